"""Off-policy actor-critic learners: TD3 (and DDPG as its special case) and SAC for
continuous actions, and SAC for discrete ones.

Each keeps an actor network, one or more critics (a [`podrace.networks.AbstractCritic`][]
of Q(s, a) estimates, or Q-networks of every action's value for discrete SAC),
Polyak-averaged target copies, one optax optimiser per part and a
[`podrace.learners.SequenceReplay`][] of one-step transitions on the device.
"""

import functools
import math
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray, PyTree

from .._types import AbstractSpace, DeterministicAction, PolicyLogits, QValues, TanhGaussianParams, TimeStep, Trajectory
from .._validation import (
    check_agent_fits,
    check_in_unit_interval,
    check_non_negative,
    check_optimizer_steps_are_finite,
    check_positive,
    check_positive_int,
)
from ..agent import Agent
from ..losses import transition_mask
from ..networks import AbstractCritic, AbstractNetwork
from ..policies import AbstractPolicy, Categorical, GaussianNoise, Greedy, TanhGaussian, tanh_gaussian_step
from ..results import UpdateMetrics
from .learner import gradient_step, with_params
from .replay import AbstractReplayLearner, AbstractReplayState, SequenceReplay


def _check_actor_critic(owner: str, actor: AbstractNetwork, critic: AbstractCritic, output_type: type) -> None:
    if not issubclass(actor.output_type, output_type):
        raise ValueError(
            f"{owner} needs an actor emitting {output_type.__name__}, but the actor emits "
            f"{actor.output_type.__name__}; give it the matching head."
        )
    if jax.tree.leaves(actor.initial_carry()):
        raise ValueError(f"{owner} replays feed-forward networks only; the actor has a recurrent carry.")
    if critic.action_size != actor.num_actions:
        raise ValueError(
            f"{owner}: the critic takes actions of size {critic.action_size} but the actor emits "
            f"{actor.num_actions}; build both for the environment's action size."
        )


def _check_optimizers(owner: str, learner: "TD3Learner | SACLearner | DiscreteSACLearner") -> None:
    """Raises `ValueError` naming the optimiser whose first step is not finite."""
    for name, network in (("actor_optimizer", learner.actor), ("critic_optimizer", learner.critic)):
        params = eqx.filter(network, eqx.is_inexact_array)
        check_optimizer_steps_are_finite(owner, name, getattr(learner, name), params)
    if not isinstance(learner, TD3Learner):
        log_temperature = jnp.log(learner.initial_temperature)
        check_optimizer_steps_are_finite(owner, "temperature_optimizer", learner.temperature_optimizer, log_temperature)


def _one_step_batch(batch: Trajectory):
    """The observations, actions, rewards, discounts and loss mask of replayed transitions `[2, B]`."""
    timestep = batch.timestep
    mask = batch.map_batch(transition_mask)[:, 0]
    return (
        timestep.observation[0],
        batch.policy_step.action[0],
        timestep.reward[1],
        timestep.discount[1],
        timestep.observation[1],
        mask,
    )


def _critic_objective(critic: AbstractCritic, observation, action, target, mask):
    def objective(params):
        values = jax.vmap(with_params(critic, params))(observation, action)
        loss = jnp.mean(mask * jnp.sum(jnp.square(values - target[:, None]), axis=-1))
        return loss, {"critic": loss}

    return objective


def _merge(*metrics: UpdateMetrics) -> UpdateMetrics:
    terms = {name: value for m in metrics for name, value in m.terms.items()}
    grad_norm = jnp.sqrt(sum(jnp.square(m.grad_norm) for m in metrics))
    return UpdateMetrics(jnp.sum(jnp.stack([m.loss for m in metrics])), terms, grad_norm)


class AbstractActorCriticState(AbstractReplayState):
    """The fields the off-policy actor-critic learners' states share."""

    actor_params: eqx.AbstractVar[PyTree[Array]]


ActorCriticStateT = TypeVar("ActorCriticStateT", bound=AbstractActorCriticState)
CriticT = TypeVar("CriticT", bound=AbstractCritic | AbstractNetwork)


class AbstractActorCriticLearner(AbstractReplayLearner[ActorCriticStateT], Generic[ActorCriticStateT, CriticT]):
    """An off-policy actor-critic learner: an actor network that acts through an
    exploration policy, and a critic learnt beside it: a [`podrace.networks.AbstractCritic`][]
    of Q(s, a), or Q-networks of every discrete action's value stacked into one network
    (their arrays with a leading axis of critics)."""

    actor: eqx.AbstractVar[AbstractNetwork]
    critic: eqx.AbstractVar[CriticT]
    exploration: eqx.AbstractVar[AbstractPolicy]

    def initial_agent(self) -> Agent:
        return Agent(self.actor, self.exploration)

    def network_at(self, state: ActorCriticStateT) -> AbstractNetwork:
        return with_params(self.actor, state.actor_params)

    def agent(self, state: ActorCriticStateT) -> Agent:
        return Agent(self.network_at(state), self.exploration.at(state.num_transitions))

    def check_fits(
        self, action_space: AbstractSpace, observation: PyTree[jax.ShapeDtypeStruct], *, num_envs: int, env_name: str
    ) -> None:
        del num_envs  # any number: each environment has its own row of the replay buffer
        check_agent_fits(self.actor, self.exploration, action_space, observation, env_name=env_name)
        if isinstance(self.critic, AbstractCritic):
            self.critic.check_fits(action_space, observation, env_name=env_name)
        else:  # stacked Q-networks: the first must value the environment's actions
            first = jax.tree.map(lambda x: x[0] if eqx.is_array(x) else x, self.critic)
            check_agent_fits(first, Greedy(), action_space, observation, env_name=env_name)


@final
class TD3State(AbstractActorCriticState):
    """Everything a [`podrace.learners.TD3Learner`][] updates.

    **Arguments:**

    - `actor_params`, `critic_params`: the online networks' trainable arrays.
    - `target_actor_params`, `target_critic_params`: their Polyak-averaged copies.
    - `actor_opt_state`, `critic_opt_state`: the optax states.
    - `replay`: the replay buffer's state.
    - `num_updates`: how many rollouts have been learnt from.
    - `num_gradient_steps`: critic steps taken (the clock of the delayed actor updates).
    - `num_transitions`: environment transitions added, over all devices.
    - `key`: the randomness of replay sampling and target smoothing.
    """

    actor_params: PyTree[Array]
    critic_params: PyTree[Array]
    target_actor_params: PyTree[Array]
    target_critic_params: PyTree[Array]
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    replay: PyTree[Array]
    num_updates: Int[Array, ""]
    num_gradient_steps: Int[Array, ""]
    num_transitions: Int[Array, ""]
    key: PRNGKeyArray


@final
class TD3Learner(AbstractActorCriticLearner[TD3State, AbstractCritic]):
    """Twin Delayed DDPG: a deterministic actor climbing its critic, learnt from replay.

    Each gradient step regresses every critic onto
    `r + discount * d * min_i Q'_i(s', a')`, with `a' = clip(mu'(s') + eps, low, high)` and
    `eps` Gaussian noise of `target_noise` times half the action range clipped to
    `target_noise_clip` times it (target policy smoothing). Every `policy_delay` steps the
    actor then ascends `Q_1(s, mu(s))` and both target copies move by
    `target <- (1 - tau) target + tau online`. The environment's discount `d` is 0 at a
    termination and 1 at a truncation, so a truncated episode bootstraps. DDPG is
    `num_critics=1`, `target_noise=0` and `policy_delay=1` (see `ddpg`).

    Reference: Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic
    Methods", ICML 2018; Lillicrap et al., "Continuous control with deep reinforcement
    learning", ICLR 2016.

    **Arguments:**

    - `actor`: a feed-forward network with a [`podrace.networks.DeterministicHead`][].
    - `critic`: a [`podrace.networks.AbstractCritic`][] (two critics for TD3).
    - `actor_optimizer`, `critic_optimizer`: optax gradient transformations.
    - `exploration`: the behaviour policy around the actor,
        [`podrace.policies.GaussianNoise`][] of 0.1 by default.
    - `buffer_size`: transitions the replay buffer holds, over all environments and devices.
    - `batch_size`: transitions per gradient step, per device.
    - `discount`: the discount factor.
    - `tau`: the Polyak step of the targets, in (0, 1].
    - `target_noise`, `target_noise_clip`: target policy smoothing, relative to half the
        action range (0 turns it off).
    - `policy_delay`: critic steps per actor and target step.
    - `min_replay_size`: transitions to collect before learning starts.
    - `gradient_steps`: critic steps per update (per rollout).
    - `check_nans`: as in [`podrace.Learner`][].
    """

    actor: AbstractNetwork
    critic: AbstractCritic
    actor_optimizer: optax.GradientTransformation
    critic_optimizer: optax.GradientTransformation
    exploration: AbstractPolicy
    replay: SequenceReplay
    batch_size: int = eqx.field(static=True)
    discount: Float[Array, ""]
    tau: Float[Array, ""]
    target_noise: Float[Array, ""]
    target_noise_clip: Float[Array, ""]
    policy_delay: int = eqx.field(static=True)
    min_replay_size: int = eqx.field(static=True)
    gradient_steps: int = eqx.field(static=True)
    check_nans: bool = eqx.field(static=True)

    def __init__(
        self,
        actor: AbstractNetwork,
        critic: AbstractCritic,
        actor_optimizer: optax.GradientTransformation,
        critic_optimizer: optax.GradientTransformation,
        *,
        exploration: AbstractPolicy | None = None,
        buffer_size: int,
        batch_size: int,
        discount: ArrayLike = 0.99,
        tau: ArrayLike = 0.005,
        target_noise: ArrayLike = 0.2,
        target_noise_clip: ArrayLike = 0.5,
        policy_delay: int = 2,
        min_replay_size: int = 1_000,
        gradient_steps: int = 1,
        check_nans: bool = False,
    ):
        self.actor = actor
        self.critic = critic
        self.actor_optimizer = actor_optimizer
        self.critic_optimizer = critic_optimizer
        self.exploration = GaussianNoise(0.1) if exploration is None else exploration
        self.replay = SequenceReplay(buffer_size, 2)
        self.batch_size = batch_size
        self.discount = jnp.asarray(discount, jnp.float32)
        self.tau = jnp.asarray(tau, jnp.float32)
        self.target_noise = jnp.asarray(target_noise, jnp.float32)
        self.target_noise_clip = jnp.asarray(target_noise_clip, jnp.float32)
        self.policy_delay = policy_delay
        self.min_replay_size = min_replay_size
        self.gradient_steps = gradient_steps
        self.check_nans = check_nans

    def __check_init__(self):
        _check_actor_critic("TD3Learner", self.actor, self.critic, DeterministicAction)
        for name in ("batch_size", "policy_delay", "min_replay_size", "gradient_steps"):
            check_positive_int("TD3Learner", name, getattr(self, name))
        check_in_unit_interval("TD3Learner", "discount", self.discount)
        check_in_unit_interval("TD3Learner", "tau", self.tau)
        check_non_negative("TD3Learner", "target_noise", self.target_noise)
        check_non_negative("TD3Learner", "target_noise_clip", self.target_noise_clip)
        _check_optimizers("TD3Learner", self)

    def init(self, key: PRNGKeyArray, timestep: TimeStep) -> TD3State:
        """The initial state, with an empty replay buffer sized for the environments of `timestep`."""
        replay = self.replay.init_for(self.initial_agent(), timestep)
        actor_params = eqx.filter(self.actor, eqx.is_inexact_array)
        critic_params = eqx.filter(self.critic, eqx.is_inexact_array)
        zero = jnp.asarray(0, jnp.int32)
        return TD3State(
            actor_params=actor_params,
            critic_params=critic_params,
            target_actor_params=actor_params,
            target_critic_params=critic_params,
            actor_opt_state=self.actor_optimizer.init(actor_params),
            critic_opt_state=self.critic_optimizer.init(critic_params),
            replay=replay,
            num_updates=zero,
            num_gradient_steps=zero,
            num_transitions=zero,
            key=key,
        )

    def learn_step(self, state: TD3State, key: PRNGKeyArray, axis_name: str | None) -> tuple[TD3State, UpdateMetrics]:
        batch = self.replay.sample(state.replay, key, self.batch_size)
        noise_key = jax.random.fold_in(key, 1)
        observation, action, reward, discount, next_observation, mask = _one_step_batch(batch)
        step = functools.partial(gradient_step, axis_name=axis_name, check_nans=self.check_nans)

        target_actor = with_params(self.actor, state.target_actor_params)
        target_output: DeterministicAction = jax.vmap(lambda o: target_actor(o, ())[0])(next_observation)
        half_range = (target_output.high - target_output.low) / 2
        noise = jax.random.normal(noise_key, target_output.action.shape) * self.target_noise
        noise = jnp.clip(noise, -self.target_noise_clip, self.target_noise_clip) * half_range
        next_action = jnp.clip(target_output.action + noise, target_output.low, target_output.high)
        next_values = jax.vmap(with_params(self.critic, state.target_critic_params))(next_observation, next_action)
        target = jax.lax.stop_gradient(reward + self.discount * discount * jnp.min(next_values, axis=-1))
        critic_params, critic_opt_state, critic_metrics = step(
            self.critic_optimizer,
            state.critic_params,
            state.critic_opt_state,
            _critic_objective(self.critic, observation, action, target, mask),
        )

        def actor_objective(params):
            actor = with_params(self.actor, params)
            actions = jax.vmap(lambda o: actor(o, ())[0].action)(observation)
            values = jax.vmap(with_params(self.critic, critic_params))(observation, actions)[:, 0]
            loss = -jnp.mean(mask * values)  # a mean of equal shares, as the critic's
            return loss, {"actor": loss}

        def actor_and_targets(_):
            actor_params, actor_opt_state, metrics = step(
                self.actor_optimizer,
                state.actor_params,
                state.actor_opt_state,
                actor_objective,
            )
            target_actor_params = optax.incremental_update(actor_params, state.target_actor_params, self.tau)
            target_critic_params = optax.incremental_update(critic_params, state.target_critic_params, self.tau)
            return actor_params, actor_opt_state, target_actor_params, target_critic_params, metrics

        def critic_only(_):
            metrics = jax.eval_shape(actor_and_targets, None)[-1]
            zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metrics)
            return (
                state.actor_params,
                state.actor_opt_state,
                state.target_actor_params,
                state.target_critic_params,
                zeros,
            )

        num_gradient_steps = state.num_gradient_steps + 1
        actor_params, actor_opt_state, target_actor_params, target_critic_params, actor_metrics = jax.lax.cond(
            num_gradient_steps % self.policy_delay == 0, actor_and_targets, critic_only, None
        )
        state = eqx.tree_at(
            lambda s: (
                s.actor_params,
                s.critic_params,
                s.target_actor_params,
                s.target_critic_params,
                s.actor_opt_state,
                s.critic_opt_state,
                s.num_gradient_steps,
            ),
            state,
            (
                actor_params,
                critic_params,
                target_actor_params,
                target_critic_params,
                actor_opt_state,
                critic_opt_state,
                num_gradient_steps,
            ),
        )
        return state, _merge(critic_metrics, actor_metrics)


def ddpg(
    actor: AbstractNetwork,
    critic: AbstractCritic,
    actor_optimizer: optax.GradientTransformation,
    critic_optimizer: optax.GradientTransformation,
    **kwargs,
) -> TD3Learner:
    """DDPG: a [`podrace.learners.TD3Learner`][] without target smoothing or delayed updates,
    on a critic of one estimate (`critic.num_critics == 1`).

    Reference: Lillicrap et al., "Continuous control with deep reinforcement learning", ICLR 2016.
    """
    if critic.num_critics != 1:
        raise ValueError(
            f"ddpg learns one critic; this one has num_critics={critic.num_critics}: build it with "
            "num_critics=1, or use TD3Learner for twin critics."
        )
    return TD3Learner(actor, critic, actor_optimizer, critic_optimizer, target_noise=0.0, policy_delay=1, **kwargs)


def _check_sac_settings(owner: str, learner: "SACLearner | DiscreteSACLearner") -> None:
    """Raises `ValueError` naming the setting of a SAC learner that is out of its range."""
    for name in ("batch_size", "min_replay_size", "gradient_steps"):
        check_positive_int(owner, name, getattr(learner, name))
    check_in_unit_interval(owner, "discount", learner.discount)
    check_in_unit_interval(owner, "tau", learner.tau)
    check_positive(owner, "initial_temperature", learner.initial_temperature)
    _check_optimizers(owner, learner)


def _sac_init(learner: "SACLearner | DiscreteSACLearner", key: PRNGKeyArray, timestep: TimeStep) -> "SACState":
    """A SAC learner's initial state, with an empty replay buffer sized for the environments of `timestep`."""
    replay = learner.replay.init_for(learner.initial_agent(), timestep)
    actor_params = eqx.filter(learner.actor, eqx.is_inexact_array)
    critic_params = eqx.filter(learner.critic, eqx.is_inexact_array)
    log_temperature = jnp.log(learner.initial_temperature)
    zero = jnp.asarray(0, jnp.int32)
    return SACState(
        actor_params=actor_params,
        critic_params=critic_params,
        target_critic_params=critic_params,
        log_temperature=log_temperature,
        actor_opt_state=learner.actor_optimizer.init(actor_params),
        critic_opt_state=learner.critic_optimizer.init(critic_params),
        temperature_opt_state=learner.temperature_optimizer.init(log_temperature),
        replay=replay,
        num_updates=zero,
        num_gradient_steps=zero,
        num_transitions=zero,
        key=key,
    )


def _sac_temperature_and_targets(
    learner: "SACLearner | DiscreteSACLearner",
    state: "SACState",
    step: Callable[..., tuple[PyTree[Array], optax.OptState, UpdateMetrics]],
    critic: tuple[PyTree[Array], optax.OptState, UpdateMetrics],
    actor: tuple[PyTree[Array], optax.OptState, UpdateMetrics],
) -> tuple["SACState", UpdateMetrics]:
    """The end of a SAC step, after the critics' and the actor's: the temperature steps
    against the actor's `entropy` term over `target_entropy`, the target critics follow
    by Polyak averaging, and the state takes every new part."""
    critic_params, critic_opt_state, critic_metrics = critic
    actor_params, actor_opt_state, actor_metrics = actor
    entropy = jax.lax.stop_gradient(actor_metrics.terms["entropy"])

    def temperature_objective(log_temperature):
        loss = log_temperature * (entropy - learner.target_entropy)
        return loss, {"temperature": loss, "alpha": jnp.exp(log_temperature)}

    log_temperature, temperature_opt_state, temperature_metrics = step(
        learner.temperature_optimizer, state.log_temperature, state.temperature_opt_state, temperature_objective
    )
    target_critic_params = optax.incremental_update(critic_params, state.target_critic_params, learner.tau)
    state = eqx.tree_at(
        lambda s: (
            s.actor_params,
            s.critic_params,
            s.target_critic_params,
            s.log_temperature,
            s.actor_opt_state,
            s.critic_opt_state,
            s.temperature_opt_state,
            s.num_gradient_steps,
        ),
        state,
        (
            actor_params,
            critic_params,
            target_critic_params,
            log_temperature,
            actor_opt_state,
            critic_opt_state,
            temperature_opt_state,
            state.num_gradient_steps + 1,
        ),
    )
    return state, _merge(critic_metrics, actor_metrics, temperature_metrics)


@final
class SACState(AbstractActorCriticState):
    """Everything a [`podrace.learners.SACLearner`][] updates.

    **Arguments:**

    - `actor_params`, `critic_params`: the online networks' trainable arrays.
    - `target_critic_params`: the critics' Polyak-averaged copy.
    - `log_temperature`: the log of the entropy temperature alpha.
    - `actor_opt_state`, `critic_opt_state`, `temperature_opt_state`: the optax states.
    - `replay`, `num_updates`, `num_gradient_steps`, `num_transitions`, `key`: as in
        [`podrace.learners.TD3State`][].
    """

    actor_params: PyTree[Array]
    critic_params: PyTree[Array]
    target_critic_params: PyTree[Array]
    log_temperature: Float[Array, ""]
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    temperature_opt_state: optax.OptState
    replay: PyTree[Array]
    num_updates: Int[Array, ""]
    num_gradient_steps: Int[Array, ""]
    num_transitions: Int[Array, ""]
    key: PRNGKeyArray


@final
class SACLearner(AbstractActorCriticLearner[SACState, AbstractCritic]):
    """Soft Actor-Critic with a learned temperature: a tanh-squashed Gaussian actor, twin
    critics with a Polyak-averaged target, learnt from replay.

    Each gradient step, with `alpha = exp(log_temperature)`:

    - the critics regress onto `r + discount * d * (min_i Q'_i(s', a') - alpha log pi(a'|s'))`
        with `a' ~ pi(s')`;
    - the actor minimises `alpha log pi(a|s) - min_i Q_i(s, a)` with `a ~ pi(s)`
        reparameterised, on the critics just updated;
    - the temperature minimises `-log_temperature * (log pi(a|s) + target_entropy)`, so that
        the policy's entropy approaches `target_entropy` (by default minus the action size);
    - the target critics move by `target <- (1 - tau) target + tau online`.

    Reference: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018
    (automatic temperature); Fujimoto et al., ICML 2018 (twin critics).

    **Arguments:**

    - `actor`: a feed-forward network with a [`podrace.networks.TanhGaussianHead`][].
    - `critic`: a [`podrace.networks.AbstractCritic`][] (two critics in SAC).
    - `actor_optimizer`, `critic_optimizer`, `temperature_optimizer`: optax gradient
        transformations.
    - `exploration`: the behaviour policy, [`podrace.policies.TanhGaussian`][] by default.
    - `buffer_size`, `batch_size`, `discount`, `tau`, `min_replay_size`, `gradient_steps`,
        `check_nans`: as in [`podrace.learners.TD3Learner`][].
    - `initial_temperature`: alpha before learning, > 0.
    - `target_entropy`: the entropy the temperature steers to; `None` for minus the action size.
    """

    actor: AbstractNetwork
    critic: AbstractCritic
    actor_optimizer: optax.GradientTransformation
    critic_optimizer: optax.GradientTransformation
    temperature_optimizer: optax.GradientTransformation
    exploration: AbstractPolicy
    replay: SequenceReplay
    batch_size: int = eqx.field(static=True)
    discount: Float[Array, ""]
    tau: Float[Array, ""]
    initial_temperature: Float[Array, ""]
    target_entropy: Float[Array, ""]
    min_replay_size: int = eqx.field(static=True)
    gradient_steps: int = eqx.field(static=True)
    check_nans: bool = eqx.field(static=True)

    def __init__(
        self,
        actor: AbstractNetwork,
        critic: AbstractCritic,
        actor_optimizer: optax.GradientTransformation,
        critic_optimizer: optax.GradientTransformation,
        temperature_optimizer: optax.GradientTransformation,
        *,
        exploration: AbstractPolicy | None = None,
        buffer_size: int,
        batch_size: int,
        discount: ArrayLike = 0.99,
        tau: ArrayLike = 0.005,
        initial_temperature: ArrayLike = 1.0,
        target_entropy: ArrayLike | None = None,
        min_replay_size: int = 100,
        gradient_steps: int = 1,
        check_nans: bool = False,
    ):
        self.actor = actor
        self.critic = critic
        self.actor_optimizer = actor_optimizer
        self.critic_optimizer = critic_optimizer
        self.temperature_optimizer = temperature_optimizer
        self.exploration = TanhGaussian() if exploration is None else exploration
        self.replay = SequenceReplay(buffer_size, 2)
        self.batch_size = batch_size
        self.discount = jnp.asarray(discount, jnp.float32)
        self.tau = jnp.asarray(tau, jnp.float32)
        self.initial_temperature = jnp.asarray(initial_temperature, jnp.float32)
        target_entropy = -critic.action_size if target_entropy is None else target_entropy
        self.target_entropy = jnp.asarray(target_entropy, jnp.float32)
        self.min_replay_size = min_replay_size
        self.gradient_steps = gradient_steps
        self.check_nans = check_nans

    def __check_init__(self):
        _check_actor_critic("SACLearner", self.actor, self.critic, TanhGaussianParams)
        _check_sac_settings("SACLearner", self)

    def init(self, key: PRNGKeyArray, timestep: TimeStep) -> SACState:
        """The initial state, with an empty replay buffer sized for the environments of `timestep`."""
        return _sac_init(self, key, timestep)

    def _sample_actions(self, actor_params: PyTree[Array], observation, key: PRNGKeyArray):
        """Reparameterised actions of the actor and their log-probabilities, one per observation."""
        actor = with_params(self.actor, actor_params)
        keys = jax.random.split(key, jax.tree.leaves(observation)[0].shape[0])
        steps = jax.vmap(lambda o, k: tanh_gaussian_step(actor(o, ())[0], k))(observation, keys)
        return steps.action, steps.log_prob

    def learn_step(self, state: SACState, key: PRNGKeyArray, axis_name: str | None) -> tuple[SACState, UpdateMetrics]:
        sample_key, next_key, actor_key = jax.random.split(key, 3)
        batch = self.replay.sample(state.replay, sample_key, self.batch_size)
        observation, action, reward, discount, next_observation, mask = _one_step_batch(batch)
        step = functools.partial(gradient_step, axis_name=axis_name, check_nans=self.check_nans)
        temperature = jnp.exp(state.log_temperature)

        next_action, next_log_prob = self._sample_actions(state.actor_params, next_observation, next_key)
        next_values = jax.vmap(with_params(self.critic, state.target_critic_params))(next_observation, next_action)
        soft_value = jnp.min(next_values, axis=-1) - temperature * next_log_prob
        target = jax.lax.stop_gradient(reward + self.discount * discount * soft_value)
        critic_params, critic_opt_state, critic_metrics = step(
            self.critic_optimizer,
            state.critic_params,
            state.critic_opt_state,
            _critic_objective(self.critic, observation, action, target, mask),
        )
        num_transitions = jnp.maximum(jnp.sum(mask), 1.0)

        def actor_objective(params):
            actions, log_prob = self._sample_actions(params, observation, actor_key)
            values = jnp.min(jax.vmap(with_params(self.critic, critic_params))(observation, actions), axis=-1)
            loss = jnp.sum(mask * (temperature * log_prob - values)) / num_transitions
            return loss, {"actor": loss, "entropy": -jnp.sum(mask * log_prob) / num_transitions}

        actor_params, actor_opt_state, actor_metrics = step(
            self.actor_optimizer,
            state.actor_params,
            state.actor_opt_state,
            actor_objective,
        )
        critic = (critic_params, critic_opt_state, critic_metrics)
        return _sac_temperature_and_targets(self, state, step, critic, (actor_params, actor_opt_state, actor_metrics))


def _stacked(owner: str, critics: Sequence[AbstractNetwork]) -> AbstractNetwork:
    """The critics as one network whose arrays have a leading axis of critics (for `filter_vmap`)."""
    critics = tuple(critics)
    if not critics:
        raise ValueError(f"{owner} needs at least one critic network (two for twin critics).")

    def layout(critic: AbstractNetwork):
        leaves, structure = jax.tree.flatten(eqx.filter(critic, eqx.is_array))
        return structure, [leaf.shape for leaf in leaves]

    for index, critic in enumerate(critics[1:], start=1):
        if layout(critic) != layout(critics[0]):
            raise ValueError(
                f"{owner}: critic {index} differs in structure or shapes from critic 0; build every critic "
                "the same way, each from its own key."
            )
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *(eqx.filter(c, eqx.is_array) for c in critics))
    return eqx.combine(stacked, eqx.filter(critics[0], eqx.is_array, inverse=True))


@final
class DiscreteSACLearner(AbstractActorCriticLearner[SACState, AbstractNetwork]):
    """Soft Actor-Critic for discrete actions: a categorical actor and twin Q-networks
    that value every action at once, with a learned temperature, learnt from replay.

    With `pi = softmax(logits(s))` and `alpha = exp(log_temperature)`, each gradient step
    takes the expectations over actions exactly, where [`podrace.learners.SACLearner`][]
    samples them:

    - the critics regress `Q_i(s, a)` onto
        `r + discount * d * sum_a' pi(a'|s') (min_i Q'_i(s', a') - alpha log pi(a'|s'))`;
    - the actor minimises `sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a))` on the
        critics just updated;
    - the temperature minimises `log_temperature * (H(pi(.|s)) - target_entropy)`;
    - the target critics move by `target <- (1 - tau) target + tau online`.

    Reference: Christodoulou, "Soft Actor-Critic for Discrete Action Settings", 2019;
    Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018.

    **Arguments:**

    - `actor`: a feed-forward network with a [`podrace.networks.PolicyLogitHead`][].
    - `critics`: feed-forward networks with a [`podrace.networks.QValueHead`][], built
        alike from keys of their own (two for twin critics); the learner stacks them into
        one `critic`, evaluated with `eqx.filter_vmap`.
    - `actor_optimizer`, `critic_optimizer`, `temperature_optimizer`: optax gradient
        transformations.
    - `exploration`: the behaviour policy, [`podrace.policies.Categorical`][] by default.
    - `buffer_size`, `batch_size`, `discount`, `tau`, `min_replay_size`, `gradient_steps`,
        `check_nans`: as in [`podrace.learners.TD3Learner`][].
    - `initial_temperature`: alpha before learning, > 0.
    - `target_entropy`: the entropy the temperature steers to; `None` for 0.98 times the
        uniform policy's, `0.98 log(num_actions)` (the paper's).
    """

    actor: AbstractNetwork
    critic: AbstractNetwork
    actor_optimizer: optax.GradientTransformation
    critic_optimizer: optax.GradientTransformation
    temperature_optimizer: optax.GradientTransformation
    exploration: AbstractPolicy
    replay: SequenceReplay
    num_critics: int = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)
    discount: Float[Array, ""]
    tau: Float[Array, ""]
    initial_temperature: Float[Array, ""]
    target_entropy: Float[Array, ""]
    min_replay_size: int = eqx.field(static=True)
    gradient_steps: int = eqx.field(static=True)
    check_nans: bool = eqx.field(static=True)

    def __init__(
        self,
        actor: AbstractNetwork,
        critics: Sequence[AbstractNetwork],
        actor_optimizer: optax.GradientTransformation,
        critic_optimizer: optax.GradientTransformation,
        temperature_optimizer: optax.GradientTransformation,
        *,
        exploration: AbstractPolicy | None = None,
        buffer_size: int,
        batch_size: int,
        discount: ArrayLike = 0.99,
        tau: ArrayLike = 0.005,
        initial_temperature: ArrayLike = 1.0,
        target_entropy: ArrayLike | None = None,
        min_replay_size: int = 100,
        gradient_steps: int = 1,
        check_nans: bool = False,
    ):
        self.actor = actor
        self.critic = _stacked("DiscreteSACLearner", critics)
        self.num_critics = len(tuple(critics))
        self.actor_optimizer = actor_optimizer
        self.critic_optimizer = critic_optimizer
        self.temperature_optimizer = temperature_optimizer
        self.exploration = Categorical() if exploration is None else exploration
        self.replay = SequenceReplay(buffer_size, 2)
        self.batch_size = batch_size
        self.discount = jnp.asarray(discount, jnp.float32)
        self.tau = jnp.asarray(tau, jnp.float32)
        self.initial_temperature = jnp.asarray(initial_temperature, jnp.float32)
        target_entropy = 0.98 * math.log(actor.num_actions) if target_entropy is None else target_entropy
        self.target_entropy = jnp.asarray(target_entropy, jnp.float32)
        self.min_replay_size = min_replay_size
        self.gradient_steps = gradient_steps
        self.check_nans = check_nans

    def __check_init__(self):
        owner = "DiscreteSACLearner"
        if not issubclass(self.actor.output_type, PolicyLogits):
            raise ValueError(
                f"{owner} needs an actor emitting PolicyLogits, but the actor emits "
                f"{self.actor.output_type.__name__}; give it a PolicyLogitHead."
            )
        if not issubclass(self.critic.output_type, QValues):
            raise ValueError(
                f"{owner} needs critics emitting QValues, but they emit {self.critic.output_type.__name__}; "
                "give them a QValueHead."
            )
        if jax.tree.leaves(self.actor.initial_carry()) or jax.tree.leaves(self.critic.initial_carry()):
            raise ValueError(f"{owner} replays feed-forward networks only; a network has a recurrent carry.")
        if self.critic.num_actions != self.actor.num_actions:
            raise ValueError(
                f"{owner}: the critics value {self.critic.num_actions} actions but the actor has "
                f"{self.actor.num_actions}; build both for the environment's actions."
            )
        _check_sac_settings(owner, self)

    def init(self, key: PRNGKeyArray, timestep: TimeStep) -> SACState:
        """The initial state, with an empty replay buffer sized for the environments of `timestep`."""
        return _sac_init(self, key, timestep)

    def _q_values(self, critic_params: PyTree[Array], observation) -> Float[Array, "batch critics actions"]:
        """Every critic's action values of a batch of observations."""
        critic = with_params(self.critic, critic_params)
        values = eqx.filter_vmap(lambda c: jax.vmap(lambda o: c(o, ())[0].q_values)(observation))(critic)
        return jnp.moveaxis(values, 0, 1)

    def _log_policy(self, actor_params: PyTree[Array], observation) -> Float[Array, "batch actions"]:
        actor = with_params(self.actor, actor_params)
        return jax.nn.log_softmax(jax.vmap(lambda o: actor(o, ())[0].logits)(observation))

    def learn_step(self, state: SACState, key: PRNGKeyArray, axis_name: str | None) -> tuple[SACState, UpdateMetrics]:
        batch = self.replay.sample(state.replay, key, self.batch_size)
        observation, action, reward, discount, next_observation, mask = _one_step_batch(batch)
        step = functools.partial(gradient_step, axis_name=axis_name, check_nans=self.check_nans)
        temperature = jnp.exp(state.log_temperature)
        num_transitions = jnp.maximum(jnp.sum(mask), 1.0)

        next_log_policy = self._log_policy(state.actor_params, next_observation)
        next_values = jnp.min(self._q_values(state.target_critic_params, next_observation), axis=1)
        soft_value = jnp.sum(jnp.exp(next_log_policy) * (next_values - temperature * next_log_policy), axis=-1)
        target = jax.lax.stop_gradient(reward + self.discount * discount * soft_value)

        def critic_objective(params):
            values = self._q_values(params, observation)  # [batch, critics, actions]
            taken = jnp.take_along_axis(values, action[:, None, None], axis=-1)[..., 0]
            loss = jnp.mean(mask * jnp.sum(jnp.square(taken - target[:, None]), axis=-1))
            return loss, {"critic": loss}

        critic_params, critic_opt_state, critic_metrics = step(
            self.critic_optimizer, state.critic_params, state.critic_opt_state, critic_objective
        )
        values = jax.lax.stop_gradient(jnp.min(self._q_values(critic_params, observation), axis=1))

        def actor_objective(params):
            log_policy = self._log_policy(params, observation)
            policy = jnp.exp(log_policy)
            per_state = jnp.sum(policy * (temperature * log_policy - values), axis=-1)
            entropy = -jnp.sum(policy * log_policy, axis=-1)
            loss = jnp.sum(mask * per_state) / num_transitions
            return loss, {"actor": loss, "entropy": jnp.sum(mask * entropy) / num_transitions}

        actor_params, actor_opt_state, actor_metrics = step(
            self.actor_optimizer, state.actor_params, state.actor_opt_state, actor_objective
        )
        critic = (critic_params, critic_opt_state, critic_metrics)
        return _sac_temperature_and_targets(self, state, step, critic, (actor_params, actor_opt_state, actor_metrics))
