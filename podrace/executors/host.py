"""Host environments: acting in a batch of Gymnasium environments and learning from it.

A [`podrace.executors.host.GymnasiumCollector`][] steps a `gymnasium.vector.VectorEnv` with a
learner's policy and returns the same [`podrace.Trajectory`][] that the on-device
rollout produces, so every learner trains on host environments unchanged.
[`podrace.executors.host.train_on_host`][] alternates collection and updates; with `overlap`, a
background thread collects the next rollout while the learner updates on the last one
(double buffering, as in rlplay's parallel samplers and IMPALA-style actors).

Gymnasium's "next-step" autoreset mode, its default, is required: after a step that
ends an episode (`terminated` or `truncated`) that step's observation is the final
one, and the next `step` call ignores its action and returns the first observation of
a new episode with reward 0. This is podrace's [`podrace.envs.AutoReset`][]
convention, so `is_first` at step `t` is `is_last` at step `t - 1`.

On a CPU, `jax.config.update("jax_cpu_enable_async_dispatch", False)` before JAX's
first computation makes each step's policy call cheaper (see the concepts page).

Requires the `gymnasium` extra: `pip install 'podrace[gymnasium]'`.
"""

import abc
import collections
import concurrent.futures
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar, final, no_type_check

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray, PyTree

from .._types import AbstractSpace, ObservationActionReward, PolicyStep, TimeStep, Trajectory
from .._validation import check_agent_fits, check_positive_int, network_observation_spec
from ..agent import AbstractAgent, Agent
from ..envs.gymnasium import vector_env_spaces
from ..learners import AbstractLearner
from ..loggers import summarize
from ..networks import AbstractNetwork
from ..policies import AbstractPolicy
from ..results import DEFAULT_METRICS, EvaluationResult, TrainMetrics, UpdateMetrics, check_metrics
from .evaluation import Evaluation
from .pipeline import AbstractPipeline, AbstractTrainResult, check_member


@final
class _HostObservations:
    """Builds the network's observations on the host: the environments' own, or with the
    previous action and reward (zeros where an episode starts), as
    [`podrace.envs.PreviousActionReward`][] does on device."""

    def __init__(self, agent: AbstractAgent, action_space: AbstractSpace, num_envs: int):
        self._reads_action_reward = agent.reads_previous_action_reward
        zero = np.asarray(action_space.zeros())
        self._zero_action = np.zeros((num_envs, *zero.shape), zero.dtype)

    @no_type_check  # at every environment step, as `_BatchedActor.__call__`
    def __call__(
        self, observation: np.ndarray, action: np.ndarray, reward: np.ndarray, is_first: np.ndarray
    ) -> np.ndarray | ObservationActionReward:
        if not self._reads_action_reward:
            return observation
        first = is_first.reshape(is_first.shape + (1,) * (self._zero_action.ndim - 1))
        action = np.where(first, self._zero_action, np.asarray(action, self._zero_action.dtype))
        reward = np.where(is_first, 0.0, reward).astype(np.float32)
        return ObservationActionReward(*(jnp.asarray(x) for x in (observation, action, reward)))

    def first(self, observation: np.ndarray) -> np.ndarray | ObservationActionReward:
        """The observations of a batch just reset."""
        num_envs = len(observation)
        return self(observation, self._zero_action, np.zeros(num_envs, np.float32), np.ones(num_envs, bool))


@final
class _BatchedActor:
    """An agent acting in a batch of host environments, one jitted call a step.

    Per step this is a plain `jax.jit` call on a flat list of arrays and raw key data
    (flattening modules and wrapping keys on the host costs more than the dispatch);
    only the actions come back to the host, the policy steps stay on the device until
    the rollout is stacked.
    """

    def __init__(self, agent: AbstractAgent):
        arrays, static = eqx.partition(agent, eqx.is_array)
        treedef = jax.tree.structure(arrays)
        initial_carry = agent.initial_carry()

        def act(leaves, observation, carry, is_first, key_data):
            agent = eqx.combine(jax.tree.unflatten(treedef, leaves), static)
            key, act_key = jax.random.split(jax.random.wrap_key_data(key_data))
            keys = jax.random.split(act_key, is_first.shape[0])

            def act_one(observation, carry, is_first, key):
                return agent(observation, agent.reset_carry(carry, is_first), key)

            policy_step, carry = jax.vmap(act_one)(observation, carry, is_first, keys)
            return policy_step.action, policy_step, carry, jax.random.key_data(key)

        self._act = jax.jit(act)
        self._initial_carry = initial_carry

    def arrays(self, agent: AbstractAgent) -> list[Array]:
        """The arrays to act with (an agent of the same structure, any parameters)."""
        return jax.tree.leaves(eqx.filter(agent, eqx.is_array))

    def initial_carry(self, num_envs: int) -> PyTree[Array]:
        """The network's initial carry for `num_envs` environments."""
        return jax.tree.map(lambda c: jnp.broadcast_to(c, (num_envs, *jnp.shape(c))), self._initial_carry)

    # Called at every environment step: `no_type_check` keeps it out of the test session's
    # runtime checks (the jaxtyping import hook), which cost more than the step.
    @no_type_check
    def __call__(
        self,
        arrays: list[Array],
        observation: PyTree[np.ndarray | Array],
        carry: PyTree[Array],
        is_first: np.ndarray,
        key_data: Array,
    ) -> tuple[Array, PolicyStep, PyTree[Array], Array]:
        """The actions, the policy steps, the next carry and the next key data."""
        return self._act(arrays, observation, carry, is_first, key_data)


@final
@dataclasses.dataclass(frozen=True)
class EpisodeStatistics:
    """Returns and lengths of the episodes that ended during one rollout.

    **Arguments:**

    - `returns`: the undiscounted return of each.
    - `lengths`: the number of steps of each.
    """

    returns: np.ndarray
    lengths: np.ndarray

    @classmethod
    def concatenate(cls, statistics: "Iterable[EpisodeStatistics]") -> "EpisodeStatistics":
        """The episodes of several rollouts (of several actors, say), in order."""
        statistics = list(statistics)
        return cls(
            np.concatenate([episodes.returns for episodes in statistics]),
            np.concatenate([episodes.lengths for episodes in statistics]),
        )


@final
class _EpisodeTracker:
    """Running returns and lengths of a batch of host environments."""

    def __init__(self, num_envs: int):
        self.returns = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, np.int64)

    def record(self, is_first: np.ndarray, reward: np.ndarray) -> None:
        """Adds a step; a reset step (`is_first`) starts a new episode at 0."""
        self.returns = np.where(is_first, 0.0, self.returns + reward)
        self.lengths = np.where(is_first, 0, self.lengths + 1)

    def record_rollout(self, timesteps: "_HostStep") -> EpisodeStatistics:
        """Adds a rollout's steps `[T + 1, B]` after its first row (the previous rollout's
        last); returns the episodes that ended in them."""
        returns, lengths = [], []
        is_last = timesteps.is_last
        for t in range(1, len(timesteps.reward)):
            self.record(timesteps.is_first[t], timesteps.reward[t])
            returns.append(self.returns[is_last[t]])
            lengths.append(self.lengths[is_last[t]])
        return EpisodeStatistics(np.concatenate(returns), np.concatenate(lengths))


@final
class GymnasiumCollector:
    """Steps a `gymnasium.vector.VectorEnv` with a learner's policy, a rollout at a time.

    Each call of `collect` takes `rollout_length` steps of every environment and
    returns a time-major [`podrace.Trajectory`][] `[T + 1, B]` whose first time step
    is the last one of the previous rollout, as in the on-device pipeline.
    Termination and truncation are kept apart: `discount` is 0 only on termination,
    and the final observation of a truncated episode is there to bootstrap from.

    **Arguments:**

    - `envs`: the vector env, in Gymnasium's default "next-step" autoreset mode.
    - `learner`: provides the network and the behaviour policy; checked to fit the
        env's spaces.
    - `rollout_length`: steps per rollout (`T`).
    - `key`: the policy's randomness.
    - `seed`: seeds the environments' first reset.
    """

    def __init__(
        self,
        envs: Any,
        learner: AbstractLearner,
        *,
        rollout_length: int,
        key: PRNGKeyArray,
        seed: int | None = None,
    ):
        check_positive_int("GymnasiumCollector", "rollout_length", rollout_length)
        action_space, observation, env_name = vector_env_spaces(envs)
        agent = learner.initial_agent()
        observation = network_observation_spec(agent, action_space, observation)
        learner.check_fits(action_space, observation, num_envs=envs.num_envs, env_name=env_name)
        self.envs = envs
        self.learner = learner
        self.rollout_length = rollout_length
        self._actor = _BatchedActor(agent)
        self._key_data = jax.random.key_data(key)
        self._observations = _HostObservations(agent, action_space, envs.num_envs)
        self.restart(seed)

    @property
    def num_envs(self) -> int:
        """The number of environments `B`."""
        return self.envs.num_envs

    def restart(self, seed: int | None = None) -> None:
        """Resets every environment and starts the next rollout from the new episodes, as
        after the collector was built (after something else stepped the environments: an
        evaluation, say).

        **Arguments:**

        - `seed`: seeds the environments' reset.
        """
        observation, _ = self.envs.reset(seed=seed)
        self._timestep = _first_timestep(self._observations.first(observation))
        self._carry = self._actor.initial_carry(self.num_envs)
        self._episodes = _EpisodeTracker(self.num_envs)

    @property
    def timestep(self) -> TimeStep:
        """The latest time steps of the environments (leading axis `B`)."""
        return self._timestep.on_device()

    def collect(self, agent: AbstractAgent) -> tuple[Trajectory, EpisodeStatistics]:
        """One rollout acting with `agent`.

        **Arguments:**

        - `agent`: the network and policy to act with (`learner.agent(state)`).

        **Returns:**

        The trajectory `[T + 1, B]` (on the default device) and the statistics of the
        episodes that ended during the rollout.
        """
        arrays = self._actor.arrays(agent)
        rollout = _RolloutBuffer(self._timestep, self.rollout_length)
        policy_steps = []
        observation, is_first, is_last = self._timestep.observation, self._timestep.is_first, self._timestep.is_last
        carry, key_data = self._carry, self._key_data
        for t in range(1, self.rollout_length + 1):
            action, policy_step, carry, key_data = self._actor(arrays, observation, carry, is_first, key_data)
            policy_steps.append(policy_step)
            action = np.asarray(action)
            observation, reward, terminated, truncated, _ = self.envs.step(action)
            is_first, is_last = is_last, terminated | truncated
            observation = self._observations(observation, action, reward, is_first)
            rollout.record(t, observation, reward, terminated, truncated)
        timesteps = rollout.timesteps()
        trajectory = Trajectory(
            timestep=timesteps.on_device(), policy_step=_stack_on_device(policy_steps), carry=self._carry
        )
        self._timestep = timesteps.at(-1)
        self._carry, self._key_data = carry, key_data
        return trajectory, self._episodes.record_rollout(timesteps)

    def close(self) -> None:
        """Closes the environments."""
        self.envs.close()


@final
@dataclasses.dataclass(frozen=True)
class _HostStep:
    """A batch of time steps in NumPy arrays, with podrace's dtypes and flags."""

    observation: PyTree[np.ndarray | Array]
    reward: np.ndarray
    discount: np.ndarray
    is_first: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray

    @property
    def is_last(self) -> np.ndarray:
        return self.terminated | self.truncated

    def at(self, index: int) -> "_HostStep":
        """The time steps at `index` of a leading (time) axis."""
        return _HostStep(*(jax.tree.map(lambda x: x[index], field) for field in self._fields()))

    def on_device(self) -> TimeStep:
        """The time steps as a [`podrace.TimeStep`][] on the default device, one transfer a leaf."""
        return TimeStep(*(jax.tree.map(jnp.asarray, field) for field in self._fields()))

    def _fields(self) -> list[Any]:
        return [getattr(self, field.name) for field in dataclasses.fields(self)]


def _host_timestep(observation, reward, terminated, truncated, is_first) -> _HostStep:
    terminated = np.asarray(terminated, bool)
    truncated = np.asarray(truncated, bool) & ~terminated
    discount = np.where(terminated, 0.0, 1.0).astype(np.float32)
    return _HostStep(
        observation,
        np.asarray(reward, np.float32),
        discount,
        np.asarray(is_first, bool),
        terminated,
        truncated,
    )


@final
class _RolloutBuffer:
    """The time steps of one rollout, `[T + 1, B]` NumPy arrays filled in place; row 0 is
    the last time step of the previous rollout."""

    def __init__(self, first: _HostStep, rollout_length: int):
        def buffer(x: np.ndarray | Array) -> np.ndarray:
            rows = np.empty((rollout_length + 1, *np.shape(x)), np.asarray(x).dtype)
            rows[0] = x
            return rows

        self._observation = jax.tree.map(buffer, first.observation)
        self._observation_leaves = jax.tree.leaves(self._observation)
        self._reward, self._terminated, self._truncated = map(buffer, (first.reward, first.terminated, first.truncated))
        self._is_first = first.is_first

    @no_type_check  # at every environment step, as `_BatchedActor.__call__`
    def record(
        self,
        t: int,
        observation: PyTree[np.ndarray | Array],
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        """Writes step `t`'s arrays, as the vector env returned them."""
        if isinstance(observation, np.ndarray):
            self._observation_leaves[0][t] = observation
        else:
            for rows, leaf in zip(self._observation_leaves, jax.tree.leaves(observation), strict=True):
                rows[t] = leaf
        self._reward[t], self._terminated[t], self._truncated[t] = reward, terminated, truncated

    def timesteps(self) -> _HostStep:
        """The rollout's time steps, with podrace's flags (`is_first` where the step before was last)."""
        is_first = np.concatenate([self._is_first[None], (self._terminated | self._truncated)[:-1]])
        return _host_timestep(self._observation, self._reward, self._terminated, self._truncated, is_first)


@jax.jit
def _stack_on_device(steps: list[PolicyStep]) -> PolicyStep:
    """The policy steps `[T, B]`, stacked in one dispatch."""
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *steps)


def _first_timestep(observation: PyTree[np.ndarray | Array]) -> _HostStep:
    """The time steps of a batch just reset."""
    num_envs = len(jax.tree.leaves(observation)[0])
    no = np.zeros(num_envs, bool)
    return _host_timestep(observation, np.zeros(num_envs), no, no, np.ones(num_envs, bool))


@final
class HostTrainResult(AbstractTrainResult[PyTree[Array]]):
    """What [`podrace.executors.host.train_on_host`][] returns.

    **Arguments:**

    - `state`: the learner state after the last update.
    - `metrics`: one entry per update (leading axis `num_updates`), as from
        [`podrace.Anakin.train`][].
    """

    state: PyTree[Array]
    metrics: TrainMetrics

    def summary(self) -> dict[str, float]:
        """[`podrace.loggers.summarize`][] of `metrics`."""
        return summarize(self.metrics)

    def reporting(self, owner: str, metrics: str | Iterable[str]) -> "HostTrainResult":
        """This result with only the metrics named in `metrics` (see [`podrace.results.METRICS`][]),
        as a host pipeline's `train` returns it; `owner` names it in the error for an unknown name."""
        return HostTrainResult(self.state, self.metrics.select(check_metrics(owner, metrics)))


ResultT = TypeVar("ResultT")
StateT = TypeVar("StateT")
LearnerT = TypeVar("LearnerT", bound=AbstractLearner)


class AbstractExperienceSource(abc.ABC, Generic[ResultT]):
    """Where a scheduled trainer's experience comes from: rounds of work asked for with an
    agent, delivered in the order asked. A [`podrace.executors.host.GymnasiumCollector`][]
    in a background thread is one (one result a round); a pool of Ray actors is another
    (one result per actor)."""

    @abc.abstractmethod
    def submit(self, agent: AbstractAgent, version: int) -> None:
        """Asks for a round of work acting with `agent` (the parameters after `version` updates)."""

    @abc.abstractmethod
    def gather(self) -> list[ResultT]:
        """The results of the oldest round asked for, waiting for them."""

    @abc.abstractmethod
    def discard_pending(self) -> None:
        """Drops the rounds asked for and not gathered."""


def run_schedule(
    source: AbstractExperienceSource[ResultT],
    agent_at: Callable[[StateT], AbstractAgent],
    state: StateT,
    *,
    num_updates: int,
    max_lag: int,
    update: Callable[[StateT, list[ResultT]], tuple[StateT, TrainMetrics]],
) -> tuple[StateT, TrainMetrics]:
    """The one scheduling loop of the host executors: update `k` learns from round `k`,
    which acts with the parameters after `max(k - max_lag, 0)` updates.

    `max_lag` rounds are asked for ahead, so the source works on them while the learner
    updates; `max_lag=0` alternates (on-policy). Which parameters act is fixed by the
    schedule, not by timing, so a run is reproducible. On an error, the rounds in
    flight are discarded.

    **Arguments:**

    - `source`: where the rounds come from.
    - `agent_at`: the agent of a learner state (`learner.agent`).
    - `state`: the learner state to start from.
    - `num_updates`: how many rounds and updates.
    - `max_lag`: rounds asked for ahead of the learner.
    - `update`: `update(state, results) -> (state, metrics)`, the learning from one round.

    **Returns:**

    The final state and the metrics of every update, stacked.
    """
    metrics: list[TrainMetrics] = []
    try:
        for _ in range(min(max_lag, num_updates)):
            source.submit(agent_at(state), 0)
        for k in range(num_updates):
            if max_lag == 0:
                source.submit(agent_at(state), k)
            results = source.gather()
            if max_lag and k + max_lag < num_updates:
                source.submit(agent_at(state), k)  # the next round acts while this update runs
            state, train_metrics = update(state, results)
            metrics.append(train_metrics)
    except BaseException:
        source.discard_pending()
        raise
    return state, jax.tree.map(lambda *values: jnp.stack(values), *metrics)


@final
class _ThreadedCollector(AbstractExperienceSource[tuple[Trajectory, EpisodeStatistics]]):
    """A collector as an experience source: each round is one `collect` in a background thread."""

    def __init__(self, collector: GymnasiumCollector, executor: concurrent.futures.ThreadPoolExecutor):
        self._collector = collector
        self._executor = executor
        self._pending: collections.deque[concurrent.futures.Future] = collections.deque()

    def submit(self, agent: AbstractAgent, version: int) -> None:
        del version
        self._pending.append(self._executor.submit(self._collector.collect, agent))

    def gather(self) -> list[tuple[Trajectory, EpisodeStatistics]]:
        return [self._pending.popleft().result()]

    def discard_pending(self) -> None:
        for future in self._pending:
            future.cancel()
        self._pending.clear()


def train_on_host(
    learner: AbstractLearner,
    collector: GymnasiumCollector,
    *,
    num_updates: int,
    key: PRNGKeyArray | None = None,
    state: PyTree[Array] | None = None,
    overlap: bool = True,
) -> HostTrainResult:
    """Trains a learner on rollouts from a host collector.

    With `overlap`, rollout `k + 1` is collected in a background thread while the
    learner updates on rollout `k`, so it acts with the parameters from before that
    update: the behaviour policy lags the learner by one update (its log-probabilities
    are in the trajectory for off-policy corrections). Which parameters act is fixed,
    not a race, so a run is reproducible. Without `overlap`, each rollout acts with the
    latest parameters. This is [`podrace.executors.host.run_schedule`][] with one
    source and `max_lag` 1 or 0, the loop the Ray trainers run over many actors.

    **Arguments:**

    - `learner`: the learner; the collector's learner provides the policy.
    - `collector`: the [`podrace.executors.host.GymnasiumCollector`][].
    - `num_updates`: how many rollouts and updates.
    - `key`: the learner's randomness, to start from `learner.init(key, collector.timestep)`.
    - `state`: the learner state to start from instead (e.g. a previous result's).
    - `overlap`: whether to collect in a background thread.

    **Returns:**

    The final learner state and the per-update metrics.
    """
    check_positive_int("train_on_host", "num_updates", num_updates)
    if (key is None) == (state is None):
        raise ValueError("train_on_host: give either a key (to start afresh) or a state (to resume), not both.")
    learner_state = state if key is None else learner.init(key, collector.timestep)

    def update(state, rollouts: list[tuple[Trajectory, EpisodeStatistics]]):
        ((trajectory, episodes),) = rollouts
        state, update_metrics = jitted_update(learner, state, trajectory)
        return state, train_metrics(update_metrics, episodes)

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        learner_state, metrics = run_schedule(
            _ThreadedCollector(collector, executor),
            learner.agent,
            learner_state,
            num_updates=num_updates,
            max_lag=1 if overlap else 0,
            update=update,
        )
    return HostTrainResult(learner_state, metrics)


class AbstractHostPipeline(AbstractPipeline[StateT], Generic[StateT, LearnerT]):
    """A pipeline of one learner that updates on the driver's default device, fed by
    environments outside the compiled program (a host collector, Ray actors). Its state
    is the learner's.

    **Attributes:**

    - `learner`: the learner.
    """

    learner: eqx.AbstractVar[LearnerT]

    @property
    def num_members(self) -> int:
        """1: one learner."""
        return 1

    @property
    def num_devices(self) -> int:
        """1: the learner updates on the default device."""
        return 1

    def network_at(self, state: StateT, member: int = 0) -> AbstractNetwork:
        """The learner's network with the parameters learnt in `state` (`member` is 0, the one learner)."""
        check_member(self, member)
        return self.learner.network_at(state)

    def agent_at(self, state: StateT, member: int = 0) -> AbstractAgent:
        """The learner's agent with the parameters learnt in `state` (`member` is 0, the one learner)."""
        check_member(self, member)
        return self.learner.agent(state)

    def evaluation_env(self, state: StateT, member: int = 0) -> None:
        """`None`: the environments are Gymnasium ones, outside JAX (see `evaluate`)."""
        del state
        check_member(self, member)


@final
class HostPipeline(AbstractHostPipeline[PyTree[Array], AbstractLearner]):
    """A learner trained on a host collector's rollouts, driven as a [`podrace.Anakin`][] pipeline is.

    `init` and `train` have the pipeline's signatures, so that
    [`podrace.progress.train_with_progress`][] (progress, metric sinks, checkpoints)
    drives host environments too. Its state is the learner's: the environments'
    states live in the collector, so a restored state starts from fresh episodes.

    **Arguments:**

    - `learner`: the learner.
    - `collector`: the [`podrace.executors.host.GymnasiumCollector`][] built for it.
    - `overlap`: whether to collect the next rollout while the learner updates (see
        [`podrace.executors.host.train_on_host`][]).
    """

    learner: AbstractLearner
    collector: GymnasiumCollector = eqx.field(static=True)
    overlap: bool = eqx.field(static=True)

    def __init__(self, learner: AbstractLearner, collector: GymnasiumCollector, *, overlap: bool = True):
        self.learner = learner
        self.collector = collector
        self.overlap = overlap

    @property
    def frames_per_update(self) -> int:
        """Environment steps per update: `num_envs * rollout_length`."""
        return self.collector.num_envs * self.collector.rollout_length

    def init(self, key: PRNGKeyArray) -> PyTree[Array]:
        """The learner's initial state."""
        return self.learner.init(key, self.collector.timestep)

    def train(
        self, state: PyTree[Array], *, num_updates: int, metrics: str | Iterable[str] = DEFAULT_METRICS
    ) -> HostTrainResult:
        """`num_updates` rollouts and updates from `state`, on the collector's environments,
        reporting `metrics` beyond the loss (as [`podrace.Anakin.train`][] does)."""
        result = train_on_host(self.learner, self.collector, num_updates=num_updates, state=state, overlap=self.overlap)
        return result.reporting("HostPipeline.train", metrics)

    @property
    def observation_spec(self) -> PyTree[jax.ShapeDtypeStruct]:
        """The shape and dtype of one observation of the collector's environments."""
        return one_observation_spec(self.collector.timestep)

    def evaluate(self, state: PyTree[Array], evaluation: Evaluation) -> EvaluationResult:
        """The trained network plays `evaluation`'s episodes in the collector's environments
        ([`podrace.executors.host.evaluate_on_host`][]); the collector then restarts them, so
        the next rollout starts new episodes. Axes `[num_episodes]`."""
        result = evaluate_on_host(
            self.collector.envs,
            self.network_at(state),
            evaluation.policy,
            num_episodes=evaluation.num_episodes,
            key=evaluation.key,
            max_steps=evaluation.max_steps,
        )
        self.collector.restart()
        return result


def one_observation_spec(timestep: TimeStep) -> PyTree[jax.ShapeDtypeStruct]:
    """The shape and dtype of one observation of a batch of time steps (leading axis: the environments)."""
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype), timestep.observation)


@eqx.filter_jit
def jitted_update(
    learner: AbstractLearner, state: PyTree[Array], trajectory: Trajectory
) -> tuple[PyTree[Array], UpdateMetrics]:
    """`learner.update`, compiled once per learner and trajectory shape (the host executors' update)."""
    return learner.update(state, trajectory)


def train_metrics(update_metrics: UpdateMetrics, episodes: EpisodeStatistics) -> TrainMetrics:
    """An update's metrics with the episodes that ended in the rollout it learnt from."""
    return TrainMetrics(
        update_metrics,
        jnp.asarray(episodes.returns.sum(), jnp.float32),
        jnp.asarray(len(episodes.returns), jnp.int32),
        jnp.asarray(episodes.lengths.sum(), jnp.int32),
    )


def evaluate_on_host(
    envs: Any,
    network: AbstractNetwork,
    policy: AbstractPolicy,
    *,
    num_episodes: int,
    key: PRNGKeyArray,
    max_steps: int = 10_000,
    seed: int | None = None,
) -> EvaluationResult:
    """Runs a policy for `num_episodes` whole episodes of a Gymnasium vector environment
    and reports each one: [`podrace.evaluate`][] for host environments.

    Each of the `B` environments plays `num_episodes // B` episodes, the first
    `num_episodes % B` one more, so that short episodes are not over-represented,
    within `max_steps` steps; an episode cut by the budget reports `completed=False`
    with its return so far, and one never started reports 0. The parts are checked to
    fit first, as [`podrace.evaluate`][] checks them.

    **Arguments:**

    - `envs`: a `gymnasium.vector.VectorEnv` in next-step autoreset mode (Gymnasium's default).
    - `network`: the network, with the parameters to evaluate.
    - `policy`: the policy over the network's outputs.
    - `num_episodes`: how many episodes.
    - `key`: the policy's randomness.
    - `max_steps`: the step budget per environment.
    - `seed`: seeds the environments' first reset.

    **Returns:**

    An [`podrace.EvaluationResult`][].
    """
    check_positive_int("evaluate_on_host", "num_episodes", num_episodes)
    check_positive_int("evaluate_on_host", "max_steps", max_steps)
    action_space, observation, env_name = vector_env_spaces(envs)
    check_agent_fits(
        network, policy, action_space, network_observation_spec(network, action_space, observation), env_name=env_name
    )
    num_envs = envs.num_envs
    quota = num_episodes // num_envs + (np.arange(num_envs) < num_episodes % num_envs)
    results: list[list[tuple[float, int, bool]]] = [[] for _ in range(num_envs)]
    agent = Agent(network, policy)
    actor = _BatchedActor(agent)
    arrays, carry, key_data = actor.arrays(agent), actor.initial_carry(num_envs), jax.random.key_data(key)
    observations = _HostObservations(agent, action_space, num_envs)
    observation, _ = envs.reset(seed=seed)
    timestep = _first_timestep(observations.first(observation))
    episodes = _EpisodeTracker(num_envs)
    for _ in range(max_steps):
        if all(len(done) >= wanted for done, wanted in zip(results, quota, strict=True)):
            break
        action, _, carry, key_data = actor(arrays, timestep.observation, carry, timestep.is_first, key_data)
        action = np.asarray(action)
        observation, reward, terminated, truncated, _ = envs.step(action)
        observation = observations(observation, action, reward, timestep.is_last)
        timestep = _host_timestep(observation, reward, terminated, truncated, timestep.is_last)
        episodes.record(timestep.is_first, timestep.reward)
        for i in np.flatnonzero(timestep.is_last):
            if len(results[i]) < quota[i]:
                results[i].append((float(episodes.returns[i]), int(episodes.lengths[i]), True))
    for i, done in enumerate(results):
        if len(done) < quota[i]:  # cut by the budget: the running episode, then unstarted ones
            done.append((float(episodes.returns[i]), int(episodes.lengths[i]), False))
            done.extend([(0.0, 0, False)] * (quota[i] - len(done)))
    returns, lengths, completed = zip(*(episode for done in results for episode in done), strict=True)
    return EvaluationResult(
        jnp.asarray(returns, jnp.float32), jnp.asarray(lengths, jnp.int32), jnp.asarray(completed, bool)
    )
