"""QR-DQN: distributional Q-learning by quantile regression."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float

from .._types import QuantileQValues, Trajectory
from .._validation import check_in_unit_interval, check_positive
from ..agent import Agent
from ..networks import AbstractNetwork
from ..results import LossTerms
from .base import AbstractQLoss, at_actions, transition_mask


def quantile_regression_loss(
    quantiles: Float[Array, " N"],
    fractions: Float[Array, " N"],
    target_samples: Float[Array, " M"],
    huber_delta: ArrayLike | None = 1.0,
) -> Float[Array, ""]:
    """The quantile (Huber) regression loss of `quantiles` at `fractions` against samples of the target.

    For each quantile `q_i` and sample `z_j`, with `u = z_j - q_i`, the loss is
    `|fractions_i - 1[u < 0]| * huber(u)`: averaged over the samples, summed over the
    quantiles. Minimising it moves each `q_i` to the `fractions_i`-quantile of the
    samples' distribution. `huber_delta=None` uses `|u|` (pure quantile regression).

    Reference: Dabney et al., "Distributional Reinforcement Learning with Quantile
    Regression", AAAI 2018, eq. 10 (without its division by the Huber threshold).

    **Arguments:**

    - `quantiles`: the estimated quantiles.
    - `fractions`: the probability level of each, in (0, 1).
    - `target_samples`: samples (or equally weighted quantiles) of the target distribution.
    - `huber_delta`: the Huber threshold (> 0), or `None`.

    **Returns:**

    The loss, a scalar.
    """
    errors = target_samples[None, :] - quantiles[:, None]
    below = jax.lax.stop_gradient((errors < 0).astype(errors.dtype))
    per_pair = jnp.abs(errors) if huber_delta is None else optax.huber_loss(errors, delta=huber_delta)  # pyright: ignore[reportArgumentType]
    return jnp.sum(jnp.mean(jnp.abs(fractions[:, None] - below) * per_pair, axis=-1))


@final
class QuantileQLoss(AbstractQLoss):
    """QR-DQN: quantile regression of each action's return quantiles onto the target's.

    The target samples of a transition are `r_{t+1} + discount * q'_j`, the quantiles
    `q'_j` of the greedy next action (of the target network when there is one; with
    `double`, the online network picks the action). Each predicted quantile `i` of `N`
    sits at the fraction `(2i + 1) / 2N` (see
    [`podrace.losses.quantile_regression_loss`][]). Bootstrapping stops on termination
    and reads the truncated state's quantiles at a truncation. Reads
    [`podrace.QuantileQValues`][] (a [`podrace.networks.QuantileQHead`][]).

    Reference: Dabney et al., "Distributional Reinforcement Learning with Quantile
    Regression", AAAI 2018.

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    - `double`: whether the online network's expected values pick the next action.
    - `huber_delta`: the Huber threshold `kappa` (> 0; 1 in the paper), or `None` for
        the unsmoothed quantile loss.
    """

    input_type = QuantileQValues
    discount: Float[Array, ""]
    huber_delta: Float[Array, ""] | None
    double: bool = eqx.field(static=True)

    def __init__(self, *, discount: ArrayLike, double: bool = False, huber_delta: ArrayLike | None = 1.0):
        self.discount = jnp.asarray(discount, jnp.float32)
        self.huber_delta = None if huber_delta is None else jnp.asarray(huber_delta, jnp.float32)
        self.double = double

    def __check_init__(self):
        check_in_unit_interval("QuantileQLoss", "discount", self.discount)
        if self.huber_delta is not None:
            check_positive("QuantileQLoss", "huber_delta", self.huber_delta)

    def trajectory_loss(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        online, bootstrap, selector = self.action_value_outputs(agent, trajectory, target_network, double=self.double)
        next_actions = self.greedy_next_actions(bootstrap, selector)
        next_quantiles = at_actions(bootstrap.quantiles, next_actions)
        timestep = trajectory.timestep
        discount_t = self.discount * timestep.discount[1:]
        targets = jax.lax.stop_gradient(timestep.reward[1:, None] + discount_t[:, None] * next_quantiles)
        quantiles = at_actions(online.quantiles, trajectory.policy_step.action)
        num_quantiles = quantiles.shape[-1]
        fractions = (jnp.arange(num_quantiles, dtype=jnp.float32) + 0.5) / num_quantiles
        per_step = jax.vmap(quantile_regression_loss, in_axes=(0, None, 0, None))(
            quantiles, fractions, targets, self.huber_delta
        )
        loss = jnp.mean(transition_mask(trajectory) * per_step)
        return loss, {"quantile_loss": loss}
