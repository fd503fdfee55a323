"""Soft Actor-Critic for continuous actions, and the base it shares with discrete SAC."""

import functools
from collections.abc import Callable
from typing import Literal, TypeVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray, PyTree

from .._types import TanhGaussianParams, TimeStep
from .._validation import (
    check_in_unit_interval,
    check_optimizer_first_step,
    check_positive,
    check_positive_int,
    check_replay_holds_batch,
)
from ..losses import (
    AbstractSoftActorLoss,
    AbstractSoftCriticLoss,
    AbstractTemperatureLoss,
    SACActorLoss,
    SACCriticLoss,
    TemperatureLoss,
    one_step_transitions,
)
from ..networks import AbstractCritic, AbstractNetwork
from ..policies import AbstractPolicy, TanhGaussian
from ..results import UpdateMetrics
from .actor_critic import (
    AbstractActorCriticLearner,
    AbstractActorCriticState,
    check_actor_critic,
    check_actor_critic_optimizers,
    check_loss_reads,
    merge_metrics,
    refuse_settings_beside_loss,
)
from .learner import gradient_step, with_params
from .replay import SequenceReplay


@final
class SACState(AbstractActorCriticState):
    """Everything a [`podrace.learners.SACLearner`][] (or a
    [`podrace.learners.DiscreteSACLearner`][]) updates.

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


CriticT = TypeVar("CriticT", bound=AbstractCritic | AbstractNetwork)
GradientStep = Callable[..., tuple[PyTree[Array], optax.OptState, UpdateMetrics]]


class AbstractSoftActorCriticLearner(AbstractActorCriticLearner[SACState, CriticT]):
    """What the SAC learners share: a learned temperature, target critics, the soft
    critic, actor and temperature losses, and their state."""

    temperature_optimizer: eqx.AbstractVar[optax.GradientTransformation]
    critic_loss: eqx.AbstractVar[AbstractSoftCriticLoss]
    actor_loss: eqx.AbstractVar[AbstractSoftActorLoss]
    temperature_loss: eqx.AbstractVar[AbstractTemperatureLoss]
    replay: eqx.AbstractVar[SequenceReplay]
    batch_size: eqx.AbstractVar[int]
    tau: eqx.AbstractVar[Float[Array, ""]]
    initial_temperature: eqx.AbstractVar[Float[Array, ""]]
    check_nans: eqx.AbstractVar[bool]

    @property
    def discount(self):
        """The critic loss's discount factor."""
        return self.critic_loss.discount  # pyright: ignore[reportAttributeAccessIssue]

    @property
    def target_entropy(self):
        """The temperature loss's target entropy."""
        return self.temperature_loss.target_entropy  # pyright: ignore[reportAttributeAccessIssue]

    def check_settings(self, owner: str) -> None:
        """Raises `ValueError` naming the loss, setting or optimiser that is out of its range."""
        check_loss_reads(owner, self.critic_loss, AbstractSoftCriticLoss, self.actor)
        check_loss_reads(owner, self.actor_loss, AbstractSoftActorLoss, self.actor)
        check_loss_reads(owner, self.temperature_loss, AbstractTemperatureLoss, self.actor)
        for name in ("batch_size", "min_replay_size", "gradient_steps"):
            check_positive_int(owner, name, getattr(self, name))
        check_replay_holds_batch(owner, self.replay.buffer_size, self.batch_size)
        check_in_unit_interval(owner, "tau", self.tau)
        check_positive(owner, "initial_temperature", self.initial_temperature)
        check_actor_critic_optimizers(owner, self)
        log_temperature = jnp.log(self.initial_temperature)
        check_optimizer_first_step(owner, "temperature_optimizer", self.temperature_optimizer, log_temperature)

    def init(self, key: PRNGKeyArray, timestep: TimeStep) -> SACState:
        """The initial state, with an empty replay buffer sized for the environments of `timestep`."""
        replay = self.replay.init_for(self.initial_agent(), timestep)
        actor_params = eqx.filter(self.actor, eqx.is_inexact_array)
        critic_params = eqx.filter(self.critic, eqx.is_inexact_array)
        log_temperature = jnp.log(self.initial_temperature)
        zero = jnp.asarray(0, jnp.int32)
        return SACState(
            actor_params=actor_params,
            critic_params=critic_params,
            target_critic_params=critic_params,
            log_temperature=log_temperature,
            actor_opt_state=self.actor_optimizer.init(actor_params),
            critic_opt_state=self.critic_optimizer.init(critic_params),
            temperature_opt_state=self.temperature_optimizer.init(log_temperature),
            replay=replay,
            num_updates=zero,
            num_gradient_steps=zero,
            num_transitions=zero,
            key=key,
        )

    def soft_step(
        self,
        state: SACState,
        sample_key: PRNGKeyArray,
        target_key: PRNGKeyArray,
        actor_key: PRNGKeyArray,
        axis_name: str | None,
        update_order: Literal["critics_first", "actor_first"] = "critics_first",
    ) -> tuple[SACState, UpdateMetrics]:
        """One gradient step of every part, then the Polyak step of the target critics.

        With `update_order="critics_first"` (the paper's order) the critics step onto
        the critic loss's targets and the actor against the critics just updated; with
        `"actor_first"` the actor steps against the critics as they were and the critics
        onto targets drawn from the actor just updated. The temperature steps last,
        against the actor's `entropy` term, so both use the temperature as it was.

        **Arguments:**

        - `state`: the learner state.
        - `sample_key`, `target_key`, `actor_key`: the randomness of replay sampling, of
            the critic loss's targets and of the actor loss.
        - `axis_name`: as in `update`.
        - `update_order`: `"critics_first"` or `"actor_first"`.
        """
        transitions = one_step_transitions(self.replay.sample(state.replay, sample_key, self.batch_size))
        step: GradientStep = functools.partial(gradient_step, axis_name=axis_name, check_nans=self.check_nans)
        temperature = jnp.exp(state.log_temperature)

        def critic_step(actor_params: PyTree[Array]) -> tuple[PyTree[Array], optax.OptState, UpdateMetrics]:
            targets = self.critic_loss.targets(
                transitions,
                actor=with_params(self.actor, actor_params),
                target_critic=with_params(self.critic, state.target_critic_params),
                temperature=temperature,
                key=target_key,
            )
            return step(
                self.critic_optimizer,
                state.critic_params,
                state.critic_opt_state,
                lambda params: self.critic_loss(with_params(self.critic, params), transitions, targets),
            )

        def actor_step(critic_params: PyTree[Array]) -> tuple[PyTree[Array], optax.OptState, UpdateMetrics]:
            critic = with_params(self.critic, critic_params)
            return step(
                self.actor_optimizer,
                state.actor_params,
                state.actor_opt_state,
                lambda params: self.actor_loss(
                    with_params(self.actor, params), transitions, critic=critic, temperature=temperature, key=actor_key
                ),
            )

        if update_order == "actor_first":
            actor_params, actor_opt_state, actor_metrics = actor_step(state.critic_params)
            critic_params, critic_opt_state, critic_metrics = critic_step(actor_params)
        else:
            critic_params, critic_opt_state, critic_metrics = critic_step(state.actor_params)
            actor_params, actor_opt_state, actor_metrics = actor_step(critic_params)
        entropy = jax.lax.stop_gradient(actor_metrics.terms["entropy"])
        log_temperature, temperature_opt_state, temperature_metrics = step(
            self.temperature_optimizer,
            state.log_temperature,
            state.temperature_opt_state,
            lambda log_temperature: self.temperature_loss(log_temperature, entropy),
        )
        target_critic_params = optax.incremental_update(critic_params, state.target_critic_params, self.tau)
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
        return state, merge_metrics(critic_metrics, actor_metrics, temperature_metrics)


def soft_losses(
    owner: str,
    critic_loss: AbstractSoftCriticLoss | None,
    temperature_loss: AbstractTemperatureLoss | None,
    *,
    default_critic_loss: Callable[[ArrayLike], AbstractSoftCriticLoss],
    discount: ArrayLike | None,
    target_entropy: ArrayLike | None,
    default_target_entropy: ArrayLike,
) -> tuple[AbstractSoftCriticLoss, AbstractTemperatureLoss]:
    """A SAC learner's critic and temperature losses: those given, or the defaults built
    from `discount` and `target_entropy` (refused beside a loss of the user's)."""
    if critic_loss is None:
        critic_loss = default_critic_loss(0.99 if discount is None else discount)
    else:
        refuse_settings_beside_loss(owner, "critic_loss", discount=discount)
    if temperature_loss is None:
        target_entropy = default_target_entropy if target_entropy is None else target_entropy
        temperature_loss = TemperatureLoss(target_entropy=target_entropy)
    else:
        refuse_settings_beside_loss(owner, "temperature_loss", target_entropy=target_entropy)
    return critic_loss, temperature_loss


@final
class SACLearner(AbstractSoftActorCriticLearner[AbstractCritic]):
    """Soft Actor-Critic with a learned temperature: a tanh-squashed Gaussian actor, twin
    critics with a Polyak-averaged target, learnt from replay.

    Each gradient step, with `alpha = exp(log_temperature)`, takes a step of the critics
    on `critic_loss` ([`podrace.losses.SACCriticLoss`][]: soft clipped double
    Q-learning), then of the actor on `actor_loss` ([`podrace.losses.SACActorLoss`][]:
    `alpha log pi(a|s) - min_i Q_i(s, a)` on the critics just updated), then of the
    temperature on `temperature_loss` ([`podrace.losses.TemperatureLoss`][], steering the
    policy's entropy to `target_entropy`); the target critics then move by
    `target <- (1 - tau) target + tau online`. With `update_order="actor_first"` the
    actor steps first, against the critics as they were, and the critics' targets are
    drawn from the actor just updated (rejax's order).

    Reference: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018
    (automatic temperature); Fujimoto et al., ICML 2018 (twin critics).

    **Arguments:**

    - `actor`: a feed-forward network with a [`podrace.networks.TanhGaussianHead`][].
    - `critic`: a [`podrace.networks.AbstractCritic`][] (two critics in SAC).
    - `actor_optimizer`, `critic_optimizer`, `temperature_optimizer`: optax gradient
        transformations.
    - `critic_loss`, `actor_loss`, `temperature_loss`: the three objectives
        ([`podrace.losses.AbstractSoftCriticLoss`][], `AbstractSoftActorLoss`,
        `AbstractTemperatureLoss`); by default `SACCriticLoss(discount=discount)`,
        `SACActorLoss()` and `TemperatureLoss(target_entropy=target_entropy)`.
    - `exploration`: the behaviour policy, [`podrace.policies.TanhGaussian`][] by default.
    - `buffer_size`, `batch_size`, `tau`, `min_replay_size`, `gradient_steps`,
        `check_nans`: as in [`podrace.learners.TD3Learner`][].
    - `discount`: the default critic loss's discount factor (0.99).
    - `initial_temperature`: alpha before learning, > 0.
    - `target_entropy`: the default temperature loss's target; `None` for minus the action size.
    - `update_order`: `"critics_first"` (the paper's, Stable-Baselines3's and CleanRL's
        order) or `"actor_first"`.
    """

    actor: AbstractNetwork
    critic: AbstractCritic
    actor_optimizer: optax.GradientTransformation
    critic_optimizer: optax.GradientTransformation
    temperature_optimizer: optax.GradientTransformation
    critic_loss: AbstractSoftCriticLoss
    actor_loss: AbstractSoftActorLoss
    temperature_loss: AbstractTemperatureLoss
    exploration: AbstractPolicy
    replay: SequenceReplay
    batch_size: int = eqx.field(static=True)
    tau: Float[Array, ""]
    initial_temperature: Float[Array, ""]
    min_replay_size: int = eqx.field(static=True)
    gradient_steps: int = eqx.field(static=True)
    check_nans: bool = eqx.field(static=True)
    update_order: Literal["critics_first", "actor_first"] = eqx.field(static=True)

    def __init__(
        self,
        actor: AbstractNetwork,
        critic: AbstractCritic,
        actor_optimizer: optax.GradientTransformation,
        critic_optimizer: optax.GradientTransformation,
        temperature_optimizer: optax.GradientTransformation,
        *,
        critic_loss: AbstractSoftCriticLoss | None = None,
        actor_loss: AbstractSoftActorLoss | None = None,
        temperature_loss: AbstractTemperatureLoss | None = None,
        exploration: AbstractPolicy | None = None,
        buffer_size: int,
        batch_size: int,
        discount: ArrayLike | None = None,
        tau: ArrayLike = 0.005,
        initial_temperature: ArrayLike = 1.0,
        target_entropy: ArrayLike | None = None,
        min_replay_size: int = 100,
        gradient_steps: int = 1,
        check_nans: bool = False,
        update_order: Literal["critics_first", "actor_first"] = "critics_first",
    ):
        if update_order not in ("critics_first", "actor_first"):
            raise ValueError(
                f"SACLearner: update_order must be 'critics_first' or 'actor_first', got {update_order!r}."
            )
        self.actor = actor
        self.critic = critic
        self.actor_optimizer = actor_optimizer
        self.critic_optimizer = critic_optimizer
        self.temperature_optimizer = temperature_optimizer
        self.critic_loss, self.temperature_loss = soft_losses(
            "SACLearner",
            critic_loss,
            temperature_loss,
            default_critic_loss=lambda discount: SACCriticLoss(discount=discount),
            discount=discount,
            target_entropy=target_entropy,
            default_target_entropy=-critic.action_size,
        )
        self.actor_loss = SACActorLoss() if actor_loss is None else actor_loss
        self.exploration = TanhGaussian() if exploration is None else exploration
        self.replay = SequenceReplay(buffer_size, 2)
        self.batch_size = batch_size
        self.tau = jnp.asarray(tau, jnp.float32)
        self.initial_temperature = jnp.asarray(initial_temperature, jnp.float32)
        self.min_replay_size = min_replay_size
        self.gradient_steps = gradient_steps
        self.check_nans = check_nans
        self.update_order = update_order

    def __check_init__(self):
        check_actor_critic("SACLearner", self.actor, self.critic, TanhGaussianParams)
        self.check_settings("SACLearner")

    def learn_step(self, state: SACState, key: PRNGKeyArray, axis_name: str | None) -> tuple[SACState, UpdateMetrics]:
        sample_key, next_key, actor_key = jax.random.split(key, 3)
        return self.soft_step(state, sample_key, next_key, actor_key, axis_name, self.update_order)
