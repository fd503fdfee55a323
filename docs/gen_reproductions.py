"""Writes the published-results page from the outputs of `podrace reproduce`.

`docs/reproductions/` holds the `NAME.json` files that `podrace reproduce NAME --seeds N
--out docs/reproductions` saved on the 2-core CPU (the measurements, the published
result and the verdict), and `docs/reproductions/gpu/` those saved on a GPU. This
script reads both, draws each run's learning curves beside its file as `NAME.png` and
writes `docs/reproductions.md`: one table of every recipe, measured or not, and the
figures of every run. The page and the figures
are build outputs (git ignores them): `nox -s docs` writes them before building the
site. No number on them is typed by hand.

    python docs/gen_reproductions.py
"""

import pathlib

from podrace import recipes, reproduction


ROOT = pathlib.Path(__file__).parent.parent
RESULTS = ROOT / "docs" / "reproductions"
# Where the runs of each platform are saved, below `RESULTS`.
PLATFORMS = {"CPU": ".", "GPU": "gpu"}
PAGE = ROOT / "docs" / "reproductions.md"

INTRODUCTION = """\
# Published results

Each row is a recipe of [`podrace.recipes`][]: a published result, the published
hyperparameters, and podrace's configuration built from them alone. `podrace reproduce
NAME --seeds N` trains the recipe for N seeds as one compiled population (on EnvPool,
whose pools cannot be vmapped, one seed after another, each on a pool of its own), measures each
seed as the source measured it (the final policy's evaluation episodes with sampled
actions for gymnax-blines, the last 100 training episodes for CleanRL, the evaluation
episodes of the deterministic policy for RL Zoo and of the greedy one for purejaxql) and
judges the mean: a recipe **reaches** the published result when the mean is at least
the published value minus the larger of the published spread and a tenth of the
distance from a uniformly random policy's return. The rule asks for at least 5 seeds:
a verdict of fewer seeds (the command prints it with that caveat) gives its number of
seeds beside it and counts as no verdict. A recipe whose source publishes its settings
but no result (purejaxql's PQN on MinAtar) has no verdict;
`benchmarks/purejaxql_baseline.py` runs the source's own code beside it. A recipe whose
threshold is at or below the lowest return its task gives cannot fail its verdict (a
published value that is a random policy's return, such as -200 on MountainCar-v0): its
verdict says so, with the reason.

This page is written by `docs/gen_reproductions.py` from the files that the command
saved in `docs/reproductions/` (on a 2-core CPU) and `docs/reproductions/gpu/` (on one
GPU). A row's score is that of the run with more seeds (the CPU's on a tie); the wall
times include compilation, and the platform lines below name each machine and JAX. The
GPU runs shared their machine with other work (the MinAtar PPO rows with a run of the test suite on
10 of its 16 CPU cores, the MinAtar PQN rows with `benchmarks/purejaxql_baseline.py` on the same GPU), so
their wall times are upper bounds.
To add or refresh a row:

```bash
podrace reproduce NAME --seeds 5 --out docs/reproductions
```
"""


def _published(recipe: recipes.Recipe) -> str:
    published = recipe.published
    if published.value is None:
        return "none published"
    spread = "" if published.spread is None else f" ± {published.spread:g}"
    runs = "1 run" if published.num_runs == 1 else f"{published.num_runs} runs"
    return f"{published.value:g}{spread} ({runs})"


def _row(recipe: recipes.Recipe, runs: dict[str, reproduction.Reproduction]) -> str:
    cells = [f"`{recipe.name}`", recipe.settings.algorithm, f"{recipe.suite} {recipe.env_id}", _published(recipe)]
    cannot_fail = f"cannot fail: {recipe.cannot_fail}" if recipe.cannot_fail else ""
    if not runs:
        return "| " + " | ".join([*cells, "not measured yet", "", "", cannot_fail, "", ""]) + " |"
    where, run = max(runs.items(), key=lambda item: len(item[1].seeds))
    if run.threshold is None:
        threshold, verdict = "", "no verdict"
    else:
        threshold = f"{run.threshold:.4g}"
        verdict = "reaches" if run.reaches_published else "**below published**"
    if len(run.seeds) < 5:
        verdict += f" ({len(run.seeds)} seeds)"
    if cannot_fail:
        verdict += f" ({cannot_fail})"
    times = [f"{runs[name].wall_seconds:.0f} s" if name in runs else "" for name in PLATFORMS]
    cells += [f"{run.mean:.4g} ± {run.std:.2g}", f"{len(run.seeds)} ({where})", threshold, verdict, *times]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    measured = {where: reproduction.load(RESULTS / folder) for where, folder in PLATFORMS.items()}
    runs = {
        name: {where: found[name] for where, found in measured.items() if name in found} for name in recipes.RECIPES
    }
    lines = [
        INTRODUCTION,
        "| recipe | algorithm | environment | published | podrace | seeds | threshold | verdict | 2-core CPU | GPU |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *(_row(recipe, runs[name]) for name, recipe in recipes.RECIPES.items()),
        "",
        "## Learning curves and notes",
        "",
    ]
    for name, recipe in recipes.RECIPES.items():
        lines += [f"### {name}", "", f"Source: {recipe.published.source}.", ""]
        if recipe.notes:
            lines += [recipe.notes, ""]
        if not runs[name]:
            lines += [f"Not measured yet: `podrace reproduce {name} --seeds 5 --out docs/reproductions`.", ""]
        for where, run in runs[name].items():
            scores = ", ".join(f"{score:.4g}" for score in run.scores)
            figure = pathlib.Path(PLATFORMS[where]) / f"{name}.png"
            reproduction.plot_reproduction(run, RESULTS / figure)
            lines += [
                f"On the {where}: {run.mean:.4g} ± {run.std:.2g}; scores of seeds {', '.join(map(str, run.seeds))}: "
                f"{scores}; a random policy: {run.random_return:.4g}; {run.wall_seconds:.0f} s on {run.platform}.",
                "",
                f"![{name}, {where}](reproductions/{figure.as_posix()})",
                "",
            ]
    PAGE.write_text("\n".join(lines))
    counts = ", ".join(f"{len(found)} on the {where}" for where, found in measured.items())
    total = f"{sum(map(bool, runs.values()))} of {len(recipes.RECIPES)} recipes measured"
    print(f"wrote {PAGE.relative_to(ROOT)}: {total} ({counts})")


if __name__ == "__main__":
    main()
