"""The entropy temperature's objective of Soft Actor-Critic."""

from typing import final

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ..results import LossTerms
from .actor_critic_base import AbstractTemperatureLoss


@final
class TemperatureLoss(AbstractTemperatureLoss):
    """Automatic entropy tuning: the temperature minimises
    `log_temperature * (entropy - target_entropy)`, so alpha falls while the policy is
    more random than `target_entropy` and rises while it is less.

    Reference: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018,
    eq. 18 (learnt as log alpha, with the batch's entropy estimate).

    **Arguments:**

    - `target_entropy`: the entropy the policy is steered to (SAC's learners default it
        to minus the action size, or to `0.98 log(num_actions)` for discrete actions).
    """

    target_entropy: Float[Array, ""]

    def __init__(self, *, target_entropy: ArrayLike):
        self.target_entropy = jnp.asarray(target_entropy, jnp.float32)

    def __call__(
        self, log_temperature: Float[Array, ""], entropy: Float[Array, ""]
    ) -> tuple[Float[Array, ""], LossTerms]:
        loss = log_temperature * (entropy - self.target_entropy)
        return loss, {"temperature": loss, "alpha": jnp.exp(log_temperature)}
