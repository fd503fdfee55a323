"""The results that learners and executors report: typed modules, free of the parts that made them."""

from typing import final

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int


LossTerms = dict[str, Float[Array, ""]]
"""The named terms of a loss (for logging and NaN checks)."""


@final
class UpdateMetrics(eqx.Module):
    """What one update reports (averaged over its gradient steps).

    **Arguments:**

    - `loss`: the minimised loss.
    - `terms`: its named terms.
    - `grad_norm`: the global norm of the (device-averaged) gradient.
    """

    loss: Float[Array, ""]
    terms: LossTerms
    grad_norm: Float[Array, ""]


@final
class TrainMetrics(eqx.Module):
    """Per-update metrics; `Anakin.train` stacks them along a leading axis.

    **Arguments:**

    - `update`: the learner's metrics.
    - `episode_return_sum`: the summed returns of episodes that ended in the rollout.
    - `episodes_completed`: how many episodes ended in the rollout.
    - `episode_length_sum`: the summed lengths (steps) of those episodes.
    """

    update: UpdateMetrics
    episode_return_sum: Float[Array, "*updates"]
    episodes_completed: Int[Array, "*updates"]
    episode_length_sum: Int[Array, "*updates"]

    @property
    def mean_episode_return(self) -> Float[Array, "*population"]:
        """The mean return of all episodes completed in these updates (NaN if none).

        Over the last axis (the updates): one value for a run, one per member for the
        stacked metrics of a [`podrace.Population`][].
        """
        return self._per_episode(self.episode_return_sum)

    @property
    def mean_episode_length(self) -> Float[Array, "*population"]:
        """The mean length of all episodes completed in these updates (NaN if none), as `mean_episode_return`."""
        return self._per_episode(self.episode_length_sum)

    def _per_episode(self, sums: Array) -> Array:
        count = jnp.sum(self.episodes_completed, axis=-1)
        return jnp.where(count > 0, jnp.sum(sums, axis=-1) / jnp.maximum(count, 1), jnp.nan)


@final
class EvaluationResult(eqx.Module):
    """Per-episode results of [`podrace.evaluate`][].

    **Arguments:**

    - `returns`: the undiscounted return of each episode.
    - `lengths`: its number of steps.
    - `completed`: whether it ended (terminated or truncated) within the step budget;
        an episode that did not reports its return and length so far.
    """

    returns: Float[Array, "*population episodes"]
    lengths: Int[Array, "*population episodes"]
    completed: Bool[Array, "*population episodes"]

    @property
    def mean_return(self) -> Float[Array, "*population"]:
        """The mean return over the episodes (of each member, for [`podrace.evaluate_population`][])."""
        return jnp.mean(self.returns, axis=-1)
