"""REINFORCE: the policy gradient of Monte Carlo returns."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._types import AbstractNetworkOutput, AbstractPolicyOutput, Trajectory
from .._validation import check_in_unit_interval, check_non_negative
from ..agent import Agent
from ..networks import AbstractNetwork
from ..results import LossTerms
from .base import AbstractTrajectoryLoss, completed_episode_mask, refuse_target_network, require_value
from .policy_gradient import clamped_importance_weights, policy_gradient_loss
from .value_learning import lambda_returns


@final
class ReinforceLoss(AbstractTrajectoryLoss):
    """REINFORCE: the policy gradient of whole-episode Monte Carlo returns.

    Each `log pi(a_t | s_t)` is weighted by the discounted return from `t` to the end
    of its episode, for the transitions whose episode ends within the rollout (see
    [`podrace.losses.completed_episode_mask`][]; choose a rollout longer than the
    episodes). With `baseline`, the network's value head is regressed on those returns
    and subtracted from them. Importance weights `pi / mu` are clamped at 1, as in
    [`podrace.losses.A2CLoss`][].

    Reference: Williams, "Simple statistical gradient-following algorithms for
    connectionist reinforcement learning", Machine Learning 8, 1992.

    **Arguments:**

    - `discount`: the discount of the returns, in [0, 1].
    - `baseline`: whether to subtract a learnt state value (needs a value head).
    - `value_coefficient`: the weight of the baseline's regression (>= 0).
    - `entropy_coefficient`: the weight of the entropy bonus (>= 0).
    """

    discount: Float[Array, ""]
    value_coefficient: Float[Array, ""]
    entropy_coefficient: Float[Array, ""]
    baseline: bool = eqx.field(static=True)
    input_type = AbstractPolicyOutput

    def __init__(
        self,
        *,
        discount: ArrayLike,
        baseline: bool = False,
        value_coefficient: ArrayLike = 0.5,
        entropy_coefficient: ArrayLike = 0.0,
    ):
        self.discount = jnp.asarray(discount, jnp.float32)
        self.value_coefficient = jnp.asarray(value_coefficient, jnp.float32)
        self.entropy_coefficient = jnp.asarray(entropy_coefficient, jnp.float32)
        self.baseline = baseline

    def __check_init__(self):
        check_in_unit_interval("ReinforceLoss", "discount", self.discount)
        check_non_negative("ReinforceLoss", "value_coefficient", self.value_coefficient)
        check_non_negative("ReinforceLoss", "entropy_coefficient", self.entropy_coefficient)

    def check_output(self, output: AbstractNetworkOutput) -> None:
        if self.baseline:
            require_value(self, output)

    def trajectory_loss(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        refuse_target_network(self, target_network)
        timestep = trajectory.timestep
        outputs = agent.outputs(trajectory)
        # Returns restart at every episode end: nothing is bootstrapped past it.
        returns = lambda_returns(
            r_t=timestep.reward[1:],
            discount_t=self.discount * (1.0 - timestep.is_last[1:]),
            v_t=jnp.zeros_like(timestep.reward[1:]),
        )
        mask = completed_episode_mask(trajectory)
        terms = {}
        advantages = returns
        if self.baseline:
            values = require_value(self, outputs)[:-1]
            advantages = returns - jax.lax.stop_gradient(values)
            terms["value_loss"] = 0.5 * jnp.mean(mask * jnp.square(returns - values))
        log_pi, entropy = agent.log_prob_and_entropy(outputs, trajectory.policy_step.action)
        weights = mask * clamped_importance_weights(log_pi, trajectory.policy_step.log_prob)
        terms["policy_loss"] = policy_gradient_loss(log_pi, advantages, weights)
        terms["entropy"] = jnp.mean(mask * entropy)
        loss = terms["policy_loss"] - self.entropy_coefficient * terms["entropy"]
        if self.baseline:
            loss = loss + self.value_coefficient * terms["value_loss"]
        return loss, terms
