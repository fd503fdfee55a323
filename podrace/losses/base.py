"""The loss family's base: what a loss is, how a per-trajectory loss is averaged over a
batch, and the masks and helpers its members share."""

import abc
from collections.abc import Callable
from typing import Any, ClassVar, cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, PyTree

from .._types import AbstractNetworkOutput, QValues, Trajectory
from ..agent import Agent
from ..networks import AbstractNetwork
from ..results import LossTerms
from .value_learning import discounted_returns


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


class AbstractQLoss(AbstractLoss):
    """A loss on action values that may bootstrap from a target network.

    Subclasses implement `trajectory_loss` for one trajectory; calling the module
    averages it over a batch. Without a target network (on-policy use in a
    [`podrace.Learner`][]) the online network bootstraps, its targets held constant; a
    [`podrace.learners.DQNLearner`][] passes its target network.
    """

    input_type = QValues

    @abc.abstractmethod
    def trajectory_loss(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        """The loss of one unbatched trajectory `[T + 1]` and its named terms.

        **Arguments:**

        - `agent`: the network whose parameters are being learnt, and its policy.
        - `trajectory`: one trajectory.
        - `target_network`: a slowly updated copy to bootstrap from, or `None`.
        """

    def __call__(
        self,
        agent: Agent,
        trajectory: Trajectory,
        *,
        targets: PyTree[Float[Array, "T B"]] = None,
        axis_name: str | None = None,
        target_network: AbstractNetwork | None = None,
    ) -> tuple[Float[Array, ""], LossTerms]:
        """As [`podrace.losses.AbstractLoss`][], bootstrapping from `target_network` if given."""
        # Nothing is computed ahead (`targets` is None); a mean of equal shares needs
        # nothing from the other devices.
        del targets, axis_name
        return mean_over_trajectories(lambda one: self.trajectory_loss(agent, one, target_network), trajectory)

    def q_values(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None
    ) -> tuple[Float[Array, "time num_actions"], Float[Array, "time-1 num_actions"]]:
        """The online action values of time steps `0..T`, and those to bootstrap from at `1..T`."""
        q_values = cast(QValues, agent.outputs(trajectory)).q_values
        if target_network is None:
            return q_values, q_values[1:]
        return q_values, cast(QValues, Agent(target_network, agent.policy).outputs(trajectory)).q_values[1:]
