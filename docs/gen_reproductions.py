"""Writes the published-results page from the outputs of `podrace reproduce`.

`docs/reproductions/` holds the `NAME.json` files that `podrace reproduce NAME --seeds N
--out docs/reproductions` saved (the measurements, the published result and the
verdict). This script reads them, draws each one's learning curves as
`docs/reproductions/NAME.png` and writes `docs/reproductions.md`: one table of every
recipe, measured or not, and one figure per measured recipe. The page and the figures
are build outputs (git ignores them): `nox -s docs` writes them before building the
site. No number on them is typed by hand.

    python docs/gen_reproductions.py
"""

import pathlib

from podrace import recipes


ROOT = pathlib.Path(__file__).parent.parent
RESULTS = ROOT / "docs" / "reproductions"
PAGE = ROOT / "docs" / "reproductions.md"

INTRODUCTION = """\
# Published results

Each row is a recipe of [`podrace.recipes`][]: a published result, the published
hyperparameters, and podrace's configuration built from them alone. `podrace reproduce
NAME --seeds N` trains the recipe for N seeds as one compiled population, measures each
seed as the source measured it (the final policy's evaluation episodes with sampled
actions for gymnax-blines, the last 100 training episodes for CleanRL) and judges the
mean: a recipe **reaches** the published result when the mean is at least the published
value minus the larger of the published spread and a tenth of the distance from a
uniformly random policy's return. The rule asks for at least 5 seeds.

This page is written by `docs/gen_reproductions.py` from the files that the command
saved in `docs/reproductions/`; the times are those of the machine named in each row's
platform. To add or refresh a row:

```bash
podrace reproduce NAME --seeds 5 --out docs/reproductions
```
"""


def _published(recipe: recipes.Recipe) -> str:
    published = recipe.published
    spread = "" if published.spread is None else f" ± {published.spread:g}"
    runs = "1 run" if published.num_runs == 1 else f"{published.num_runs} runs"
    return f"{published.value:g}{spread} ({runs})"


def _row(recipe: recipes.Recipe, run: recipes.Reproduction | None) -> str:
    cells = [f"`{recipe.name}`", recipe.settings.algorithm, recipe.env_id, _published(recipe)]
    if run is None:
        cells += ["not measured yet", "", "", "", ""]
    else:
        verdict = "reaches" if run.reaches_published else "**below published**"
        if len(run.seeds) < 5:
            verdict += f" ({len(run.seeds)} seeds)"
        cells += [
            f"{run.mean:.4g} ± {run.std:.2g}",
            str(len(run.seeds)),
            f"{run.threshold:.4g}",
            verdict,
            f"{run.wall_seconds:.0f} s on {run.platform.split(',')[0]}",
        ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    measured = recipes.load(RESULTS)
    lines = [
        INTRODUCTION,
        "| recipe | algorithm | gymnax env | published | podrace | seeds | threshold | verdict | wall time |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *(_row(recipe, measured.get(name)) for name, recipe in recipes.RECIPES.items()),
        "",
        "## Learning curves and notes",
        "",
    ]
    for name, recipe in recipes.RECIPES.items():
        run = measured.get(name)
        lines += [f"### {name}", "", f"Source: {recipe.published.source}.", ""]
        if recipe.notes:
            lines += [recipe.notes, ""]
        if run is None:
            lines += [f"Not measured yet: `podrace reproduce {name} --seeds 5 --out docs/reproductions`.", ""]
            continue
        scores = ", ".join(f"{score:.4g}" for score in run.scores)
        lines += [
            f"Scores of seeds {', '.join(map(str, run.seeds))}: {scores}; a random policy: "
            f"{run.random_return:.4g}; platform: {run.platform}.",
            "",
        ]
        recipes.plot_reproduction(run, RESULTS / f"{name}.png")
        lines += [f"![{name}](reproductions/{name}.png)", ""]
    PAGE.write_text("\n".join(lines))
    print(f"wrote {PAGE.relative_to(ROOT)}: {len(measured)} of {len(recipes.RECIPES)} recipes measured")


if __name__ == "__main__":
    main()
