from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray, UInt8

from .._types import Box, Discrete, TimeStep
from ._base import AbstractRenderableEnv


# Colours of `Catch.render`: background, ball, paddle, ball on the paddle.
_PALETTE = np.array([[20, 20, 20], [230, 80, 60], [240, 240, 240], [80, 200, 120]], np.uint8)


@final
class CatchState(eqx.Module):
    """Positions on the Catch board (row 0 at the top).

    **Arguments:**

    - `ball_row`, `ball_column`: where the ball is.
    - `paddle_column`: where the paddle is on the last row.
    """

    ball_row: Int[Array, ""]
    ball_column: Int[Array, ""]
    paddle_column: Int[Array, ""]


@final
class Catch(AbstractRenderableEnv[CatchState]):
    """The Catch grid world of the bsuite and the Podracer paper's Anakin demonstration.

    A ball starts on the top row in a uniformly random column and falls one row per
    step; the agent moves a paddle on the bottom row left, not at all or right
    (actions 0, 1, 2). When the ball reaches the bottom row the episode terminates
    with reward +1 if the paddle is under it and -1 otherwise.

    The observation is the `rows x columns x 1` board, 1 where the ball or the paddle
    is and 0 elsewhere. `render` draws the board with square cells of
    `pixels_per_cell` pixels: a red ball, a white paddle, green when the ball is caught.

    Reference: Osband et al., "Behaviour Suite for Reinforcement Learning", ICLR 2020;
    Hessel et al., "Podracer architectures for scalable Reinforcement Learning", 2021.

    **Arguments:**

    - `rows`: board height (10 in the references).
    - `columns`: board width (5 in the references).
    - `pixels_per_cell`: the side of a cell in `render`'s pictures.
    """

    rows: int = eqx.field(static=True, default=10)
    columns: int = eqx.field(static=True, default=5)
    pixels_per_cell: int = eqx.field(static=True, default=16)

    def __check_init__(self):
        if self.rows < 2 or self.columns < 1:
            raise ValueError(f"Catch needs rows >= 2 and columns >= 1, got {self.rows}x{self.columns}.")
        if self.pixels_per_cell < 1:
            raise ValueError(f"Catch needs pixels_per_cell >= 1, got {self.pixels_per_cell}.")

    @property
    def observation_space(self) -> Box:
        return Box(0.0, 1.0, (self.rows, self.columns, 1))

    @property
    def action_space(self) -> Discrete:
        return Discrete(3)

    def reset(self, key: PRNGKeyArray) -> tuple[CatchState, TimeStep]:
        state = CatchState(
            ball_row=jnp.asarray(0, jnp.int32),
            ball_column=jax.random.randint(key, (), 0, self.columns, dtype=jnp.int32),
            paddle_column=jnp.asarray(self.columns // 2, jnp.int32),
        )
        return state, TimeStep.first(self._observation(state))

    def step(self, state: CatchState, action: Array, key: PRNGKeyArray) -> tuple[CatchState, TimeStep]:
        del key
        paddle_column = jnp.clip(state.paddle_column + action - 1, 0, self.columns - 1)
        state = CatchState(state.ball_row + 1, state.ball_column, paddle_column.astype(jnp.int32))
        terminated = state.ball_row == self.rows - 1
        reward = jnp.where(terminated, jnp.where(state.ball_column == paddle_column, 1.0, -1.0), 0.0)
        return state, TimeStep.transition(self._observation(state), reward, terminated)

    def render(self, state: CatchState) -> UInt8[Array, "height width 3"]:
        ball, paddle = self._cells(state)
        colour = ball.astype(jnp.int32) + 2 * paddle.astype(jnp.int32)  # an index into _PALETTE
        size = self.pixels_per_cell
        return jnp.asarray(_PALETTE)[jnp.repeat(jnp.repeat(colour, size, axis=0), size, axis=1)]

    def _cells(self, state: CatchState) -> tuple[Bool[Array, "rows columns"], Bool[Array, "rows columns"]]:
        """Where the ball is and where the paddle is."""
        rows = jnp.arange(self.rows)[:, None]
        columns = jnp.arange(self.columns)[None, :]
        ball = (rows == state.ball_row) & (columns == state.ball_column)
        paddle = (rows == self.rows - 1) & (columns == state.paddle_column)
        return ball, paddle

    def _observation(self, state: CatchState) -> Float[Array, "rows columns 1"]:
        ball, paddle = self._cells(state)
        return (ball | paddle).astype(jnp.float32)[..., None]
