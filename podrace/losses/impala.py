"""V-trace: off-policy corrected value targets and policy-gradient advantages, and the IMPALA loss."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._types import AbstractNetworkOutput, AbstractPolicyOutput, Trajectory
from .._validation import as_float_array, check_in_unit_interval, check_non_negative, check_positive
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
from .value_learning import discounted_returns


def vtrace(
    r_t: Float[Array, " T"],
    discount_t: Float[Array, " T"],
    values: Float[Array, " T+1"],
    log_pi_t: Float[Array, " T"],
    log_mu_t: Float[Array, " T"],
    lambda_: ArrayLike = 1.0,
    *,
    rho_bar: ArrayLike = 1.0,
    c_bar: ArrayLike = 1.0,
    pg_rho_bar: ArrayLike = 1.0,
    associative_scan: bool = False,
) -> tuple[Float[Array, " T"], Float[Array, " T"]]:
    """V-trace value targets and policy-gradient advantages along a trajectory.

    With the truncated importance weights `rho_s = min(rho_bar, pi_s / mu_s)` and
    `c_s = lambda_s * min(c_bar, pi_s / mu_s)`, the targets are
    `v_s = values_s + delta_s + discount_s * c_s * (v_{s+1} - values_{s+1})`, with
    `delta_s = rho_s * (r_s + discount_s * values_{s+1} - values_s)` and `v_T = values_T`.
    The advantages are `min(pg_rho_bar, pi_s / mu_s) * (r_s + discount_s * q_s - values_s)`
    with `q_s = (1 - lambda_s) * values_{s+1} + lambda_s * v_{s+1}`. On-policy (`pi = mu`)
    the targets are the [`podrace.losses.lambda_returns`][] of `values`. A `discount_t` of 0
    (termination) stops bootstrapping; at a truncation pass a discount of 1 and a
    `lambda_t` of 0, so that the target bootstraps from `values_{s+1}` there. No gradient
    flows through the importance weights; gradients flow from `values` into both outputs
    (pass `jax.lax.stop_gradient(values)` for constant targets, as IMPALA does).

    Reference: Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance
    Weighted Actor-Learner Architectures", ICML 2018, section 4.

    **Arguments:**

    - `r_t`: rewards at times `1..T`.
    - `discount_t`: discounts at times `1..T` (the agent's discount times the env's).
    - `values`: value estimates at times `0..T`.
    - `log_pi_t`: log-probabilities of the actions taken at times `0..T-1`, under the
      policy being learnt.
    - `log_mu_t`: log-probabilities of the same actions under the behaviour policy.
    - `lambda_`: a scalar or one trace coefficient per step, in [0, 1].
    - `rho_bar`: the truncation of the importance weights of the TD errors (> 0).
    - `c_bar`: the truncation of the trace coefficients (> 0).
    - `pg_rho_bar`: the truncation of the importance weights of the advantages (> 0).
    - `associative_scan`: as in [`podrace.losses.discounted_returns`][], which runs the
      backward recurrence of the corrections `v_s - values_s`.

    **Returns:**

    The value targets and the policy-gradient advantages for times `0..T-1`.
    """
    lambda_ = jnp.broadcast_to(jnp.asarray(lambda_, values.dtype), r_t.shape)
    rho = clamped_importance_weights(log_pi_t, log_mu_t, rho_bar)
    c = lambda_ * clamped_importance_weights(log_pi_t, log_mu_t, c_bar)
    deltas = rho * (r_t + discount_t * values[1:] - values[:-1])
    zero = jnp.zeros((), values.dtype)
    corrections = discounted_returns(deltas, discount_t * c, zero, associative_scan=associative_scan)
    targets = values[:-1] + corrections
    # `v_{s+1} - values_{s+1}` is the next step's correction, 0 after the last step.
    next_corrections = jnp.concatenate([corrections[1:], jnp.zeros_like(corrections[:1])])
    q = r_t + discount_t * (values[1:] + lambda_ * next_corrections)
    advantages = clamped_importance_weights(log_pi_t, log_mu_t, pg_rho_bar) * (q - values[:-1])
    return targets, advantages


@final
class VTraceLoss(AbstractTrajectoryLoss):
    """IMPALA's actor-critic loss: V-trace off-policy corrections of A2C's terms.

    The value head regresses the [`podrace.losses.vtrace`][] targets of its own
    (stopped) estimates, with the importance weights `pi / mu` of the learnt policy over
    the behaviour policy that acted (its log-probabilities are stored in the
    trajectory); the policy term weights each `log pi(a_t | s_t)` by the V-trace
    advantage; an entropy bonus is added. Bootstrapping stops on termination and is
    one-step at a truncation. On-policy, with thresholds of at least 1, it is
    [`podrace.losses.A2CLoss`][]; when the acting parameters lag (a host collector) or
    over several epochs, the truncated weights correct the targets and bound the updates.

    Reference: Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance
    Weighted Actor-Learner Architectures", ICML 2018.

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    - `lambda_`: the trace coefficient of V-trace, in [0, 1].
    - `rho_bar`: the truncation of the importance weights of the TD errors (> 0).
    - `c_bar`: the truncation of the trace coefficients (> 0).
    - `pg_rho_bar`: the truncation of the importance weights of the advantages (> 0).
    - `value_coefficient`: the weight of the value term, IMPALA's baseline cost (>= 0).
    - `entropy_coefficient`: the weight of the entropy bonus (>= 0).
    """

    discount: Float[Array, ""] = eqx.field(converter=as_float_array, kw_only=True)
    lambda_: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)
    rho_bar: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)
    c_bar: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)
    pg_rho_bar: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)
    value_coefficient: Float[Array, ""] = eqx.field(default=0.5, converter=as_float_array, kw_only=True)
    entropy_coefficient: Float[Array, ""] = eqx.field(default=0.01, converter=as_float_array, kw_only=True)
    input_type = AbstractPolicyOutput

    def __check_init__(self):
        check_in_unit_interval("VTraceLoss", "discount", self.discount)
        check_in_unit_interval("VTraceLoss", "lambda_", self.lambda_)
        check_positive("VTraceLoss", "rho_bar", self.rho_bar)
        check_positive("VTraceLoss", "c_bar", self.c_bar)
        check_positive("VTraceLoss", "pg_rho_bar", self.pg_rho_bar)
        check_non_negative("VTraceLoss", "value_coefficient", self.value_coefficient)
        check_non_negative("VTraceLoss", "entropy_coefficient", self.entropy_coefficient)

    def check_output(self, output: AbstractNetworkOutput) -> None:
        require_value(self, output)

    def trajectory_loss(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        timestep = trajectory.timestep
        outputs = agent.outputs(trajectory)
        values = require_value(self, outputs)
        log_pi, entropy = agent.log_prob_and_entropy(outputs, trajectory.policy_step.action)
        targets, advantages = vtrace(
            r_t=timestep.reward[1:],
            discount_t=self.discount * timestep.discount[1:],
            values=jax.lax.stop_gradient(bootstrap_values(self, agent, trajectory, target_network, values)),
            log_pi_t=log_pi,
            log_mu_t=trajectory.policy_step.log_prob,
            lambda_=cut_lambda_at_episode_ends(self.lambda_, trajectory),
            rho_bar=self.rho_bar,
            c_bar=self.c_bar,
            pg_rho_bar=self.pg_rho_bar,
        )
        mask = transition_mask(trajectory)
        policy_loss = policy_gradient_loss(log_pi, advantages, mask)
        value_loss = 0.5 * jnp.mean(mask * jnp.square(targets - values[:-1]))
        entropy = jnp.mean(mask * entropy)
        loss = policy_loss + self.value_coefficient * value_loss - self.entropy_coefficient * entropy
        return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}
