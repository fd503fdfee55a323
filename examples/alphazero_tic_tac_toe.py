"""AlphaZero learns tic-tac-toe by self-play, then plays matches; its games drawn move by move.

Pgx's tic-tac-toe through `podrace.envs.PgxEnv`: one AlphaZero agent moves for both
players, searching 32 simulations over all nine moves with four times the default Gumbel
noise, which keeps the openings and replies varied (the settings that learn the game on
seeds 0-9 in the tests). The trained network then searches greedily, 64 simulations a
move, and plays 1,000 games (first in half of them, second in the other) against a
uniformly random player and against the same search with the untrained network. The
picture draws four games, one row each, the last move in red. Needs the pgx, search and
plot extras: pip install 'podrace[pgx,search,plot]'.

    python examples/alphazero_tic_tac_toe.py --num-updates 400
"""

import argparse

import equinox as eqx
import jax
import matplotlib.pyplot as plt

import podrace as pr
from podrace.executors.match import act
from podrace.executors.pipeline import AbstractTrainResult
from podrace.progress import plot_learning_curve, train_with_progress


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--num-updates", type=int, default=400)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

env = pr.envs.PgxEnv.make("tic_tac_toe")
network_key, run_key, match_key, game_key = jax.random.split(jax.random.key(args.seed), 4)

# The settings of `podrace train pgx:tic_tac_toe alphazero`.
config = pr.configs.TUNED["pgx:tic_tac_toe", "alphazero"].config
pipeline = config.pipeline(env, network_key)
initial_state = pipeline.init(run_key)


def report(updates_done: int, result: AbstractTrainResult) -> None:
    # A self-play game's return is both players' rewards: 1 for a game either side won,
    # 0 for a draw. It falls as both sides learn to hold the draw.
    if updates_done % 100 == 0:
        print(f"update {updates_done}: self-play return {float(result.metrics.mean_episode_return):.2f}")


state, log = train_with_progress(
    pipeline, initial_state, num_updates=args.num_updates, updates_per_call=20, on_call=report
)
curve_title = "Tic-tac-toe self-play return (1 a decided game, 0 a draw)"
print("saved", plot_learning_curve(log, "alphazero_tic_tac_toe_self_play.png", title=curve_title))

# Matches: a greedy search of 64 simulations over all nine moves, on either network. Two
# greedy searches play the same game every time they meet with the same sides.
match_search = pr.search.GumbelMuZeroSearch(64, max_num_considered_actions=9, gumbel_scale=0.0)
trained = pr.search.AlphaZeroAgent(pipeline.learner.network_at(state.learner), match_search, discount=1.0)
untrained = pr.search.AlphaZeroAgent(pipeline.learner.network_at(initial_state.learner), match_search, discount=1.0)
random_player = pr.RandomAgent(env.action_space.num_values)

print("trained agent's wins / draws / losses in 1,000 games")
print(f"{'opponent':<18}{'moving first':>15}{'moving second':>15}")
opponents = {"random player": random_player, "untrained search": untrained}
for (name, opponent), key in zip(opponents.items(), jax.random.split(match_key), strict=True):
    result = pr.play_match(env, trained, opponent, num_games=1_000, key=key)
    records = ["{} / {} / {}".format(*result.record(first=first)) for first in (True, False)]
    print(f"{name:<18}{records[0]:>15}{records[1]:>15}")


# A move, as a match chooses it: the search plans in the game from its state, the random
# player reads the legal moves from the observation.
choose_move = eqx.filter_jit(act)
reset, step = jax.jit(env.reset), jax.jit(env.step)


def play_game(x_player: pr.AbstractAgent, o_player: pr.AbstractAgent, key: jax.Array) -> tuple[list[int], str]:
    """The cells played in one game, X's first, and how it ended."""
    reset_key, key = jax.random.split(key)
    game_state, timestep = reset(reset_key)
    moves = []
    while not timestep.is_last:
        key, move_key, step_key = jax.random.split(key, 3)
        mover = (x_player, o_player)[len(moves) % 2]
        moves.append(int(choose_move(mover, env, game_state, timestep, (), move_key)[0].action))
        game_state, timestep = step(game_state, moves[-1], step_key)
    # The last reward is the last mover's: 1 for a win, 0 for a draw on a full board.
    outcome = ("O wins", "X wins")[len(moves) % 2] if timestep.reward > 0 else "draw"
    return moves, outcome


pairings = [
    ("trained (X) v random (O)", trained, random_player),
    ("random (X) v trained (O)", random_player, trained),
    ("untrained (X) v trained (O)", untrained, trained),
    ("trained v itself", trained, trained),
]
figure, rows = plt.subplots(len(pairings), 9, figsize=(11, 1.4 * len(pairings)))
game_keys = jax.random.split(game_key, len(pairings))
for (title, x_player, o_player), boards, key in zip(pairings, rows, game_keys, strict=True):
    moves, outcome = play_game(x_player, o_player, key)
    boards[0].set_ylabel(f"{title}\n{outcome}", rotation=0, ha="right", va="center", fontsize=9)
    for ply, board in enumerate(boards):
        board.set(xlim=(0, 3), ylim=(3, 0), xticks=[], yticks=[], aspect="equal")
        board.spines[:].set_visible(False)
        if ply >= len(moves):
            continue
        for line in (1, 2):
            board.axhline(line, color="black", lw=1)
            board.axvline(line, color="black", lw=1)
        for turn, cell in enumerate(moves[: ply + 1]):
            colour = "C3" if turn == ply else "black"
            board.text(
                cell % 3 + 0.5, cell // 3 + 0.5, "XO"[turn % 2], ha="center", va="center", color=colour, fontsize=14
            )
figure.tight_layout()
figure.savefig("alphazero_tic_tac_toe.png", dpi=100)
print("saved alphazero_tic_tac_toe.png")
