"""Soft Actor-Critic for discrete actions: a categorical actor and twin Q-networks."""

import math
from collections.abc import Sequence
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from .._types import PolicyLogits, QValues
from ..losses import (
    AbstractSoftActorLoss,
    AbstractSoftCriticLoss,
    AbstractTemperatureLoss,
    DiscreteSACActorLoss,
    DiscreteSACCriticLoss,
)
from ..networks import AbstractNetwork
from ..policies import AbstractPolicy, Categorical
from ..results import UpdateMetrics
from .replay import SequenceReplay
from .sac import AbstractSoftActorCriticLearner, SACState, soft_losses


def stack_critics(owner: str, critics: Sequence[AbstractNetwork]) -> AbstractNetwork:
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
class DiscreteSACLearner(AbstractSoftActorCriticLearner[AbstractNetwork]):
    """Soft Actor-Critic for discrete actions: a categorical actor and twin Q-networks
    that value every action at once, with a learned temperature, learnt from replay.

    Each gradient step takes the expectations over actions exactly, where
    [`podrace.learners.SACLearner`][] samples them: the critics step on `critic_loss`
    ([`podrace.losses.DiscreteSACCriticLoss`][]), the actor on `actor_loss`
    ([`podrace.losses.DiscreteSACActorLoss`][], on the critics just updated), the
    temperature on `temperature_loss` ([`podrace.losses.TemperatureLoss`][]), and the
    target critics move by `target <- (1 - tau) target + tau online`.

    Reference: Christodoulou, "Soft Actor-Critic for Discrete Action Settings", 2019;
    Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018.

    **Arguments:**

    - `actor`: a feed-forward network with a [`podrace.networks.PolicyLogitHead`][].
    - `critics`: feed-forward networks with a [`podrace.networks.QValueHead`][], built
        alike from keys of their own (two for twin critics); the learner stacks them into
        one `critic`, evaluated with `eqx.filter_vmap`.
    - `actor_optimizer`, `critic_optimizer`, `temperature_optimizer`: optax gradient
        transformations.
    - `critic_loss`, `actor_loss`, `temperature_loss`: the three objectives; by default
        `DiscreteSACCriticLoss(discount=discount)`, `DiscreteSACActorLoss()` and
        `TemperatureLoss(target_entropy=target_entropy)`.
    - `exploration`: the behaviour policy, [`podrace.policies.Categorical`][] by default.
    - `buffer_size`, `batch_size`, `tau`, `min_replay_size`, `gradient_steps`,
        `check_nans`: as in [`podrace.learners.TD3Learner`][].
    - `discount`: the default critic loss's discount factor (0.99).
    - `initial_temperature`: alpha before learning, > 0.
    - `target_entropy`: the default temperature loss's target; `None` for 0.98 times the
        uniform policy's, `0.98 log(num_actions)` (the paper's).
    """

    actor: AbstractNetwork
    critic: AbstractNetwork
    actor_optimizer: optax.GradientTransformation
    critic_optimizer: optax.GradientTransformation
    temperature_optimizer: optax.GradientTransformation
    critic_loss: AbstractSoftCriticLoss
    actor_loss: AbstractSoftActorLoss
    temperature_loss: AbstractTemperatureLoss
    exploration: AbstractPolicy
    replay: SequenceReplay
    num_critics: int = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)
    tau: Float[Array, ""]
    initial_temperature: Float[Array, ""]
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
    ):
        self.actor = actor
        self.critic = stack_critics("DiscreteSACLearner", critics)
        self.num_critics = len(tuple(critics))
        self.actor_optimizer = actor_optimizer
        self.critic_optimizer = critic_optimizer
        self.temperature_optimizer = temperature_optimizer
        self.critic_loss, self.temperature_loss = soft_losses(
            "DiscreteSACLearner",
            critic_loss,
            temperature_loss,
            default_critic_loss=lambda discount: DiscreteSACCriticLoss(discount=discount),
            discount=discount,
            target_entropy=target_entropy,
            default_target_entropy=0.98 * math.log(actor.num_actions),
        )
        self.actor_loss = DiscreteSACActorLoss() if actor_loss is None else actor_loss
        self.exploration = Categorical() if exploration is None else exploration
        self.replay = SequenceReplay(buffer_size, 2)
        self.batch_size = batch_size
        self.tau = jnp.asarray(tau, jnp.float32)
        self.initial_temperature = jnp.asarray(initial_temperature, jnp.float32)
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
        self.check_settings(owner)

    def learn_step(self, state: SACState, key: PRNGKeyArray, axis_name: str | None) -> tuple[SACState, UpdateMetrics]:
        # The exact expectations need no randomness beyond replay sampling.
        return self.soft_step(state, key, key, key, axis_name)
