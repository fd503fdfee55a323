"""The base of the off-policy actor-critic learners (TD3 and DDPG, SAC, discrete SAC)
and the checks and bookkeeping they share.

Each learner keeps an actor network, one or more critics, Polyak-averaged target
copies, one optax optimiser per part and a [`podrace.learners.SequenceReplay`][] of
one-step transitions on the device; its objectives are losses of
[`podrace.losses`][] it takes as arguments.
"""

from typing import Generic, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, PyTree

from .._types import AbstractSpace
from .._validation import check_agent_fits, check_optimizer_first_step
from ..agent import Agent
from ..networks import AbstractCritic, AbstractNetwork
from ..policies import AbstractPolicy, Greedy
from ..results import UpdateMetrics
from .learner import with_params
from .replay import AbstractReplayLearner, AbstractReplayState


def check_actor_critic(owner: str, actor: AbstractNetwork, critic: AbstractCritic, output_type: type) -> None:
    """Raises `ValueError` unless `actor` is feed-forward, emits `output_type` and acts in `critic`'s action size."""
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


def check_loss_reads(owner: str, loss: eqx.Module, base: type, actor: AbstractNetwork) -> None:
    """Raises `ValueError` unless `loss` is a `base` and, where it declares the actor
    output it reads (`input_type`), `actor` emits that."""
    if not isinstance(loss, base):
        raise ValueError(
            f"{owner} takes a {base.__name__} here, got {type(loss).__name__}; subclass "
            f"podrace.losses.{base.__name__} to write your own."
        )
    input_type = getattr(type(loss), "input_type", None)
    if input_type is not None and not issubclass(actor.output_type, input_type):
        raise ValueError(
            f"{owner}: {type(loss).__name__} reads an actor emitting {input_type.__name__}, but the actor emits "
            f"{actor.output_type.__name__}; pick the loss for this actor's head."
        )


def refuse_settings_beside_loss(owner: str, loss_name: str, **settings) -> None:
    """Raises `ValueError` if settings that a default loss would take are given beside a loss of the user's."""
    given = [name for name, value in settings.items() if value is not None]
    if given:
        raise ValueError(
            f"{owner}: {', '.join(given)} configure the default {loss_name}; with a {loss_name} of your own, "
            "give them to that loss instead."
        )


def merge_metrics(*metrics: UpdateMetrics) -> UpdateMetrics:
    """One step's metrics from those of its parts' steps: summed losses, every term, the
    norm of all gradients together."""
    terms = {name: value for m in metrics for name, value in m.terms.items()}
    grad_norm = optax.tree.norm([m.grad_norm for m in metrics])
    return UpdateMetrics(jnp.sum(jnp.stack([m.loss for m in metrics])), terms, grad_norm)


def check_actor_critic_optimizers(owner: str, learner: "AbstractActorCriticLearner") -> None:
    """Raises `ValueError` naming the actor's or the critic's optimiser if its first step is not finite."""
    for name, network in (("actor_optimizer", learner.actor), ("critic_optimizer", learner.critic)):
        params = eqx.filter(network, eqx.is_inexact_array)
        check_optimizer_first_step(owner, name, getattr(learner, name), params)


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
    actor_optimizer: eqx.AbstractVar[optax.GradientTransformation]
    critic_optimizer: eqx.AbstractVar[optax.GradientTransformation]
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
