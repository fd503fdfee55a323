"""Loss modules: hold coefficients and glue network outputs to the pure loss functions."""

import abc
from collections.abc import Callable
from typing import Any, ClassVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, PyTree

from .._types import AbstractNetworkOutput, AbstractPolicyOutput, Trajectory
from .._validation import check_in_unit_interval, check_non_negative
from ..agent import Agent
from ..results import LossTerms
from .policy_gradient import clamped_importance_weights, policy_gradient_loss
from .value_learning import discounted_returns, lambda_returns


class AbstractLoss(eqx.Module):
    """A differentiable objective for a time-major batch of trajectories `[T + 1, B]`.

    Losses are interchangeable: a [`podrace.Learner`][] takes any of them as one
    argument and calls it with its [`podrace.Agent`][] (the network with the parameters
    being learnt and the policy over its outputs) and a batch of trajectories.
    """

    input_type: ClassVar[type[AbstractNetworkOutput]]

    def targets(self, agent: Agent, trajectory: Trajectory) -> PyTree[Float[Array, "T B"]]:
        """What the loss takes from a batch of trajectories once, before its gradient steps.

        A [`podrace.Learner`][] with several epochs or minibatches calls it once per
        update, with the parameters the update starts from (on device, those that
        collected the batch; a host collector that overlaps acting with learning acts
        one update behind), and splits the result along the environment axis with the
        trajectories: each minibatch step then reads its share instead of recomputing
        it (PPO's advantages and value targets). The default, for losses that recompute
        everything in every step, is `None`.

        **Arguments:**

        - `agent`: the network with the parameters the update starts from, and its policy.
        - `trajectory`: a time-major batch of trajectories `[T + 1, B]`.

        **Returns:**

        A pytree of time-major arrays `[T, B]`, one entry per transition, or `None`.
        """
        del agent, trajectory
        return None

    @abc.abstractmethod
    def __call__(
        self,
        agent: Agent,
        trajectory: Trajectory,
        *,
        targets: PyTree[Float[Array, "T B"]] = None,
        axis_name: str | None = None,
    ) -> tuple[Float[Array, ""], LossTerms]:
        """The loss of a batch of trajectories.

        **Arguments:**

        - `agent`: the network whose parameters are being learnt, and its policy.
        - `trajectory`: a time-major batch of trajectories `[T + 1, B]`.
        - `targets`: this batch's share of what `targets` returned for the batch it was
            drawn from; `None` computes them here, from `agent` (the same, when `agent`
            holds the parameters the update starts from).
        - `axis_name`: inside `shard_map`, the device axis the batch is split over (for
            statistics over the whole batch); `None` outside.

        **Returns:**

        The scalar to minimise (a mean over the batch) and its named terms (for
        logging and NaN checks).
        """

    def check_output(self, output: AbstractNetworkOutput) -> None:
        """Raises `ValueError` if the loss cannot learn from `output` (e.g. it lacks a value).

        **Arguments:**

        - `output`: one network output, or its shapes (`jax.eval_shape`).
        """
        del output


class AbstractTrajectoryLoss(AbstractLoss):
    """A loss that is the mean of a loss of each trajectory of the batch."""

    @abc.abstractmethod
    def trajectory_loss(self, agent: Agent, trajectory: Trajectory) -> tuple[Float[Array, ""], LossTerms]:
        """The loss of one unbatched trajectory `[T + 1]` and its named terms."""

    def __call__(
        self,
        agent: Agent,
        trajectory: Trajectory,
        *,
        targets: PyTree[Float[Array, "T B"]] = None,
        axis_name: str | None = None,
    ) -> tuple[Float[Array, ""], LossTerms]:
        # Nothing is computed ahead (`targets` is None); a mean of equal shares needs
        # nothing from the other devices.
        del targets, axis_name
        return mean_over_trajectories(lambda one: self.trajectory_loss(agent, one), trajectory)


def mean_over_trajectories(
    trajectory_loss: Callable[[Trajectory], tuple[Float[Array, ""], LossTerms]], trajectory: Trajectory
) -> tuple[Float[Array, ""], LossTerms]:
    """The mean over a batch `[T + 1, B]` of a loss of one trajectory, and of each of its terms."""
    loss, terms = trajectory.map_batch(trajectory_loss)
    return jnp.mean(loss), jax.tree.map(jnp.mean, terms)


def require_value(loss: AbstractLoss, output: AbstractNetworkOutput) -> Any:
    """The state value(s) of `output` (arrays, or shapes under `jax.eval_shape`).

    Raises `ValueError`, naming `loss` and the fix, if the output carries none.
    """
    value = getattr(output, "value", None)
    if value is None:
        raise ValueError(
            f"{type(loss).__name__} needs state values, but the network's head emits none: build the policy "
            "head with with_value=True (PolicyLogitHead(..., with_value=True) or GaussianHead(..., with_value=True)), "
            "or use an ActorCriticNetwork."
        )
    return value


def transition_mask(trajectory: Trajectory) -> Float[Array, " T"]:
    """1 for real transitions `t -> t + 1`, 0 where `t + 1` starts a new episode.

    The step after an episode's last time step only resets the environment; no loss
    should be taken on it.
    """
    return (~trajectory.timestep.is_first[1:]).astype(jnp.float32)


def cut_lambda_at_episode_ends(lambda_: ArrayLike, trajectory: Trajectory) -> Float[Array, " T"]:
    """The trace coefficient of each transition `t -> t + 1`, cut to 0 where `t + 1` is last.

    At a termination the discount already stops bootstrapping; at a truncation the
    target must bootstrap from the final observation's value alone, never run on into
    the next episode. Every multi-step target takes its `lambda_` from here.
    """
    return jnp.asarray(lambda_, jnp.float32) * (1.0 - trajectory.timestep.is_last[1:])


@final
class A2CLoss(AbstractTrajectoryLoss):
    """Advantage actor-critic: a policy-gradient term, a value regression and an entropy bonus.

    The value head regresses lambda-returns (bootstrapped from its own estimates,
    stopped on termination, one-step at a truncation); the advantage is the return
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

    discount: Float[Array, ""]
    lambda_: Float[Array, ""]
    value_coefficient: Float[Array, ""]
    entropy_coefficient: Float[Array, ""]
    input_type = AbstractPolicyOutput

    def __init__(
        self,
        *,
        discount: ArrayLike,
        lambda_: ArrayLike = 1.0,
        value_coefficient: ArrayLike = 0.5,
        entropy_coefficient: ArrayLike = 0.01,
    ):
        self.discount = jnp.asarray(discount, jnp.float32)
        self.lambda_ = jnp.asarray(lambda_, jnp.float32)
        self.value_coefficient = jnp.asarray(value_coefficient, jnp.float32)
        self.entropy_coefficient = jnp.asarray(entropy_coefficient, jnp.float32)

    def __check_init__(self):
        check_in_unit_interval("A2CLoss", "discount", self.discount)
        check_in_unit_interval("A2CLoss", "lambda_", self.lambda_)
        check_non_negative("A2CLoss", "value_coefficient", self.value_coefficient)
        check_non_negative("A2CLoss", "entropy_coefficient", self.entropy_coefficient)

    def check_output(self, output: AbstractNetworkOutput) -> None:
        require_value(self, output)

    def trajectory_loss(self, agent: Agent, trajectory: Trajectory) -> tuple[Float[Array, ""], LossTerms]:
        timestep = trajectory.timestep
        outputs = agent.outputs(trajectory)
        values = require_value(self, outputs)
        returns = lambda_returns(
            r_t=timestep.reward[1:],
            discount_t=self.discount * timestep.discount[1:],
            v_t=values[1:],
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


def categorical_entropy(logits: Float[Array, "*batch num_actions"]) -> Float[Array, "*batch"]:
    """The entropy of the categorical distributions with these logits.

    Reference: Shannon, "A Mathematical Theory of Communication", 1948.
    """
    log_probs = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)


def completed_episode_mask(trajectory: Trajectory) -> Float[Array, " T"]:
    """1 for transitions `t -> t + 1` whose episode ends within the trajectory, else 0.

    Monte Carlo returns are only whole for those; a transition whose episode runs past
    the end of the rollout (or the reset step after an episode) gets 0.
    """
    is_last, is_first = trajectory.timestep.is_last[1:], trajectory.timestep.is_first[1:]
    # ends_t = ~first_t & (last_t | ends_{t+1}) (a reset step starts another episode), as
    # the recurrence ends_t = [~first_t & last_t] + [~first_t & ~last_t] * ends_{t+1} in {0, 1}.
    return discounted_returns(
        (~is_first & is_last).astype(jnp.float32), (~is_first & ~is_last).astype(jnp.float32), jnp.zeros(())
    )


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

    def trajectory_loss(self, agent: Agent, trajectory: Trajectory) -> tuple[Float[Array, ""], LossTerms]:
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
