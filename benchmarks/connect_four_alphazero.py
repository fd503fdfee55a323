"""AlphaZero on Pgx's Connect Four against plain Monte-Carlo tree search with random
rollouts, both searching with the same number of simulations per move.

AlphaZero learns by self-play with the settings of `podrace train pgx:connect_four
alphazero` (`podrace.configs.TUNED`), one run per seed. Each trained agent then searches
without exploration noise (`config.evaluation_search()`, what `podrace evaluate` plays)
and plays `--games` games of `podrace.play_match` (first in half, second in the other)
against `podrace.search.RolloutSearchAgent` with `UCTSearch` of the same number of
simulations: UCT (exploration constant 2), each state valued by one rollout of random
legal moves to the end of the game, as OpenSpiel's `MCTSBot` with its random-rollout
evaluator. For reference the trained agent also plays the rollout search with four times
its simulations and a uniformly random player, and the untrained agent (the search with
the network's initial prior and values) plays the rollout search.

Figures, per seed: the training seconds, and each match's wins / draws / losses moving
first and second, with the share of games won. The issue's bar is 90 % won against the
rollout search.

    python benchmarks/connect_four_alphazero.py [--seeds 0 1 ... 9] [--games 200]
        [--num-updates N]
"""

import argparse
import dataclasses
import time

import jax

import podrace as pr
from podrace.executors.pipeline import AbstractTrainResult
from podrace.progress import train_with_progress


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
parser.add_argument("--games", type=int, default=200)
parser.add_argument("--num-updates", type=int, default=None, help="instead of the tuned row's")
args = parser.parse_args()

env = pr.envs.PgxEnv.make("connect_four")
num_actions = env.action_space.num_values
config = pr.configs.TUNED["pgx:connect_four", "alphazero"].config
assert isinstance(config, pr.configs.AlphaZeroConfig)
if args.num_updates is not None:
    config = dataclasses.replace(config, num_updates=args.num_updates)
simulations = config.num_simulations
baseline = pr.search.RolloutSearchAgent(num_actions, pr.search.UCTSearch(simulations))
stronger_baseline = pr.search.RolloutSearchAgent(num_actions, pr.search.UCTSearch(4 * simulations))
print(f"{config.num_updates} updates of {config.num_envs} x {config.rollout_length} steps, {simulations} simulations")
print(f"matches of {args.games} games; wins / draws / losses, moving first and second")


def record(result: pr.MatchResult) -> str:
    first, second = (result.record(first=first) for first in (True, False))
    won = (first[0] + second[0]) / result.scores.shape[0]
    return f"{'{} / {} / {}'.format(*first):>13}  {'{} / {} / {}'.format(*second):>13}  won {won:.3f}"


def report(updates_done: int, result: AbstractTrainResult) -> None:
    print(f"  update {updates_done}: self-play return {float(result.metrics.mean_episode_return):.2f}")


for seed in args.seeds:
    network_key, run_key, match_key = jax.random.split(jax.random.key(seed), 3)
    pipeline = config.pipeline(env, network_key)
    initial_state = pipeline.init(run_key)

    start = time.perf_counter()
    state, _ = train_with_progress(
        pipeline,
        initial_state,
        num_updates=config.num_updates,
        updates_per_call=config.updates_per_call,
        on_call=report,
    )
    jax.block_until_ready(state)
    seconds = time.perf_counter() - start
    search = config.evaluation_search()
    trained = pr.search.AlphaZeroAgent(pipeline.learner.network_at(state.learner), search, discount=config.discount)
    untrained = pr.search.AlphaZeroAgent(
        pipeline.learner.network_at(initial_state.learner), search, discount=config.discount
    )
    opponents = {
        "trained v rollout search": (trained, baseline),
        "trained v rollout search x4": (trained, stronger_baseline),
        "trained v random": (trained, pr.RandomAgent(num_actions)),
        "untrained v rollout search": (untrained, baseline),
    }
    print(f"seed {seed}: trained in {seconds:.0f} s")
    for (name, (agent, opponent)), key in zip(opponents.items(), jax.random.split(match_key, 4), strict=True):
        print(f"  {name:<29}{record(pr.play_match(env, agent, opponent, num_games=args.games, key=key))}")
