"""TD3, and DDPG as its special case: a deterministic actor climbing its critics, learnt from replay."""

import functools
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray, PyTree

from .._types import DeterministicAction, TimeStep
from .._validation import check_in_unit_interval, check_positive_int, check_replay_holds_batch
from ..losses import (
    AbstractDeterministicActorLoss,
    AbstractDeterministicCriticLoss,
    DeterministicActorLoss,
    TD3CriticLoss,
    one_step_transitions,
)
from ..networks import AbstractCritic, AbstractNetwork
from ..policies import AbstractPolicy, GaussianNoise
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
from .learner import cond_or_zero_metrics, gradient_step, with_params
from .replay import SequenceReplay


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

    Each gradient step regresses the critics onto the targets of `critic_loss`
    ([`podrace.losses.TD3CriticLoss`][] by default: clipped double Q-learning with target
    policy smoothing). Every `policy_delay` steps the actor then steps on `actor_loss`
    ([`podrace.losses.DeterministicActorLoss`][]: ascend `Q_1(s, mu(s))`) and both target
    copies move by `target <- (1 - tau) target + tau online`. DDPG is one critic,
    `target_noise=0` and `policy_delay=1` (see `ddpg`).

    Reference: Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic
    Methods", ICML 2018; Lillicrap et al., "Continuous control with deep reinforcement
    learning", ICLR 2016.

    **Arguments:**

    - `actor`: a feed-forward network with a [`podrace.networks.DeterministicHead`][].
    - `critic`: a [`podrace.networks.AbstractCritic`][] (two critics for TD3).
    - `actor_optimizer`, `critic_optimizer`: optax gradient transformations.
    - `critic_loss`: the critics' objective, a
        [`podrace.losses.AbstractDeterministicCriticLoss`][]; by default
        `TD3CriticLoss(discount=..., target_noise=..., target_noise_clip=...)` of the three
        settings below.
    - `actor_loss`: the actor's objective, a
        [`podrace.losses.AbstractDeterministicActorLoss`][]; `DeterministicActorLoss()` by default.
    - `exploration`: the behaviour policy around the actor,
        [`podrace.policies.GaussianNoise`][] of 0.1 by default.
    - `buffer_size`: transitions the replay buffer holds, over all environments and devices.
    - `batch_size`: transitions per gradient step, per device.
    - `discount`: the discount factor of the default critic loss (0.99).
    - `tau`: the Polyak step of the targets, in (0, 1].
    - `target_noise`, `target_noise_clip`: the default critic loss's target policy
        smoothing, relative to half the action range (0.2 and 0.5; 0 turns it off).
    - `policy_delay`: critic steps per actor and target step.
    - `min_replay_size`: transitions to collect before learning starts.
    - `gradient_steps`: critic steps per update (per rollout).
    - `check_nans`: as in [`podrace.Learner`][].
    """

    actor: AbstractNetwork
    critic: AbstractCritic
    actor_optimizer: optax.GradientTransformation
    critic_optimizer: optax.GradientTransformation
    critic_loss: AbstractDeterministicCriticLoss
    actor_loss: AbstractDeterministicActorLoss
    exploration: AbstractPolicy
    replay: SequenceReplay
    batch_size: int = eqx.field(static=True)
    tau: Float[Array, ""]
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
        critic_loss: AbstractDeterministicCriticLoss | None = None,
        actor_loss: AbstractDeterministicActorLoss | None = None,
        exploration: AbstractPolicy | None = None,
        buffer_size: int,
        batch_size: int,
        discount: ArrayLike | None = None,
        tau: ArrayLike = 0.005,
        target_noise: ArrayLike | None = None,
        target_noise_clip: ArrayLike | None = None,
        policy_delay: int = 2,
        min_replay_size: int = 1_000,
        gradient_steps: int = 1,
        check_nans: bool = False,
    ):
        self.actor = actor
        self.critic = critic
        self.actor_optimizer = actor_optimizer
        self.critic_optimizer = critic_optimizer
        if critic_loss is None:
            critic_loss = TD3CriticLoss(
                discount=0.99 if discount is None else discount,
                target_noise=0.2 if target_noise is None else target_noise,
                target_noise_clip=0.5 if target_noise_clip is None else target_noise_clip,
            )
        else:
            refuse_settings_beside_loss(
                "TD3Learner",
                "critic_loss",
                discount=discount,
                target_noise=target_noise,
                target_noise_clip=target_noise_clip,
            )
        self.critic_loss = critic_loss
        self.actor_loss = DeterministicActorLoss() if actor_loss is None else actor_loss
        self.exploration = GaussianNoise(0.1) if exploration is None else exploration
        self.replay = SequenceReplay(buffer_size, 2)
        self.batch_size = batch_size
        self.tau = jnp.asarray(tau, jnp.float32)
        self.policy_delay = policy_delay
        self.min_replay_size = min_replay_size
        self.gradient_steps = gradient_steps
        self.check_nans = check_nans

    def __check_init__(self):
        check_actor_critic("TD3Learner", self.actor, self.critic, DeterministicAction)
        check_loss_reads("TD3Learner", self.critic_loss, AbstractDeterministicCriticLoss, self.actor)
        check_loss_reads("TD3Learner", self.actor_loss, AbstractDeterministicActorLoss, self.actor)
        for name in ("batch_size", "policy_delay", "min_replay_size", "gradient_steps"):
            check_positive_int("TD3Learner", name, getattr(self, name))
        check_replay_holds_batch("TD3Learner", self.replay.buffer_size, self.batch_size)
        check_in_unit_interval("TD3Learner", "tau", self.tau)
        check_actor_critic_optimizers("TD3Learner", self)

    @property
    def discount(self):
        """The critic loss's discount factor."""
        return self.critic_loss.discount  # pyright: ignore[reportAttributeAccessIssue]

    @property
    def target_noise(self):
        """The critic loss's target policy smoothing noise."""
        return self.critic_loss.target_noise  # pyright: ignore[reportAttributeAccessIssue]

    @property
    def target_noise_clip(self):
        """The critic loss's clip of the smoothing noise."""
        return self.critic_loss.target_noise_clip  # pyright: ignore[reportAttributeAccessIssue]

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
        transitions = one_step_transitions(self.replay.sample(state.replay, key, self.batch_size))
        step = functools.partial(gradient_step, axis_name=axis_name, check_nans=self.check_nans)
        targets = self.critic_loss.targets(
            transitions,
            target_actor=with_params(self.actor, state.target_actor_params),
            target_critic=with_params(self.critic, state.target_critic_params),
            key=jax.random.fold_in(key, 1),
        )
        critic_params, critic_opt_state, critic_metrics = step(
            self.critic_optimizer,
            state.critic_params,
            state.critic_opt_state,
            lambda params: self.critic_loss(with_params(self.critic, params), transitions, targets),
        )
        critic = with_params(self.critic, critic_params)

        def actor_and_targets(_):
            actor_params, actor_opt_state, metrics = step(
                self.actor_optimizer,
                state.actor_params,
                state.actor_opt_state,
                lambda params: self.actor_loss(with_params(self.actor, params), transitions, critic=critic),
            )
            target_actor_params = optax.incremental_update(actor_params, state.target_actor_params, self.tau)
            target_critic_params = optax.incremental_update(critic_params, state.target_critic_params, self.tau)
            return (actor_params, actor_opt_state, target_actor_params, target_critic_params), metrics

        def critic_only(_):
            return state.actor_params, state.actor_opt_state, state.target_actor_params, state.target_critic_params

        num_gradient_steps = state.num_gradient_steps + 1
        (actor_params, actor_opt_state, target_actor_params, target_critic_params), actor_metrics = (
            cond_or_zero_metrics(num_gradient_steps % self.policy_delay == 0, actor_and_targets, critic_only, None)
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
        return state, merge_metrics(critic_metrics, actor_metrics)


def ddpg(
    actor: AbstractNetwork,
    critic: AbstractCritic,
    actor_optimizer: optax.GradientTransformation,
    critic_optimizer: optax.GradientTransformation,
    *,
    discount: ArrayLike = 0.99,
    **kwargs,
) -> TD3Learner:
    """DDPG: a [`podrace.learners.TD3Learner`][] without target smoothing or delayed updates,
    on a critic of one estimate (`critic.num_critics == 1`).

    Reference: Lillicrap et al., "Continuous control with deep reinforcement learning", ICLR 2016.

    **Arguments:**

    - `actor`, `critic`, `actor_optimizer`, `critic_optimizer`: as in
        [`podrace.learners.TD3Learner`][].
    - `discount`: the discount factor of its critic loss, `TD3CriticLoss(target_noise=0)`.
    - `kwargs`: the other keyword arguments of [`podrace.learners.TD3Learner`][], but
        `critic_loss`, `target_noise` and `policy_delay`, which make it DDPG.
    """
    if critic.num_critics != 1:
        raise ValueError(
            f"ddpg learns one critic; this one has num_critics={critic.num_critics}: build it with "
            "num_critics=1, or use TD3Learner for twin critics."
        )
    fixed = sorted({"critic_loss", "target_noise", "target_noise_clip", "policy_delay"} & kwargs.keys())
    if fixed:
        raise ValueError(f"ddpg sets {', '.join(fixed)} itself; use TD3Learner to choose them.")
    critic_loss = TD3CriticLoss(discount=discount, target_noise=0.0)
    return TD3Learner(
        actor, critic, actor_optimizer, critic_optimizer, critic_loss=critic_loss, policy_delay=1, **kwargs
    )
