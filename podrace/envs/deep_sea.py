from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray, UInt8

from .._types import Box, Discrete, TimeStep
from .._validation import as_float_array
from ._base import AbstractRenderableEnv


# Colours of `DeepSea.render`: cell borders, water, the rewarding bottom-right cell, the agent.
_PALETTE = np.array([[45, 75, 140], [25, 45, 95], [60, 170, 90], [250, 200, 40]], np.uint8)


@final
class DeepSeaState(eqx.Module):
    """The agent's cell on the grid.

    **Arguments:**

    - `row`: from 0 (top) to `size` (past the bottom row: the episode is over).
    - `column`: from 0 (left) to `size - 1`.
    """

    row: Int[Array, ""]
    column: Int[Array, ""]


@final
class DeepSea(AbstractRenderableEnv[DeepSeaState]):
    """A deep-exploration probe: an `N x N` grid descended one row per step.

    The agent starts in the top-left cell and, at every step, moves down one row and
    either left or right; which of the actions 0 and 1 means "right" differs from cell
    to cell (`action_mapping`). Moving right costs `move_cost / N`; moving right from
    the bottom-right cell earns 1. The episode terminates after `N` steps, so the only
    rewarding policy goes right `N` times in a row, which dithering exploration finds
    with probability `2^-N`. The observation is the one-hot `N x N` grid (all zeros
    after the last step). `render` draws the grid with square cells of `pixels_per_cell`
    pixels: blue water, the rewarding bottom-right cell in green, the agent in yellow.

    In the stochastic variant a move right fails (the agent goes straight down) with
    probability `1 / N`, and the reward at the bottom corners carries standard normal
    noise.

    Reference: Osband et al., "Deep Exploration via Randomized Value Functions",
    JMLR 2019; Osband et al., "Behaviour Suite for Reinforcement Learning", ICLR 2020.

    **Arguments:**

    - `size`: the grid size `N`.
    - `action_mapping_key`: draws the per-cell action meaning (each cell's "right"
        action is 0 or 1 with probability 1/2); by default `jax.random.key(0)`.
    - `randomize_actions`: if `False`, action 1 means "right" everywhere.
    - `deterministic`: `False` for the stochastic variant.
    - `move_cost`: the total cost of moving right on every step.
    - `pixels_per_cell`: the side of a cell in `render`'s pictures.
    """

    action_mapping: Int[Array, "size size"]
    move_cost: Float[Array, ""]
    size: int = eqx.field(static=True)
    deterministic: bool = eqx.field(static=True)
    pixels_per_cell: int = eqx.field(static=True)

    def __init__(
        self,
        size: int = 10,
        *,
        action_mapping_key: PRNGKeyArray | None = None,
        randomize_actions: bool = True,
        deterministic: bool = True,
        move_cost: float = 0.01,
        pixels_per_cell: int = 16,
    ):
        if size < 1:
            raise ValueError(f"DeepSea needs size >= 1, got {size}.")
        if pixels_per_cell < 1:
            raise ValueError(f"DeepSea needs pixels_per_cell >= 1, got {pixels_per_cell}.")
        if action_mapping_key is None:
            action_mapping_key = jax.random.key(0)
        if randomize_actions:
            self.action_mapping = jax.random.bernoulli(action_mapping_key, 0.5, (size, size)).astype(jnp.int32)
        else:
            self.action_mapping = jnp.ones((size, size), jnp.int32)
        self.move_cost = as_float_array(move_cost)
        self.size = size
        self.deterministic = deterministic
        self.pixels_per_cell = pixels_per_cell

    @property
    def observation_space(self) -> Box:
        return Box(0.0, 1.0, (self.size, self.size))

    @property
    def action_space(self) -> Discrete:
        return Discrete(2)

    def reset(self, key: PRNGKeyArray) -> tuple[DeepSeaState, TimeStep]:
        del key
        state = DeepSeaState(jnp.asarray(0, jnp.int32), jnp.asarray(0, jnp.int32))
        return state, TimeStep.first(self._observation(state))

    def step(self, state: DeepSeaState, action: Array, key: PRNGKeyArray) -> tuple[DeepSeaState, TimeStep]:
        noise_key, move_key = jax.random.split(key)
        last = self.size - 1
        right = action == self.action_mapping[state.row, state.column]
        reward = jnp.where(right & (state.column == last), 1.0, 0.0) - jnp.where(right, self.move_cost / self.size, 0.0)
        moved_right = right
        if not self.deterministic:
            at_corner = (state.row == last) & ((state.column == 0) | (state.column == last))
            reward = reward + jnp.where(at_corner, jax.random.normal(noise_key, ()), 0.0)
            moved_right = right & (jax.random.uniform(move_key, ()) > 1 / self.size)
        column = jnp.where(moved_right, state.column + 1, jnp.where(right, state.column, state.column - 1))
        state = DeepSeaState(state.row + 1, jnp.clip(column, 0, last).astype(jnp.int32))
        return state, TimeStep.transition(self._observation(state), reward, state.row == self.size)

    def render(self, state: DeepSeaState) -> UInt8[Array, "height width 3"]:
        agent = self._agent_cell(state)
        goal = jnp.zeros((self.size, self.size), bool).at[-1, -1].set(True)
        colour = jnp.where(agent, 3, jnp.where(goal, 2, 1))  # an index into _PALETTE
        size = self.pixels_per_cell
        colour = jnp.repeat(jnp.repeat(colour, size, axis=0), size, axis=1)
        if size > 2:  # a one-pixel border around each cell
            edge = (jnp.arange(size) == 0) | (jnp.arange(size) == size - 1)
            border = jnp.tile(edge[:, None] | edge[None, :], (self.size, self.size))
            colour = jnp.where(border, 0, colour)
        return jnp.asarray(_PALETTE)[colour]

    def _agent_cell(self, state: DeepSeaState) -> Bool[Array, "size size"]:
        rows = jnp.arange(self.size)[:, None]
        columns = jnp.arange(self.size)[None, :]
        return (rows == state.row) & (columns == state.column)

    def _observation(self, state: DeepSeaState) -> Float[Array, "size size"]:
        return self._agent_cell(state).astype(jnp.float32)
