"""Ray actors for host environments: environments stepped in other processes (or machines),
learning on the driver.

A [`podrace.executors.ray_actors.RayRolloutPool`][] starts `num_actors` Ray actors. Each
owns a batch of Gymnasium environments and a
[`podrace.executors.host.GymnasiumCollector`][], acts with the parameters the driver
last sent it (with JAX, on the actor's CPU) and returns the same
[`podrace.Trajectory`][] that every learner consumes, together with the parameter version
that produced it. [`podrace.executors.ray_actors.train_with_ray`][] is
[`podrace.executors.host.train_on_host`][] with the collection spread over those actors:
the learner updates on the driver's default device while the actors collect the next
rollout.

A [`podrace.executors.ray_actors.RayGradientPool`][] follows Ray's Pong example
instead: each actor collects a rollout and returns the gradient of the learner's loss on
it; [`podrace.executors.ray_actors.train_with_ray_gradients`][] reduces the gradients
and applies the learner's optimiser on the driver. Only gradients and statistics cross
the process boundary, not trajectories.

**Seeds.** Actor slot `i` (of `num_actors`), in its `g`-th incarnation (0 at the start,
1 after its first replacement, ...), has the incarnation number
`j = g * num_actors + i`. It builds `SyncVectorEnv([make_env] * num_envs)`, resets it
with seed `seed + j * num_envs` (so environment `e` of the first incarnations gets
`seed + i * num_envs + e`, as in one vector env of `num_actors * num_envs` environments
reset with `seed`) and acts with the key `jax.random.fold_in(key, j)`. An in-process
`GymnasiumCollector` built with that seed and key produces the same trajectories.

**Policy lag.** With `max_lag=L`, `L` rounds of rollouts are in flight while the driver
updates: rollout `k` acts with the parameters after `max(k - L, 0)` updates and is learnt
from after `k`, so the behaviour policy trails the learner by up to `L` versions (each
[`podrace.executors.ray_actors.RayRollout`][] records its `version`). `L = 1`, the
default, overlaps one rollout with one update, like `train_on_host(overlap=True)`;
`L = 0` alternates and is on-policy. The trajectory holds the behaviour policy's
log-probabilities, so a loss can correct for the lag: [`podrace.losses.A2CLoss`][] and
[`podrace.losses.ReinforceLoss`][] clamp the importance weight `pi / mu` at 1,
[`podrace.losses.PPOLoss`][] clips its ratio, and V-trace ([`podrace.losses.VTraceLoss`][],
Espeholt et al., "IMPALA", 2018) corrects both the policy gradient and the value targets,
which matters more as `L` grows.

**Faults.** An actor that dies (its process killed, its node lost) is replaced by a fresh
one in the same slot, with the next incarnation's seeds, and every request of the dead
one that had not been gathered is sent again with the parameters it was first sent with.
Each result carries its slot and sequence number; a pool delivers each `(slot,
sequence)` exactly once, in order. An error raised inside an actor's method (a bug, not
a fault) is raised on the driver, and so is a failure to start the first actors.

Requires the `ray` and `gymnasium` extras: `pip install 'podrace[ray,gymnasium]'`. Call
`ray.init(...)` (for a local cluster, e.g. `ray.init(num_cpus=4)`) before building a
pool; otherwise Ray starts a default local cluster itself.
"""

import collections
import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Literal, TypeVar, cast, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int, PRNGKeyArray, PyTree

from .._types import TimeStep, Trajectory
from .._validation import check_positive_int
from ..agent import AbstractAgent
from ..envs.gymnasium import import_gymnasium
from ..learners import AbstractGradientLearner, AbstractLearner, Learner, LearnerState
from ..networks import AbstractNetwork
from ..results import DEFAULT_METRICS, EvaluationResult, LossTerms, UpdateMetrics
from .evaluation import Evaluation
from .host import (
    AbstractExperienceSource,
    AbstractHostPipeline,
    EpisodeStatistics,
    GymnasiumCollector,
    HostTrainResult,
    evaluate_on_host,
    jitted_update,
    one_observation_spec,
    run_schedule,
    train_metrics,
)


def _import_ray():
    try:
        import ray
        import ray.exceptions
    except ImportError as error:
        raise ImportError("Ray actors need Ray: pip install 'podrace[ray]'.") from error
    return ray


def _sync_vector_env(env: str | Callable[[], Any], num_envs: int, env_kwargs: Mapping[str, Any]) -> Any:
    """`SyncVectorEnv([make_env] * num_envs)`, `make_env` being `env` or `gymnasium.make(env, **env_kwargs)`."""
    gymnasium = import_gymnasium()
    make_env = functools.partial(gymnasium.make, env, **env_kwargs) if isinstance(env, str) else env
    return gymnasium.vector.SyncVectorEnv([make_env] * num_envs)


def _agent_arrays(agent: AbstractAgent) -> list[np.ndarray]:
    """The agent's arrays as host NumPy arrays, in flattening order (one transfer)."""
    return jax.device_get(jax.tree.leaves(eqx.filter(agent, eqx.is_array)))


@final
@dataclasses.dataclass(frozen=True)
class RayRollout:
    """One rollout of one actor of a [`podrace.executors.ray_actors.RayRolloutPool`][].

    **Arguments:**

    - `trajectory`: the rollout `[T + 1, B]` of the actor's `B` environments, as
        [`podrace.executors.host.GymnasiumCollector.collect`][] returns it but in host
        NumPy arrays (`jax.device_put` it to learn from it alone).
    - `episodes`: the episodes that ended during the rollout.
    - `version`: the parameter version that acted (the `version` given to `submit`).
    - `slot`: the actor's slot, `0 <= slot < num_actors`.
    - `sequence`: the rollout's number within its slot (0, 1, ...); `(slot, sequence)`
        identifies it.
    - `incarnation`: the incarnation number of the actor that collected it,
        `g * num_actors + slot` after `g` replacements of the slot.
    """

    trajectory: Trajectory
    episodes: EpisodeStatistics
    version: int
    slot: int
    sequence: int
    incarnation: int


@final
@dataclasses.dataclass(frozen=True)
class RayGradient:
    """The gradient of the learner's loss on one rollout of one actor of a
    [`podrace.executors.ray_actors.RayGradientPool`][].

    **Arguments:**

    - `gradients`: the gradient of the loss with respect to the acting network's
        trainable arrays, as host NumPy arrays in the order of
        `jax.tree.leaves(params)` for a [`podrace.LearnerState`][]'s `params` (leaves
        only: the network's static parts would not survive the trip between processes
        as the same objects); `jax.tree.unflatten(jax.tree.structure(params), gradients)`
        rebuilds the tree.
    - `loss`: the loss on the rollout.
    - `terms`: its named terms.
    - `episodes`: the episodes that ended during the rollout.
    - `version`, `slot`, `sequence`, `incarnation`: as in
        [`podrace.executors.ray_actors.RayRollout`][].
    """

    gradients: list[np.ndarray]
    loss: float
    terms: dict[str, float]
    episodes: EpisodeStatistics
    version: int
    slot: int
    sequence: int
    incarnation: int


@eqx.filter_jit
def _gradients(
    learner: AbstractGradientLearner, agent: AbstractAgent, trajectory: Trajectory
) -> tuple[Array, LossTerms, PyTree[Array]]:
    """`learner.gradients`, compiled."""
    return learner.gradients(agent, trajectory)


@eqx.filter_jit
def _step_with_gradients(
    learner: AbstractGradientLearner,
    state: Any,
    gradients: PyTree[Array],
    loss: Array,
    terms: LossTerms,
    *,
    new_transitions: Int[Array, ""],
) -> tuple[Any, UpdateMetrics]:
    """`learner.step_with_gradients`, compiled."""
    return learner.step_with_gradients(state, gradients, loss, terms, new_transitions=new_transitions)


@final
class _Worker:
    """What runs inside each Ray actor: a `GymnasiumCollector` and the learner's loss."""

    def __init__(
        self,
        env: str | Callable[[], Any],
        env_kwargs: Mapping[str, Any],
        num_envs: int,
        learner: AbstractLearner,
        rollout_length: int,
        key_data: np.ndarray,
        seed: int,
        slot: int,
        incarnation: int,
    ):
        envs = _sync_vector_env(env, num_envs, env_kwargs)
        key = jax.random.wrap_key_data(jnp.asarray(key_data))
        self._collector = GymnasiumCollector(envs, learner, rollout_length=rollout_length, key=key, seed=seed)
        self._learner = learner
        arrays, self._static = eqx.partition(learner.initial_agent(), eqx.is_array)
        leaves, self._treedef = jax.tree.flatten(arrays)
        self._shapes = [(leaf.shape, leaf.dtype) for leaf in leaves]
        self._slot, self._incarnation = slot, incarnation

    def timestep(self) -> TimeStep:
        """The latest time steps of the actor's environments, in NumPy arrays."""
        return jax.device_get(self._collector.timestep)

    def _agent(self, arrays: list[np.ndarray]) -> AbstractAgent:
        shapes = [(np.shape(x), np.asarray(x).dtype) for x in arrays]
        if shapes != self._shapes:
            raise ValueError(
                "The parameters sent to the Ray actor do not fit its agent: send the arrays of "
                "learner.agent(state) for the learner the pool was built with."
            )
        leaves = [jnp.asarray(x) for x in arrays]
        return eqx.combine(jax.tree.unflatten(self._treedef, leaves), self._static)

    def _collect(self, arrays: list[np.ndarray]) -> tuple[AbstractAgent, Trajectory, EpisodeStatistics]:
        agent = self._agent(arrays)
        trajectory, episodes = self._collector.collect(agent)
        return agent, trajectory, episodes

    def rollout(self, arrays: list[np.ndarray], version: int, sequence: int) -> RayRollout:
        _, trajectory, episodes = self._collect(arrays)
        return RayRollout(jax.device_get(trajectory), episodes, version, self._slot, sequence, self._incarnation)

    def gradient(self, arrays: list[np.ndarray], version: int, sequence: int) -> RayGradient:
        agent, trajectory, episodes = self._collect(arrays)
        # A RayGradientPool takes only a learner of one gradient step.
        learner = cast(AbstractGradientLearner, self._learner)
        loss, terms, gradients = jax.device_get(_gradients(learner, agent, trajectory))
        terms = {name: float(value) for name, value in terms.items()}
        leaves = jax.tree.leaves(gradients)
        return RayGradient(leaves, float(loss), terms, episodes, version, self._slot, sequence, self._incarnation)


@functools.cache
def _remote_worker_class() -> Any:
    return _import_ray().remote(_Worker)


@final
@dataclasses.dataclass
class _Request:
    """One rollout (or gradient) asked of one slot; sent again if its actor dies."""

    slot: int
    sequence: int
    version: int
    arrays: Any  # the ObjectRef of the parameters, shared by a round's requests
    result: Any = None  # the ObjectRef of the result


ResultT = TypeVar("ResultT", RayRollout, RayGradient)


class AbstractRayActorPool(AbstractExperienceSource[ResultT]):
    """Ray actors that each own a batch of environments; requests go out in rounds, one per
    actor. [`podrace.executors.ray_actors.RayRolloutPool`][] asks them for trajectories,
    [`podrace.executors.ray_actors.RayGradientPool`][] for gradients."""

    _method: ClassVar[str]

    def __init__(
        self,
        env: str | Callable[[], Any],
        learner: AbstractLearner,
        *,
        num_actors: int,
        num_envs: int,
        rollout_length: int,
        key: PRNGKeyArray,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
        actor_options: Mapping[str, Any] | None = None,
        max_replacements: int = 10,
    ):
        name = type(self).__name__
        check_positive_int(name, "num_actors", num_actors)
        check_positive_int(name, "num_envs", num_envs)
        check_positive_int(name, "rollout_length", rollout_length)
        if self._method == "gradient" and not isinstance(learner, AbstractGradientLearner):
            raise TypeError(
                f"{name}: gradient workers compute the gradient of a learner of one loss "
                f"(a podrace.learners.AbstractGradientLearner such as podrace.Learner), got {type(learner).__name__}."
            )
        if not isinstance(env, str) and not callable(env):
            raise ValueError(f"{name}: env must be a Gymnasium id or a callable that makes one environment.")
        if env_kwargs and not isinstance(env, str):
            raise ValueError(f"{name}: env_kwargs go to gymnasium.make and need env to be a Gymnasium id.")
        if max_replacements < 0:
            raise ValueError(f"{name}: max_replacements must be >= 0, got {max_replacements}.")
        self._ray = _import_ray()
        self._env, self._env_kwargs = env, dict(env_kwargs or {})
        self._learner = self._ray.put(learner)  # once, for every actor and replacement
        self._num_actors, self._num_envs_per_actor = num_actors, num_envs
        self._rollout_length = rollout_length
        self._key, self._seed = key, seed
        self._options = _actor_options(actor_options)
        self._max_replacements = max_replacements
        self._num_replacements = 0
        self._incarnations = list(range(num_actors))
        self._actors = [self._start(slot, slot) for slot in range(num_actors)]
        self._rounds: collections.deque[list[_Request]] = collections.deque()
        self._next_sequence = 0
        try:
            timesteps = self._ray.get([actor.timestep.remote() for actor in self._actors])
        except self._ray.exceptions.RayActorError as error:
            self.close()
            raise RuntimeError(f"{name}: an actor failed to start (the Ray error above says why).") from error
        self._timestep = jax.tree.map(lambda *x: jnp.asarray(np.concatenate(x)), *timesteps)

    def _start(self, slot: int, incarnation: int) -> Any:
        key_data = np.asarray(jax.random.key_data(jax.random.fold_in(self._key, incarnation)))
        return (
            _remote_worker_class()
            .options(**self._options)
            .remote(
                self._env,
                self._env_kwargs,
                self._num_envs_per_actor,
                self._learner,
                self._rollout_length,
                key_data,
                self._seed + incarnation * self._num_envs_per_actor,
                slot,
                incarnation,
            )
        )

    @property
    def num_actors(self) -> int:
        """The number of actors (slots)."""
        return self._num_actors

    @property
    def num_envs(self) -> int:
        """The number of environments over all actors, `num_actors * num_envs` as built."""
        return self._num_actors * self._num_envs_per_actor

    @property
    def rollout_length(self) -> int:
        """Steps per rollout (`T`)."""
        return self._rollout_length

    @property
    def timestep(self) -> TimeStep:
        """The first time steps of all environments (leading axis `num_envs`, slot by slot),
        for `learner.init`."""
        return self._timestep

    @property
    def actors(self) -> list[Any]:
        """The current Ray actor handles, by slot."""
        return list(self._actors)

    @property
    def num_replacements(self) -> int:
        """How many dead actors have been replaced."""
        return self._num_replacements

    @property
    def num_pending(self) -> int:
        """How many rounds were submitted and not yet gathered."""
        return len(self._rounds)

    def submit(self, agent: AbstractAgent, version: int) -> None:
        """Asks every actor for one more result, acting with `agent`.

        The agent's arrays go into Ray's object store once; every actor reads them from
        there. Each actor works through its requests in order, so several rounds can be
        queued.

        **Arguments:**

        - `agent`: the network and policy to act with (`learner.agent(state)`, with the
            structure of the pool's learner).
        - `version`: the parameter version, recorded in the results.
        """
        arrays = self._ray.put(_agent_arrays(agent))
        requests = [_Request(slot, self._next_sequence, version, arrays) for slot in range(self._num_actors)]
        for request in requests:
            self._send(request)
        self._rounds.append(requests)
        self._next_sequence += 1

    def _send(self, request: _Request) -> None:
        method = getattr(self._actors[request.slot], self._method)
        request.result = method.remote(request.arrays, request.version, request.sequence)

    def gather(self) -> list[ResultT]:
        """The results of the oldest round not yet gathered, by slot; waits for them.

        An actor found dead is replaced and its outstanding requests are sent to the
        replacement (see the module's description).

        **Raises:**

        `RuntimeError` if nothing is pending or more than `max_replacements` actors have
        had to be replaced; an error raised inside an actor's method.
        """
        if not self._rounds:
            raise RuntimeError(f"{type(self).__name__}.gather: no round is pending; submit one first.")
        requests = self._rounds[0]
        results: list[Any] = [None] * self._num_actors
        waiting = {request.result: request for request in requests}
        while waiting:
            [ready], _ = self._ray.wait(list(waiting), num_returns=1)
            request = waiting.pop(ready)
            try:
                results[request.slot] = self._ray.get(ready)
            except (self._ray.exceptions.RayActorError, self._ray.exceptions.ObjectLostError):
                # The actor died, or its node did with the result: redo the work elsewhere.
                self._replace(request.slot)
                waiting[request.result] = request
        self._rounds.popleft()
        return results

    def _replace(self, slot: int) -> None:
        if self._num_replacements >= self._max_replacements:
            raise RuntimeError(
                f"{type(self).__name__}: the actor in slot {slot} died after {self._num_replacements} replacements "
                f"(max_replacements={self._max_replacements}); look at the Ray logs for why."
            )
        self._num_replacements += 1
        self._ray.kill(self._actors[slot], no_restart=True)
        self._incarnations[slot] += self._num_actors
        self._actors[slot] = self._start(slot, self._incarnations[slot])
        for requests in self._rounds:
            self._send(requests[slot])

    def discard_pending(self) -> None:
        """Forgets the rounds not yet gathered (the actors still finish them, unread)."""
        self._rounds.clear()

    def evaluate(self, network: AbstractNetwork, evaluation: Evaluation) -> EvaluationResult:
        """`network` plays `evaluation`'s episodes in one actor's environments made here, on
        the driver ([`podrace.executors.host.evaluate_on_host`][] in `num_envs // num_actors`
        environments of `env`, reset with the pool's `seed`), closed afterwards.

        **Arguments:**

        - `network`: the network, with the parameters to evaluate.
        - `evaluation`: the episodes and the policy.

        **Returns:**

        The episodes, with axes `[num_episodes]`.
        """
        envs = _sync_vector_env(self._env, self._num_envs_per_actor, self._env_kwargs)
        try:
            return evaluate_on_host(
                envs,
                network,
                evaluation.policy,
                num_episodes=evaluation.num_episodes,
                key=evaluation.key,
                max_steps=evaluation.max_steps,
                seed=self._seed,
            )
        finally:
            envs.close()

    def close(self) -> None:
        """Kills the actors (if Ray is still running)."""
        self._rounds.clear()
        if self._ray.is_initialized():
            for actor in self._actors:
                self._ray.kill(actor, no_restart=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _actor_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """One CPU per actor, no automatic restart (the pool replaces dead actors itself) and
    JAX on the CPU, unless the caller says otherwise."""
    merged: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0, **(options or {})}
    runtime_env = dict(merged.get("runtime_env") or {})
    runtime_env["env_vars"] = {"JAX_PLATFORMS": "cpu", **(runtime_env.get("env_vars") or {})}
    merged["runtime_env"] = runtime_env
    return merged


@final
class RayRolloutPool(AbstractRayActorPool[RayRollout]):
    """Ray actors that each step a batch of Gymnasium environments and return trajectories.

    `submit(agent, version)` sends the agent's arrays to every actor (one `ray.put`) and
    queues one rollout on each; `gather()` returns the oldest round's
    [`podrace.executors.ray_actors.RayRollout`][]s, by slot.
    [`podrace.executors.ray_actors.train_with_ray`][] drives a pool. Building one
    waits until every actor has started (an actor waits for a free CPU of the cluster
    if there is none); use it as a context manager, or call `close()`, to end the actors.

    **Arguments:**

    - `env`: a Gymnasium id (made with `gymnasium.make(env, **env_kwargs)`) or a
        picklable callable that makes one environment; each actor steps
        `SyncVectorEnv([make_env] * num_envs)` in Gymnasium's default next-step autoreset
        mode. A callable runs in the actor's process, so it imports what it needs (e.g.
        `ale_py`; or give the id as `"ale_py:ALE/Pong-v5"`).
    - `learner`: provides the network and the behaviour policy (and the loss, for
        gradients); sent to every actor through Ray's cloudpickle. podrace's modules and
        optax's optimisers travel as they are; an Equinox module whose class is defined
        in the script being run (`__main__`) travels by value and loses its fields on the
        way, so define such classes in an importable module.
    - `num_actors`: how many actors.
    - `num_envs`: environments per actor.
    - `rollout_length`: steps per rollout (`T`).
    - `key`: the policy's randomness; actor incarnation `j` acts with
        `jax.random.fold_in(key, j)`.
    - `seed`: seeds the environments' resets, `seed + j * num_envs` for incarnation `j`.
    - `env_kwargs`: keyword arguments of `gymnasium.make`, with an id only.
    - `actor_options`: options of the Ray actors (`.options(...)`), over the defaults
        `num_cpus=1`, `max_restarts=0` and the environment variable `JAX_PLATFORMS=cpu`
        (acting stays on the actors' CPUs; the learner keeps the driver's accelerator).
    - `max_replacements`: how many dead actors to replace before giving up.
    """

    _method = "rollout"


@final
class RayGradientPool(AbstractRayActorPool[RayGradient]):
    """Ray actors that each collect a rollout and return the gradient of the learner's loss on it.

    The scheme of Ray's Pong example: only gradients come back. Each actor computes
    `learner.gradients(agent, trajectory)`: the learner's loss on its rollout and its
    gradient at the acting network's trainable arrays, as one [`podrace.Learner`][]
    gradient step does (see [`podrace.learners.AbstractGradientLearner`][]).
    `submit` and `gather` work as for [`podrace.executors.ray_actors.RayRolloutPool`][];
    [`podrace.executors.ray_actors.train_with_ray_gradients`][] drives a pool.

    **Arguments:** as for [`podrace.executors.ray_actors.RayRolloutPool`][].
    """

    _method = "gradient"


def _check_start(name: str, num_updates: int, max_lag: int, pool: AbstractRayActorPool, key, state) -> None:
    check_positive_int(name, "num_updates", num_updates)
    if max_lag < 0:
        raise ValueError(f"{name}: max_lag must be >= 0, got {max_lag}.")
    if (key is None) == (state is None):
        raise ValueError(f"{name}: give either a key (to start afresh) or a state (to resume), not both.")
    if pool.num_pending:
        raise ValueError(f"{name}: the pool has {pool.num_pending} rounds pending; gather or discard them first.")


def _episodes(results: list[RayRollout] | list[RayGradient]) -> EpisodeStatistics:
    return EpisodeStatistics.concatenate(result.episodes for result in results)


def _batch(rollouts: list[RayRollout]) -> Trajectory:
    """The rollouts side by side `[T + 1, sum B]`, on the default device in one transfer each part."""
    return Trajectory.concatenate([rollout.trajectory for rollout in rollouts])


def train_with_ray(
    learner: AbstractLearner,
    pool: RayRolloutPool,
    *,
    num_updates: int,
    key: PRNGKeyArray | None = None,
    state: PyTree[Array] | None = None,
    max_lag: int = 1,
    on_rollouts: Callable[[int, list[RayRollout]], None] | None = None,
) -> HostTrainResult:
    """Trains a learner on rollouts from Ray actors: [`podrace.executors.host.train_on_host`][]
    with the environments in other processes.

    Update `k` learns from round `k`: one rollout of every actor, side by side along the
    environment axis (`[T + 1, num_envs]`, slot by slot). The actors collect round
    `k + max_lag` while the driver updates, acting with the parameters after `k`
    updates, so round `k` acts with version `max(k - max_lag, 0)` (versions count the
    updates of this call). Which parameters act is fixed by this schedule, not by
    timing, so a run is reproducible whatever the speed of the actors; only a replaced
    actor changes what is collected. See the module's description on policy lag and the
    losses that correct for it.

    **Arguments:**

    - `learner`: the learner; the pool's learner provides the policy.
    - `pool`: the [`podrace.executors.ray_actors.RayRolloutPool`][].
    - `num_updates`: how many rounds and updates.
    - `key`: the learner's randomness, to start from `learner.init(key, pool.timestep)`.
    - `state`: the learner state to start from instead (e.g. a previous result's).
    - `max_lag`: rounds collected ahead of the learner (0: alternate, on-policy).
    - `on_rollouts`: called as `on_rollouts(k, rollouts)` before update `k`, e.g. to log
        the versions and episode statistics of each actor.

    **Returns:**

    The final learner state and the per-update metrics (a
    [`podrace.executors.host.HostTrainResult`][], as from `train_on_host`).
    """
    _check_start("train_with_ray", num_updates, max_lag, pool, key, state)
    learner_state = state if key is None else learner.init(key, pool.timestep)
    count = [0]

    def update(state, rollouts: list[RayRollout]):
        if on_rollouts is not None:
            on_rollouts(count[0], rollouts)
        count[0] += 1
        state, update_metrics = jitted_update(learner, state, _batch(rollouts))
        return state, train_metrics(update_metrics, _episodes(rollouts))

    learner_state, metrics = run_schedule(
        pool, learner.agent, learner_state, num_updates=num_updates, max_lag=max_lag, update=update
    )
    return HostTrainResult(learner_state, metrics)


Reduction = Literal["mean", "sum"]


def reduce_gradients(gradients: list[RayGradient], params: PyTree[Array], reduce: Reduction = "mean") -> PyTree[Array]:
    """The actors' gradients summed (in slot order) or averaged, as a tree like `params`
    on the default device.

    **Arguments:**

    - `gradients`: one round's results.
    - `params`: the parameters they are gradients of (for the tree's structure).
    - `reduce`: `"mean"` or `"sum"`; see
        [`podrace.executors.ray_actors.train_with_ray_gradients`][].
    """
    if reduce not in ("mean", "sum"):
        raise ValueError(f"reduce must be 'mean' or 'sum', got {reduce!r}.")
    structure = jax.tree.structure(params)
    if any(len(gradient.gradients) != structure.num_leaves for gradient in gradients):
        raise ValueError("reduce_gradients: the gradients do not have the parameters' number of arrays.")
    leaves = [functools.reduce(np.add, arrays) for arrays in zip(*[g.gradients for g in gradients], strict=True)]
    if reduce == "mean":
        leaves = [leaf / np.asarray(len(gradients), leaf.dtype) for leaf in leaves]
    return jax.device_put(jax.tree.unflatten(structure, leaves))


def train_with_ray_gradients(
    learner: AbstractGradientLearner,
    pool: RayGradientPool,
    *,
    num_updates: int,
    key: PRNGKeyArray | None = None,
    state: Any = None,
    reduce: Reduction = "mean",
    max_lag: int = 0,
    on_gradients: Callable[[int, list[RayGradient]], None] | None = None,
) -> HostTrainResult:
    """Trains a learner of one gradient step per update (a [`podrace.Learner`][], any
    [`podrace.learners.AbstractGradientLearner`][]) from gradients computed by Ray
    actors, Ray's Pong scheme.

    Each update, every actor collects a rollout and returns the gradient of the learner's
    loss on it; the driver reduces them and takes one step of the learner's optimiser
    (`learner.step_with_gradients`). The learner must take one gradient step per update
    (for a [`podrace.Learner`][], `num_epochs=1` and `num_minibatches=1`).

    `reduce="mean"` (the default) averages: podrace's losses are means over their batch,
    so for a loss that is a mean over trajectories (A2C, REINFORCE, PPO's surrogate)
    with equal batches per actor the average is the gradient of the loss on all actors'
    rollouts together, the step `Learner.update` would take on the whole batch, and the
    step size does not depend on the number of actors. `reduce="sum"` adds them, as Ray's
    Pong example does (its per-episode gradients are sums over steps); for scale-free
    optimisers such as RMSProp and Adam it changes little, for SGD it multiplies the
    learning rate by the number of actors.

    With `max_lag > 0` the actors compute round `k + max_lag` while the driver applies
    round `k`, so gradients are taken at parameters up to `max_lag` versions old and
    applied to newer ones (asynchronous SGD's staleness). The default, 0, is synchronous,
    as in the example: the driver's work per update is small, so overlap gains little.

    **Arguments:**

    - `learner`: the learner; its loss and optimiser are used, the pool's learner
        computes the gradients.
    - `pool`: the [`podrace.executors.ray_actors.RayGradientPool`][].
    - `num_updates`: how many rounds and updates.
    - `key`: the learner's randomness, to start from `learner.init(key)`.
    - `state`: the learner state to start from instead.
    - `reduce`: `"mean"` or `"sum"` of the actors' gradients.
    - `max_lag`: rounds computed ahead of the driver.
    - `on_gradients`: called as `on_gradients(k, gradients)` before update `k`.

    **Returns:**

    The final learner state and the per-update metrics: the loss and its terms averaged
    over the actors, the norm of the reduced gradient, and the episodes.
    """
    _check_start("train_with_ray_gradients", num_updates, max_lag, pool, key, state)
    if state is None:
        assert key is not None
        state = learner.init(key, pool.timestep)
    learner.check_one_gradient_step("train_with_ray_gradients")
    if reduce not in ("mean", "sum"):
        raise ValueError(f"train_with_ray_gradients: reduce must be 'mean' or 'sum', got {reduce!r}.")
    count = [0]

    def update(state: LearnerState, gradients: list[RayGradient]):
        if on_gradients is not None:
            on_gradients(count[0], gradients)
        count[0] += 1
        loss = jnp.asarray(np.mean([gradient.loss for gradient in gradients]), jnp.float32)
        terms = {
            name: jnp.asarray(np.mean([gradient.terms[name] for gradient in gradients]), jnp.float32)
            for name in gradients[0].terms
        }
        params = eqx.filter(learner.network_at(state), eqx.is_inexact_array)
        grads = reduce_gradients(gradients, params, reduce)
        new_transitions = len(gradients) * (pool.num_envs // pool.num_actors) * pool.rollout_length
        state, update_metrics = _step_with_gradients(
            learner, state, grads, loss, terms, new_transitions=jnp.asarray(new_transitions, jnp.int32)
        )
        return state, train_metrics(update_metrics, _episodes(gradients))

    state, metrics = run_schedule(pool, learner.agent, state, num_updates=num_updates, max_lag=max_lag, update=update)
    return HostTrainResult(state, metrics)


@final
class RayPipeline(AbstractHostPipeline[PyTree[Array], AbstractLearner]):
    """A learner trained on a [`podrace.executors.ray_actors.RayRolloutPool`][]'s rollouts,
    driven as a [`podrace.Anakin`][] pipeline is.

    `init` and `train` have the pipeline's signatures, so that
    [`podrace.progress.train_with_progress`][] (progress, metric sinks, checkpoints)
    drives Ray actors too. Its state is the learner's; the environments live in the
    actors, so a restored state starts from their current episodes.

    **Arguments:**

    - `learner`: the learner.
    - `pool`: the pool built for it.
    - `max_lag`: rounds collected ahead of the learner (see
        [`podrace.executors.ray_actors.train_with_ray`][]).
    """

    learner: AbstractLearner
    pool: RayRolloutPool = eqx.field(static=True)
    max_lag: int = eqx.field(static=True, default=1, kw_only=True)

    @property
    def frames_per_update(self) -> int:
        """Environment steps per update: every actor's `num_envs * rollout_length`."""
        return self.pool.num_envs * self.pool.rollout_length

    def init(self, key: PRNGKeyArray) -> PyTree[Array]:
        """The learner's initial state."""
        return self.learner.init(key, self.pool.timestep)

    def train(
        self, state: PyTree[Array], *, num_updates: int, metrics: str | Iterable[str] = DEFAULT_METRICS
    ) -> HostTrainResult:
        """`num_updates` rounds of rollouts and updates from `state`, reporting `metrics`
        beyond the loss (as [`podrace.Anakin.train`][] does)."""
        result = train_with_ray(self.learner, self.pool, num_updates=num_updates, state=state, max_lag=self.max_lag)
        return result.reporting("RayPipeline.train", metrics)

    @property
    def observation_spec(self) -> PyTree[jax.ShapeDtypeStruct]:
        """The shape and dtype of one observation of the actors' environments."""
        return one_observation_spec(self.pool.timestep)

    def evaluate(self, state: PyTree[Array], evaluation: Evaluation) -> EvaluationResult:
        """The trained network plays `evaluation`'s episodes in environments made on the
        driver (the pool's `evaluate`)."""
        return self.pool.evaluate(self.network_at(state), evaluation)


@final
class RayGradientPipeline(AbstractHostPipeline[LearnerState, Learner]):
    """A [`podrace.Learner`][] trained on a [`podrace.executors.ray_actors.RayGradientPool`][]'s
    gradients, driven as a [`podrace.Anakin`][] pipeline is (see
    [`podrace.executors.ray_actors.RayPipeline`][]).

    **Arguments:**

    - `learner`: the learner (one gradient step per update).
    - `pool`: the pool built for it.
    - `reduce`: `"mean"` or `"sum"` of the actors' gradients.
    - `max_lag`: rounds computed ahead of the driver (see
        [`podrace.executors.ray_actors.train_with_ray_gradients`][]).
    """

    learner: Learner
    pool: RayGradientPool = eqx.field(static=True)
    reduce: Reduction = eqx.field(static=True, default="mean", kw_only=True)
    max_lag: int = eqx.field(static=True, default=0, kw_only=True)

    @property
    def frames_per_update(self) -> int:
        """Environment steps per update: every actor's `num_envs * rollout_length`."""
        return self.pool.num_envs * self.pool.rollout_length

    def init(self, key: PRNGKeyArray) -> LearnerState:
        """The learner's initial state."""
        return self.learner.init(key, self.pool.timestep)

    def train(
        self, state: LearnerState, *, num_updates: int, metrics: str | Iterable[str] = DEFAULT_METRICS
    ) -> HostTrainResult:
        """`num_updates` rounds of gradients and optimiser steps from `state`, reporting
        `metrics` beyond the loss (as [`podrace.Anakin.train`][] does)."""
        result = train_with_ray_gradients(
            self.learner, self.pool, num_updates=num_updates, state=state, reduce=self.reduce, max_lag=self.max_lag
        )
        return result.reporting("RayGradientPipeline.train", metrics)

    @property
    def observation_spec(self) -> PyTree[jax.ShapeDtypeStruct]:
        """The shape and dtype of one observation of the actors' environments."""
        return one_observation_spec(self.pool.timestep)

    def evaluate(self, state: LearnerState, evaluation: Evaluation) -> EvaluationResult:
        """The trained network plays `evaluation`'s episodes in environments made on the
        driver (the pool's `evaluate`)."""
        return self.pool.evaluate(self.network_at(state), evaluation)
