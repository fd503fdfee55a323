"""Brax's environments (`brax.envs`) as podrace environments."""

import copy
from typing import Any, final

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray, PyTree

from .._types import AbstractSpace, Box, TimeStep
from .._validation import unknown_name
from ._base import AbstractEnv
from ._packages import default_numpy_rules, import_package, strongly_typed, uncommitted
from .wrappers import TimeLimit


EPISODE_LENGTH = 1000
"""Steps after which [`podrace.envs.brax_env`][] truncates an episode, as Brax's training does."""


def _import_brax_envs() -> Any:
    return import_package("brax.envs", extra="brax", owner="BraxEnv")


def brax_ids() -> list[str]:
    """The names of Brax's registered environments."""
    return sorted(_import_brax_envs()._envs)


@final
class BraxEnv(AbstractEnv[Any]):
    """A Brax environment as a podrace environment.

    The state is Brax's own `State`. `reset` and `step` call the bare environment's,
    without Brax's training wrappers: podrace's own [`podrace.envs.TimeLimit`][] and
    [`podrace.envs.AutoReset`][] take their place ([`podrace.envs.brax_env`][] adds the
    time limit; [`podrace.Anakin`][] the automatic reset).

    **Terminated or truncated.** A bare Brax environment has no time limit: its `done`
    flag is a termination (Hopper, Walker2d, Ant and Humanoid falling over; the
    inverted pendulums' pole leaving its range), and Brax's training adds the time limit
    with its `EpisodeWrapper`, which reports it in `info["truncation"]`. Here `done`
    sets `terminated` (discount 0), and the time limit truncates (discount 1).

    **Params.** The physical system `sys` (a `brax.System`: masses, inertias, friction,
    gear ratios, ...) is an array field of the adapter, used in place of the
    environment's own, so a batch of differently parameterised environments is one
    `eqx.filter_vmap`, for instance
    `eqx.filter_vmap(lambda m: BraxEnv(env, env.sys.tree_replace({"link.inertia.mass": m})))(masses)`.

    **Spaces.** Observations are `float32` vectors of `env.observation_size`, unbounded;
    actions are `float32` vectors of `env.action_size` in `[-1, 1]`, which Brax scales to
    each actuator's control range.

    Brax draws its environments with MuJoCo's renderer on the host, not in JAX, so the
    adapter does not render.

    Reference: Freeman et al., "Brax - A Differentiable Physics Engine for Large Scale
    Rigid Body Simulation", 2021, https://github.com/google/brax.

    **Arguments:**

    - `env`: a Brax environment (a `brax.envs.Env` with a `sys`, such as
        `brax.envs.get_environment("hopper")`), without wrappers. Static and hashed by
        identity: build it once.
    - `sys`: its physical system, by default `env.sys` (`None` for an environment
        without one, such as Brax's `fast`).
    """

    env: Any = eqx.field(static=True)
    sys: PyTree

    def __init__(self, env: Any, sys: PyTree = None):
        if isinstance(env, _import_brax_envs().Wrapper):
            raise ValueError(
                f"BraxEnv takes a bare Brax environment, got one in {type(env).__name__}: build it with "
                "brax.envs.get_environment(name), without Brax's training wrappers (podrace's TimeLimit and "
                "AutoReset take their place)."
            )
        self.env = env
        self.sys = uncommitted(getattr(env, "sys", None) if sys is None else sys)

    @classmethod
    def make(cls, env_id: str, **kwargs: Any) -> "BraxEnv":
        """The bare Brax environment `env_id` (no time limit; see [`podrace.envs.brax_env`][]).

        **Arguments:**

        - `env_id`: a name in `brax.envs`, e.g. `"hopper"`.
        - `kwargs`: passed on to `brax.envs.get_environment` (e.g. `backend="mjx"`).

        **Raises:**

        `ImportError` if Brax is not installed; `ValueError`, naming the nearest ids, if
        `env_id` is not registered.
        """
        envs = _import_brax_envs()
        if env_id not in envs._envs:
            raise ValueError(unknown_name("brax environment", env_id, brax_ids()))
        return cls(envs.get_environment(env_id, **kwargs))

    @property
    def observation_space(self) -> AbstractSpace:
        with default_numpy_rules():  # Brax resets the environment to find the size
            return Box(-jnp.inf, jnp.inf, (self.env.observation_size,))

    @property
    def action_space(self) -> AbstractSpace:
        return Box(-1.0, 1.0, (self.env.action_size,))

    def reset(self, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        with default_numpy_rules():
            state = strongly_typed(self._env().reset(key))
        return state, TimeStep.first(state.obs)

    def step(self, state: Any, action: Array, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        del key  # Brax's dynamics are deterministic
        with default_numpy_rules():
            state = strongly_typed(self._env().step(state, action))
        return state, TimeStep.transition(state.obs, state.reward, state.done > 0)

    def _env(self) -> Any:
        """The Brax environment with this adapter's `sys` (a shallow copy, made while tracing)."""
        if self.sys is None:  # an environment without physics (Brax's `fast`)
            return self.env
        env = copy.copy(self.env)
        env.sys = self.sys
        return env


def brax_env(env_id: str, *, episode_length: int = EPISODE_LENGTH, **kwargs: Any) -> TimeLimit:
    """The Brax environment `env_id`, truncated after `episode_length` steps as in Brax's training.

    **Arguments:**

    - `env_id`: a name in `brax.envs`, e.g. `"inverted_pendulum"`.
    - `episode_length`: steps after which an episode is truncated.
    - `kwargs`: passed on to `brax.envs.get_environment` (e.g. `backend="mjx"`).
    """
    return TimeLimit(BraxEnv.make(env_id, **kwargs), episode_length)
