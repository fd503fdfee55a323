"""Replay on the device: the part every off-policy learner stores its experience in."""

import abc
from collections.abc import Callable
from typing import Any, TypeVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int, PRNGKeyArray, PyTree

from .._types import PolicyStep, TimeStep, Trajectory
from .._validation import check_positive_int
from ..agent import AbstractAgent
from ..results import UpdateMetrics
from .learner import AbstractLearner, cond_or_zero_metrics


def _flashbax() -> Any:
    """flashbax's trajectory buffer (the `replay` extra)."""
    try:
        from flashbax.buffers import trajectory_buffer
    except ImportError as error:
        raise ImportError("Replay is kept in flashbax: pip install 'podrace[replay]'.") from error
    return trajectory_buffer


@final
class SequenceReplay(eqx.Module):
    """Uniform replay of sequences of consecutive time steps, held on the device.

    One ring buffer per environment (flashbax's trajectory buffer), each holding
    `buffer_size // B` of its time steps with the action taken there. A batch of
    environments split over devices keeps each device's experience on that device:
    the buffer's arrays are device-local (see `device_local`). Sampled sequences may
    cross episode boundaries; a loss cuts its targets at `is_first`, as it does on
    rollouts.

    Reference: Lin, "Self-improving reactive agents based on reinforcement learning,
    planning and teaching", Machine Learning 8, 1992; Toledo et al., "Flashbax:
    Streamlining Experience Replay Buffers for Reinforcement Learning with JAX", 2023.

    **Arguments:**

    - `buffer_size`: how many time steps the buffer holds, over all environments and devices.
    - `sequence_length`: time steps per sampled sequence (2 for one-step targets,
        `n + 1` for n-step targets).
    - `normalize_observations`: applied to every sampled observation: the pipeline's
        running normalisation with the statistics of the moment, when the buffer keeps
        raw observations (set by [`podrace.learners.AbstractReplayLearner`][]'s
        `update`); `None` to return them as stored.
    """

    buffer_size: int = eqx.field(static=True)
    sequence_length: int = eqx.field(static=True)
    normalize_observations: Callable[[PyTree[Array]], PyTree[Array]] | None = None

    def __check_init__(self):
        check_positive_int("SequenceReplay", "buffer_size", self.buffer_size)
        if not isinstance(self.sequence_length, int) or self.sequence_length < 2:
            raise ValueError(f"SequenceReplay: sequence_length must be an integer >= 2, got {self.sequence_length!r}.")
        _flashbax()

    def init(self, timestep: TimeStep, policy_step: PolicyStep) -> PyTree[Array]:
        """An empty buffer for the environments of `timestep`.

        **Arguments:**

        - `timestep`: the first time steps of all environments (leading axis `B`, this
            device's share under `shard_map`).
        - `policy_step`: an example of one environment's policy step (shapes and dtypes).

        **Raises:**

        `ValueError` if an environment's share of `buffer_size` is shorter than a sequence.
        """
        num_envs = timestep.reward.shape[0]
        capacity = self.buffer_size // num_envs
        if capacity < self.sequence_length:
            raise ValueError(
                f"SequenceReplay: buffer_size={self.buffer_size} over {num_envs} environments leaves "
                f"{capacity} steps per environment, fewer than sequence_length={self.sequence_length}."
            )
        example = (jax.tree.map(lambda x: x[0], timestep), policy_step)
        state = _flashbax().init(example, add_batch_size=num_envs, max_length_time_axis=capacity)
        # flashbax leaves the storage uninitialised (garbage on a GPU): zeros make the state,
        # and so every checkpoint, a function of its inputs alone.
        return state.replace(experience=jax.tree.map(jnp.zeros_like, state.experience))

    def init_for(self, agent: AbstractAgent, timestep: TimeStep) -> PyTree[Array]:
        """An empty buffer for the environments of `timestep` and the policy steps of `agent`."""
        observation = jax.tree.map(lambda x: x[0], timestep.observation)
        step = jax.eval_shape(lambda: agent(observation, agent.initial_carry(), jax.random.key(0))[0])
        return self.init(timestep, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), step))

    def add(self, state: PyTree[Array], trajectory: Trajectory) -> PyTree[Array]:
        """The buffer with the rollout's time steps `0..T-1` and their actions added.

        The rollout's last time step is the next rollout's first, so it is added with
        the action taken there, by the next call.
        """
        steps = (jax.tree.map(lambda x: x[:-1], trajectory.timestep), trajectory.policy_step)
        return _flashbax().add(state, jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), steps))

    def ready(self, state: PyTree[Array]) -> Bool[Array, ""]:
        """Whether a sequence can be sampled."""
        return _flashbax().can_sample(state, self.sequence_length)

    def sample(self, state: PyTree[Array], key: PRNGKeyArray, batch_size: int) -> Trajectory:
        """`batch_size` sequences drawn uniformly, as a batch of trajectories `[L, batch_size]`
        (no recurrent carry); the action after a sequence's last time step is dropped."""
        with jax.numpy_rank_promotion("allow"):  # flashbax broadcasts implicitly
            sample = _flashbax().sample(state, key, batch_size, self.sequence_length, 1).experience
        timestep, policy_step = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), sample)
        if self.normalize_observations is not None:
            timestep = eqx.tree_at(lambda t: t.observation, timestep, self.normalize_observations(timestep.observation))
        return Trajectory(timestep, jax.tree.map(lambda x: x[:-1], policy_step), ())

    def device_local(self, state: PyTree[Array]) -> PyTree[bool]:
        """Which leaves of `state` each device keeps for itself: the stored experience."""
        replicated = jax.tree.map(lambda _: False, state)
        return eqx.tree_at(lambda s: s.experience, replicated, replace=True)


class AbstractReplayState(eqx.Module):
    """The fields every replay learner's state has (see [`podrace.learners.AbstractReplayLearner`][])."""

    replay: eqx.AbstractVar[PyTree[Array]]
    num_updates: eqx.AbstractVar[Int[Array, ""]]
    num_transitions: eqx.AbstractVar[Int[Array, ""]]
    key: eqx.AbstractVar[PRNGKeyArray]


ReplayStateT = TypeVar("ReplayStateT", bound=AbstractReplayState)


class AbstractReplayLearner(AbstractLearner[ReplayStateT]):
    """A learner from replayed experience: what DQN, TD3 and SAC share.

    Each update stores the rollout `[T + 1, B]` in the state's
    [`podrace.learners.SequenceReplay`][], then, once the buffer can be sampled and
    `min_replay_size` transitions (over all devices) have been added, takes
    `gradient_steps` steps of `learn_step`; the update's metrics are the steps' mean
    (zeros before learning starts). Each device keeps its own environments' experience.
    A member implements `learn_step` and the rest of the learner contract.

    **Attributes:**

    - `replay`: the replay part.
    - `min_replay_size`: transitions to collect before learning starts.
    - `gradient_steps`: calls of `learn_step` per update.
    """

    replay: eqx.AbstractVar[SequenceReplay]
    min_replay_size: eqx.AbstractVar[int]
    gradient_steps: eqx.AbstractVar[int]

    @abc.abstractmethod
    def learn_step(
        self, state: ReplayStateT, key: PRNGKeyArray, axis_name: str | None
    ) -> tuple[ReplayStateT, UpdateMetrics]:
        """One learning step on a batch sampled (with `key`) from `state.replay`.

        **Arguments:**

        - `state`: the learner state.
        - `key`: this step's randomness.
        - `axis_name`: as in `update`.
        """

    def device_local(self, state: ReplayStateT) -> PyTree[bool]:
        replicated = jax.tree.map(lambda _: False, state)
        return eqx.tree_at(lambda s: s.replay, replicated, self.replay.device_local(state.replay))

    def update(
        self,
        state: ReplayStateT,
        trajectory: Trajectory,
        *,
        axis_name: str | None = None,
        normalize_observations: Callable[[PyTree[Array]], PyTree[Array]] | None = None,
    ) -> tuple[ReplayStateT, UpdateMetrics]:
        """Stores the rollout, then learns from sampled batches once ready.

        **Arguments:**

        - `state`: the learner state.
        - `trajectory`: the rollout `[T + 1, B]`.
        - `axis_name`: inside `shard_map`, the device axis.
        - `normalize_observations`: the pipeline's observation normalisation with its
            current statistics, when the trajectory's observations are raw: the buffer
            keeps them raw and each sampled batch is normalised with it.
        """
        learner = self
        if normalize_observations is not None:
            replay = SequenceReplay(self.replay.buffer_size, self.replay.sequence_length, normalize_observations)
            learner = eqx.tree_at(lambda learner: learner.replay, self, replay)
        num_steps, num_envs = trajectory.timestep.reward.shape
        num_devices = 1 if axis_name is None else jax.lax.psum(1, axis_name)
        num_transitions = state.num_transitions + (num_steps - 1) * num_envs * num_devices
        state = eqx.tree_at(
            lambda s: (s.replay, s.num_transitions),
            state,
            (self.replay.add(state.replay, trajectory), num_transitions),
        )

        def learn(state: ReplayStateT) -> tuple[ReplayStateT, UpdateMetrics]:
            key, *step_keys = jax.random.split(state.key, self.gradient_steps + 1)
            state, metrics = jax.lax.scan(
                lambda state, key: learner.learn_step(state, key, axis_name), state, jnp.stack(step_keys)
            )
            return eqx.tree_at(lambda s: s.key, state, key), jax.tree.map(lambda x: jnp.mean(x, axis=0), metrics)

        ready = self.replay.ready(state.replay) & (num_transitions >= self.min_replay_size)
        state, metrics = cond_or_zero_metrics(ready, learn, lambda state: state, state)
        return eqx.tree_at(lambda s: s.num_updates, state, state.num_updates + 1), metrics
