"""The PPO loss: a clipped surrogate on generalised advantages, a value regression and an entropy bonus."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._types import AbstractNetworkOutput, AbstractPolicyOutput, Trajectory
from .._validation import check_in_unit_interval, check_non_negative, check_positive
from ..agent import Agent
from ..networks import AbstractNetwork
from ..results import LossTerms
from .base import AbstractLoss, bootstrap_agent, cut_lambda_at_episode_ends, require_value, transition_mask
from .policy_gradient import ppo_clipped_surrogate
from .value_learning import generalized_advantage_estimation


@final
class PPOLoss(AbstractLoss):
    """Proximal policy optimisation: the clipped surrogate objective with GAE.

    Advantages are generalised advantage estimates from the values of the parameters
    the update starts from, those that collected the rollout (bootstrapping stopped on
    termination, one-step at a truncation), computed once per update by
    [`targets`][podrace.losses.PPOLoss.targets] before the epochs, and, with
    `normalize_advantages`, standardised over each minibatch. The policy term clips
    the ratio `pi / mu` of the learnt policy to the behaviour policy to
    `[1 - clip_epsilon, 1 + clip_epsilon]`; the value head regresses the returns
    `advantage + value` of those same values. With `clip_value`, the value term is
    the larger of the squared errors of the new value and of the new value clipped to
    `clip_epsilon` around the one the update started from, as the published PPO
    implementations (OpenAI Baselines, CleanRL, gymnax-blines) compute it. Pair it with a
    [`podrace.Learner`][] with several epochs and minibatches.

    Reference: Schulman et al., "Proximal Policy Optimization Algorithms", 2017
    (advantages computed once per rollout, then epochs of minibatch steps);
    Andrychowicz et al., "What Matters In On-Policy Reinforcement Learning?", ICLR 2021
    (per-minibatch normalisation; value clipping, which they find does not help).

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    - `lambda_`: the GAE parameter, in [0, 1].
    - `clip_epsilon`: the clipping radius of the probability ratio (> 0).
    - `value_coefficient`: the weight of the value term (>= 0).
    - `entropy_coefficient`: the weight of the entropy bonus (>= 0).
    - `normalize_advantages`: whether to standardise advantages over the minibatch.
    - `clip_value`: whether to clip the value term around the values the update
        started from (off by default).
    - `associative_scan`: whether GAE runs as an associative (log-depth) scan rather
        than a sequential one, see [`podrace.losses.discounted_returns`][].
    """

    discount: Float[Array, ""]
    lambda_: Float[Array, ""]
    clip_epsilon: Float[Array, ""]
    value_coefficient: Float[Array, ""]
    entropy_coefficient: Float[Array, ""]
    normalize_advantages: bool = eqx.field(static=True)
    clip_value: bool = eqx.field(static=True)
    associative_scan: bool = eqx.field(static=True)
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
        clip_value: bool = False,
        associative_scan: bool = False,
    ):
        self.discount = jnp.asarray(discount, jnp.float32)
        self.lambda_ = jnp.asarray(lambda_, jnp.float32)
        self.clip_epsilon = jnp.asarray(clip_epsilon, jnp.float32)
        self.value_coefficient = jnp.asarray(value_coefficient, jnp.float32)
        self.entropy_coefficient = jnp.asarray(entropy_coefficient, jnp.float32)
        self.normalize_advantages = normalize_advantages
        self.clip_value = clip_value
        self.associative_scan = associative_scan

    def __check_init__(self):
        check_in_unit_interval("PPOLoss", "discount", self.discount)
        check_in_unit_interval("PPOLoss", "lambda_", self.lambda_)
        check_positive("PPOLoss", "clip_epsilon", self.clip_epsilon)
        check_non_negative("PPOLoss", "value_coefficient", self.value_coefficient)
        check_non_negative("PPOLoss", "entropy_coefficient", self.entropy_coefficient)

    def check_output(self, output: AbstractNetworkOutput) -> None:
        require_value(self, output)

    def targets(self, agent: Agent, trajectory: Trajectory) -> tuple[Float[Array, "T B"], Float[Array, "T B"]]:
        """The advantages and the value targets of each transition, from `agent`'s values.

        **Arguments:**

        - `agent`: the network with the parameters the update starts from, and its policy.
        - `trajectory`: a time-major batch of trajectories `[T + 1, B]`.

        **Returns:**

        The generalised advantage estimates and the returns `advantage + value`, each
        `[T, B]` and constant (no gradient flows into them).
        """

        return trajectory.map_batch(lambda one: self._trajectory_targets(one, agent.outputs(one)), out_axes=1)

    def __call__(
        self,
        agent: Agent,
        trajectory: Trajectory,
        *,
        targets: tuple[Float[Array, "T B"], Float[Array, "T B"]] | None = None,
        axis_name: str | None = None,
        target_network: AbstractNetwork | None = None,
    ) -> tuple[Float[Array, ""], LossTerms]:
        if targets is None and target_network is not None:
            targets = self.targets(bootstrap_agent(agent, target_network), trajectory)
        parts = trajectory.map_batch(lambda one, targets: self._parts(agent, one, targets), targets)
        log_pi, log_mu, advantages, returns, values, mask, entropy = (x.ravel() for x in parts)
        returns, advantages = jax.lax.stop_gradient((returns, advantages))
        value_errors = jnp.square(returns - values)
        if self.clip_value:
            # The values the update started from, those the targets were computed with.
            old_values = returns - advantages
            clipped = old_values + jnp.clip(values - old_values, -self.clip_epsilon, self.clip_epsilon)
            value_errors = jnp.maximum(value_errors, jnp.square(returns - clipped))
        if self.normalize_advantages:
            advantages = _standardized(advantages, mask, axis_name)
        policy_loss = ppo_clipped_surrogate(log_pi, log_mu, advantages, self.clip_epsilon, weights=mask)
        value_loss = 0.5 * jnp.mean(mask * value_errors)
        entropy = jnp.mean(mask * entropy)
        loss = policy_loss + self.value_coefficient * value_loss - self.entropy_coefficient * entropy
        return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}

    def _trajectory_targets(
        self, trajectory: Trajectory, outputs: AbstractNetworkOutput
    ) -> tuple[Float[Array, " T"], Float[Array, " T"]]:
        """The advantages and the returns of one trajectory, from the values in `outputs`."""
        values = jax.lax.stop_gradient(require_value(self, outputs))
        timestep = trajectory.timestep
        advantages = generalized_advantage_estimation(
            r_t=timestep.reward[1:],
            discount_t=self.discount * timestep.discount[1:],
            lambda_=cut_lambda_at_episode_ends(self.lambda_, trajectory),
            values=values,
            associative_scan=self.associative_scan,
        )
        return advantages, advantages + values[:-1]

    def _parts(
        self,
        agent: Agent,
        trajectory: Trajectory,
        targets: tuple[Float[Array, " T"], Float[Array, " T"]] | None,
    ) -> tuple[Float[Array, " T"], ...]:
        """Per transition: log pi, log mu, the advantage, the return, the value, the mask and the entropy."""
        if targets is None:
            outputs = agent.outputs(trajectory)
            advantages, returns = self._trajectory_targets(trajectory, outputs)
        else:
            # The targets hold what the last time step's value was needed for: the network
            # runs on the first T time steps only (half the work on one-step transitions).
            outputs = agent.outputs(trajectory.without_last_step())
            advantages, returns = targets
        values = require_value(self, outputs)[: len(advantages)]
        log_pi, entropy = agent.log_prob_and_entropy(outputs, trajectory.policy_step.action)
        log_mu = trajectory.policy_step.log_prob
        return log_pi, log_mu, advantages, returns, values, transition_mask(trajectory), entropy


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
