"""Navix's grid worlds (MiniGrid in JAX) as podrace environments."""

from typing import Any, final

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray, UInt8

from .._types import AbstractSpace, Box, Discrete, TimeStep
from .._validation import unknown_name
from ._base import AbstractRenderableEnv
from ._packages import ByIdentity, default_numpy_rules, import_package, strongly_typed


def _import_navix() -> Any:
    return import_package("navix", extra="navix", owner="NavixEnv")


def navix_ids() -> list[str]:
    """The names of Navix's registered environments."""
    return sorted(_import_navix().registry())


@final
class NavixEnv(AbstractRenderableEnv[Any]):
    """A Navix environment as a podrace environment.

    The state is Navix's own `Timestep` (its grid, entities, step count and `info`).
    `reset` is Navix's; `step` is Navix's `step`, whose own automatic reset never
    fires here: podrace's [`podrace.envs.AutoReset`][] resets after the last step of
    an episode, before Navix would.

    **Terminated or truncated.** Navix keeps them apart: a step's `step_type` is 2
    when the episode terminated (the goal reached, lava entered) and 1 when it reached
    the environment's `max_steps` (a truncation, discount 1), which
    [`podrace.envs.NavixEnv.make`][] leaves at Navix's default of 100 unless given.

    **Spaces.** Observations are those of the environment's observation function,
    Navix's symbolic grid by default: `uint8[height, width, 3]` of (object, colour,
    state or direction), bounded by the dtype's range, as Navix's declared bounds
    (`[0, 8]`) leave out some of the symbols it emits. Actions are a
    [`podrace.Discrete`][] of Navix's action set (7 MiniGrid actions).

    **Params.** Navix's environments hold no array parameters: the layout, sizes and
    functions are static, so environments differ by construction, not by `vmap`.

    `render` draws the grid with Navix's own sprites, in JAX (`navix.observations.rgb`).

    Reference: Pignatelli et al., "NAVIX: Scaling MiniGrid Environments with JAX",
    2024, https://github.com/epignatelli/navix.

    **Arguments:**

    - `env`: a Navix environment (`navix.make(name)`), held static and hashed by
        identity: build it once.
    """

    held: ByIdentity = eqx.field(static=True)

    def __init__(self, env: Any):
        self.held = ByIdentity(env)

    @classmethod
    def make(cls, env_id: str, **kwargs: Any) -> "NavixEnv":
        """The Navix environment `env_id`.

        **Arguments:**

        - `env_id`: a name in `navix.registry()`, e.g. `"Navix-Empty-5x5-v0"`.
        - `kwargs`: passed on to `navix.make` (`max_steps`, `observation_fn`, ...).

        **Raises:**

        `ImportError` if Navix is not installed; `ValueError`, naming the nearest ids, if
        `env_id` is not registered.
        """
        navix = _import_navix()
        if env_id not in navix.registry():
            raise ValueError(unknown_name("navix environment", env_id, navix_ids()))
        return cls(navix.make(env_id, **kwargs))

    @property
    def env(self) -> Any:
        """The Navix environment."""
        return self.held.value

    @property
    def observation_space(self) -> AbstractSpace:
        space = self.env.observation_space
        dtype = np.dtype(space.dtype)
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            return Box(info.min, info.max, tuple(space.shape), dtype)
        return Box(-jnp.inf, jnp.inf, tuple(space.shape), dtype)

    @property
    def action_space(self) -> AbstractSpace:
        return Discrete(int(self.env.action_space.maximum) + 1)

    def reset(self, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        with default_numpy_rules():
            timestep = strongly_typed(self.env.reset(key))
        return timestep, TimeStep.first(timestep.observation)

    def step(self, state: Any, action: Array, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        del key  # Navix draws its randomness from the key in its state
        with default_numpy_rules():
            timestep = strongly_typed(self.env.step(state, action))
        terminated, truncated = timestep.step_type == 2, timestep.step_type == 1
        return timestep, TimeStep.transition(timestep.observation, timestep.reward, terminated, truncated)

    def render(self, state: Any) -> UInt8[Array, "height width 3"]:
        with default_numpy_rules():
            return _import_navix().observations.rgb(state.state)
