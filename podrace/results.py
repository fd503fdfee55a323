"""The results that learners and executors report: typed modules, free of the parts that made them."""

from collections.abc import Iterable
from typing import NoReturn, final

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ._validation import unknown_name


LossTerms = dict[str, Float[Array, ""]]
"""The named terms of a loss (for logging and NaN checks)."""

METRICS = ("loss_terms", "grad_norm", "episodes")
"""The metrics a training call reports when asked, beyond the loss that every update
reports: `loss_terms` (the loss's named terms), `grad_norm` (the gradient's global norm,
a second pass over the gradients) and `episodes` (the returns, lengths and count of the
episodes that ended)."""

DEFAULT_METRICS = frozenset({"episodes"})
"""What a training call reports unless asked otherwise: the loss and the episodes. A
metric left out is not computed: the compiled program is smaller and compiles sooner."""


@final
class NotComputed(eqx.Module):
    """Stands for a metric that a training call was not asked for (see
    [`podrace.results.METRICS`][]). Reading it raises a `ValueError` that says how to ask.

    **Arguments:**

    - `name`: the metric's name in [`podrace.results.METRICS`][].
    """

    name: str = eqx.field(static=True)

    def missing(self, *args: object, **kwargs: object) -> NoReturn:
        """Raises the `ValueError` that reading the metric raises."""
        del args, kwargs
        raise ValueError(
            f"The metric {self.name!r} was not computed: ask for it with "
            f"train(..., metrics={{{self.name!r}, ...}}) (the names: {', '.join(METRICS)}; "
            f"the default: {', '.join(sorted(DEFAULT_METRICS))})."
        )

    __array__ = __jax_array__ = __float__ = __int__ = __getitem__ = __iter__ = missing
    items = keys = values = missing


def check_metrics(owner: str, metrics: str | Iterable[str]) -> frozenset[str]:
    """The names of `metrics` (one name or several) as a set; raises `ValueError`, naming
    `owner`, the nearest names and all of them, for a name not in [`podrace.results.METRICS`][]."""
    names = frozenset((metrics,) if isinstance(metrics, str) else metrics)
    for name in sorted(names):
        if name not in METRICS:
            raise ValueError(f"{owner}: {unknown_name('metric', name, METRICS)}")
    return names


@final
class UpdateMetrics(eqx.Module):
    """What one update reports (averaged over its gradient steps).

    **Arguments:**

    - `loss`: the minimised loss.
    - `terms`: its named terms ([`podrace.results.NotComputed`][] unless asked for as
        `loss_terms`).
    - `grad_norm`: the global norm of the (device-averaged) gradient
        ([`podrace.results.NotComputed`][] unless asked for).
    """

    loss: Float[Array, ""]
    terms: LossTerms | NotComputed
    grad_norm: Float[Array, ""] | NotComputed


@final
class TrainMetrics(eqx.Module):
    """Per-update metrics; `Anakin.train` stacks them along a leading axis.

    **Arguments:**

    - `update`: the learner's metrics.
    - `episode_return_sum`: the summed returns of episodes that ended in the rollout.
    - `episodes_completed`: how many episodes ended in the rollout.
    - `episode_length_sum`: the summed lengths (steps) of those episodes.

    The episodes' three are [`podrace.results.NotComputed`][] unless asked for as `episodes`.
    """

    update: UpdateMetrics
    episode_return_sum: Float[Array, "*updates"] | NotComputed
    episodes_completed: Int[Array, "*updates"] | NotComputed
    episode_length_sum: Int[Array, "*updates"] | NotComputed

    def select(self, metrics: frozenset[str]) -> "TrainMetrics":
        """These metrics with those not named in `metrics` replaced by
        [`podrace.results.NotComputed`][]: inside a compiled program, XLA then leaves out
        what computes them."""
        fields = {
            "loss_terms": lambda m: (m.update.terms,),
            "grad_norm": lambda m: (m.update.grad_norm,),
            "episodes": lambda m: (m.episode_return_sum, m.episodes_completed, m.episode_length_sum),
        }
        left_out = [
            (where, name)
            for name, where in fields.items()
            if name not in metrics and not isinstance(where(self)[0], NotComputed)
        ]
        if not left_out:
            return self
        # By node, not by constructor: the metrics may be stacked over updates and members.
        return eqx.tree_at(
            lambda m: sum((where(m) for where, _ in left_out), ()),
            self,
            tuple(NotComputed(name) for where, name in left_out for _ in where(self)),
        )

    @property
    def has_episodes(self) -> bool:
        """Whether the episodes' statistics were computed (asked for as `episodes`)."""
        return not isinstance(self.episodes_completed, NotComputed)

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

    def _per_episode(self, sums: Array | NotComputed) -> Array:
        if isinstance(sums, NotComputed) or isinstance(self.episodes_completed, NotComputed):
            NotComputed("episodes").missing()
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


@final
class MatchResult(eqx.Module):
    """Per-game results of [`podrace.play_match`][], from the side of the agent it tests.

    **Arguments:**

    - `scores`: the agent's return in each game: its rewards minus the opponent's (in
        a game scored +1, 0 and -1, positive for a win, 0 for a draw, negative for a loss).
    - `moved_first`: whether the agent made the game's first move.
    - `lengths`: the game's number of moves.
    - `completed`: whether the game ended within the step budget; one that did not
        reports its score so far.
    """

    scores: Float[Array, " games"]
    moved_first: Bool[Array, " games"]
    lengths: Int[Array, " games"]
    completed: Bool[Array, " games"]

    def record(self, *, first: bool) -> tuple[int, int, int]:
        """The agent's wins, draws and losses in the games where it moved first (`first=True`)
        or second: counts of positive, zero and negative scores."""
        scores = self.scores[self.moved_first == first]
        return int(jnp.sum(scores > 0)), int(jnp.sum(scores == 0)), int(jnp.sum(scores < 0))
