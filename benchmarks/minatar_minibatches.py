"""gymnax-blines' MinAtar PPO with minibatches of single transitions (the published way) or of whole trajectories.

The recipe `gymnax-ppo-<game>-minatar` of `podrace.recipes`, shortened to `--env-steps`,
trained for `--seeds` seeds as one population, twice: as published (single transitions
shuffled into the minibatches) and with podrace's default minibatches of whole
trajectories, everything else equal. Prints each variant's evaluation scores (164
episodes with sampled actions per seed, as the recipe measures them).

    python benchmarks/minatar_minibatches.py --game breakout --env-steps 2000000 --seeds 2
"""

import argparse
import dataclasses
from typing import final

import equinox as eqx
import jax
import numpy as np
from jaxtyping import PRNGKeyArray

import podrace as pr
from podrace import recipes, reproduction


@final
class WholeTrajectories(recipes.AbstractSettings):
    """A recipe's settings, with its learner's minibatches made of whole trajectories."""

    faithful: recipes.GymnaxBlinesPPO

    @property
    def algorithm(self) -> str:
        return self.faithful.algorithm + ", whole trajectories"

    @property
    def num_updates(self) -> int:
        return self.faithful.num_updates

    def pipeline(self, env: pr.envs.AbstractEnv, key: PRNGKeyArray) -> pr.Anakin:
        pipeline = self.faithful.pipeline(env, key)
        learner = dataclasses.replace(pipeline.learner, minibatches_of="trajectories")
        return eqx.tree_at(lambda p: p.learner, pipeline, learner)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--game", default="breakout", choices=["asterix", "breakout", "freeway", "spaceinvaders"])
    parser.add_argument("--env-steps", type=int, default=2_000_000)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    recipe = recipes.RECIPES[f"gymnax-ppo-{args.game}-minatar"]
    settings = recipe.settings
    assert isinstance(settings, recipes.GymnaxBlinesPPO)
    shortened = eqx.tree_at(lambda s: s.num_train_steps, settings, args.env_steps)
    print(f"{recipe.name} at {args.env_steps:,} env steps, seeds 0-{args.seeds - 1}, {jax.devices()[0].platform}")
    for label, variant in (("single transitions", shortened), ("whole trajectories", WholeTrajectories(shortened))):
        run = reproduction.reproduce(dataclasses.replace(recipe, settings=variant), num_seeds=args.seeds, show=False)
        scores = ", ".join(f"{score:.1f}" for score in run.scores)
        last = np.nanmean(np.asarray(run.curves)[-1])
        print(
            f"{label:>18}: {run.mean:.2f} ± {run.std:.2f} (seeds: {scores}); training episodes of the last call "
            f"{last:.2f}; {run.wall_seconds:.0f} s"
        )


if __name__ == "__main__":
    main()
