"""Soft Actor-Critic's critic and actor objectives for a tanh-squashed Gaussian actor."""

from typing import final

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray, PyTree

from .._types import TanhGaussianParams
from .._validation import check_in_unit_interval
from ..networks import AbstractCritic, AbstractNetwork
from ..policies import tanh_gaussian_step
from ..results import LossTerms
from .actor_critic_base import AbstractSoftActorLoss, AbstractSoftCriticLoss, Transitions
from .td3 import critic_regression_loss


def tanh_gaussian_actions(
    actor: AbstractNetwork, observation: PyTree[Array], key: PRNGKeyArray
) -> tuple[Float[Array, "B action_size"], Float[Array, " B"]]:
    """Reparameterised actions of a tanh-Gaussian actor for a batch of observations, and
    their log-probabilities (see [`podrace.policies.tanh_gaussian_step`][])."""
    keys = jax.random.split(key, jax.tree.leaves(observation)[0].shape[0])
    steps = jax.vmap(lambda o, k: tanh_gaussian_step(actor(o, ())[0], k))(observation, keys)
    return steps.action, steps.log_prob


@final
class SACCriticLoss(AbstractSoftCriticLoss[AbstractCritic]):
    """Soft Q-learning with clipped double critics.

    Every critic regresses onto `r + discount * d * (min_i Q'_i(s', a') - alpha log pi(a'|s'))`
    with `a' ~ pi(s')` sampled once per transition; `d` is the environment's discount.

    Reference: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018,
    eq. 5 and 6; Fujimoto et al., ICML 2018 (the minimum of twin critics).

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    """

    input_type = TanhGaussianParams
    discount: Float[Array, ""]

    def __init__(self, *, discount: ArrayLike = 0.99):
        self.discount = jnp.asarray(discount, jnp.float32)

    def __check_init__(self):
        check_in_unit_interval("SACCriticLoss", "discount", self.discount)

    def targets(
        self,
        transitions: Transitions,
        *,
        actor: AbstractNetwork,
        target_critic: AbstractCritic,
        temperature: Float[Array, ""],
        key: PRNGKeyArray,
    ) -> Float[Array, " B"]:
        next_action, next_log_prob = tanh_gaussian_actions(actor, transitions.next_observation, key)
        next_values = jax.vmap(target_critic)(transitions.next_observation, next_action)
        soft_value = jnp.min(next_values, axis=-1) - temperature * next_log_prob
        return jax.lax.stop_gradient(transitions.reward + self.discount * transitions.discount * soft_value)

    def __call__(
        self, critic: AbstractCritic, transitions: Transitions, targets: Float[Array, " B"]
    ) -> tuple[Float[Array, ""], LossTerms]:
        values = jax.vmap(critic)(transitions.observation, transitions.action)
        loss = critic_regression_loss(values, targets, transitions.mask)
        return loss, {"critic": loss}


@final
class SACActorLoss(AbstractSoftActorLoss[AbstractCritic]):
    """The actor minimises `alpha log pi(a|s) - min_i Q_i(s, a)` with `a ~ pi(s)`
    reparameterised, averaged over the unmasked transitions; its `entropy` term is
    minus the mean log-probability of those actions.

    Reference: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018, eq. 7.
    """

    input_type = TanhGaussianParams

    def __call__(
        self,
        actor: AbstractNetwork,
        transitions: Transitions,
        *,
        critic: AbstractCritic,
        temperature: Float[Array, ""],
        key: PRNGKeyArray,
    ) -> tuple[Float[Array, ""], LossTerms]:
        mask = transitions.mask
        num_transitions = jnp.maximum(jnp.sum(mask), 1.0)
        actions, log_prob = tanh_gaussian_actions(actor, transitions.observation, key)
        values = jnp.min(jax.vmap(critic)(transitions.observation, actions), axis=-1)
        loss = jnp.sum(mask * (temperature * log_prob - values)) / num_transitions
        return loss, {"actor": loss, "entropy": -jnp.sum(mask * log_prob) / num_transitions}
