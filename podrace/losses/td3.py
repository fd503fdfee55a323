"""TD3's critic objective (DDPG's without target policy smoothing): clipped double
Q-learning onto a smoothed target action."""

from typing import final

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from .._types import DeterministicAction
from .._validation import check_in_unit_interval, check_non_negative
from ..networks import AbstractCritic, AbstractNetwork
from ..results import LossTerms
from .actor_critic_base import AbstractDeterministicCriticLoss, Transitions


def critic_regression_loss(
    values: Float[Array, "B num_critics"], targets: Float[Array, " B"], mask: Float[Array, " B"]
) -> Float[Array, ""]:
    """The squared error of every critic's estimate against its transition's target,
    summed over the critics and averaged over the batch, masked transitions counting 0.

    **Arguments:**

    - `values`: each critic's estimate of each transition.
    - `targets`: each transition's target.
    - `mask`: each transition's weight (see [`podrace.losses.Transitions`][]).
    """
    return jnp.mean(mask * jnp.sum(jnp.square(values - targets[:, None]), axis=-1))


@final
class TD3CriticLoss(AbstractDeterministicCriticLoss):
    """Clipped double Q-learning with target policy smoothing.

    Every critic regresses onto `r + discount * d * min_i Q'_i(s', a')`, with
    `a' = clip(mu'(s') + eps, low, high)` and `eps` Gaussian noise of `target_noise`
    times half the action range, clipped to `target_noise_clip` times it; `d` is the
    environment's discount (0 at a termination). DDPG's critic loss is
    `target_noise=0` on one critic.

    Reference: Fujimoto et al., "Addressing Function Approximation Error in Actor-Critic
    Methods", ICML 2018, eq. 10 and 14; Lillicrap et al., "Continuous control with deep
    reinforcement learning", ICLR 2016.

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    - `target_noise`, `target_noise_clip`: target policy smoothing, relative to half the
        action range (0 turns it off).
    """

    discount: Float[Array, ""]
    target_noise: Float[Array, ""]
    target_noise_clip: Float[Array, ""]

    def __init__(
        self, *, discount: ArrayLike = 0.99, target_noise: ArrayLike = 0.2, target_noise_clip: ArrayLike = 0.5
    ):
        self.discount = jnp.asarray(discount, jnp.float32)
        self.target_noise = jnp.asarray(target_noise, jnp.float32)
        self.target_noise_clip = jnp.asarray(target_noise_clip, jnp.float32)

    def __check_init__(self):
        check_in_unit_interval("TD3CriticLoss", "discount", self.discount)
        check_non_negative("TD3CriticLoss", "target_noise", self.target_noise)
        check_non_negative("TD3CriticLoss", "target_noise_clip", self.target_noise_clip)

    def targets(
        self,
        transitions: Transitions,
        *,
        target_actor: AbstractNetwork,
        target_critic: AbstractCritic,
        key: PRNGKeyArray,
    ) -> Float[Array, " B"]:
        target_output: DeterministicAction = jax.vmap(lambda o: target_actor(o, ())[0])(transitions.next_observation)
        half_range = (target_output.high - target_output.low) / 2
        noise = jax.random.normal(key, target_output.action.shape) * self.target_noise
        noise = jnp.clip(noise, -self.target_noise_clip, self.target_noise_clip) * half_range
        next_action = jnp.clip(target_output.action + noise, target_output.low, target_output.high)
        next_values = jax.vmap(target_critic)(transitions.next_observation, next_action)
        target = transitions.reward + self.discount * transitions.discount * jnp.min(next_values, axis=-1)
        return jax.lax.stop_gradient(target)

    def __call__(
        self, critic: AbstractCritic, transitions: Transitions, targets: Float[Array, " B"]
    ) -> tuple[Float[Array, ""], LossTerms]:
        values = jax.vmap(critic)(transitions.observation, transitions.action)
        loss = critic_regression_loss(values, targets, transitions.mask)
        return loss, {"critic": loss}
