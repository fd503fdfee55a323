"""Advantage actor-critic."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._types import AbstractNetworkOutput, AbstractPolicyOutput, Trajectory
from .._validation import as_float_array, check_in_unit_interval, check_non_negative
from ..agent import Agent
from ..networks import AbstractNetwork
from ..results import LossTerms
from .base import (
    AbstractTrajectoryLoss,
    bootstrap_values,
    cut_lambda_at_episode_ends,
    require_value,
    transition_mask,
)
from .policy_gradient import clamped_importance_weights, policy_gradient_loss
from .value_learning import lambda_returns


@final
class A2CLoss(AbstractTrajectoryLoss):
    """Advantage actor-critic: a policy-gradient term, a value regression and an entropy bonus.

    The value head regresses lambda-returns (bootstrapped from its own estimates, or
    a target network's where the learner passes one; stopped on termination,
    one-step at a truncation); the advantage is the return
    minus the value. The policy term weights each `log pi(a_t | s_t)` by its
    advantage and by the importance weight `pi / mu` of the learnt policy over the
    behaviour policy, clamped at 1 (1 on-policy; it bounds the update when the acting
    parameters lag, as on a host collector).

    Reference: Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning",
    ICML 2016; Espeholt et al., "IMPALA", ICML 2018 (clamped importance weights).

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    - `lambda_`: the mixing of the value targets (1: n-step returns over the rollout).
    - `value_coefficient`: the weight of the value term (>= 0).
    - `entropy_coefficient`: the weight of the entropy bonus (>= 0).
    """

    discount: Float[Array, ""] = eqx.field(converter=as_float_array, kw_only=True)
    lambda_: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)
    value_coefficient: Float[Array, ""] = eqx.field(default=0.5, converter=as_float_array, kw_only=True)
    entropy_coefficient: Float[Array, ""] = eqx.field(default=0.01, converter=as_float_array, kw_only=True)
    input_type = AbstractPolicyOutput

    def __check_init__(self):
        check_in_unit_interval("A2CLoss", "discount", self.discount)
        check_in_unit_interval("A2CLoss", "lambda_", self.lambda_)
        check_non_negative("A2CLoss", "value_coefficient", self.value_coefficient)
        check_non_negative("A2CLoss", "entropy_coefficient", self.entropy_coefficient)

    def check_output(self, output: AbstractNetworkOutput) -> None:
        require_value(self, output)

    def trajectory_loss(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        timestep = trajectory.timestep
        outputs = agent.outputs(trajectory)
        values = require_value(self, outputs)
        bootstrap = bootstrap_values(self, agent, trajectory, target_network, values)
        returns = lambda_returns(
            r_t=timestep.reward[1:],
            discount_t=self.discount * timestep.discount[1:],
            v_t=bootstrap[1:],
            lambda_=cut_lambda_at_episode_ends(self.lambda_, trajectory),
        )
        returns = jax.lax.stop_gradient(returns)
        mask = transition_mask(trajectory)
        log_pi, entropy = agent.log_prob_and_entropy(outputs, trajectory.policy_step.action)
        weights = mask * clamped_importance_weights(log_pi, trajectory.policy_step.log_prob)
        policy_loss = policy_gradient_loss(log_pi, returns - values[:-1], weights)
        value_loss = 0.5 * jnp.mean(mask * jnp.square(returns - values[:-1]))
        entropy = jnp.mean(mask * entropy)
        loss = policy_loss + self.value_coefficient * value_loss - self.entropy_coefficient * entropy
        return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}
