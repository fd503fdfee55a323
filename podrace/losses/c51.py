"""C51: categorical distributional Q-learning."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._types import CategoricalQValues, Trajectory
from .._validation import check_in_unit_interval
from ..agent import Agent
from ..networks import AbstractNetwork
from ..results import LossTerms
from .base import AbstractQLoss, at_actions, transition_mask


def categorical_projection(
    atoms_from: Float[Array, " n_from"], probs: Float[Array, " n_from"], atoms_onto: Float[Array, " n_onto"]
) -> Float[Array, " n_onto"]:
    """Projects the distribution `probs` on `atoms_from` onto evenly spaced `atoms_onto`.

    Each probability is clipped into `[atoms_onto[0], atoms_onto[-1]]` and split
    between its two neighbouring atoms in proportion to its distance from each: the
    projection of the C51 paper's Algorithm 1, which is the Cramér (L2) projection for
    an evenly spaced support.

    Reference: Bellemare et al., "A Distributional Perspective on Reinforcement
    Learning", ICML 2017, Algorithm 1; Rowland et al., "An Analysis of Categorical
    Distributional Reinforcement Learning", AISTATS 2018.

    **Arguments:**

    - `atoms_from`: where the probabilities sit (e.g. `r + discount * atoms`).
    - `probs`: the probabilities, summing to 1.
    - `atoms_onto`: the support to project onto, evenly spaced and increasing.

    **Returns:**

    The probabilities on `atoms_onto`.
    """
    num_atoms = atoms_onto.shape[0]
    spacing = atoms_onto[1] - atoms_onto[0]
    # Each probability's position on the support, in atoms from the first.
    position = (jnp.clip(atoms_from, atoms_onto[0], atoms_onto[-1]) - atoms_onto[0]) / spacing
    lower = jnp.clip(jnp.floor(position), 0, num_atoms - 1)
    upper_share = position - lower
    lower = lower.astype(jnp.int32)
    projected = jnp.zeros_like(atoms_onto).at[lower].add(probs * (1.0 - upper_share))
    return projected.at[jnp.minimum(lower + 1, num_atoms - 1)].add(probs * upper_share)


@final
class CategoricalQLoss(AbstractQLoss):
    """C51: the cross-entropy from each action's return distribution to its projected target.

    The target of a transition is the greedy next action's distribution (of the target
    network when there is one; with `double`, the online network picks the action),
    its atoms moved to `r_{t+1} + discount * atoms`, projected back onto the atoms
    (see [`podrace.losses.categorical_projection`][]). Bootstrapping stops on
    termination and reads the truncated state's distribution at a truncation. Reads
    [`podrace.CategoricalQValues`][] (a [`podrace.networks.CategoricalQHead`][]).

    Reference: Bellemare et al., "A Distributional Perspective on Reinforcement
    Learning", ICML 2017.

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    - `double`: whether the online network's expected values pick the next action.
    """

    input_type = CategoricalQValues
    discount: Float[Array, ""]
    double: bool = eqx.field(static=True)

    def __init__(self, *, discount: ArrayLike, double: bool = False):
        self.discount = jnp.asarray(discount, jnp.float32)
        self.double = double

    def __check_init__(self):
        check_in_unit_interval("CategoricalQLoss", "discount", self.discount)

    def trajectory_loss(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        online, bootstrap, selector = self.action_value_outputs(agent, trajectory, target_network, double=self.double)
        next_actions = self.greedy_next_actions(bootstrap, selector)
        next_logits = at_actions(bootstrap.logits, next_actions)
        timestep = trajectory.timestep
        discount_t = self.discount * timestep.discount[1:]
        target_atoms = timestep.reward[1:, None] + discount_t[:, None] * bootstrap.atoms
        targets = jax.vmap(categorical_projection)(target_atoms, jax.nn.softmax(next_logits), online.atoms)
        logits = at_actions(online.logits, trajectory.policy_step.action)
        cross_entropy = -jnp.sum(jax.lax.stop_gradient(targets) * jax.nn.log_softmax(logits), axis=-1)
        loss = jnp.mean(transition_mask(trajectory) * cross_entropy)
        return loss, {"cross_entropy": loss}
