"""Population-based training against the best of the same members trained with fixed learning rates.

The recipe is `gymnax-ppo-cartpole-v1` of the reproduction registry (gymnax-blines'
PPO on CartPole-v1, 150k steps per member at a constant learning rate of 5e-4), with
the learning rate deliberately bad: each of `--members` members starts at a learning
rate drawn log-uniformly from `--learning-rates` (by default 1e-5 to 1e-4). Both arms
train the same members (same seeds, same starting learning rates) for the recipe's
number of updates:

- fixed: a `podrace.Population`, every member at its starting learning rate;
- PBT: a `podrace.PBT` of that population, every `--interval` updates the lowest
  quarter copying the top quarter and perturbing its learning rate by 0.8 or 1.2.

Each member's final network is then measured as the recipe's source measured it (164
episodes with the sampling policy); an arm's score is its best member's mean return. Also reported: each
arm's mean training return (of the sampling policy) over the last tenth of the
updates, best member and mean over members. One experiment per
`--seeds` seed (seed `s` draws the members' networks and learning rates from
`key(s)`); PBT beats the fixed arm in an experiment when its score is higher.

Writes `pbt_comparison.json` (every member's score and learning rates, the lineage of
the first experiment) and `pbt_comparison.png` (the first experiment's learning-rate
schedules and returns). Last line: `pbt_wins=W/E`.

    python benchmarks/pbt_comparison.py [--seeds 0,1,2] [--members 8] [--interval 5]
"""

import argparse
import json
import pathlib
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import podrace as pr
from podrace.executors.pbt import Perturb, Resample
from podrace.progress import import_pyplot
from podrace.recipes import RECIPES


RECIPE = "gymnax-ppo-cartpole-v1"


def experiment(seed: int, *, members: int, interval: int, learning_rates: Resample, num_updates: int | None) -> dict:
    """Both arms of one experiment: the members' scores, learning rates and the PBT lineage."""
    recipe = RECIPES[RECIPE]
    env = recipe.env()
    keys = jax.random.split(jax.random.key(seed), members)
    starting = jax.vmap(lambda key: learning_rates.sample(jax.random.fold_in(key, 1), ()))(keys)

    def make_member(hyperparameters: dict) -> pr.Anakin:
        learning_rate = hyperparameters["learning_rate"]
        settings = eqx.tree_at(lambda s: (s.lr_begin, s.lr_end), recipe.settings, (learning_rate, learning_rate))
        return settings.pipeline(env, hyperparameters["key"])

    population = pr.Population(make_member, {"key": keys, "learning_rate": starting})
    pbt = pr.PBT(population, {"key": None, "learning_rate": Perturb()}, interval=interval)
    num_updates = num_updates or recipe.settings.num_updates
    published = recipe.published
    output_type = jax.eval_shape(lambda: population.networks(population.init(jax.random.key(seed)))).output_type
    evaluation = pr.Evaluation(
        published.evaluation_policy(env, output_type),
        num_episodes=published.episodes,
        key=jax.random.key(seed + 1_000_003),
    )
    results: dict = {"seed": seed, "starting_learning_rates": np.asarray(starting).tolist()}

    start = time.perf_counter()
    fixed = population.train(population.init(jax.random.key(seed)), num_updates=num_updates)
    fixed_scores = np.asarray(population.evaluate(fixed.state, evaluation).mean_return)
    results["fixed"] = {
        "scores": fixed_scores.tolist(),
        "training_returns": _last_tenth(fixed.metrics).tolist(),
        "seconds": time.perf_counter() - start,
    }

    start = time.perf_counter()
    trained = pbt.train(pbt.init(jax.random.key(seed)), num_updates=num_updates)
    pbt_scores = np.asarray(pbt.population_at(trained.state).evaluate(trained.state.members, evaluation).mean_return)
    lineage = trained.lineage
    results["pbt"] = {
        "scores": pbt_scores.tolist(),
        "training_returns": _last_tenth(trained.metrics).tolist(),
        "final_learning_rates": np.asarray(trained.state.hyperparameters["learning_rate"]).tolist(),
        "seconds": time.perf_counter() - start,
        "copies": len(lineage.events()),
    }
    results["curves"] = {
        "frames_per_update": population.frames_per_update,
        "learning_rate": np.asarray(lineage.hyperparameters["learning_rate"]).tolist(),
        "fixed_return": _smoothed_returns(fixed.metrics),
        "pbt_return": _smoothed_returns(trained.metrics),
    }
    results["lineage"] = lineage.events()
    return results


def _last_tenth(metrics: pr.TrainMetrics) -> np.ndarray:
    """Each member's mean training return over the last tenth of the updates."""
    tail = jax.tree.map(lambda x: x[:, -max(1, x.shape[1] // 10) :], metrics)
    return np.asarray(tail.mean_episode_return)


def _smoothed_returns(metrics: pr.TrainMetrics, window: int = 20) -> list[list[float]]:
    """Each member's mean return over windows of `window` updates (NaN where no episode ended)."""
    sums, counts = np.asarray(metrics.episode_return_sum), np.asarray(metrics.episodes_completed)
    window = min(window, sums.shape[1])
    usable = sums.shape[1] // window * window
    sums = sums[:, :usable].reshape(len(sums), -1, window).sum(-1)
    counts = counts[:, :usable].reshape(len(counts), -1, window).sum(-1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan).tolist()


def plot(result: dict, path: pathlib.Path) -> None:
    """The first experiment: learning rates and returns of every member of both arms against steps."""
    plt = import_pyplot()
    curves = result["curves"]
    rates = np.asarray(curves["learning_rate"])
    frames = curves["frames_per_update"] * np.arange(1, rates.shape[1] + 1)
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for member, row in enumerate(rates):
        top.plot(frames, row, color=f"C{member % 10}", lw=1)
        top.axhline(result["starting_learning_rates"][member], color=f"C{member % 10}", lw=0.8, ls=":")
    top.set_yscale("log")
    top.set_ylabel("learning rate")
    top.set_title(f"PBT of {RECIPE} (seed {result['seed']}): solid PBT, dotted fixed")
    window = rates.shape[1] // len(curves["pbt_return"][0])
    window_frames = curves["frames_per_update"] * window * np.arange(1, len(curves["pbt_return"][0]) + 1)
    for member, (pbt_row, fixed_row) in enumerate(zip(curves["pbt_return"], curves["fixed_return"], strict=True)):
        bottom.plot(window_frames, pbt_row, color=f"C{member % 10}", lw=1)
        bottom.plot(window_frames, fixed_row, color=f"C{member % 10}", lw=0.8, ls=":")
    bottom.set_ylabel("training return")
    bottom.set_xlabel("environment steps per member")
    for axes in (top, bottom):
        axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="the experiments' seeds")
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--interval", type=int, default=5, help="updates between PBT's ready steps")
    parser.add_argument("--learning-rates", default="1e-5,1e-4", help="LOW,HIGH of the starting learning rates")
    parser.add_argument("--num-updates", type=int, help="updates per member (by default the recipe's)")
    parser.add_argument("--output", type=pathlib.Path, default=pathlib.Path("."))
    args = parser.parse_args()
    low, high = (float(x) for x in args.learning_rates.split(","))
    learning_rates = Resample(low, high, log=True)
    args.output.mkdir(parents=True, exist_ok=True)
    results = []
    for seed in (int(s) for s in args.seeds.split(",")):
        result = experiment(
            seed,
            members=args.members,
            interval=args.interval,
            learning_rates=learning_rates,
            num_updates=args.num_updates,
        )
        fixed, pbt = max(result["fixed"]["scores"]), max(result["pbt"]["scores"])
        best_rate = result["starting_learning_rates"][int(np.argmax(result["fixed"]["scores"]))]
        print(
            f"seed {seed}: best fixed {fixed:.1f} (lr {best_rate:.2e}), "
            f"best PBT {pbt:.1f}; training return of the last tenth (best, mean of members): fixed "
            f"{max(result['fixed']['training_returns']):.1f}, {np.mean(result['fixed']['training_returns']):.1f}, "
            f"PBT {max(result['pbt']['training_returns']):.1f}, {np.mean(result['pbt']['training_returns']):.1f}; "
            "PBT learning rates at the end "
            + ", ".join(f"{x:.2e}" for x in result["pbt"]["final_learning_rates"])
            + f"; {result['pbt']['copies']} copies; {result['fixed']['seconds']:.0f} s fixed, "
            f"{result['pbt']['seconds']:.0f} s PBT",
            flush=True,
        )
        results.append(result)
    plot(results[0], args.output / "pbt_comparison.png")
    for result in results[1:]:
        del result["lineage"], result["curves"]
    summary = {
        "recipe": RECIPE,
        "members": args.members,
        "interval": args.interval,
        "learning_rates": [low, high],
        "platform": f"{jax.devices()[0].platform}, jax {jax.__version__}",
        "experiments": results,
    }
    (args.output / "pbt_comparison.json").write_text(json.dumps(summary, indent=1))
    wins = sum(max(r["pbt"]["scores"]) > max(r["fixed"]["scores"]) for r in results)
    print(f"pbt_wins={wins}/{len(results)}")


if __name__ == "__main__":
    jnp.zeros(())  # start the backend before timing
    main()
