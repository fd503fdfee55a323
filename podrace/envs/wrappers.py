from typing import Any, Generic, TypeVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int, Key, PRNGKeyArray, UInt8

from .._types import AbstractSpace, ObservationActionReward, ObservationActionRewardSpace, TimeStep
from ._base import AbstractEnv, AbstractPoolEnv, AbstractRenderableEnv, render


StateT = TypeVar("StateT")


class AbstractWrapper(AbstractEnv[StateT]):
    """Base of the wrappers that keep the wrapped environment's observation and action
    spaces: a subclass names its `env` field and defines `reset` and `step`.

    A wrapper that draws (the wrapped environment's state, or a picture of its own) also
    subclasses [`podrace.envs.AbstractRenderableEnv`][] and implements `render`, as
    podrace's wrappers do with [`podrace.envs.render`][] of the wrapped state."""

    env: eqx.AbstractVar[AbstractEnv[Any]]

    @property
    def observation_space(self) -> AbstractSpace:
        return self.env.observation_space

    @property
    def action_space(self) -> AbstractSpace:
        return self.env.action_space


@final
class AutoResetState(eqx.Module, Generic[StateT]):
    """The wrapped state and whether the last time step ended an episode.

    **Arguments:**

    - `env_state`: the wrapped environment's state.
    - `is_last`: whether the previous time step was the last of its episode.
    """

    env_state: StateT
    is_last: Bool[Array, ""]


@final
class AutoReset(AbstractWrapper[AutoResetState[StateT]], AbstractRenderableEnv[AutoResetState[StateT]]):
    """Starts a new episode on the step after an episode ends.

    The last time step of an episode is returned as it is, so its final observation
    stays visible to the agent (and bootstraps a truncated episode). The next call of
    `step` ignores its action, resets the wrapped environment and returns a first time
    step (`is_first` set). This is `dm_env`'s convention and Gymnasium 1.x's default
    ("next-step") autoreset mode.

    **Batches and costly resets.** Under `vmap` every environment of a batch computes
    both its step and its reset on every step. Where a reset costs much more than a step
    (Craftax generates a world: 13 times a step's time), `resets_per_step=K` makes
    [`step_batch`][podrace.envs.AutoReset.step_batch] compute only `K` resets per batch
    step: the first `K` environments that start a new episode (in batch order) reset with
    their own keys, exactly as without the option, and any more start from copies of
    those `K` resets (Craftax's "optimistic resets", Matthews et al. 2024). While at most
    `K` episodes of a batch end on one step, nothing changes; the copies share their
    first state but not their later randomness. The batch is the one a device steps, so
    a run with copies is not device-count invariant.

    **Pools.** A [`podrace.envs.AbstractPoolEnv`][] (an EnvPool pool) starts its episodes
    itself, with the same convention: its steps are returned as they are, and
    `resets_per_step` changes nothing.

    **Arguments:**

    - `env`: the environment to wrap.
    - `resets_per_step`: the most resets computed per batch step; `None` (the default)
        resets every environment that needs it.
    """

    env: AbstractEnv[StateT]
    resets_per_step: int | None = eqx.field(default=None, static=True)

    def __check_init__(self):
        if self.resets_per_step is not None and self.resets_per_step <= 0:
            raise ValueError(f"AutoReset needs resets_per_step > 0 or None, got {self.resets_per_step}.")

    def reset(self, key: PRNGKeyArray) -> tuple[AutoResetState[StateT], TimeStep]:
        env_state, timestep = self.env.reset(key)
        return AutoResetState(env_state, timestep.is_last), timestep

    def step(
        self, state: AutoResetState[StateT], action: Array, key: PRNGKeyArray
    ) -> tuple[AutoResetState[StateT], TimeStep]:
        if isinstance(self.env, AbstractPoolEnv):  # the pool resets its environments itself
            env_state, timestep = self.env.step(state.env_state, action, key)
            return AutoResetState(env_state, timestep.is_last), timestep
        # Both branches are computed and one is selected: under `vmap` a `lax.cond`
        # would do the same, and a select also lets the reset's device-invariant
        # outputs meet the step's device-varying ones inside `shard_map`.
        env_state, timestep = jax.tree.map(
            lambda reset, step: jnp.where(state.is_last, reset, step),
            self.env.reset(key),
            self.env.step(state.env_state, action, key),
        )
        return AutoResetState(env_state, timestep.is_last), timestep

    def step_batch(
        self, states: AutoResetState[StateT], actions: Array, keys: Key[Array, " batch"]
    ) -> tuple[AutoResetState[StateT], TimeStep]:
        """Steps a batch of environments: `jax.vmap(self.step)`, or with at most
        `resets_per_step` resets (see above).

        **Arguments:**

        - `states`: the batch's states, leading axis `B`.
        - `actions`: one action per environment.
        - `keys`: one key per environment.

        **Returns:**

        The batch's next states and time steps.
        """
        num_envs = states.is_last.shape[0]
        pool = isinstance(self.env, AbstractPoolEnv)
        if pool or self.resets_per_step is None or self.resets_per_step >= num_envs:
            return jax.vmap(self.step)(states, actions, keys)
        starting = states.is_last
        # The K first environments to start an episode; the rest of the K slots are filled
        # with environment 0, whose reset is then computed and never used.
        (resetting,) = jnp.nonzero(starting, size=self.resets_per_step, fill_value=0)
        resets = jax.vmap(self.env.reset)(keys[resetting])
        rank = jnp.cumsum(starting) - 1  # among the environments starting an episode
        source = jnp.where(starting, rank % self.resets_per_step, 0)
        stepped = jax.vmap(self.env.step)(states.env_state, actions, keys)

        def select(reset: Array, step: Array) -> Array:
            chosen = reset[source]
            return jnp.where(starting.reshape(starting.shape + (1,) * (step.ndim - 1)), chosen, step)

        env_state, timestep = jax.tree.map(select, resets, stepped)
        return jax.vmap(AutoResetState)(env_state, timestep.is_last), timestep

    def render(self, state: AutoResetState[StateT]) -> UInt8[Array, "height width 3"]:
        return render(self.env, state.env_state)


@final
class TimeLimitState(eqx.Module, Generic[StateT]):
    """The wrapped state and the number of steps taken in the episode.

    **Arguments:**

    - `env_state`: the wrapped environment's state.
    - `elapsed_steps`: steps since the last reset.
    """

    env_state: StateT
    elapsed_steps: Int[Array, ""]


@final
class TimeLimit(AbstractWrapper[TimeLimitState[StateT]], AbstractRenderableEnv[TimeLimitState[StateT]]):
    """Truncates episodes after `max_episode_steps` steps.

    A truncated time step keeps `discount = 1` and sets `truncated`, so that learners
    bootstrap from its observation; an episode that terminates on the limit's step is
    reported as terminated only.

    **Arguments:**

    - `env`: the environment to wrap.
    - `max_episode_steps`: the number of steps after which an episode is truncated.
    """

    env: AbstractEnv[StateT]
    max_episode_steps: int = eqx.field(static=True)

    def __check_init__(self):
        if self.max_episode_steps <= 0:
            raise ValueError(f"TimeLimit needs max_episode_steps > 0, got {self.max_episode_steps}.")

    def reset(self, key: PRNGKeyArray) -> tuple[TimeLimitState[StateT], TimeStep]:
        env_state, timestep = self.env.reset(key)
        return TimeLimitState(env_state, jnp.asarray(0, jnp.int32)), timestep

    def step(
        self, state: TimeLimitState[StateT], action: Array, key: PRNGKeyArray
    ) -> tuple[TimeLimitState[StateT], TimeStep]:
        env_state, timestep = self.env.step(state.env_state, action, key)
        elapsed_steps = state.elapsed_steps + 1
        truncated = (timestep.truncated | (elapsed_steps >= self.max_episode_steps)) & ~timestep.terminated
        timestep = eqx.tree_at(lambda t: t.truncated, timestep, truncated)
        return TimeLimitState(env_state, elapsed_steps), timestep

    def render(self, state: TimeLimitState[StateT]) -> UInt8[Array, "height width 3"]:
        return render(self.env, state.env_state)


@final
class TruncationAsTermination(AbstractWrapper[StateT], AbstractRenderableEnv[StateT]):
    """Reports a truncation (a time limit) as a termination, with discount 0.

    podrace keeps the two apart, so that learners bootstrap at a time limit. Many
    published results did not: gymnax before 1.0 (which gymnax-blines ran), CleanRL's
    scripts and Stable-Baselines3 before its `handle_timeout_termination` end an episode
    at its time limit as in an absorbing state. This wrapper gives that behaviour, to
    reproduce such a result as it was computed (Pardo et al., 2018, "Time Limits in
    Reinforcement Learning", show what it changes).

    **Arguments:**

    - `env`: the environment to wrap (inside [`podrace.envs.AutoReset`][], if any).
    """

    env: AbstractEnv[StateT]

    def reset(self, key: PRNGKeyArray) -> tuple[StateT, TimeStep]:
        return self.env.reset(key)

    def step(self, state: StateT, action: Array, key: PRNGKeyArray) -> tuple[StateT, TimeStep]:
        env_state, timestep = self.env.step(state, action, key)
        truncated = timestep.truncated
        timestep = eqx.tree_at(
            lambda t: (t.discount, t.terminated, t.truncated),
            timestep,
            (jnp.where(truncated, 0.0, timestep.discount), timestep.terminated | truncated, jnp.zeros_like(truncated)),
        )
        return env_state, timestep

    def render(self, state: StateT) -> UInt8[Array, "height width 3"]:
        return render(self.env, state)


@final
class PreviousActionReward(AbstractRenderableEnv[StateT]):
    """Puts the previous action and reward beside each observation.

    Observations become [`podrace.ObservationActionReward`][]: the wrapped observation,
    the action that led to it and the reward of that step (zeros and 0 on the first step
    of an episode), for recurrent agents that read them (build
    [`podrace.networks.RecurrentNetwork`][] with `previous_action_reward=True`). Wrap it
    in [`podrace.envs.AutoReset`][] (not the other way round), so a reset clears both.

    **Arguments:**

    - `env`: the environment to wrap.
    """

    env: AbstractEnv[StateT]

    @property
    def observation_space(self) -> ObservationActionRewardSpace:
        return ObservationActionRewardSpace(self.env.observation_space, self.env.action_space)

    @property
    def action_space(self) -> AbstractSpace:
        return self.env.action_space

    def reset(self, key: PRNGKeyArray) -> tuple[StateT, TimeStep]:
        env_state, timestep = self.env.reset(key)
        zero_action = self.env.action_space.zeros()
        return env_state, self._with_action_reward(timestep, zero_action, jnp.zeros((), jnp.float32))

    def step(self, state: StateT, action: Array, key: PRNGKeyArray) -> tuple[StateT, TimeStep]:
        env_state, timestep = self.env.step(state, action, key)
        action = jnp.asarray(action, self.env.action_space.zeros().dtype)
        return env_state, self._with_action_reward(timestep, action, timestep.reward)

    def render(self, state: StateT) -> UInt8[Array, "height width 3"]:
        return render(self.env, state)

    @staticmethod
    def _with_action_reward(timestep: TimeStep, action: Array, reward: Array) -> TimeStep:
        observation = ObservationActionReward(timestep.observation, action, reward)
        return eqx.tree_at(lambda t: t.observation, timestep, observation)
