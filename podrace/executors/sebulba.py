"""Sebulba: actor threads stepping host environments, a learner on devices of its own.

The second architecture of Hessel et al., "Podracer architectures for scalable
Reinforcement Learning" (2021). Each actor thread steps its own batch of host
environments (a Gymnasium vector env, through a
[`podrace.executors.host.GymnasiumCollector`][]; EnvPool's pools through
`envpool.make_gymnasium`) and acts with the parameters on its actor device. Its
trajectories go to the learner devices with `jax.device_put`, split along the
environment axis when there are several; the learner (any of podrace's, unchanged)
updates on them, and the new parameters go back to the actor devices after each update.

**Schedule and staleness.** Update `k` of a `train` call learns from one rollout of
every actor thread, side by side (`[T + 1, sum B_i]`, thread by thread). Rollout `k` of
each thread acts with the parameters after `max(k - max_staleness, 0)` updates of the
call, so a trajectory is at most `max_staleness` updates old when the learner takes it:
by default 1, as the paper's PPO (PPO's clipped ratio and V-trace correct for it); 0
alternates acting and learning, on-policy. The threads collect the next `max_staleness`
rollouts while the learner updates, and each thread's queue of finished rollouts holds
at most `max(max_staleness, 1)`. Which parameters act is fixed by this schedule
([`podrace.executors.host.run_schedule`][]), not by the threads' timing, so a run is
reproducible.

**Accounting.** A call of `num_updates` updates makes every thread collect exactly
`num_updates` rollouts and the learner learn from each of them once; the state counts
the steps each thread took and the steps the learner learnt from, per thread, and the
result counts them per update.

**Processes.** After [`podrace.distributed.initialize`][], `learner_devices` may span
every process: each process runs the same script with actor threads of its own, its
rollouts become its share of the learner's batch
(`multihost_utils.host_local_array_to_global_array`), and the update is one program
over every learner device. Every process must give the same number of collectors, of
the same sizes, and as many learner devices of its own. The counts of the state are of
this process's threads, the same in every process (and replicated over the learner
devices, so that a checkpoint holds them once); the episode statistics of the metrics
are summed over every process.

**Shutdown.** An error in an actor thread (its environments, its policy) stops every
thread and is raised in the caller; so is an error or a `KeyboardInterrupt` in the
caller. Either way every thread is joined and every environment closed before `train`
raises. The threads of a call are started by it and joined before it returns.

Requires the `gymnasium` extra: `pip install 'podrace[gymnasium]'`.
"""

import collections
import dataclasses
import functools
import queue
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, final, no_type_check

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, PartitionSpec
from jaxtyping import Array, Int, PRNGKeyArray, PyTree

from .._types import Trajectory
from .._validation import check_positive_int, network_observation_spec
from ..agent import AbstractAgent
from ..envs.gymnasium import vector_env_spaces
from ..learners import AbstractLearner
from ..loggers import summarize
from ..networks import AbstractNetwork
from ..results import DEFAULT_METRICS, EvaluationResult, NotComputed, TrainMetrics, UpdateMetrics, check_metrics
from .anakin import learner_specs
from .evaluation import Evaluation
from .host import (
    AbstractExperienceSource,
    EpisodeStatistics,
    GymnasiumCollector,
    evaluate_on_host,
    jitted_update,
    one_observation_spec,
    run_schedule,
    train_metrics,
)
from .pipeline import AbstractPipeline, AbstractTrainResult, check_member


if TYPE_CHECKING:  # `jax.Device` is jaxlib's class under a name type checkers do not take as a type
    from jaxlib._jax import Device
else:
    Device = jax.Device

_POLL_SECONDS = 0.05  # how often a waiting thread looks for a stop or an error


@final
class SebulbaState(eqx.Module):
    """The state of a [`podrace.Sebulba`][] pipeline.

    **Arguments:**

    - `learner`: the learner's state, on the learner devices.
    - `actor_steps`: the environment steps each actor thread has taken, counted by the
        thread; replicated over the learner devices, as `learnt_steps`.
    - `learnt_steps`: the environment steps of each actor thread's trajectories that the
        learner has updated on, counted by the learner; equal to `actor_steps` after every
        call: no step is lost or learnt from twice.
    """

    learner: PyTree[Array]
    actor_steps: Int[Array, " actors"]
    learnt_steps: Int[Array, " actors"]


@final
class SebulbaTrainResult(AbstractTrainResult[SebulbaState]):
    """What [`podrace.Sebulba.train`][] returns.

    **Arguments:**

    - `state`: the state after the last update.
    - `metrics`: one entry per update (leading axis `num_updates`), as from [`podrace.Anakin.train`][].
    - `versions`: `[num_updates, actors]`, the parameters that collected each actor
        thread's trajectory of each update, as the number of updates of the call before
        them: `max(k - max_staleness, 0)` for update `k`.
    - `steps`: `[num_updates, actors]`, the environment steps of each of those trajectories.
    """

    state: SebulbaState
    metrics: TrainMetrics
    versions: Int[Array, "updates actors"]
    steps: Int[Array, "updates actors"]

    def summary(self) -> dict[str, float]:
        """[`podrace.loggers.summarize`][] of `metrics`."""
        return summarize(self.metrics)


@final
@dataclasses.dataclass(frozen=True)
class _Rollout:
    """One actor thread's rollout, on the learner devices."""

    trajectory: Trajectory
    episodes: EpisodeStatistics
    version: int
    steps: int


@final
class _ActorThreads(AbstractExperienceSource[_Rollout]):
    """One thread per collector, acting on its actor device; a round is one rollout of every thread.

    Each thread takes the agents to act with from a queue of its own and puts its rollouts,
    moved to the learner devices, in a queue of at most `max(max_staleness, 1)` (the
    schedule never has more agents waiting either). The first error of a thread stops
    them all; `gather` raises it.
    """

    def __init__(
        self,
        collectors: Sequence[GymnasiumCollector],
        devices: Sequence[Device],
        to_learner: Callable[[Trajectory], Trajectory],
        max_staleness: int,
    ):
        self._collectors, self._devices, self._to_learner = collectors, devices, to_learner
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._agents: list[queue.SimpleQueue[tuple[AbstractAgent, int]]] = [queue.SimpleQueue() for _ in collectors]
        self._rollouts: list[queue.Queue[_Rollout]] = [queue.Queue(max(max_staleness, 1)) for _ in collectors]
        self.steps = [0] * len(collectors)
        self._threads = [
            threading.Thread(target=self._act, args=(slot,), name=f"podrace-sebulba-actor-{slot}", daemon=True)
            for slot in range(len(collectors))
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, agent: AbstractAgent, version: int) -> None:
        arrays, static = eqx.partition(_this_process_copy(agent), eqx.is_array)
        on_device = {device: eqx.combine(jax.device_put(arrays, device), static) for device in set(self._devices)}
        for agents, device in zip(self._agents, self._devices, strict=True):
            agents.put((on_device[device], version))

    def gather(self) -> list[_Rollout]:
        rollouts = [self._poll(rollouts.get, queue.Empty) for rollouts in self._rollouts]
        if self._errors:  # the threads stop on an error only
            raise self._errors[0]
        return rollouts

    def discard_pending(self) -> None:
        self._stop.set()

    def close(self) -> None:
        """Stops the threads and joins them (a thread finishes the rollout it is collecting)."""
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _poll(self, call: Callable[..., Any], busy: type[Exception]) -> Any:
        """`call(timeout=...)` until it does not raise `busy`; `None` once the threads are stopped."""
        while not self._stop.is_set():
            try:
                return call(timeout=_POLL_SECONDS)
            except busy:
                pass
        return None

    def _act(self, slot: int) -> None:
        collector, agents, rollouts = self._collectors[slot], self._agents[slot], self._rollouts[slot]
        steps = collector.rollout_length * collector.num_envs
        try:
            with jax.default_device(self._devices[slot]):
                while (work := self._poll(agents.get, queue.Empty)) is not None:
                    agent, version = work
                    trajectory, episodes = collector.collect(agent)
                    self.steps[slot] += steps
                    rollout = _Rollout(self._to_learner(trajectory), episodes, version, steps)
                    self._poll(functools.partial(rollouts.put, rollout), queue.Full)
        except BaseException as error:  # raised in the caller by `gather`
            self._errors.append(error)
            self._stop.set()


def _summed_over_processes(metrics: TrainMetrics) -> TrainMetrics:
    """`metrics` with the episode statistics of every process's threads."""
    if jax.process_count() == 1:
        return metrics

    def summed(value: Array | NotComputed) -> Array | NotComputed:
        if isinstance(value, NotComputed):
            return value
        return jnp.asarray(multihost_utils.process_allgather(value).sum(0), value.dtype)

    episodes = (metrics.episode_return_sum, metrics.episodes_completed, metrics.episode_length_sum)
    return TrainMetrics(metrics.update, *(summed(value) for value in episodes))


def _devices(owner: str, name: str, devices: Sequence[Device], *, every_process: bool = False) -> tuple[Device, ...]:
    """`devices` checked: distinct, and of this process only, or (`every_process`) as
    many of every process's."""
    devices = tuple(devices)
    if not devices:
        raise ValueError(f"{owner}: {name} is empty; give at least one device (e.g. [jax.devices()[0]]).")
    if len(set(devices)) != len(devices):
        raise ValueError(f"{owner}: {name} names a device twice: {list(devices)}; name each once.")
    local = jax.local_devices()
    if not every_process and any(device not in local for device in devices):
        raise ValueError(f"{owner}: {name} must be devices of this process (jax.local_devices()), got {list(devices)}.")
    per_process = collections.Counter(device.process_index for device in devices)
    if every_process and (set(per_process) != set(range(jax.process_count())) or len(set(per_process.values())) > 1):
        raise ValueError(
            f"{owner}: {name} must hold as many devices of every process (of {jax.process_count()}), got "
            f"{dict(sorted(per_process.items()))} by process; each process's rollouts go to its own learner devices."
        )
    return devices


def _same_places_in_every_process(devices: Sequence[Device]) -> list[Device]:
    """The devices of every process at the places of `devices` among this process's."""
    places = [jax.local_devices().index(device) for device in devices]
    return [
        jax.local_devices(process_index=process)[place] for process in range(jax.process_count()) for place in places
    ]


def _this_process_copy(tree: PyTree) -> PyTree:
    """`tree` with each array replicated over several processes replaced by this process's copy."""

    def local(leaf: Any) -> Any:
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            return leaf.addressable_data(0)
        return leaf

    return jax.tree.map(local, tree)


@final
class Sebulba(AbstractPipeline[SebulbaState]):
    """A learner on its own devices, fed by actor threads that step host environments:
    the Sebulba architecture of Hessel et al., "Podracer architectures for scalable
    Reinforcement Learning" (2021). See the module's description for the schedule, the
    staleness, the accounting and the shutdown.

    Actor thread `i` steps `collectors[i]` and acts on `actor_devices[i % len(actor_devices)]`.
    With several learner devices the learner updates under `jax.shard_map`, each device
    on its share of every thread's environments (as [`podrace.Anakin`][] splits its
    batch), its gradients averaged over them.

    **Arguments:**

    - `learner`: the learner, any of podrace's, unchanged.
    - `collectors`: one [`podrace.executors.host.GymnasiumCollector`][] per actor thread,
        built for `learner`, all with the same `rollout_length`.
    - `actor_devices`: the devices the threads act on; by default the first local device.
    - `learner_devices`: the devices the learner updates on; by default the local devices
        that are not actor devices, or the one device there is.
    - `max_staleness`: how many updates old the parameters that collect a trajectory may
        be when the learner takes it (0: on-policy, acting and learning alternate).
    """

    learner: AbstractLearner
    collectors: tuple[GymnasiumCollector, ...] = eqx.field(static=True)
    actor_devices: tuple[Device, ...] = eqx.field(static=True)
    learner_mesh: Mesh = eqx.field(static=True)
    max_staleness: int = eqx.field(static=True)

    def __init__(
        self,
        learner: AbstractLearner,
        collectors: Sequence[GymnasiumCollector],
        *,
        actor_devices: Sequence[Device] | None = None,
        learner_devices: Sequence[Device] | None = None,
        max_staleness: int = 1,
    ):
        local = jax.local_devices()
        actor_devices = _devices("Sebulba", "actor_devices", local[:1] if actor_devices is None else actor_devices)
        if learner_devices is None:
            learner_devices = _same_places_in_every_process(
                [device for device in local if device not in actor_devices] or local
            )
        learner_devices = _devices("Sebulba", "learner_devices", learner_devices, every_process=True)
        local_learner_devices = [device for device in learner_devices if device in local]
        if len(local) > 1 and set(actor_devices) & set(learner_devices):
            raise ValueError(
                f"Sebulba: actor_devices {list(actor_devices)} and learner_devices {list(learner_devices)} share "
                "devices; give each device to the actors or to the learner, not both (only a single device is shared)."
            )
        collectors = tuple(collectors)
        if not collectors:
            raise ValueError("Sebulba: collectors is empty; give one GymnasiumCollector per actor thread.")
        if len({id(collector) for collector in collectors}) != len(collectors):
            raise ValueError("Sebulba: a collector is given twice; each actor thread needs a collector of its own.")
        if len(collectors) % len(actor_devices):
            raise ValueError(
                f"Sebulba: {len(collectors)} collectors cannot be spread evenly over {len(actor_devices)} actor "
                "devices; give a multiple of len(actor_devices) collectors (one actor thread each)."
            )
        lengths = sorted({collector.rollout_length for collector in collectors})
        if len(lengths) > 1:
            raise ValueError(f"Sebulba: the collectors' rollout_length differ ({lengths}); build them with one.")
        if max_staleness < 0 or not isinstance(max_staleness, int):
            raise ValueError(f"Sebulba: max_staleness must be an integer >= 0, got {max_staleness!r}.")
        for collector in collectors:
            if collector.num_envs % len(local_learner_devices):
                raise ValueError(
                    f"Sebulba: a collector's {collector.num_envs} environments cannot be split over "
                    f"{len(local_learner_devices)} learner devices; give each collector a multiple of "
                    f"{len(local_learner_devices)} environments."
                )
        action_space, observation, env_name = vector_env_spaces(collectors[0].envs)
        observation = network_observation_spec(learner.initial_agent(), action_space, observation)
        num_envs = sum(collector.num_envs for collector in collectors) // len(local_learner_devices)
        learner.check_fits(action_space, observation, num_envs=num_envs, env_name=env_name)
        self.learner = learner
        self.collectors = collectors
        self.actor_devices = actor_devices
        self.learner_mesh = Mesh(np.asarray(learner_devices), ("learners",))
        self.max_staleness = max_staleness

    @property
    def frames_per_update(self) -> int:
        """Environment steps per update: every thread's `num_envs * rollout_length`, in every process."""
        local = sum(collector.num_envs for collector in self.collectors) * self.collectors[0].rollout_length
        return jax.process_count() * local

    @property
    def num_members(self) -> int:
        """1: one learner."""
        return 1

    @property
    def num_devices(self) -> int:
        """The number of learner devices."""
        return self.learner_mesh.size

    @property
    def observation_spec(self) -> PyTree[jax.ShapeDtypeStruct]:
        """The shape and dtype of one observation of the collectors' environments."""
        return one_observation_spec(self.collectors[0].timestep)

    def init(self, key: PRNGKeyArray) -> SebulbaState:
        """The learner's initial state on the learner devices, and counts of 0.

        **Arguments:**

        - `key`: the learner's randomness (the collectors hold the actors').
        """
        timestep = jax.tree.map(lambda *x: jnp.concatenate(x), *(collector.timestep for collector in self.collectors))
        zeros = self._replicated(np.zeros(len(self.collectors), np.int32))
        return SebulbaState(self._place(self.learner.init(key, timestep)), zeros, zeros)

    def train(
        self, state: SebulbaState, *, num_updates: int, metrics: str | Iterable[str] = DEFAULT_METRICS
    ) -> SebulbaTrainResult:
        """`num_updates` rounds of rollouts and updates from `state`, reporting `metrics`
        beyond the loss (as [`podrace.Anakin.train`][] does).

        **Raises:**

        The error of an actor thread, or of the caller (a `KeyboardInterrupt`), once every
        thread is joined and every environment closed.
        """
        check_positive_int("Sebulba.train", "num_updates", num_updates)
        metrics = check_metrics("Sebulba.train", metrics)
        devices = [self.actor_devices[slot % len(self.actor_devices)] for slot in range(len(self.collectors))]
        source = _ActorThreads(self.collectors, devices, self._to_learner, self.max_staleness)
        versions: list[list[int]] = []
        steps: list[list[int]] = []

        # At every update: `no_type_check` keeps the learner state's pytree out of the test
        # session's runtime checks (the jaxtyping import hook), as the host collector's step.
        @no_type_check
        def update(learner_state: PyTree[Array], rollouts: list[_Rollout]) -> tuple[PyTree[Array], TrainMetrics]:
            versions.append([rollout.version for rollout in rollouts])
            steps.append([rollout.steps for rollout in rollouts])
            learner_state, update_metrics = self._update(learner_state, [rollout.trajectory for rollout in rollouts])
            episodes = EpisodeStatistics.concatenate(rollout.episodes for rollout in rollouts)
            return learner_state, _summed_over_processes(train_metrics(update_metrics, episodes))

        try:
            learner_state, reported = run_schedule(
                source,
                self.learner.agent,
                self._place(state.learner),
                num_updates=num_updates,
                max_lag=self.max_staleness,
                update=update,
            )
        except BaseException:
            source.close()
            self.close()
            raise
        source.close()
        learnt = jnp.asarray(steps, jnp.int32)
        actor_steps = np.asarray(state.actor_steps) + np.asarray(source.steps, np.int32)
        learnt_steps = np.asarray(state.learnt_steps) + np.asarray(learnt).sum(0)
        state = SebulbaState(learner_state, self._replicated(actor_steps), self._replicated(learnt_steps))
        return SebulbaTrainResult(state, reported.select(metrics), jnp.asarray(versions, jnp.int32), learnt)

    def evaluate(self, state: SebulbaState, evaluation: Evaluation) -> EvaluationResult:
        """The trained network plays `evaluation`'s episodes in the first collector's
        environments ([`podrace.executors.host.evaluate_on_host`][]); that collector then
        restarts them, so its next rollout starts new episodes. Axes `[num_episodes]`."""
        collector = self.collectors[0]
        result = evaluate_on_host(
            collector.envs,
            self.network_at(state),
            evaluation.policy,
            num_episodes=evaluation.num_episodes,
            key=evaluation.key,
            max_steps=evaluation.max_steps,
        )
        collector.restart()
        return result

    def network_at(self, state: SebulbaState, member: int = 0) -> AbstractNetwork:
        """The learner's network with the parameters learnt in `state` (`member` is 0, the one learner)."""
        check_member(self, member)
        return _this_process_copy(self.learner.network_at(state.learner))

    def agent_at(self, state: SebulbaState, member: int = 0) -> AbstractAgent:
        """The learner's agent with the parameters learnt in `state` (`member` is 0, the one learner)."""
        check_member(self, member)
        return _this_process_copy(self.learner.agent(state.learner))

    def evaluation_env(self, state: SebulbaState, member: int = 0) -> None:
        """`None`: the environments are host ones, outside JAX (see `evaluate`)."""
        del state
        check_member(self, member)

    def close(self) -> None:
        """Closes every collector's environments (`train` does on an error)."""
        for collector in self.collectors:
            collector.close()

    def _place(self, learner_state: PyTree[Array]) -> PyTree[Array]:
        """The learner state laid out over the learner devices (of every process)."""
        (axis,) = self.learner_mesh.axis_names
        specs = learner_specs(self.learner, learner_state, axis)

        def place(leaf: Array, spec: PartitionSpec) -> Array:
            if not leaf.is_fully_addressable:  # placed already
                return leaf
            return multihost_utils.host_local_array_to_global_array(leaf, self.learner_mesh, spec)

        def place_all(spec: PartitionSpec, subtree: PyTree[Array]) -> PyTree[Array]:
            return jax.tree.map(lambda leaf: place(leaf, spec), subtree)

        return jax.tree.map(place_all, specs, learner_state, is_leaf=lambda node: isinstance(node, PartitionSpec))

    def _replicated(self, counts: np.ndarray) -> Array:
        """Counts of this process's threads (the same in every process) replicated over the learner devices."""
        return multihost_utils.host_local_array_to_global_array(counts, self.learner_mesh, PartitionSpec())

    def _trajectory_specs(self) -> tuple[PartitionSpec, PartitionSpec, PartitionSpec]:
        """How a rollout's time steps, policy steps and carry are laid out: split along
        their environment axis over the learner devices."""
        (axis,) = self.learner_mesh.axis_names
        return PartitionSpec(None, axis), PartitionSpec(None, axis), PartitionSpec(axis)

    def _to_learner(self, trajectory: Trajectory) -> Trajectory:
        """An actor thread's rollout moved to the learner devices: this process's share of
        the learner's batch."""
        parts = (trajectory.timestep, trajectory.policy_step, trajectory.carry)
        specs = self._trajectory_specs()
        return Trajectory(*multihost_utils.host_local_array_to_global_array(parts, self.learner_mesh, specs))

    @no_type_check  # at every update, as `train`'s `update`
    def _update(
        self, learner_state: PyTree[Array], trajectories: list[Trajectory]
    ) -> tuple[PyTree[Array], UpdateMetrics]:
        """The learner's update on the threads' rollouts side by side."""
        if self.learner_mesh.size == 1:
            return jitted_update(self.learner, learner_state, Trajectory.concatenate(trajectories))
        return self._sharded_update(learner_state, [(t.timestep, t.policy_step, t.carry) for t in trajectories])

    @eqx.filter_jit
    def _sharded_update(
        self, learner_state: PyTree[Array], trajectories: list[tuple]
    ) -> tuple[PyTree[Array], UpdateMetrics]:
        (axis,) = self.learner_mesh.axis_names
        dynamic, static = eqx.partition(self.learner, eqx.is_array)

        def on_shard(dynamic, learner_state, trajectories):
            learner = eqx.combine(dynamic, static)
            trajectory = Trajectory.concatenate([Trajectory(*parts) for parts in trajectories])
            return learner.update(learner_state, trajectory, axis_name=axis)

        specs = learner_specs(self.learner, learner_state, axis)
        split = self._trajectory_specs()
        # Without JAX's check of the axes values vary over, as Anakin: the learner averages
        # its gradients over the devices explicitly.
        return jax.shard_map(
            on_shard,
            mesh=self.learner_mesh,
            in_specs=(PartitionSpec(), specs, [split] * len(trajectories)),
            out_specs=(specs, PartitionSpec()),
            check_vma=False,
        )(dynamic, learner_state, trajectories)
