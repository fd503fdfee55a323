"""Soft Actor-Critic's critic and actor objectives for discrete actions, with the
expectations over actions taken exactly."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray, PyTree

from .._types import PolicyLogits
from .._validation import check_in_unit_interval
from ..networks import AbstractNetwork
from ..results import LossTerms
from .actor_critic_base import AbstractSoftActorLoss, AbstractSoftCriticLoss, Transitions
from .td3 import critic_regression_loss


def stacked_q_values(critic: AbstractNetwork, observation: PyTree[Array]) -> Float[Array, "B num_critics num_actions"]:
    """Every critic's action values of a batch of observations, from Q-networks stacked
    into one network (their arrays with a leading axis of critics)."""
    values = eqx.filter_vmap(lambda c: jax.vmap(lambda o: c(o, ())[0].q_values)(observation))(critic)
    return jnp.moveaxis(values, 0, 1)


def categorical_log_policy(actor: AbstractNetwork, observation: PyTree[Array]) -> Float[Array, "B num_actions"]:
    """The log-probabilities of every action under a logits actor, for a batch of observations."""
    return jax.nn.log_softmax(jax.vmap(lambda o: actor(o, ())[0].logits)(observation))


def policy_expectation(
    log_policy: Float[Array, "B num_actions"], values: Float[Array, "B num_actions"]
) -> Float[Array, " B"]:
    """`sum_a pi(a|s) values(s, a)` for each state, over the actions of positive probability.

    The illegal actions of a [`podrace.MaskedObservation`][] have probability 0, and the
    lowest float as their logit and value (see [`podrace.exclude_illegal`][]): they add
    nothing, where `0 * (alpha log pi - Q)`, which overflows once alpha exceeds 1, would
    give NaN.

    **Arguments:**

    - `log_policy`: the log-probability of each action, per state.
    - `values`: the value of each action, per state.

    **Returns:**

    The expected value of each state.
    """
    policy = jnp.exp(log_policy)
    return jnp.sum(policy * jnp.where(policy > 0, values, 0.0), axis=-1)


@final
class DiscreteSACCriticLoss(AbstractSoftCriticLoss[AbstractNetwork]):
    """Soft Q-learning over discrete actions, with clipped double critics.

    Every critic's value of the action taken regresses onto
    `r + discount * d * sum_a' pi(a'|s') (min_i Q'_i(s', a') - alpha log pi(a'|s'))`:
    the next state's soft value in expectation over the policy, without sampling.
    The critics are Q-networks stacked into one (see
    [`podrace.learners.DiscreteSACLearner`][]). The illegal actions of a masked
    observation are left out of the expectation ([`podrace.losses.policy_expectation`][]).

    Reference: Christodoulou, "Soft Actor-Critic for Discrete Action Settings", 2019, eq. 10.

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    """

    input_type = PolicyLogits
    discount: Float[Array, ""]

    def __init__(self, *, discount: ArrayLike = 0.99):
        self.discount = jnp.asarray(discount, jnp.float32)

    def __check_init__(self):
        check_in_unit_interval("DiscreteSACCriticLoss", "discount", self.discount)

    def targets(
        self,
        transitions: Transitions,
        *,
        actor: AbstractNetwork,
        target_critic: AbstractNetwork,
        temperature: Float[Array, ""],
        key: PRNGKeyArray,
    ) -> Float[Array, " B"]:
        del key  # the expectation over next actions is exact
        next_log_policy = categorical_log_policy(actor, transitions.next_observation)
        next_values = jnp.min(stacked_q_values(target_critic, transitions.next_observation), axis=1)
        soft_value = policy_expectation(next_log_policy, next_values - temperature * next_log_policy)
        return jax.lax.stop_gradient(transitions.reward + self.discount * transitions.discount * soft_value)

    def __call__(
        self, critic: AbstractNetwork, transitions: Transitions, targets: Float[Array, " B"]
    ) -> tuple[Float[Array, ""], LossTerms]:
        values = stacked_q_values(critic, transitions.observation)  # [batch, critics, actions]
        taken = jnp.take_along_axis(values, transitions.action[:, None, None], axis=-1)[..., 0]
        loss = critic_regression_loss(taken, targets, transitions.mask)
        return loss, {"critic": loss}


@final
class DiscreteSACActorLoss(AbstractSoftActorLoss[AbstractNetwork]):
    """The actor minimises `sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a))`, averaged
    over the unmasked transitions; its `entropy` term is the policy's exact mean entropy.
    Both expectations leave out the illegal actions of a masked observation
    ([`podrace.losses.policy_expectation`][]).

    Reference: Christodoulou, "Soft Actor-Critic for Discrete Action Settings", 2019, eq. 12.
    """

    input_type = PolicyLogits

    def __call__(
        self,
        actor: AbstractNetwork,
        transitions: Transitions,
        *,
        critic: AbstractNetwork,
        temperature: Float[Array, ""],
        key: PRNGKeyArray,
    ) -> tuple[Float[Array, ""], LossTerms]:
        del key  # the expectation over actions is exact
        mask = transitions.mask
        num_transitions = jnp.maximum(jnp.sum(mask), 1.0)
        values = jax.lax.stop_gradient(jnp.min(stacked_q_values(critic, transitions.observation), axis=1))
        log_policy = categorical_log_policy(actor, transitions.observation)
        per_state = policy_expectation(log_policy, temperature * log_policy - values)
        entropy = -policy_expectation(log_policy, log_policy)
        loss = jnp.sum(mask * per_state) / num_transitions
        return loss, {"actor": loss, "entropy": jnp.sum(mask * entropy) / num_transitions}
