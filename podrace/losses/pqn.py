"""PQN: Q-learning with Q(lambda) returns computed once per rollout, for epochs of minibatches,
of action values or of categorical return distributions."""

from typing import cast, final

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._types import AbstractNetworkOutput, CategoricalQValues, QValues, Trajectory
from .._validation import check_in_unit_interval
from ..agent import Agent
from ..networks import AbstractNetwork
from ..results import LossTerms
from .base import AbstractLoss, at_actions, bootstrap_agent, cut_lambda_at_episode_ends, transition_mask
from .c51 import categorical_projection
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
        outputs = agent.batch_outputs(trajectory.without_last_step())
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


def categorical_lambda_returns(
    r_t: Float[Array, " T"],
    discount_t: Float[Array, " T"],
    probs_t: Float[Array, "T num_atoms"],
    lambda_t: Float[Array, " T"],
    atoms: Float[Array, " num_atoms"],
) -> Float[Array, "T num_atoms"]:
    """Lambda-returns as categorical distributions on `atoms`, bootstrapped from the last one.

    The distribution of [`podrace.losses.lambda_returns`][]'s recursion: `eta_t` is the
    mixture `(1 - lambda_t) p_t + lambda_t eta_{t+1}` (both on `atoms`), its atoms moved
    to `r_t + discount_t * atoms` and projected back onto `atoms` with
    [`podrace.losses.categorical_projection`][]; `eta_{T+1} = p_T`. While no atom is
    clipped at the support's ends, the mean of `eta_t` is the scalar lambda-return of the
    means (the projection keeps means).

    Reference: Bellemare, Dabney & Rowland, "Distributional Reinforcement Learning",
    MIT Press 2023, 6.2 (the categorical projection of a mixture is the mixture of the
    projections) and 7.6 (multi-step targets).

    **Arguments:**

    - `r_t`: rewards at times `1..T`.
    - `discount_t`: discounts at times `1..T` (the agent's discount times the env's).
    - `probs_t`: the bootstrap distributions at times `1..T` (e.g. the greedy action's).
    - `lambda_t`: one mixing coefficient per step, in [0, 1].
    - `atoms`: the evenly spaced, increasing support of every distribution.

    **Returns:**

    The target distributions for times `0..T-1`.
    """

    def backwards(following: Array, inputs: tuple[Array, Array, Array, Array]) -> tuple[Array, Array]:
        reward, discount, probs, lambda_ = inputs
        mixture = (1.0 - lambda_) * probs + lambda_ * following
        target = categorical_projection(reward + discount * atoms, mixture, atoms)
        return target, target

    _, returns = jax.lax.scan(backwards, probs_t[-1], (r_t, discount_t, probs_t, lambda_t), reverse=True)
    return returns


@final
class CategoricalPQNLoss(AbstractLoss):
    """PQN with a categorical return distribution per action (C51's head): the
    cross-entropy from `Q(s_t, a_t)`'s distribution to a categorical Q(lambda) return.

    The targets follow [`podrace.losses.PQNLoss`][]'s recursion on distributions (see
    [`podrace.losses.categorical_lambda_returns`][]): each step bootstraps from the
    distribution of the action whose expected value is greatest, from it alone at the
    rollout's end and at a truncation, and from nothing at a termination. They are
    computed once per update, from the parameters that collected the rollout, before a
    [`podrace.Learner`][] takes its epochs of minibatches; the loss is the mean
    cross-entropy `-sum_i eta_t[i] log p(s_t, a_t)[i]` over real transitions. Reads
    [`podrace.CategoricalQValues`][] (a [`podrace.networks.CategoricalQHead`][]).

    Neither PQN's authors nor another library publish this combination: it is
    [`podrace.losses.CategoricalQLoss`][]'s target carried through PQN's returns, with
    no replay and no target network.

    References: Gallici et al., "Simplifying Deep Temporal Difference Learning", ICLR
    2025; Bellemare et al., "A Distributional Perspective on Reinforcement Learning",
    ICML 2017.

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    - `lambda_`: the trace coefficient, in [0, 1].
    """

    discount: Float[Array, ""]
    lambda_: Float[Array, ""]
    input_type = CategoricalQValues

    def __init__(self, *, discount: ArrayLike, lambda_: ArrayLike):
        self.discount = jnp.asarray(discount, jnp.float32)
        self.lambda_ = jnp.asarray(lambda_, jnp.float32)

    def __check_init__(self):
        check_in_unit_interval("CategoricalPQNLoss", "discount", self.discount)
        check_in_unit_interval("CategoricalPQNLoss", "lambda_", self.lambda_)

    def check_output(self, output: AbstractNetworkOutput) -> None:
        del output  # any categorical head

    def targets(self, agent: Agent, trajectory: Trajectory) -> Float[Array, "T B num_atoms"]:
        """The categorical Q(lambda) return of each transition `[T, B, num_atoms]`, from
        `agent`'s distributions (constant: no gradient flows into them)."""
        return trajectory.map_batch(self._returns, agent.batch_outputs(trajectory), out_axes=1)

    def __call__(
        self,
        agent: Agent,
        trajectory: Trajectory,
        *,
        targets: Float[Array, "T B num_atoms"] | None = None,
        axis_name: str | None = None,
        target_network: AbstractNetwork | None = None,
    ) -> tuple[Float[Array, ""], LossTerms]:
        del axis_name  # a mean of equal shares
        if targets is None:
            targets = self.targets(bootstrap_agent(agent, target_network), trajectory)
        outputs = cast(CategoricalQValues, agent.batch_outputs(trajectory.without_last_step()))
        action = trajectory.policy_step.action
        logits = jnp.take_along_axis(outputs.logits, action[..., None, None], axis=-2)[..., 0, :]
        cross_entropy = -jnp.sum(jax.lax.stop_gradient(targets) * jax.nn.log_softmax(logits), axis=-1)
        mask = trajectory.map_batch(transition_mask, out_axes=1)
        loss = jnp.mean(mask * cross_entropy)
        return loss, {"cross_entropy": loss}

    def _returns(self, trajectory: Trajectory, outputs: AbstractNetworkOutput) -> Float[Array, "T num_atoms"]:
        values = cast(CategoricalQValues, jax.lax.stop_gradient(outputs))
        next_actions = jnp.argmax(values.q_values[1:], axis=-1)
        probs = jax.nn.softmax(at_actions(values.logits[1:], next_actions))
        timestep = trajectory.timestep
        return categorical_lambda_returns(
            timestep.reward[1:],
            self.discount * timestep.discount[1:],
            probs,
            cut_lambda_at_episode_ends(self.lambda_, trajectory),
            values.atoms[0],
        )
