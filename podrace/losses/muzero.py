"""MuZero's loss: the learnt model unrolled along the actions taken, its policies,
values and rewards learning the search's policies, n-step returns and the rewards."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PyTree

from .._types import AbstractNetworkOutput, PolicyLogits, SearchStatistics, Trajectory
from .._validation import as_float_array, check_non_negative, check_positive_int
from ..agent import Agent
from ..networks import AbstractNetwork, MuZeroNetwork, split_action_mask
from ..results import LossTerms
from .base import AbstractTrajectoryLoss, cut_lambda_at_episode_ends, require_value
from .search_policy import search_policy_cross_entropy
from .search_value import categorical_value_loss, scalar_value_loss
from .value_learning import n_step_bootstrapped_returns


@final
class MuZeroLoss(AbstractTrajectoryLoss):
    """MuZero's loss on the trajectories of a [`podrace.search.MuZeroAgent`][]: from each
    time step `t` where the agent acted, the model
    ([`podrace.networks.MuZeroNetwork`][]) represents the observation and unrolls its
    dynamics `num_unroll_steps` (`K`) steps along the actions taken; at each unrolled step
    `k` its prediction learns

    - the search's policy at `t + k` (cross-entropy, [`podrace.losses.search_policy_cross_entropy`][]),
    - the n-step return `z_{t+k}` ([`podrace.losses.n_step_bootstrapped_returns`][] of the
        rewards, with the search's discounts times the environment's, bootstrapped from
        the search's root values; from the network's value at the trajectory's last time
        step, or the target network's when given),
    - and, for `k >= 1`, the dynamics' reward the reward received at `t + k`,

    by squared error for a network of scalar values and rewards, by
    [`podrace.losses.categorical_value_loss`][] on its support for a categorical one
    (`MuZeroNetwork(..., support_size=...)`).

    Past an episode's end the targets follow the paper's absorbing states where the
    episode terminated: value and reward targets 0, no policy target. Where it was
    truncated, nothing past its last observation is learnt (the value there is also left
    out, as no one acted). Steps past the trajectory's end are left out. Each start's
    loss is the sum over its `K + 1` steps, with the gradient of the unrolled steps scaled
    by `1 / K` and that entering the dynamics by `1/2`, as in the paper; the loss is the
    mean over start times.

    Reference: Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning with
    a Learned Model", Nature 2020, eq. 1, Appendix F (categorical values and rewards, as
    for Atari) and Appendix G (scalar ones, as for board games).

    **Arguments:**

    - `num_unroll_steps`: the dynamics steps `K` unrolled from each start (static, >= 1).
    - `n_step`: the rewards summed before a value target bootstraps (static, >= 1).
    - `value_coefficient`: the weight of the value terms (>= 0; the paper's 0.25 when
        values are reused, 1 otherwise).
    """

    num_unroll_steps: int = eqx.field(default=5, static=True, kw_only=True)
    n_step: int = eqx.field(default=10, static=True, kw_only=True)
    value_coefficient: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)
    input_type = PolicyLogits

    def __check_init__(self):
        check_positive_int("MuZeroLoss", "num_unroll_steps", self.num_unroll_steps)
        check_positive_int("MuZeroLoss", "n_step", self.n_step)
        check_non_negative("MuZeroLoss", "value_coefficient", self.value_coefficient)

    def check_output(self, output: AbstractNetworkOutput) -> None:
        require_value(self, output)

    def trajectory_loss(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        network = agent.network
        if not isinstance(network, MuZeroNetwork):
            raise ValueError(
                f"MuZeroLoss unrolls a learnt model, but the network is a {type(network).__name__}: learn a "
                "podrace.search.MuZeroAgent's podrace.networks.MuZeroNetwork (or use AlphaZeroLoss for AlphaZero)."
            )
        statistics = trajectory.policy_step.extras
        if not isinstance(statistics, SearchStatistics):
            raise ValueError(
                "MuZeroLoss learns from what a search found, but the trajectory's policy steps carry "
                f"{type(statistics).__name__} in their extras: collect it with podrace.search.MuZeroAgent."
            )
        timestep = trajectory.timestep
        num_steps, steps = timestep.reward.shape[0] - 1, self.num_unroll_steps
        bootstrap_network = network if target_network is None else target_network
        last = require_value(self, bootstrap_network(_at(timestep.observation, -1), ())[0])
        bootstrap = jnp.concatenate([statistics.value[1:], last[None]])
        returns = n_step_bootstrapped_returns(
            timestep.reward[1:],
            statistics.discount * timestep.discount[1:],
            jax.lax.stop_gradient(bootstrap),
            self.n_step,
            cut_lambda_at_episode_ends(1.0, trajectory),
        )
        targets = _unroll_targets(trajectory, returns, steps)
        # Each start's window of actions a_t..a_{t+K-1}, padded past the trajectory's end.
        actions = _windows(trajectory.policy_step.action, steps, num_steps)
        observations, _ = split_action_mask(timestep.observation)
        logits, values, rewards = jax.vmap(lambda t, actions: _unroll(network, observations, t, actions))(
            jnp.arange(num_steps), actions
        )
        # The gradients of the unrolled steps scaled by 1/K (the values unchanged).
        scale = jnp.concatenate([jnp.ones(1), jnp.full(steps, 1.0 / steps)])
        policy_loss = search_policy_cross_entropy(logits, targets.policy)
        value_loss = _value_loss(network, values, targets.value)
        reward_loss = _value_loss(network, rewards, targets.reward)
        terms = {
            "policy_loss": _mean_of_sums(policy_loss, targets.policy_mask, scale),
            "value_loss": _mean_of_sums(value_loss, targets.value_mask, scale),
            "reward_loss": _mean_of_sums(reward_loss, targets.reward_mask, scale[1:]),
        }
        loss = terms["policy_loss"] + self.value_coefficient * terms["value_loss"] + terms["reward_loss"]
        return loss, terms


@final
class _UnrollTargets(eqx.Module):
    """The targets of each start `t` and unrolled step `k` (`[T, K + 1]`, rewards `[T, K]`
    for `k = 1..K`), and where each is learnt (1) or left out (0)."""

    policy: Float[Array, "T K1 num_actions"]
    policy_mask: Float[Array, "T K1"]
    value: Float[Array, "T K1"]
    value_mask: Float[Array, "T K1"]
    reward: Float[Array, "T K"]
    reward_mask: Float[Array, "T K"]


def _unroll_targets(trajectory: Trajectory, returns: Float[Array, " T"], steps: int) -> _UnrollTargets:
    """The targets of the model unrolled `steps` steps from each time step `t` where
    someone acted, with the paper's absorbing states past a termination."""
    timestep, statistics = trajectory.timestep, trajectory.policy_step.extras
    num_steps = timestep.reward.shape[0] - 1
    is_last = timestep.is_last.astype(jnp.float32)
    ends_terminated = is_last * timestep.terminated.astype(jnp.float32)
    # Along each window u = t + k, k = 0..K (past time step T as if an episode had ended).
    last = _windows(is_last, steps + 1, num_steps, fill=1.0)
    terminal = _windows(ends_terminated, steps + 1, num_steps)
    in_range = _windows(jnp.ones(num_steps), steps + 1, num_steps)  # u <= T - 1
    # alive: no episode ended at t..u-1; absorbed: the first that did was terminated.
    alive = jnp.cumprod(jnp.concatenate([jnp.ones((num_steps, 1)), 1.0 - last[:, :-1]], axis=1), axis=1)
    absorbed = jnp.concatenate([jnp.zeros((num_steps, 1)), jnp.cumsum(alive * terminal, axis=1)[:, :-1]], axis=1)
    acted = alive * (1.0 - last) * in_range  # someone acted at u, in this episode
    start = 1.0 - is_last[:-1, None]
    return _UnrollTargets(
        policy=_windows(statistics.policy, steps + 1, num_steps),
        policy_mask=start * acted,
        value=acted * _windows(returns, steps + 1, num_steps),
        value_mask=start * (acted + alive * terminal + absorbed),
        reward=alive[:, 1:] * _windows(timestep.reward[1:], steps, num_steps),
        reward_mask=start * (alive[:, 1:] * in_range[:, :-1] + absorbed[:, 1:]),
    )


def _windows(x: Array, length: int, num_starts: int, *, fill: float = 0.0) -> Array:
    """`x[t:t + length]` for each `t` of `0..num_starts-1`, `fill` past the end of `x`."""
    padded = jnp.concatenate([x, jnp.full((length, *x.shape[1:]), fill, x.dtype)])
    return jax.vmap(lambda t: jax.lax.dynamic_slice_in_dim(padded, t, length))(jnp.arange(num_starts))


def _value_loss(network: MuZeroNetwork, outputs: Array, targets: Float[Array, "*batch"]) -> Float[Array, "*batch"]:
    """The loss of the network's value or reward outputs (scalars or atoms' logits)."""
    support = network.support
    if support is None:
        return scalar_value_loss(outputs, targets)
    return categorical_value_loss(outputs, targets, support)


def _unroll(
    network: MuZeroNetwork, observations: PyTree[Array], t: Int[Array, ""], actions: Int[Array, " K"]
) -> tuple[Float[Array, "K1 num_actions"], Array, Array]:
    """The model from observation `t`, unrolled along `actions`: the policy logits and
    value outputs of its `K + 1` latent states and the reward outputs of its `K` steps
    (scalars, or the logits of their supports' atoms)."""
    latent = network.represent(_at(observations, t))

    def step(latent: Array, action: Array) -> tuple[Array, tuple[Array, Array]]:
        latent, reward = network.transition_outputs(_scale_gradient(latent, 0.5), action)
        return latent, (latent, reward)

    _, (latents, rewards) = jax.lax.scan(step, latent, actions)
    logits, values = jax.vmap(network.prediction_outputs)(jnp.concatenate([latent[None], latents]))
    return logits, values, rewards


def _at(observations: PyTree[Array], t: Int[Array, ""] | int) -> PyTree[Array]:
    """Observation `t` of a sequence (any pytree)."""
    return jax.tree.map(lambda x: x[t], observations)


def _scale_gradient(x: Array, scale: float | Array) -> Array:
    """`x`, with its gradient multiplied by `scale`."""
    return scale * x + (1.0 - scale) * jax.lax.stop_gradient(x)


def _mean_of_sums(loss: Float[Array, "T K"], mask: Float[Array, "T K"], scale: Float[Array, " K"]) -> Float[Array, ""]:
    """The mean over start times of the masked sum over unrolled steps, each step's
    gradient scaled by `scale`."""
    return jnp.mean(jnp.sum(_scale_gradient(mask * loss, scale[None]), axis=1))
