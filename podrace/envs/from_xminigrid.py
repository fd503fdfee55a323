"""XLand-MiniGrid's grid worlds and meta-learning rulesets as podrace environments."""

from typing import Any, final

import equinox as eqx
import numpy as np
from jaxtyping import Array, PRNGKeyArray, PyTree

from .._types import AbstractSpace, Box, Discrete, TimeStep
from .._validation import unknown_name
from ._base import AbstractEnv
from ._packages import ByIdentity, default_numpy_rules, import_package, strongly_typed


def _import_xminigrid() -> Any:
    return import_package("xminigrid", extra="xminigrid", owner="XMiniGridEnv")


def xminigrid_ids() -> list[str]:
    """The names of XLand-MiniGrid's registered environments."""
    return sorted(_import_xminigrid().registered_environments())


@final
class XMiniGridEnv(AbstractEnv[Any]):
    """An XLand-MiniGrid environment as a podrace environment.

    The state is XLand-MiniGrid's own `TimeStep` (grid, agent, step count); `reset` and
    `step` are its own, and the automatic reset is podrace's
    [`podrace.envs.AutoReset`][] (XLand-MiniGrid's `GymAutoResetWrapper` is not used).

    **Terminated or truncated.** XLand-MiniGrid keeps them apart: a `LAST` step with
    discount 0 reached the goal (terminated), one with discount 1 reached
    `params.max_steps` (truncated).

    **Params.** The environment's params are a field of the adapter. Their array leaves,
    XLand's `ruleset` above all (the goal, the rules and the initial tiles of a task),
    can be batched: a batch of tasks is one `eqx.filter_vmap`, for instance
    `eqx.filter_vmap(lambda r: XMiniGridEnv(env, params.replace(ruleset=r)))(rulesets)`
    over rulesets stacked from `xminigrid.load_benchmark(name).get_ruleset(i)` (the
    benchmarks are files that XLand-MiniGrid downloads on first use). The sizes and
    `max_steps` are static.

    **Spaces.** Observations are the agent's `uint8[view, view, 2]` field of view (tile
    and colour of each cell), bounded by the dtype's range; actions are a
    [`podrace.Discrete`][] of XLand-MiniGrid's 6 actions.

    XLand-MiniGrid draws on the host with NumPy, not in JAX, so the adapter does not
    render.

    Reference: Nikulin et al., "XLand-MiniGrid: Scalable Meta-Reinforcement Learning
    Environments in JAX", 2024, https://github.com/dunnolab/xland-minigrid.

    **Arguments:**

    - `env`: an XLand-MiniGrid environment (the first of `xminigrid.make(name)`), held
        static and hashed by identity: build it once.
    - `params`: its params (the second of `xminigrid.make(name)`).
    """

    held: ByIdentity = eqx.field(static=True)
    params: PyTree

    def __init__(self, env: Any, params: PyTree):
        self.held = ByIdentity(env)
        self.params = params

    @classmethod
    def make(cls, env_id: str, **kwargs: Any) -> "XMiniGridEnv":
        """The XLand-MiniGrid environment `env_id` with its default params.

        **Arguments:**

        - `env_id`: a name in `xminigrid.registered_environments()`, e.g.
            `"MiniGrid-Empty-5x5"` or `"XLand-MiniGrid-R1-9x9"`.
        - `kwargs`: passed on to `xminigrid.make` (params such as `max_steps`).

        **Raises:**

        `ImportError` if XLand-MiniGrid is not installed; `ValueError`, naming the nearest
        ids, if `env_id` is not registered.
        """
        xminigrid = _import_xminigrid()
        if env_id not in xminigrid.registered_environments():
            raise ValueError(unknown_name("xminigrid environment", env_id, xminigrid_ids()))
        return cls(*xminigrid.make(env_id, **kwargs))

    @property
    def env(self) -> Any:
        """The XLand-MiniGrid environment."""
        return self.held.value

    @property
    def observation_space(self) -> AbstractSpace:
        shape = tuple(self.env.observation_shape(self.params))
        return Box(0, np.iinfo(np.uint8).max, shape, np.uint8)

    @property
    def action_space(self) -> AbstractSpace:
        return Discrete(self.env.num_actions(self.params))

    def reset(self, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        with default_numpy_rules():
            timestep = strongly_typed(self.env.reset(self.params, key))
        return timestep, TimeStep.first(timestep.observation)

    def step(self, state: Any, action: Array, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        del key  # XLand-MiniGrid's dynamics are deterministic
        with default_numpy_rules():
            timestep = strongly_typed(self.env.step(self.params, state, action))
        last = timestep.step_type == _import_xminigrid().types.StepType.LAST
        terminated, truncated = last & (timestep.discount == 0), last & (timestep.discount != 0)
        return timestep, TimeStep.transition(timestep.observation, timestep.reward, terminated, truncated)
