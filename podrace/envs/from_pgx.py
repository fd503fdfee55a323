"""Pgx's games (board games, card games, MinAtar) as podrace environments, with their
legal-action masks."""

from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int, PRNGKeyArray

from .._types import Box, Discrete, MaskedObservation, MaskedObservationSpace, TimeStep
from .._validation import unknown_name
from ._base import AbstractTurnBasedEnv
from ._packages import ByIdentity, default_numpy_rules, import_package, strongly_typed


def _import_pgx() -> Any:
    return import_package("pgx", extra="pgx", owner="PgxEnv")


def pgx_ids() -> list[str]:
    """The names of Pgx's games (`pgx.available_envs()`)."""
    return sorted(_import_pgx().available_envs())


@final
class PgxEnv(AbstractTurnBasedEnv[Any]):
    """A Pgx game as a podrace environment: one learner plays every side (self-play).

    The state is Pgx's own state; `reset` is Pgx's `init` and `step` Pgx's `step`, given
    the step's key (which the games with chance, such as 2048 and backgammon, draw from).
    The automatic reset is podrace's [`podrace.envs.AutoReset`][].

    **Players, rewards and observations.** Pgx's games are turn-based: its
    `state.current_player` is the id of the player to move, and its observation is
    that player's view of the board (`env.observe(state)` for `current_player`). Pgx
    gives each player its own reward, `state.rewards[player]`. The adapter's time step
    after a step holds:

    - `reward`: `state.rewards[mover]` of the state after the step, where `mover` is
        `current_player` before the step: the reward of the player who chose the action
        (in tic-tac-toe or Connect Four, +1 for the winning move, 0 for the drawing one
        and for every other move, and Pgx's -1 for an illegal move, which ends the game);
    - `observation`: Pgx's observation after the step, from the view of the player to
        move next (`current_player` after the step), with its legal actions.

    So each time step shows the player to move, and each reward belongs to the action
    taken from the time step before it: a single learner acting for every player learns
    the value of a position for the player to move. In the two-player zero-sum games a
    player's return is minus the opponent's: a self-play learner that bootstraps across
    a change of player negates the next position's value (mctx's `discount = -1`), and
    reads from Pgx's `state.current_player` whether the player changed (in backgammon
    a player may move several times in a row): `current_player(state)`, as a
    [`podrace.envs.AbstractTurnBasedEnv`][] says it.

    **Terminated or truncated.** Pgx's `terminated` (the game is over: a win, a draw or
    an illegal move) is `terminated`, with discount 0; Pgx's `truncated` is `truncated`,
    with discount 1. Pgx's games themselves do not truncate; wrap the environment in
    [`podrace.envs.TimeLimit`][] for a time limit.

    **Legal actions.** Observations are [`podrace.MaskedObservation`][]s: Pgx's
    observation as `float32` (its `bool` planes as 0 and 1) with `state.legal_action_mask`,
    so that podrace's networks and policies choose legal moves only. The observation space
    is a [`podrace.MaskedObservationSpace`][], over `[0, 1]` for the games that observe
    `bool` planes and unbounded otherwise; the action space is a [`podrace.Discrete`][]
    over Pgx's actions. After the game ends Pgx marks every action legal.

    Pgx draws on the host as SVG, not in JAX, so the adapter does not render.

    Reference: Koyamada et al., "Pgx: Hardware-Accelerated Parallel Game Simulators for
    Reinforcement Learning", NeurIPS 2023 Datasets and Benchmarks,
    https://github.com/sotetsuk/pgx.

    **Arguments:**

    - `env`: a Pgx environment (`pgx.make(name)`), held static and hashed by identity:
        build it once.
    """

    held: ByIdentity = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: np.dtype = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)

    def __init__(self, env: Any):
        with default_numpy_rules():
            state = jax.eval_shape(env.init, jax.random.key(0))
        self.observation_shape = tuple(state.observation.shape)
        self.observation_dtype = np.dtype(state.observation.dtype)
        self.num_actions = int(state.legal_action_mask.shape[0])
        self.held = ByIdentity(env)

    @classmethod
    def make(cls, env_id: str) -> "PgxEnv":
        """The Pgx game `env_id`.

        **Arguments:**

        - `env_id`: a name in `pgx.available_envs()`, e.g. `"tic_tac_toe"` or `"connect_four"`.

        **Raises:**

        `ImportError` if Pgx is not installed; `ValueError`, naming the nearest ids, if
        `env_id` is not one of Pgx's games.
        """
        pgx = _import_pgx()
        if env_id not in pgx.available_envs():
            raise ValueError(unknown_name("pgx environment", env_id, pgx_ids()))
        return cls(pgx.make(env_id))

    @property
    def env(self) -> Any:
        """The Pgx environment."""
        return self.held.value

    @property
    def observation_space(self) -> MaskedObservationSpace:
        bounds = (0.0, 1.0) if self.observation_dtype == np.bool_ else (-jnp.inf, jnp.inf)
        return MaskedObservationSpace(Box(*bounds, self.observation_shape), self.action_space)

    @property
    def action_space(self) -> Discrete:
        return Discrete(self.num_actions)

    def reset(self, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        with default_numpy_rules():
            state = strongly_typed(self.env.init(key))
        return state, TimeStep.first(_observation(state))

    def current_player(self, state: Any) -> Int[Array, ""]:
        """Pgx's `state.current_player`: the player to move (after the game ends, the one
        who would move next).

        **Arguments:**

        - `state`: one Pgx state.

        **Returns:**

        The player's id, an `int32` scalar.
        """
        return jnp.asarray(state.current_player, jnp.int32)

    def step(self, state: Any, action: Array, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        mover = state.current_player
        with default_numpy_rules():
            state = strongly_typed(self.env.step(state, action, key))
        reward = state.rewards[mover]
        return state, TimeStep.transition(_observation(state), reward, state.terminated, state.truncated)


def _observation(state: Any) -> MaskedObservation:
    return MaskedObservation(state.observation.astype(jnp.float32), state.legal_action_mask)
