from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray

from .._types import Box, Discrete, TimeStep
from ._base import AbstractEnv


@final
class RepeatFirstState(eqx.Module):
    """The symbol to repeat and the number of steps taken.

    **Arguments:**

    - `symbol`: the symbol shown on the first step.
    - `elapsed_steps`: steps taken in the episode.
    """

    symbol: Int[Array, ""]
    elapsed_steps: Int[Array, ""]


@final
class RepeatFirst(AbstractEnv[RepeatFirstState]):
    """A memory task: recall the symbol shown first, after a delay.

    The first observation shows one of `num_symbols` symbols (one-hot). The next `delay`
    observations are blank, and the one after them raises a query flag: the action
    taken on it ends the episode (terminated) with reward 1 if it names the first
    symbol and 0 otherwise. Actions before the query do nothing. An episode is
    `delay + 2` steps long, and the query observation is the same whatever the symbol,
    so an agent without memory earns `1 / num_symbols` on average and one with memory 1.

    Observations are `num_symbols + 1` floats: the one-hot symbol (first step only) and
    the query flag (last). The delay is an array leaf: environments with different
    delays run in one batch.

    Reference: Morad et al., "POPGym: Benchmarking Partially Observable Reinforcement
    Learning", ICLR 2023 (its "Repeat First" task).

    **Arguments:**

    - `num_symbols`: how many symbols there are (the number of actions).
    - `delay`: the number of blank steps between the symbol and the query (at least 0).
    """

    num_symbols: int = eqx.field(static=True)
    delay: Int[Array, ""]

    def __init__(self, num_symbols: int = 4, delay: ArrayLike = 4):
        if num_symbols < 2:
            raise ValueError(f"RepeatFirst needs num_symbols >= 2, got {num_symbols}.")
        if isinstance(delay, int | float) and delay < 0:
            raise ValueError(f"RepeatFirst needs delay >= 0, got {delay}.")
        self.num_symbols = num_symbols
        self.delay = jnp.asarray(delay, jnp.int32)

    @property
    def observation_space(self) -> Box:
        return Box(0.0, 1.0, (self.num_symbols + 1,))

    @property
    def action_space(self) -> Discrete:
        return Discrete(self.num_symbols)

    def reset(self, key: PRNGKeyArray) -> tuple[RepeatFirstState, TimeStep]:
        symbol = jax.random.randint(key, (), 0, self.num_symbols, dtype=jnp.int32)
        state = RepeatFirstState(symbol, jnp.asarray(0, jnp.int32))
        return state, TimeStep.first(self._observe(state))

    def step(self, state: RepeatFirstState, action: Array, key: PRNGKeyArray) -> tuple[RepeatFirstState, TimeStep]:
        del key
        answered = state.elapsed_steps == self.delay + 1
        reward = jnp.where(answered & (action == state.symbol), 1.0, 0.0)
        state = RepeatFirstState(state.symbol, state.elapsed_steps + 1)
        return state, TimeStep.transition(self._observe(state), reward, answered)

    def _observe(self, state: RepeatFirstState) -> Float[Array, " num_symbols_plus_one"]:
        shown = jax.nn.one_hot(state.symbol, self.num_symbols) * (state.elapsed_steps == 0)
        query = (state.elapsed_steps == self.delay + 1).astype(jnp.float32)
        return jnp.concatenate([shown, query[None]]).astype(jnp.float32)
