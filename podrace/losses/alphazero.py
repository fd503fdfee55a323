"""AlphaZero's loss: the network's policy learns the search's, its value the returns."""

from typing import cast, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._types import AbstractNetworkOutput, PolicyLogits, SearchStatistics, Trajectory
from .._validation import as_float_array, check_in_unit_interval, check_non_negative, check_positive_int
from ..agent import Agent
from ..networks import AbstractNetwork, split_action_mask
from ..results import LossTerms
from .base import AbstractTrajectoryLoss, bootstrap_values, cut_lambda_at_episode_ends, require_value
from .search_policy import search_policy_cross_entropy
from .search_value import scalar_value_loss
from .value_learning import n_step_bootstrapped_returns


@final
class AlphaZeroLoss(AbstractTrajectoryLoss):
    """AlphaZero's loss on the trajectories of a search agent: the cross-entropy from the
    network's policy to the search's, plus `value_coefficient` times the squared error of
    the network's value to n-step (or TD(lambda)) returns.

    The search's policy and the discount of each step taken come from the trajectory's
    [`podrace.SearchStatistics`][] (`policy_step.extras`). The value targets are
    [`podrace.losses.n_step_bootstrapped_returns`][] of the rewards, with the search's
    discounts (the agent's discount, 0 where a game ends, and -1 where the player to move
    changes: in a two-player zero-sum game a value is that of the player to move, so the
    next player's value is negated) times the environment's, bootstrapped from the
    network's own values, held constant; they are cut at each episode's end. The steps
    where no one acts (an episode's last time step) take no loss.

    With `n_step=None` the returns run to the end of the rollout: Monte Carlo returns
    (AlphaZero's game outcome `z`) for the episodes that end inside it.

    Reference: Silver et al., "A general reinforcement learning algorithm that masters
    chess, shogi, and Go through self-play", Science 2018 (`(z - v)^2 - pi^T log p`);
    Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning with a Learned
    Model", Nature 2020 (n-step value targets).

    **Arguments:**

    - `n_step`: the rewards summed before a target bootstraps (static); `None` for the
        whole rollout.
    - `lambda_`: the mixing of the n-step targets (1: plain n-step returns; below 1,
        TD(lambda) truncated after `n_step`).
    - `value_coefficient`: the weight of the value term (>= 0).
    """

    n_step: int | None = eqx.field(default=None, static=True, kw_only=True)
    lambda_: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)
    value_coefficient: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)
    input_type = PolicyLogits

    def __check_init__(self):
        if self.n_step is not None:
            check_positive_int("AlphaZeroLoss", "n_step", self.n_step)
        check_in_unit_interval("AlphaZeroLoss", "lambda_", self.lambda_)
        check_non_negative("AlphaZeroLoss", "value_coefficient", self.value_coefficient)

    def check_output(self, output: AbstractNetworkOutput) -> None:
        require_value(self, output)

    def trajectory_loss(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        statistics = trajectory.policy_step.extras
        if not isinstance(statistics, SearchStatistics):
            raise ValueError(
                "AlphaZeroLoss learns from what a search found, but the trajectory's policy steps carry "
                f"{type(statistics).__name__} in their extras: collect it with a search agent "
                "(podrace.search.AlphaZeroAgent, in podrace.learners.AlphaZeroLearner)."
            )
        timestep = trajectory.timestep
        outputs = cast(PolicyLogits, agent.outputs(trajectory))
        values = require_value(self, outputs)
        bootstrap = bootstrap_values(self, agent, trajectory, target_network, values)
        num_steps = timestep.reward.shape[0] - 1
        returns = n_step_bootstrapped_returns(
            timestep.reward[1:],
            statistics.discount * timestep.discount[1:],
            jax.lax.stop_gradient(bootstrap[1:]),
            num_steps if self.n_step is None else self.n_step,
            cut_lambda_at_episode_ends(self.lambda_, trajectory),
        )
        acting = (~timestep.is_last[:-1]).astype(jnp.float32)
        _, action_mask = split_action_mask(timestep.observation)
        policy_loss = jnp.mean(
            acting
            * search_policy_cross_entropy(
                outputs.logits[:-1], statistics.policy, action_mask=None if action_mask is None else action_mask[:-1]
            )
        )
        value_loss = jnp.mean(acting * scalar_value_loss(values[:-1], returns))
        loss = policy_loss + self.value_coefficient * value_loss
        return loss, {"policy_loss": policy_loss, "value_loss": value_loss}
