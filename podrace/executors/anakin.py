"""The Anakin pipeline: acting, environment steps and learning in one XLA program.

A batch of environments is stepped with `vmap` inside a `lax.scan` over the rollout,
the learner updates on the whole batch (one batched matmul per step: parameters are
shared, not copied per environment), many updates run inside one compiled call, and
the environment batch is split over every device of a `Mesh` with `jax.shard_map`,
gradients being averaged over the batch and the devices.

Reference: Hessel et al., "Podracer architectures for scalable Reinforcement
Learning", 2021.
"""

import functools
from collections.abc import Iterable
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, Float, Int, Key, PRNGKeyArray, PyTree

from .._types import PolicyStep, TimeStep, Trajectory
from .._validation import check_positive_int
from ..agent import AbstractAgent
from ..compilation import compiled_once
from ..envs import AbstractEnv, AbstractPoolEnv, AutoReset
from ..envs.normalization import map_observation
from ..learners import AbstractLearner
from ..learners.learner import raise_non_finite_loss
from ..learners.replay import AbstractReplayLearner
from ..loggers import summarize
from ..networks import AbstractNetwork, split_action_mask
from ..results import DEFAULT_METRICS, EvaluationResult, TrainMetrics, check_metrics
from ..search import AbstractEnvModelAgent
from .evaluation import Evaluation
from .normalization import NormalizationState, RunningNormalization
from .pipeline import AbstractPipeline, AbstractTrainResult, check_member


@final
class EnvBatch(eqx.Module):
    """The state of a batch of environments and of the agent acting in them.

    Every leaf has a leading batch axis; each environment owns its PRNG key, so a
    rollout is the same however the batch is split over devices.

    **Arguments:**

    - `env_state`: the environments' states.
    - `timestep`: their latest time steps.
    - `carry`: the network's recurrent state for each environment.
    - `key`: one PRNG key per environment.
    - `episode_return`: the return so far of each running episode.
    - `episode_length`: the steps so far of each running episode (0 from its last step
        on, until the next one starts).
    - `normalization`: each environment's copy of the running normalisation's
        statistics (the same in all), when the pipeline normalises; `timestep` is then
        normalised.
    - `raw_observation`: the observation of `timestep` before normalisation, kept when
        a replay learner stores raw observations (see
        [`podrace.RunningNormalization`][]); `None` otherwise.
    """

    env_state: PyTree[Array]
    timestep: TimeStep
    carry: PyTree[Array]
    key: Key[Array, "*batch"]
    episode_return: Float[Array, "*batch"]
    episode_length: Int[Array, "*batch"]
    normalization: NormalizationState | None = None
    raw_observation: PyTree[Array] | None = None


@final
class AnakinState(eqx.Module):
    """Everything a run needs to resume: learner state and environment batch.

    **Arguments:**

    - `learner`: the learner's state (replicated on devices, but for per-device parts
        such as a replay buffer).
    - `envs`: the environment batch (split over devices).
    """

    learner: PyTree[Array]
    envs: EnvBatch


@final
class TrainResult(AbstractTrainResult[AnakinState]):
    """What `Anakin.train` returns.

    **Arguments:**

    - `state`: the state after the last update, to pass to the next call.
    - `metrics`: one entry per update (leading axis `num_updates`).
    - `evaluation`: the episodes of the call's [`podrace.Evaluation`][], played with the
        network of `state`; `None` without one.
    """

    state: AnakinState
    metrics: TrainMetrics
    evaluation: EvaluationResult | None = None

    def summary(self) -> dict[str, float]:
        """[`podrace.loggers.summarize`][] of `metrics`."""
        return summarize(self.metrics)


def rollout(
    env: AutoReset,
    agent: AbstractAgent,
    envs: EnvBatch,
    length: int,
    normalization: RunningNormalization | None = None,
    axis_name: str | None = None,
    *,
    raw_observations: bool = False,
) -> tuple[EnvBatch, Trajectory, Float[Array, " T batch"]]:
    """Acts for `length` steps in a batch of auto-resetting environments.

    **Arguments:**

    - `env`: an auto-resetting environment.
    - `agent`: what acts (shared by all environments).
    - `envs`: the batch to step.
    - `length`: the number of steps `T`.
    - `normalization`: normalises the time steps that the agent and the trajectory see
        (the episode returns stay the environment's own).
    - `axis_name`: inside `shard_map`, the device axis the batch is split over.
    - `raw_observations`: the trajectory's observations are those before
        normalisation (kept in `envs.raw_observation`), for a replay learner that
        normalises each sampled batch; the agent acts on normalised ones all the same.

    **Returns:**

    The batch after the rollout, the time-major trajectory `[T + 1, B]` (its first time
    step is the last one of the previous rollout) and, for each step and environment,
    the return of an episode that ended there (0 elsewhere).
    """

    def recorded(envs: EnvBatch) -> TimeStep:
        if not raw_observations:
            return envs.timestep
        return eqx.tree_at(lambda t: t.observation, envs.timestep, envs.raw_observation)

    step_envs = env.step_batch
    reset_carry = jax.vmap(agent.reset_carry)
    if isinstance(agent, AbstractEnvModelAgent):
        # The agent plans with the environment itself: it reads each environment's state
        # and steps copies of it without the automatic reset.
        plan = jax.vmap(
            lambda state, timestep, carry, key: agent.act_in(env.env, state.env_state, timestep, carry, key)
        )

        def act(envs: EnvBatch, carry: PyTree[Array], keys: Key[Array, " batch"]) -> tuple[PolicyStep, PyTree[Array]]:
            return plan(envs.env_state, envs.timestep, carry, keys)
    else:
        act_on_observations = jax.vmap(agent)

        def act(envs: EnvBatch, carry: PyTree[Array], keys: Key[Array, " batch"]) -> tuple[PolicyStep, PyTree[Array]]:
            return act_on_observations(envs.timestep.observation, carry, keys)

    def step(envs: EnvBatch, _):
        keys = jax.vmap(lambda key: jax.random.split(key, 3))(envs.key)
        carry = reset_carry(envs.carry, envs.timestep.is_first)
        policy_step, carry = act(envs, carry, keys[:, 1])
        env_state, timestep = step_envs(envs.env_state, policy_step.action, keys[:, 2])
        episode_return = jnp.where(timestep.is_first, 0.0, envs.episode_return + timestep.reward)
        ended_return = jnp.where(timestep.is_last, episode_return, 0.0)
        episode_length = jnp.where(timestep.is_first | timestep.is_last, 0, envs.episode_length + 1)
        statistics = envs.normalization
        raw_observation = timestep.observation if raw_observations else None
        if normalization is not None:
            assert statistics is not None
            statistics, timestep = normalization.step(statistics, timestep, axis_name)
        batch = EnvBatch(
            env_state, timestep, carry, keys[:, 0], episode_return, episode_length, statistics, raw_observation
        )
        return batch, (recorded(envs), policy_step, ended_return)

    last, (timesteps, policy_steps, ended_returns) = jax.lax.scan(step, envs, length=length)
    timesteps = jax.tree.map(lambda steps, final: jnp.concatenate([steps, final[None]]), timesteps, recorded(last))
    return last, Trajectory(timesteps, policy_steps, envs.carry), ended_returns


def init_state(
    env: AbstractEnv,
    learner: AbstractLearner,
    key: PRNGKeyArray,
    *,
    num_envs: int,
    normalization: RunningNormalization | None = None,
) -> AnakinState:
    """The initial state of `num_envs` auto-resetting environments and of the learner.

    The device-free core of [`podrace.Anakin.init`][]: it runs on one device, under
    `vmap` (as [`podrace.Population`][] runs it) or wherever the caller places it.

    The keys follow one recipe: `learner_key, envs_key = split(key)`; environment `i`
    takes `split(envs_key, num_envs)[i]` and splits it into its own next key and the
    key of its reset. The learner's state comes from `learner_key`.

    **Arguments:**

    - `env`: an auto-resetting environment.
    - `learner`: the learner.
    - `key`: the randomness of the resets, of every later step and of the learner.
    - `num_envs`: the number of environments.
    - `normalization`: the running normalisation, if any; its statistics start from
        the first observations of all `num_envs` environments.

    **Returns:**

    The learner's initial state and the batch of environments (each with its own key).
    """

    def reset(key: PRNGKeyArray) -> EnvBatch:
        key, reset_key = jax.random.split(key)
        env_state, timestep = env.reset(reset_key)
        carry = learner.initial_agent().initial_carry()
        return EnvBatch(env_state, timestep, carry, key, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))

    learner_key, envs_key = jax.random.split(key)
    envs = jax.vmap(reset)(jax.random.split(envs_key, num_envs))
    if normalization is not None:
        raw_observation = envs.timestep.observation if replays_raw_observations(learner, normalization) else None
        statistics, timestep = normalization.init(envs.timestep)
        envs = EnvBatch(
            envs.env_state,
            timestep,
            envs.carry,
            envs.key,
            envs.episode_return,
            envs.episode_length,
            statistics,
            raw_observation,
        )
    # A replay of raw observations is laid out for them (their dtype may not be the normalised ones').
    timestep = envs.timestep
    if envs.raw_observation is not None:
        timestep = eqx.tree_at(lambda t: t.observation, timestep, envs.raw_observation)
    return AnakinState(learner.init(learner_key, timestep), envs)


def check_env_model(agent: AbstractAgent, env: AbstractEnv, normalization: RunningNormalization | None) -> None:
    """Raises `ValueError`, naming the parts and the fix, when `agent` plans with the
    environment as its model ([`podrace.search.AbstractEnvModelAgent`][]) and `env` cannot
    be one: a pool of environments outside JAX, whose states cannot be copied and stepped,
    or normalised observations, which the model's steps would not be.

    Reference: Silver et al., "A general reinforcement learning algorithm that masters
    chess, shogi, and Go through self-play", Science 2018 (the game's rules as the model).

    **Arguments:**

    - `agent`: the learner's agent.
    - `env`: the environment without its automatic reset.
    - `normalization`: the pipeline's running normalisation, if any.
    """
    if not isinstance(agent, AbstractEnvModelAgent):
        return
    name = type(agent).__name__
    if isinstance(env, AbstractPoolEnv):
        raise ValueError(
            f"Anakin: {name} plans by stepping copies of the environment's state, but {type(env).__name__} is a "
            "pool of environments outside JAX whose states cannot be copied: use a JAX environment."
        )
    if normalization is not None and normalization.observations:
        raise ValueError(
            f"Anakin: {name} evaluates the observations its search reaches in the environment, which are not "
            "normalised: build the pipeline without observation normalisation "
            "(RunningNormalization(observations=False))."
        )


def observation_shape(env: AbstractEnv) -> tuple[int, ...]:
    """The shape of `env`'s observations without their legal-action mask (which a network
    applies to its output, see [`podrace.networks.split_action_mask`][]): the shape that
    a network's torso for `env` reads.

    **Arguments:**

    - `env`: an environment whose observations are one array, or a
        [`podrace.MaskedObservation`][] of one.

    **Returns:**

    The shape of one observation.
    """
    return jax.eval_shape(lambda: split_action_mask(env.reset(jax.random.key(0))[1].observation)[0]).shape


def replays_raw_observations(learner: AbstractLearner, normalization: RunningNormalization | None) -> bool:
    """Whether `learner` keeps raw observations in its replay and normalises each sampled
    batch (a replay learner, with `normalization.replayed_observations == "raw"`)."""
    return (
        isinstance(learner, AbstractReplayLearner)
        and normalization is not None
        and normalization.observations
        and normalization.replayed_observations == "raw"
    )


def train_steps(
    env: AutoReset,
    learner: AbstractLearner,
    state: AnakinState,
    *,
    rollout_length: int,
    num_updates: int,
    axis_name: str | None = None,
    normalization: RunningNormalization | None = None,
    metrics: frozenset[str] = DEFAULT_METRICS,
) -> tuple[AnakinState, TrainMetrics]:
    """Runs `num_updates` rollouts and learner updates: the device-free core of [`podrace.Anakin.train`][].

    **Arguments:**

    - `env`: an auto-resetting environment.
    - `learner`: the learner.
    - `state`: the state to continue from (its environment batch is this device's share).
    - `rollout_length`: environment steps per update.
    - `num_updates`: the number of updates (static).
    - `axis_name`: inside `shard_map`, the device axis that the environment batch is
        split over (gradients, episode counts and normalisation statistics are combined
        over it); `None` outside.
    - `normalization`: the running normalisation, if any.
    - `metrics`: the metrics to report beyond the loss (see [`podrace.results.METRICS`][]);
        the others are not computed.

    **Returns:**

    The state after the last update and the metrics of each update.
    """

    raw_observations = replays_raw_observations(learner, normalization)

    def one_update(state: AnakinState, _):
        agent = learner.agent(state.learner)
        envs, trajectory, ended_returns = rollout(
            env, agent, state.envs, rollout_length, normalization, axis_name, raw_observations=raw_observations
        )
        if raw_observations:
            assert isinstance(learner, AbstractReplayLearner)
            assert normalization is not None and envs.normalization is not None
            normalize = normalization.frozen(env.env, envs.normalization).normalize
            learner_state, update_metrics = learner.update(
                state.learner, trajectory, axis_name=axis_name, normalize_observations=normalize
            )
        else:
            learner_state, update_metrics = learner.update(state.learner, trajectory, axis_name=axis_name)
        # Every step but a reset belongs to an episode: the episodes that ended took the
        # rollout's other steps and the steps they had taken before it, but for the steps
        # of the episodes still running at its end.
        resets = jnp.sum(trajectory.timestep.is_first[1:], dtype=jnp.int32)
        steps = envs.episode_length.size * rollout_length - resets
        ended_length = jnp.sum(state.envs.episode_length) + steps - jnp.sum(envs.episode_length)
        if isinstance(env.env, AbstractPoolEnv):
            # An episode cut by a restart (a pool's first step from a restored state, as
            # podrace.envs.EnvPoolEnv takes it) ends there without an episode's end: its steps leave.
            cut = trajectory.timestep.is_first[1] & ~trajectory.timestep.is_last[0]
            ended_length = ended_length - jnp.sum(jnp.where(cut, state.envs.episode_length, 0))
        episodes = (jnp.sum(ended_returns), jnp.sum(trajectory.timestep.is_last[1:], dtype=jnp.int32), ended_length)
        if axis_name is not None:
            episodes = jax.lax.psum(episodes, axis_name)
        return AnakinState(learner_state, envs), TrainMetrics(update_metrics, *episodes).select(metrics)

    return jax.lax.scan(one_update, state, length=num_updates)


def learner_specs(learner: AbstractLearner, learner_state: PyTree[Array], axis: str) -> PyTree[PartitionSpec]:
    """How a learner state is laid out over a one-axis mesh: replicated, but for the
    learner's per-device parts (`learner.device_local`), split along axis 0 over `axis`."""
    return jax.tree.map(
        lambda local: PartitionSpec(axis) if local else PartitionSpec(), learner.device_local(learner_state)
    )


@final
class Anakin(AbstractPipeline[AnakinState]):
    """An on-device training pipeline for an environment and a learner.

    The environment is wrapped in [`podrace.envs.AutoReset`][] unless it already is.
    Construction checks that the parts fit: the policy suits the action space, the
    network's head has one output per action and the network accepts the observations.

    The module is a pytree: hyperparameters held as arrays can be changed, or
    `vmap`ped over, without recompiling; an optax optimiser's hyperparameters are
    constants unless it is built with `optax.inject_hyperparams`.

    **Arguments:**

    - `env`: the environment (a JAX [`podrace.envs.AbstractEnv`][], or a pool of
        environments outside JAX, a [`podrace.envs.AbstractPoolEnv`][] such as EnvPool's,
        stepped whole inside the program, on one device).
    - `learner`: the learner to train (a [`podrace.Learner`][] or
        [`podrace.learners.DQNLearner`][]).
    - `num_envs`: environments per device (the batch `B`).
    - `rollout_length`: environment steps per update (`T`).
    - `mesh`: a one-axis device mesh to split the environment batch over; by default
        all devices (`jax.devices()`, which after [`podrace.distributed.initialize`][]
        spans every process, each stepping the environments on its own devices). On one
        device no `shard_map` is used, so the pipeline also composes under a user's
        `eqx.filter_vmap` or `eqx.filter_pmap`.
    - `normalization`: a [`podrace.RunningNormalization`][] of observations and
        rewards, its statistics kept in the state; `None` for none.
    """

    env: AutoReset
    learner: AbstractLearner
    num_envs: int = eqx.field(static=True)
    rollout_length: int = eqx.field(static=True)
    mesh: Mesh = eqx.field(static=True)
    normalization: RunningNormalization | None

    def __init__(
        self,
        env: AbstractEnv,
        learner: AbstractLearner,
        *,
        num_envs: int,
        rollout_length: int,
        mesh: Mesh | None = None,
        normalization: RunningNormalization | None = None,
    ):
        check_positive_int("Anakin", "num_envs", num_envs)
        check_positive_int("Anakin", "rollout_length", rollout_length)
        if mesh is None:
            mesh = jax.make_mesh((jax.device_count(),), ("devices",))
        if len(mesh.axis_names) != 1:
            raise ValueError(f"Anakin: the mesh must have one axis (the devices), got axes {mesh.axis_names}.")
        if normalization is not None:
            normalization.check_fits(env)
        pool = env.env if isinstance(env, AutoReset) else env
        if isinstance(pool, AbstractPoolEnv) and mesh.size > 1:
            raise ValueError(
                f"Anakin: {type(pool).__name__} is one pool of environments on the host, stepped whole, which "
                f"cannot be split over the mesh's {mesh.size} devices; run it on one device: "
                "mesh=jax.make_mesh((1,), ('devices',))."
            )
        observation = jax.eval_shape(lambda: env.reset(jax.random.key(0))[1].observation)
        if normalization is not None and normalization.observations:
            as_float = functools.partial(map_observation, lambda x: x.astype(jnp.float32))
            observation = jax.eval_shape(as_float, observation)
        learner.check_fits(env.action_space, observation, num_envs=num_envs, env_name=type(env).__name__)
        check_env_model(learner.initial_agent(), pool, normalization)
        self.env = env if isinstance(env, AutoReset) else AutoReset(env)
        self.learner = learner
        self.num_envs = num_envs
        self.rollout_length = rollout_length
        self.mesh = mesh
        self.normalization = normalization

    @property
    def num_devices(self) -> int:
        """The number of devices the environment batch is split over."""
        return self.mesh.size

    @property
    def frames_per_update(self) -> int:
        """Environment steps per update, over all devices."""
        return self.num_devices * self.num_envs * self.rollout_length

    @property
    def num_members(self) -> int:
        """1: one run (see [`podrace.Population`][] for many)."""
        return 1

    def init(self, key: PRNGKeyArray) -> AnakinState:
        """Resets `num_devices * num_envs` environments and initialises the learner.

        **Arguments:**

        - `key`: the run's randomness (environment resets, all later steps and the
            learner's own randomness).

        **Returns:**

        The initial state, laid out over the mesh.
        """
        return self._init(key)

    @compiled_once
    def _init(self, key: PRNGKeyArray) -> AnakinState:
        # Laid out inside the compiled program, so that with many processes each one
        # computes only the environments on its own devices.
        num_envs = self.num_devices * self.num_envs
        state = init_state(self.env, self.learner, key, num_envs=num_envs, normalization=self.normalization)
        if self.num_devices == 1:
            return state
        (axis,) = self.mesh.axis_names
        shardings = jax.tree.map(lambda spec: NamedSharding(self.mesh, spec), self._learner_specs(state.learner))
        return AnakinState(
            jax.device_put(state.learner, shardings),
            jax.device_put(state.envs, NamedSharding(self.mesh, PartitionSpec(axis))),
        )

    def _learner_specs(self, learner_state: PyTree[Array]) -> PyTree[PartitionSpec]:
        (axis,) = self.mesh.axis_names
        return learner_specs(self.learner, learner_state, axis)

    def train(
        self,
        state: AnakinState,
        *,
        num_updates: int,
        metrics: str | Iterable[str] = DEFAULT_METRICS,
        evaluation: Evaluation | None = None,
    ) -> TrainResult:
        """Runs `num_updates` rollouts and updates in one compiled call.

        With a learner's `check_nans`, the call waits for its result and a non-finite
        loss term raises a `FloatingPointError` naming it.

        **Arguments:**

        - `state`: from `init` or a previous call.
        - `num_updates`: updates in this call (a compile-time constant).
        - `metrics`: what each update reports beyond its loss, from
            [`podrace.results.METRICS`][]: by default the episodes that ended; the others
            (the loss's terms, the gradient's norm) are computed only when named here.
        - `evaluation`: episodes for the trained network to play at the end of the
            call, in the same program (in the environment without its auto-reset).

        **Returns:**

        The new state, the metrics of each update and the evaluation's episodes.
        """
        check_positive_int("Anakin.train", "num_updates", num_updates)
        metrics = check_metrics("Anakin.train", metrics)
        if not self.learner.check_nans:
            return self._train(state, evaluation, num_updates=num_updates, metrics=metrics)
        try:
            return jax.block_until_ready(self._train(state, evaluation, num_updates=num_updates, metrics=metrics))
        except eqx.EquinoxRuntimeError as error:
            raise_non_finite_loss(error)
            raise

    def evaluation_env(self, state: AnakinState | None = None, member: int = 0) -> AbstractEnv:
        """The environment without its auto-reset, where evaluations play whole episodes.

        When the pipeline normalises observations, they are normalised with the
        statistics of `state` ([`podrace.envs.NormalizeObservation`][]), as the agent
        saw them in training.

        **Arguments:**

        - `state`: the state whose statistics normalise observations; needed only when
            the pipeline normalises them.
        - `member`: 0, the one run.
        """
        check_member(self, member)
        if isinstance(self.env.env, AbstractPoolEnv):
            raise ValueError(
                f"Anakin: {type(self.env.env).__name__} is a pool that training steps, so evaluation episodes cannot "
                "play in it; evaluate in an environment of its own: podrace.evaluate(env, "
                "pipeline.network_at(state), policy, num_episodes=..., key=...) with a new env."
            )
        if self.normalization is None or not self.normalization.observations:
            return self.env.env
        if state is None:
            raise ValueError(
                "Anakin.evaluation_env: this pipeline normalises observations, so pass the state whose "
                "statistics normalise them: evaluation_env(state)."
            )
        assert state.envs.normalization is not None
        return self.normalization.frozen(self.env.env, state.envs.normalization)

    def network_at(self, state: AnakinState, member: int = 0) -> AbstractNetwork:
        """The network with the parameters learnt in `state` (`member` is 0, the one run)."""
        check_member(self, member)
        return self.learner.network_at(state.learner)

    def agent_at(self, state: AnakinState, member: int = 0) -> AbstractAgent:
        """The agent with the parameters learnt in `state` (`member` is 0, the one run)."""
        check_member(self, member)
        return self.learner.agent(state.learner)

    @property
    def observation_spec(self) -> PyTree[jax.ShapeDtypeStruct]:
        """The shape and dtype of one observation of the environment, before any normalisation."""
        return jax.eval_shape(lambda: self.env.env.reset(jax.random.key(0))[1].observation)

    @eqx.filter_jit
    def evaluate(self, state: AnakinState, evaluation: Evaluation) -> EvaluationResult:
        """The trained network plays `evaluation`'s episodes in `evaluation_env(state)`, in one
        compiled call, as `train` plays them at the end of a call.

        **Arguments:**

        - `state`: from `init` or `train`.
        - `evaluation`: the episodes and the policy.

        **Returns:**

        The episodes, with axes `[num_episodes]`.
        """
        return evaluation.play(self.evaluation_env(state), self.network_at(state))

    @eqx.filter_jit
    def _train(
        self, state: AnakinState, evaluation: Evaluation | None, *, num_updates: int, metrics: frozenset[str]
    ) -> TrainResult:
        state, reported = self._train_steps(state, num_updates, metrics)
        if evaluation is None:
            return TrainResult(state, reported)
        return TrainResult(state, reported, self.evaluate(state, evaluation))

    def _train_steps(
        self, state: AnakinState, num_updates: int, metrics: frozenset[str]
    ) -> tuple[AnakinState, TrainMetrics]:
        if self.num_devices == 1:
            return train_steps(
                self.env,
                self.learner,
                state,
                rollout_length=self.rollout_length,
                num_updates=num_updates,
                normalization=self.normalization,
                metrics=metrics,
            )

        (axis,) = self.mesh.axis_names
        dynamic, static = eqx.partition((self.env, self.learner, self.normalization), eqx.is_array)

        def on_shard(dynamic, learner_state, envs):
            env, learner, normalization = eqx.combine(dynamic, static)
            state, reported = train_steps(
                env,
                learner,
                AnakinState(learner_state, envs),
                rollout_length=self.rollout_length,
                num_updates=num_updates,
                axis_name=axis,
                normalization=normalization,
                metrics=metrics,
            )
            return state.learner, state.envs, reported

        replicated, split, learner_specs = PartitionSpec(), PartitionSpec(axis), self._learner_specs(state.learner)
        # Without JAX's check of the axes each value varies over: environments of other
        # packages return constants from one branch of a `lax.cond` and device-varying
        # values from the other (Navix's automatic reset, jaxopt's loop in Brax), which the
        # check refuses. Nothing here relies on it: gradients are averaged explicitly
        # (`loss_gradients`), and the device matrix checks two devices against one.
        learner_state, envs, reported = jax.shard_map(
            on_shard,
            mesh=self.mesh,
            in_specs=(replicated, learner_specs, split),
            out_specs=(learner_specs, split, replicated),
            check_vma=False,
        )(dynamic, state.learner, state.envs)
        return AnakinState(learner_state, envs), reported
