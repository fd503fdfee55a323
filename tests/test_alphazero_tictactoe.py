"""Perfect play at tic-tac-toe: an exhaustive minimax solver computed here, a match
harness on Pgx's own state and step in which a batched player meets the solver (as the
first player in half the games, the second in the other), and AlphaZero's search with a
uniform prior and a zero value, judged position by position against the solver.

The solver values every reachable position for the player to move (+1 a win, 0 a draw,
-1 a loss with best play on both sides) and lists its optimal moves; the solver's player
picks uniformly among them with a seeded generator, so the games vary. Boards are
tuples of nine cells, row by row: -1 empty, 0 the first player's mark (X), 1 the
second's (O).
"""

import functools
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, PRNGKeyArray

import podrace as pr


pgx = pytest.importorskip("pgx")
pytest.importorskip("mctx")

TIC_TAC_TOE = pr.envs.PgxEnv.make("tic_tac_toe")
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
EMPTY = (-1,) * 9

Board = tuple[int, ...]
# The moves of the player the harness tests, for a batch of games: (Pgx states, time
# steps, one key per game) -> one action per game.
Player = Callable[[Any, pr.TimeStep, PRNGKeyArray], np.ndarray]


# --------------------------------------------------------------------------------------
# The exhaustive minimax solver.
# --------------------------------------------------------------------------------------


def _winner(board: Board) -> int:
    """The mark with three in a line, or -1."""
    for a, b, c in LINES:
        if board[a] >= 0 and board[a] == board[b] == board[c]:
            return board[a]
    return -1


def _mover(board: Board) -> int:
    """The mark of the player to move: X (0) after an even number of moves."""
    return sum(cell >= 0 for cell in board) % 2


@functools.cache
def solve(board: Board) -> tuple[int, tuple[int, ...]]:
    """The game-theoretic value of a position that is not over, for the player to move,
    and the moves that keep it: memoised over boards, exhaustive."""
    mover = _mover(board)
    values = {}
    for cell in range(9):
        if board[cell] < 0:
            after = (*board[:cell], mover, *board[cell + 1 :])
            if _winner(after) == mover:
                values[cell] = 1
            elif all(mark >= 0 for mark in after):
                values[cell] = 0
            else:
                values[cell] = -solve(after)[0]
    best = max(values.values())
    return best, tuple(cell for cell, value in values.items() if value == best)


def _reachable(board: Board = EMPTY) -> set[Board]:
    """Every position reachable from `board` in play, `board` and the final ones included."""
    found = {board}
    if _winner(board) < 0 and min(board) < 0:
        for cell in (cell for cell in range(9) if board[cell] < 0):
            found |= _reachable((*board[:cell], _mover(board), *board[cell + 1 :]))
    return found


def test_the_solver_knows_tic_tac_toe():
    """Known facts: 5,478 legal positions; a draw with best play, whatever the first move;
    against a corner opening only the centre holds, against the centre only a corner."""
    positions = _reachable()
    assert len(positions) == 5_478
    assert solve(EMPTY) == (0, tuple(range(9)))
    assert solve((0, -1, -1, -1, -1, -1, -1, -1, -1)) == (0, (4,))
    assert solve((-1, -1, -1, -1, 0, -1, -1, -1, -1)) == (0, (0, 2, 6, 8))
    # X has 0 and 1, O has 3 and 4: X, to move, wins at 2 only. After X's 8 instead, O
    # wins at 5, or at 2 by a fork (2-4-6 and 3-4-5); after X's 6, at 5 only.
    assert solve((0, 0, -1, 1, 1, -1, -1, -1, -1)) == (1, (2,))
    assert solve((0, 0, -1, 1, 1, -1, -1, -1, 0)) == (1, (2, 5))
    assert solve((0, 0, -1, 1, 1, -1, 0, -1, -1)) == (1, (5,))
    # Every position still in play has a value and a move that keeps it.
    assert all(solve(board)[1] for board in positions if _winner(board) < 0 and min(board) < 0)


# --------------------------------------------------------------------------------------
# The match harness: Pgx's own state and step, batched over games.
# --------------------------------------------------------------------------------------


def _boards(timestep: pr.TimeStep) -> list[Board]:
    """The boards of a batch of games, read from Pgx's observations (the player to move's
    marks in plane 0, the opponent's in plane 1)."""
    planes = np.asarray(timestep.observation.observation).reshape(-1, 9, 2).astype(bool)
    mover = planes.sum(axis=(1, 2)) % 2
    boards = np.where(planes[..., 0], mover[:, None], np.where(planes[..., 1], 1 - mover[:, None], -1))
    return [tuple(int(cell) for cell in board) for board in boards]


_reset = jax.jit(jax.vmap(TIC_TAC_TOE.reset))
_step = jax.jit(jax.vmap(TIC_TAC_TOE.step))


def play_minimax(player: Player, *, num_games: int, seed: int) -> dict[str, tuple[int, int, int]]:
    """`player` plays X in the first half of `num_games` games and O in the second against
    the solver, which picks uniformly among its optimal moves (a generator seeded with
    `seed`). An illegal move of `player` loses its game (Pgx's -1 to the mover).

    **Returns:** `{"first": (wins, draws, losses), "second": (...)}` of `player`.
    """
    key = jax.random.key(seed)
    rng = np.random.default_rng(seed)
    state, timestep = _reset(jax.random.split(key, num_games))
    player_mark = (np.arange(num_games) >= num_games // 2).astype(int)
    score = np.zeros(num_games)  # the player's reward minus the solver's
    over = np.zeros(num_games, bool)
    for ply in range(9):
        keys = jax.random.split(jax.random.fold_in(key, ply), num_games)
        boards = _boards(timestep)
        players_turn = np.asarray([_mover(board) for board in boards]) == player_mark
        chosen = np.asarray(player(state, timestep, keys))
        moves = np.asarray(
            [
                chosen[game] if players_turn[game] or over[game] else rng.choice(solve(boards[game])[1])
                for game in range(num_games)
            ],
            np.int32,
        )
        state, timestep = _step(state, jnp.asarray(moves), keys)
        reward = np.asarray(timestep.reward)
        score += np.where(over, 0.0, np.where(players_turn, reward, -reward))
        over |= np.asarray(timestep.is_last)
    assert over.all()

    def count(scores: np.ndarray) -> tuple[int, int, int]:
        return int(np.sum(scores > 0)), int(np.sum(scores == 0)), int(np.sum(scores < 0))

    return {"first": count(score[: num_games // 2]), "second": count(score[num_games // 2 :])}


def _solver_player(state: Any, timestep: pr.TimeStep, keys: PRNGKeyArray) -> np.ndarray:
    del state, keys
    boards = _boards(timestep)
    return np.asarray([solve(board)[1][0] if _winner(board) < 0 and min(board) < 0 else 0 for board in boards])


@jax.jit
def _random_player(state: Any, timestep: pr.TimeStep, keys: PRNGKeyArray) -> Array:
    del state
    mask = timestep.observation.action_mask
    return jax.vmap(lambda mask, key: jax.random.choice(key, 9, p=mask / mask.sum()))(mask, keys)


def test_the_harness_scores_perfect_play_as_draws_and_punishes_random_play():
    assert play_minimax(_solver_player, num_games=200, seed=0) == {"first": (0, 100, 0), "second": (0, 100, 0)}
    random = play_minimax(_random_player, num_games=200, seed=0)
    assert all(wins == 0 for wins, _, _ in random.values())
    assert random["first"][2] > 20 and random["second"][2] > 50


# --------------------------------------------------------------------------------------
# AlphaZero's search with no knowledge: a uniform prior and a zero value.
# --------------------------------------------------------------------------------------


def _uninformed_agent(search: pr.search.AbstractSearchOperator) -> pr.search.AlphaZeroAgent:
    """An AlphaZero agent whose network gives every legal move the same prior and every
    position the value 0: what it knows comes from the search and the game's end alone."""
    config = pr.configs.AlphaZeroConfig(algorithm="alphazero", hidden=(8,))
    network = config.network(TIC_TAC_TOE.action_space, (3, 3, 2), jax.random.key(0))
    network = eqx.tree_at(
        lambda network: (network.head.linear, network.head.value_head.linear),
        network,
        replace_fn=lambda linear: eqx.tree_at(
            lambda linear: (linear.weight, linear.bias), linear, replace_fn=jnp.zeros_like
        ),
    )
    return pr.search.AlphaZeroAgent(network, search, discount=1.0)


def _positions(plies: int) -> list[Board]:
    """The reachable positions after `plies` moves that are still in play."""
    in_play = (board for board in _reachable() if _winner(board) < 0 and min(board) < 0)
    return sorted(board for board in in_play if sum(cell >= 0 for cell in board) == plies)


def _states_at(boards: list[Board]) -> tuple[Any, pr.TimeStep]:
    """Pgx's states of `boards` (all after the same number of moves), reached by playing
    X's and O's cells in turn: a prefix of a board in play has no line either."""
    plies = sum(cell >= 0 for cell in boards[0])
    orders = [
        [[cell for cell in range(9) if board[cell] == ply % 2][ply // 2] for ply in range(plies)] for board in boards
    ]
    keys = jax.random.split(jax.random.key(0), len(boards))
    state, timestep = _reset(keys)
    for ply in range(plies):
        state, timestep = _step(state, jnp.asarray([order[ply] for order in orders], jnp.int32), keys)
    assert not np.any(timestep.is_last) and _boards(timestep) == boards
    return state, timestep


@eqx.filter_jit
def _search_moves(agent: pr.search.AlphaZeroAgent, state: Any, timestep: pr.TimeStep, keys: PRNGKeyArray) -> Array:
    def act(state: Any, timestep: pr.TimeStep, key: PRNGKeyArray) -> Array:
        return agent.act_in(TIC_TAC_TOE, state, timestep, (), key)[0].action

    return jax.vmap(act)(state, timestep, keys)


def _search_player(agent: pr.search.AlphaZeroAgent) -> Player:
    """`agent`'s search, batched over games."""
    return lambda state, timestep, keys: np.asarray(_search_moves(agent, state, timestep, keys))


def _value_after(board: Board, cell: int) -> int:
    """The solver's value of playing `cell` in `board`, for the player who plays it."""
    after = (*board[:cell], _mover(board), *board[cell + 1 :])
    if _winner(after) >= 0:
        return 1
    return 0 if min(after) >= 0 else -solve(after)[0]


def _wins_in_one(board: Board) -> bool:
    return any(_winner((*board[:cell], _mover(board), *board[cell + 1 :])) >= 0 for cell in range(9) if board[cell] < 0)


@pytest.mark.parametrize(
    "search",
    [
        pr.search.GumbelMuZeroSearch(64, max_num_considered_actions=9, gumbel_scale=0.0),
        pr.search.MuZeroSearch(64, dirichlet_fraction=0.0, temperature=1e-3),
    ],
    ids=["gumbel", "muzero"],
)
@pytest.mark.parametrize("plies", [6, 7, 8])
def test_a_search_with_no_knowledge_never_throws_a_draw_away_late_in_the_game(search, plies):
    """With a uniform prior and a zero value, only the game's end informs the search. From
    the seventh move on, 64 simulations take every win in one and never choose a move
    that loses a drawn position (a block where the opponent threatens, an answer to a
    fork before it is laid). A wrong sign in the value backup, or a reward read for the
    wrong player, fails these. Earlier in the game, where a loss lies four or more moves
    deep, such a search does lose some drawn positions (at the fifth and sixth moves, at
    64 simulations): it has no value to go on."""
    boards = _positions(plies)
    state, timestep = _states_at(boards)
    moves = _search_player(_uninformed_agent(search))(state, timestep, jax.random.split(jax.random.key(1), len(boards)))
    thrown, missed = [], []
    for board, move in zip(boards, moves.tolist(), strict=True):
        value = _value_after(board, move)
        if value < min(solve(board)[0], 0):
            thrown.append((board, move))
        if _wins_in_one(board) and value < 1:
            missed.append((board, move))
    assert not thrown and not missed, f"of {len(boards)}: draws lost {thrown[:3]}, wins in one missed {missed[:3]}"
