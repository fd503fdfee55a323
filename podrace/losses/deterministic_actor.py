"""The deterministic policy gradient's actor objective (DDPG, TD3)."""

from typing import final

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..networks import AbstractCritic, AbstractNetwork
from ..results import LossTerms
from .actor_critic_base import AbstractDeterministicActorLoss, Transitions


@final
class DeterministicActorLoss(AbstractDeterministicActorLoss):
    """The actor ascends its first critic: the loss is `-Q_1(s, mu(s))`, averaged over
    the batch with masked transitions counting 0, so its gradient is the deterministic
    policy gradient `-grad_a Q_1(s, a)|_{a = mu(s)} grad mu(s)`.

    Reference: Silver et al., "Deterministic Policy Gradient Algorithms", ICML 2014,
    theorem 1; Fujimoto et al., ICML 2018 (the first of twin critics).
    """

    def __call__(
        self, actor: AbstractNetwork, transitions: Transitions, *, critic: AbstractCritic
    ) -> tuple[Float[Array, ""], LossTerms]:
        actions = jax.vmap(lambda o: actor(o, ())[0].action)(transitions.observation)
        values = jax.vmap(critic)(transitions.observation, actions)[:, 0]
        loss = -jnp.mean(transitions.mask * values)  # a mean of equal shares, as the critic's
        return loss, {"actor": loss}
