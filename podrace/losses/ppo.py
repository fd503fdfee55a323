"""The PPO loss: a clipped surrogate on generalised advantages, a value regression and an entropy bonus."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._types import AbstractNetworkOutput, AbstractPolicyOutput, Trajectory
from .._validation import check_in_unit_interval, check_non_negative, check_positive
from ..agent import Agent
from ..results import LossTerms
from .modules import AbstractLoss, cut_lambda_at_episode_ends, require_value, transition_mask
from .policy_gradient import ppo_clipped_surrogate
from .value_learning import generalized_advantage_estimation


@final
class PPOLoss(AbstractLoss):
    """Proximal policy optimisation: the clipped surrogate objective with GAE.

    Advantages are generalised advantage estimates from the network's own values
    (bootstrapping stopped on termination, one-step at a truncation), computed afresh
    for every minibatch and, with `normalize_advantages`, standardised over it. The
    policy term clips the ratio `pi / mu` of the learnt policy to the behaviour policy
    to `[1 - clip_epsilon, 1 + clip_epsilon]`; the value head regresses the returns
    `advantage + value`. Pair it with a [`podrace.Learner`][] with several epochs and
    minibatches.

    Reference: Schulman et al., "Proximal Policy Optimization Algorithms", 2017;
    Andrychowicz et al., "What Matters In On-Policy Reinforcement Learning?", ICLR 2021
    (advantages recomputed each pass, per-minibatch normalisation, no value clipping).

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    - `lambda_`: the GAE parameter, in [0, 1].
    - `clip_epsilon`: the clipping radius of the probability ratio (> 0).
    - `value_coefficient`: the weight of the value term (>= 0).
    - `entropy_coefficient`: the weight of the entropy bonus (>= 0).
    - `normalize_advantages`: whether to standardise advantages over the minibatch.
    """

    discount: Float[Array, ""]
    lambda_: Float[Array, ""]
    clip_epsilon: Float[Array, ""]
    value_coefficient: Float[Array, ""]
    entropy_coefficient: Float[Array, ""]
    normalize_advantages: bool = eqx.field(static=True)
    input_type = AbstractPolicyOutput

    def __init__(
        self,
        *,
        discount: ArrayLike,
        lambda_: ArrayLike = 0.95,
        clip_epsilon: ArrayLike = 0.2,
        value_coefficient: ArrayLike = 0.5,
        entropy_coefficient: ArrayLike = 0.01,
        normalize_advantages: bool = True,
    ):
        self.discount = jnp.asarray(discount, jnp.float32)
        self.lambda_ = jnp.asarray(lambda_, jnp.float32)
        self.clip_epsilon = jnp.asarray(clip_epsilon, jnp.float32)
        self.value_coefficient = jnp.asarray(value_coefficient, jnp.float32)
        self.entropy_coefficient = jnp.asarray(entropy_coefficient, jnp.float32)
        self.normalize_advantages = normalize_advantages

    def __check_init__(self):
        check_in_unit_interval("PPOLoss", "discount", self.discount)
        check_in_unit_interval("PPOLoss", "lambda_", self.lambda_)
        check_positive("PPOLoss", "clip_epsilon", self.clip_epsilon)
        check_non_negative("PPOLoss", "value_coefficient", self.value_coefficient)
        check_non_negative("PPOLoss", "entropy_coefficient", self.entropy_coefficient)

    def check_output(self, output: AbstractNetworkOutput) -> None:
        require_value(self, output)

    def __call__(
        self, agent: Agent, trajectory: Trajectory, *, axis_name: str | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        parts = jax.vmap(lambda t, p, c: self._parts(agent, Trajectory(t, p, c)), in_axes=(1, 1, 0))(
            trajectory.timestep, trajectory.policy_step, trajectory.carry
        )
        log_pi, log_mu, advantages, values, mask, entropy = (x.ravel() for x in parts)
        returns = jax.lax.stop_gradient(advantages + values)
        if self.normalize_advantages:
            advantages = _standardized(advantages, mask, axis_name)
        policy_loss = ppo_clipped_surrogate(log_pi, log_mu, advantages, self.clip_epsilon, weights=mask)
        value_loss = 0.5 * jnp.mean(mask * jnp.square(returns - values))
        entropy = jnp.mean(mask * entropy)
        loss = policy_loss + self.value_coefficient * value_loss - self.entropy_coefficient * entropy
        return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}

    def _parts(self, agent: Agent, trajectory: Trajectory) -> tuple[Float[Array, " T"], ...]:
        """Per transition: log pi, log mu, the advantage, the value, the mask and the entropy."""
        timestep = trajectory.timestep
        outputs = agent.outputs(trajectory)
        values = require_value(self, outputs)
        advantages = generalized_advantage_estimation(
            r_t=timestep.reward[1:],
            discount_t=self.discount * timestep.discount[1:],
            lambda_=cut_lambda_at_episode_ends(self.lambda_, trajectory),
            values=jax.lax.stop_gradient(values),
        )
        log_pi, entropy = agent.log_prob_and_entropy(outputs, trajectory.policy_step.action)
        log_mu = trajectory.policy_step.log_prob
        return log_pi, log_mu, advantages, values[:-1], transition_mask(trajectory), entropy


def _standardized(
    advantages: Float[Array, " N"], mask: Float[Array, " N"], axis_name: str | None
) -> Float[Array, " N"]:
    """Advantages standardised by the mean and standard deviation of the masked ones.

    The statistics are those of the whole minibatch: summed over the device axis when
    the batch is split over devices, so that the result does not depend on the split.
    """

    def total(x: Array) -> Array:
        x = jnp.sum(x)
        return x if axis_name is None else jax.lax.psum(x, axis_name)

    count = jnp.maximum(total(mask), 1.0)
    mean = total(mask * advantages) / count
    std = jnp.sqrt(total(mask * jnp.square(advantages - mean)) / count)
    return (advantages - mean) / (std + 1e-8)
