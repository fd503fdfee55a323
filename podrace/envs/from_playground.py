"""MuJoCo Playground's DM Control Suite environments (`mujoco_playground`) as podrace
environments."""

import copy
from collections.abc import Mapping
from typing import Any, final

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray, PyTree

from .._types import AbstractSpace, Box, TimeStep
from .._validation import unknown_name
from ._base import AbstractEnv
from ._packages import default_numpy_rules, import_package, strongly_typed, uncommitted
from .wrappers import TimeLimit


IMPLEMENTATION = "jax"
"""MJX's implementation that [`podrace.envs.PlaygroundEnv.make`][] asks for: MJX in JAX, which
runs on every JAX backend. Playground's own default, MuJoCo Warp (`"warp"`), needs an
NVIDIA GPU; pass `impl="warp"` to use it there."""


EPISODE_LENGTH = 1000
"""Steps after which [`podrace.envs.playground_env`][] truncates an episode: the
`episode_length` of every DM Control Suite config of Playground."""


def _import_playground() -> Any:
    return import_package("mujoco_playground", extra="playground", owner="PlaygroundEnv")


def playground_ids() -> list[str]:
    """The names of Playground's DM Control Suite environments, whose model files ship in
    the package (the `playground:` ids of the command line)."""
    return sorted(_import_playground().dm_control_suite.ALL_ENVS)


def playground_exclusions() -> dict[str, str]:
    """Playground's registered environments that [`podrace.envs.PlaygroundEnv.make`][]
    refuses, with the reason: the locomotion and manipulation environments, whose robots
    are MuJoCo Menagerie's models, which Playground clones from GitHub when it first loads
    one (and which report dictionaries of observations)."""
    registry = _import_playground().registry
    reason = (
        "its robot is a model of MuJoCo Menagerie, which Playground clones from GitHub when it first loads one; "
        "podrace's playground ids are the DM Control Suite environments, whose model files ship in the package"
    )
    return {env_id: reason for env_id in registry.ALL_ENVS if env_id not in registry.dm_control_suite.ALL_ENVS}


@final
class PlaygroundEnv(AbstractEnv[Any]):
    """A MuJoCo Playground environment as a podrace environment.

    The state is Playground's own `State` (MJX's `Data`, the observation, reward, `done`,
    metrics and `info`). `reset` and `step` call the bare environment's, without
    Playground's training wrappers: podrace's own [`podrace.envs.TimeLimit`][] and
    [`podrace.envs.AutoReset`][] take their place ([`podrace.envs.playground_env`][] adds
    the time limit; [`podrace.Anakin`][] the automatic reset).

    **Terminated or truncated.** A bare Playground environment has no time limit; its
    `done` flag is a termination. In the DM Control Suite, whose tasks run for a fixed
    time, `done` is set only when the simulation diverges (a NaN in the joint positions or
    velocities), which ends the episode with discount 0 here. Playground's training adds
    the time limit (`episode_length` of the environment's config, 1000) with Brax's
    `EpisodeWrapper`, which reports it in `info["truncation"]`; here it truncates
    (discount 1).

    **Params.** MJX's model `mjx_model` (masses, inertias, friction, damping, gains, ...)
    is an array field of the adapter, used in place of the environment's own (as
    Playground's own domain randomisation does), so a batch of differently parameterised
    environments is one `eqx.filter_vmap`, for instance
    `eqx.filter_vmap(lambda m: PlaygroundEnv(env, env.mjx_model.replace(body_mass=m)))(masses)`.

    **Spaces.** Observations are `float32` vectors of `env.observation_size`, unbounded;
    actions are `float32` vectors of `env.action_size` within each actuator's control range
    (`[-1, 1]` throughout the DM Control Suite), unbounded for an actuator without one.

    Playground draws its environments with MuJoCo's renderer on the host, not in JAX, so
    the adapter does not render.

    Reference: Zakka et al., "MuJoCo Playground", 2025,
    https://github.com/google-deepmind/mujoco_playground.

    **Arguments:**

    - `env`: a Playground environment (a `mujoco_playground.MjxEnv`, such as
        `mujoco_playground.registry.load("CartpoleBalance", config_overrides={"impl": "jax"})`),
        without wrappers, whose observation is one array. Static and hashed by identity:
        build it once.
    - `mjx_model`: its MJX model, by default `env.mjx_model`.
    """

    env: Any = eqx.field(static=True)
    mjx_model: PyTree
    observation_size: int = eqx.field(static=True)

    def __init__(self, env: Any, mjx_model: PyTree = None):
        if isinstance(env, _import_playground().wrapper.Wrapper):
            raise ValueError(
                f"PlaygroundEnv takes a bare Playground environment, got one in {type(env).__name__}: load it with "
                "mujoco_playground.registry.load(name), without Playground's training wrappers (podrace's TimeLimit "
                "and AutoReset take their place)."
            )
        with default_numpy_rules():
            observation_size = env.observation_size
        if isinstance(observation_size, Mapping):
            raise ValueError(
                f"PlaygroundEnv takes environments whose observation is one array; {type(env).__name__}'s is a "
                f"dictionary of {dict(observation_size)}. Pick the entry to act on in a wrapper of your own."
            )
        self.env = env
        self.mjx_model = uncommitted(env.mjx_model if mjx_model is None else mjx_model)
        self.observation_size = int(observation_size)

    @classmethod
    def make(cls, env_id: str, **config_overrides: Any) -> "PlaygroundEnv":
        """The DM Control Suite environment `env_id` of Playground (no time limit; see
        [`podrace.envs.playground_env`][]), on MJX's JAX implementation unless `impl` says
        otherwise.

        **Arguments:**

        - `env_id`: the name of a DM Control Suite environment of Playground, e.g.
            `"CartpoleBalance"`.
        - `config_overrides`: entries of the environment's config to change (e.g.
            `impl="warp"`, `ctrl_dt=0.02`), passed to `mujoco_playground.registry.load`.

        **Raises:**

        `ImportError` if Playground is not installed; `ValueError`, naming the nearest ids,
        if `env_id` is not a DM Control Suite environment, and saying why for
        Playground's locomotion and manipulation environments.
        """
        playground = _import_playground()
        if reason := playground_exclusions().get(env_id):
            raise ValueError(f"playground:{env_id} is not available: {reason}.")
        if env_id not in (ids := playground_ids()):
            raise ValueError(unknown_name("playground environment", env_id, ids))
        return cls(playground.registry.load(env_id, config_overrides={"impl": IMPLEMENTATION, **config_overrides}))

    @property
    def observation_space(self) -> AbstractSpace:
        return Box(-jnp.inf, jnp.inf, (self.observation_size,))

    @property
    def action_space(self) -> AbstractSpace:
        model = self.env.mj_model
        limited = np.asarray(model.actuator_ctrllimited, bool)
        low = np.where(limited, model.actuator_ctrlrange[:, 0], -np.inf)
        high = np.where(limited, model.actuator_ctrlrange[:, 1], np.inf)
        return Box(low, high, (self.env.action_size,))

    def reset(self, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        with default_numpy_rules():
            state = strongly_typed(self._env().reset(key))
        return state, TimeStep.first(state.obs)

    def step(self, state: Any, action: Array, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        del key  # Playground draws from the key in its state's `info`
        with default_numpy_rules():
            state = strongly_typed(self._env().step(state, action))
        return state, TimeStep.transition(state.obs, state.reward, state.done > 0)

    def _env(self) -> Any:
        """The Playground environment with this adapter's `mjx_model` (a shallow copy, made
        while tracing)."""
        env = copy.copy(self.env)
        env._mjx_model = self.mjx_model
        return env


def playground_env(env_id: str, *, episode_length: int = EPISODE_LENGTH, **config_overrides: Any) -> TimeLimit:
    """Playground's DM Control Suite environment `env_id`, truncated after `episode_length`
    steps as in Playground's training.

    **Arguments:**

    - `env_id`: the name of a DM Control Suite environment of Playground, e.g.
        `"CartpoleBalance"`.
    - `episode_length`: steps after which an episode is truncated.
    - `config_overrides`: passed on to [`podrace.envs.PlaygroundEnv.make`][].
    """
    return TimeLimit(PlaygroundEnv.make(env_id, **config_overrides), episode_length)
