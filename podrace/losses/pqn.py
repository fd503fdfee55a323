"""PQN: Q-learning with Q(lambda) returns computed once per rollout, for epochs of minibatches."""

from typing import cast, final

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._types import AbstractNetworkOutput, QValues, Trajectory
from .._validation import check_in_unit_interval
from ..agent import Agent
from ..networks import AbstractNetwork
from ..results import LossTerms
from .base import AbstractLoss, bootstrap_agent, cut_lambda_at_episode_ends, transition_mask
from .value_learning import greedy_value, lambda_returns


@final
class PQNLoss(AbstractLoss):
    """PQN's loss: `Q(s_t, a_t)` regressed onto Peng's Q(lambda) returns held fixed for the update.

    The returns follow the paper's recursion
    `G_t = r_{t+1} + discount * d_{t+1} * ((1 - lambda) max_a Q(s_{t+1}, a) + lambda G_{t+1})`,
    bootstrapping from `max_a Q` alone at the rollout's end and at a truncation, and from
    nothing at a termination (`d = 0`). As [`targets`][podrace.losses.PQNLoss.targets]
    they are computed once per update, from the parameters that collected the rollout,
    before a [`podrace.Learner`][] takes its epochs of minibatches (of single transitions
    with `minibatches_of="transitions"`); the loss is `0.5 * mean((G_t - Q(s_t, a_t))^2)`.
    PQN itself is this loss in a [`podrace.Learner`][], with an
    [`podrace.policies.EpsilonGreedy`][] on a schedule and a Q-network whose layers are
    normalised (`MLPTorso(..., layer_norm=True)`), with no replay and no target network.

    Reference: Gallici et al., "Simplifying Deep Temporal Difference Learning", ICLR 2025;
    Peng & Williams, "Incremental Multi-Step Q-Learning", Machine Learning 22, 1996.

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    - `lambda_`: the trace coefficient, in [0, 1].
    """

    discount: Float[Array, ""]
    lambda_: Float[Array, ""]
    input_type = QValues

    def __init__(self, *, discount: ArrayLike, lambda_: ArrayLike):
        self.discount = jnp.asarray(discount, jnp.float32)
        self.lambda_ = jnp.asarray(lambda_, jnp.float32)

    def __check_init__(self):
        check_in_unit_interval("PQNLoss", "discount", self.discount)
        check_in_unit_interval("PQNLoss", "lambda_", self.lambda_)

    def check_output(self, output: AbstractNetworkOutput) -> None:
        del output  # action values are all it reads

    def targets(self, agent: Agent, trajectory: Trajectory) -> Float[Array, "T B"]:
        """The Q(lambda) return of each transition `[T, B]`, from `agent`'s action values
        (constant: no gradient flows into them)."""
        return trajectory.map_batch(self._returns, agent.batch_outputs(trajectory), out_axes=1)

    def __call__(
        self,
        agent: Agent,
        trajectory: Trajectory,
        *,
        targets: Float[Array, "T B"] | None = None,
        axis_name: str | None = None,
        target_network: AbstractNetwork | None = None,
    ) -> tuple[Float[Array, ""], LossTerms]:
        del axis_name  # a mean of equal shares
        if targets is None:
            targets = self.targets(bootstrap_agent(agent, target_network), trajectory)

        # The returns hold what the last time step was needed for: the network runs on the
        # first T time steps only.
        first_steps = jax.tree.map(lambda x: x[:-1], trajectory.timestep)
        outputs = agent.batch_outputs(Trajectory(first_steps, trajectory.policy_step, trajectory.carry))
        action = trajectory.policy_step.action
        values = jnp.take_along_axis(cast(QValues, outputs).q_values, action[..., None], axis=-1)[..., 0]
        mask = trajectory.map_batch(transition_mask, out_axes=1)
        td_loss = 0.5 * jnp.mean(mask * jnp.square(jax.lax.stop_gradient(targets) - values))
        return td_loss, {"td_loss": td_loss}

    def _returns(self, trajectory: Trajectory, outputs: AbstractNetworkOutput) -> Float[Array, " T"]:
        q_values = jax.lax.stop_gradient(cast(QValues, outputs).q_values)
        timestep = trajectory.timestep
        return lambda_returns(
            timestep.reward[1:],
            self.discount * timestep.discount[1:],
            greedy_value(q_values[1:]),
            cut_lambda_at_episode_ends(self.lambda_, trajectory),
        )
