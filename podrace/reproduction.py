"""Running a recipe of [`podrace.recipes`][] and judging it: [`podrace.reproduction.reproduce`][]
trains it for several seeds as one [`podrace.Population`][] (one compiled program),
measures each seed as the source measured it, and judges the mean against the published
value (`podrace reproduce NAME --seeds N` on the command line).

**Verdict rule.** A recipe reaches the published result when the mean over seeds is at
least the published value minus the larger of its published spread and a tenth of the
distance between a uniformly random policy's return and the published value. The rule
asks for at least 5 seeds. A recipe whose source publishes settings but no result has
no verdict.
"""

import dataclasses
import json
import pathlib
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any, final

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from ._version import __version__
from .executors.anakin import Anakin
from .executors.evaluation import random_policy_episodes
from .executors.population import Population, evaluate_population
from .recipes import RECIPES, Recipe
from .results import TrainMetrics


@final
@dataclasses.dataclass(frozen=True)
class Reproduction:
    """What [`podrace.reproduction.reproduce`][] measured.

    **Arguments:**

    - `recipe`: the recipe's name.
    - `seeds`: the seeds run.
    - `scores`: each seed's number, measured as the source measured it.
    - `random_return`: the mean return of a uniformly random policy (over 200 episodes).
    - `env_steps`: the learning curve's x-axis: environment steps of each seed after each call.
    - `curves`: the mean return of the training episodes that ended in each call,
        `[calls, seeds]` (NaN where none did).
    - `wall_seconds`: the run's time, compilation included.
    - `platform`: where it ran (devices, JAX and podrace versions).
    """

    recipe: str
    seeds: tuple[int, ...]
    scores: tuple[float, ...]
    random_return: float
    env_steps: tuple[int, ...]
    curves: tuple[tuple[float, ...], ...]
    wall_seconds: float
    platform: str

    @property
    def mean(self) -> float:
        """The mean score over seeds."""
        return float(np.mean(self.scores))

    @property
    def std(self) -> float:
        """The standard deviation of the scores over seeds (population, as CleanRL reports it)."""
        return float(np.std(self.scores))

    @property
    def threshold(self) -> float | None:
        """The lowest mean that reaches the published result (see the module's verdict rule);
        `None` where nothing is published."""
        published = RECIPES[self.recipe].published
        if published.value is None:
            return None
        margin = max(published.spread or 0.0, 0.1 * abs(published.value - self.random_return))
        return published.value - margin

    @property
    def reaches_published(self) -> bool | None:
        """Whether the mean is at or above `threshold`; `None` where nothing is published."""
        threshold = self.threshold
        return None if threshold is None else self.mean >= threshold

    def to_json(self) -> dict[str, Any]:
        """The measurements and the verdict, with the recipe's published result, as JSON values."""
        recipe = RECIPES[self.recipe]
        return {
            **{field.name: getattr(self, field.name) for field in dataclasses.fields(self)},
            "mean": self.mean,
            "std": self.std,
            "threshold": self.threshold,
            "reaches_published": self.reaches_published,
            "env_id": recipe.env_id,
            "algorithm": recipe.settings.algorithm,
            "published": dataclasses.asdict(recipe.published),
        }

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> "Reproduction":
        """The reproduction saved by `to_json`."""
        return cls(
            recipe=values["recipe"],
            seeds=tuple(values["seeds"]),
            scores=tuple(values["scores"]),
            random_return=values["random_return"],
            env_steps=tuple(values["env_steps"]),
            curves=tuple(tuple(row) for row in values["curves"]),
            wall_seconds=values["wall_seconds"],
            platform=values["platform"],
        )


def _call_sizes(num_updates: int, target: int = 20) -> list[int]:
    """The updates of each call, about `target` calls in all.

    Calls of one size (one compiled program) where a divisor of `num_updates` gives
    between half and twice `target` calls; otherwise calls of `ceil(num_updates /
    target)` updates and a shorter last one.
    """
    divisors = [d for d in range(1, num_updates + 1) if num_updates % d == 0]
    best = min(divisors, key=lambda d: (abs(num_updates // d - target), d))
    if target / 2 <= num_updates // best <= 2 * target or num_updates < target:
        return [best] * (num_updates // best)
    size = -(-num_updates // target)
    return [size] * (num_updates // size) + ([num_updates % size] if num_updates % size else [])


def _last_episodes_mean(return_sums: np.ndarray, counts: np.ndarray, episodes: int) -> float:
    """The mean return of the episodes that ended in the last updates holding at least `episodes` of them."""
    total_count = np.cumsum(counts[::-1])
    last = int(np.searchsorted(total_count, episodes)) + 1  # updates from the end
    return float(np.sum(return_sums[-last:]) / max(np.sum(counts[-last:]), 1))


POOL_SEED_STRIDE = 10_000
"""Seed `s` of a recipe on EnvPool steps the pool seeded from `POOL_SEED_STRIDE * s` (its
environment `i` from that plus `i`), so that no two seeds share an environment's seed."""


def reproduce(recipe: Recipe, *, num_seeds: int, seed: int = 0, show: bool = True) -> Reproduction:
    """Trains a recipe for `num_seeds` seeds as one population and measures each seed as its source did.

    Seed `s` draws its network from `key(s)` and plays from the population's
    `key(seed)` (member `s - seed` of [`podrace.Population.init`][]). A recipe on
    EnvPool ([`podrace.envs.EnvPoolEnv`][]) cannot be vmapped over seeds: each seed
    trains in turn, on a pool of its own (seeded from `POOL_SEED_STRIDE * s`), playing
    from `fold_in(key(seed), s)`. The run is split into about 20 calls, for the progress
    bar and the learning curves.

    **Arguments:**

    - `recipe`: the recipe.
    - `num_seeds`: the seeds `seed, ..., seed + num_seeds - 1`.
    - `seed`: the first seed.
    - `show`: whether to draw a progress bar.

    **Returns:**

    A [`podrace.reproduction.Reproduction`][].
    """
    start = time.perf_counter()
    settings = recipe.settings
    seeds = tuple(range(seed, seed + num_seeds))
    call_sizes = _call_sizes(settings.num_updates)
    runs: Sequence[Anakin | Population]
    on_pools = recipe.suite == "envpool"
    if on_pools:
        pipelines = [settings.pipeline(recipe.env(POOL_SEED_STRIDE * s), jax.random.key(s)) for s in seeds]
        states = [
            pipeline.init(jax.random.fold_in(jax.random.key(seed), s))
            for pipeline, s in zip(pipelines, seeds, strict=True)
        ]
        runs, member = pipelines, pipelines[0]
    else:
        env = recipe.env()
        population = Population(lambda key: settings.pipeline(env, key), jax.vmap(jax.random.key)(jnp.asarray(seeds)))
        runs, states, member = [population], [population.init(jax.random.key(seed))], population.member(0)
    steps_per_update = member.num_envs * member.rollout_length
    return_sums, counts, curves = [], [], []
    with tqdm(total=settings.num_updates * steps_per_update, unit="step", unit_scale=True, disable=not show) as bar:
        bar.set_description(recipe.name)
        for updates in call_sizes:
            results = []
            for index, run in enumerate(runs):
                results.append(run.train(states[index], num_updates=updates))
                states[index] = results[-1].state
            # Each as [seeds, updates] (or [seeds]): a population's metrics have their members first.
            return_sums.append(_by_seed(results, lambda metrics: metrics.episode_return_sum, on_pools))
            counts.append(_by_seed(results, lambda metrics: metrics.episodes_completed, on_pools))
            curves.append(_by_seed(results, lambda metrics: metrics.mean_episode_return, on_pools))
            bar.set_postfix(mean_return=f"{np.nanmean(curves[-1]):.3f}" if np.isfinite(curves[-1]).any() else "-")
            bar.update(updates * steps_per_update)
    published = recipe.published
    if published.measure == "evaluation":  # a population's (a recipe on EnvPool is measured in training)
        (population,) = runs
        assert isinstance(population, Population)
        evaluation_env = member.evaluation_env()
        networks = population.networks(states[0])
        episodes = evaluate_population(
            evaluation_env,
            networks,
            published.evaluation_policy(evaluation_env, networks.output_type),
            num_episodes=published.episodes,
            key=jax.random.key(seed + 1_000_003),
        )
        scores = np.asarray(episodes.mean_return)
    else:
        sums, completed = np.concatenate(return_sums, axis=1), np.concatenate(counts, axis=1)
        scores = np.asarray(
            [_last_episodes_mean(s, c, published.episodes) for s, c in zip(sums, completed, strict=True)]
        )
    # A bare environment: for EnvPool, a pool of its own (training's cannot be shared).
    random_env = recipe.env(POOL_SEED_STRIDE * (seed + num_seeds)) if on_pools else member.evaluation_env()
    random = random_policy_episodes(random_env, num_episodes=200, key=jax.random.key(seed + 2_000_003))
    return Reproduction(
        recipe=recipe.name,
        seeds=seeds,
        scores=tuple(float(x) for x in scores),
        random_return=float(random.mean_return),
        env_steps=tuple(int(x) for x in steps_per_update * np.cumsum(call_sizes)),
        curves=tuple(tuple(float(x) for x in row) for row in curves),
        wall_seconds=time.perf_counter() - start,
        platform=_platform(),
    )


def _by_seed(results: list[Any], metric: Callable[[TrainMetrics], Any], on_pools: bool) -> np.ndarray:
    """A metric of one call's results, seeds first: the runs' of each seed on EnvPool, else the population's
    (whose members come first)."""
    if on_pools:
        return np.stack([np.asarray(metric(result.metrics)) for result in results])
    return np.asarray(metric(results[0].metrics))


def _platform() -> str:
    device = jax.devices()[0]
    kind = device.device_kind if device.platform != "cpu" else f"CPU ({platform.machine()})"
    return f"{jax.device_count()} x {kind}, jax {jax.__version__}, podrace {__version__}"


def save(reproduction: Reproduction, directory: str | pathlib.Path, *, plot: bool = True) -> list[pathlib.Path]:
    """Writes `NAME.json` (the measurements, the published result and the verdict) and, with `plot`, `NAME.png`.

    **Arguments:**

    - `reproduction`: from [`podrace.reproduction.reproduce`][].
    - `directory`: where to write (created if missing).
    - `plot`: whether to draw the learning curves (needs matplotlib: `pip install "podrace[plot]"`).

    **Returns:**

    The paths written.
    """
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{reproduction.recipe}.json"
    path.write_text(json.dumps(reproduction.to_json(), indent=1, allow_nan=True) + "\n")
    return [path, plot_reproduction(reproduction, directory / f"{reproduction.recipe}.png")] if plot else [path]


def load(directory: str | pathlib.Path) -> dict[str, Reproduction]:
    """The reproductions saved in `directory` by [`podrace.reproduction.save`][], by recipe
    name (known recipes only)."""
    found = {}
    for path in sorted(pathlib.Path(directory).glob("*.json")):
        values = json.loads(path.read_text())
        if values.get("recipe") in RECIPES:
            found[values["recipe"]] = Reproduction.from_json(values)
    return found


def plot_reproduction(reproduction: Reproduction, path: str | pathlib.Path) -> pathlib.Path:
    """Draws the learning curves (mean and spread over seeds) with the published level and the verdict's threshold."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError('Plotting needs matplotlib: pip install "podrace[plot]"') from error
    recipe = RECIPES[reproduction.recipe]
    steps, curves = np.asarray(reproduction.env_steps), np.asarray(reproduction.curves, np.float64)
    ended = np.isfinite(curves).any(axis=1)
    steps, curves = steps[ended], curves[ended]
    mean, std = np.nanmean(curves, axis=1), np.nanstd(curves, axis=1)
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.fill_between(steps, mean - std, mean + std, color="C0", alpha=0.3, lw=0, label="± one std over seeds")
    axes.plot(steps, mean, color="C0", label=f"podrace, mean of {len(reproduction.seeds)} seeds (training episodes)")
    if recipe.published.value is not None and reproduction.threshold is not None:
        axes.axhline(recipe.published.value, color="C3", ls="--", label=f"published {recipe.published.value:g}")
        axes.axhline(reproduction.threshold, color="C3", ls=":", alpha=0.6, label="verdict threshold")
    axes.plot(
        [steps[-1] if len(steps) else 0],
        [reproduction.mean],
        "o",
        color="C1",
        label=f"podrace's score {reproduction.mean:.4g} ± {reproduction.std:.2g}",
    )
    axes.set_xlabel("environment steps (each seed)")
    axes.set_ylabel("return")
    axes.set_title(f"{recipe.settings.algorithm} on {recipe.env_id}", fontsize="medium")
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    path = pathlib.Path(path)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
