"""Host-side driving of a compiled pipeline: progress bar, timing, metric logging and learning curves."""

import dataclasses
import pathlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

import jax
import numpy as np
from tqdm.auto import tqdm

from .checkpoint import Checkpointer
from .executors.pipeline import AbstractPipeline, AbstractTrainResult
from .loggers import AbstractSink
from .results import DEFAULT_METRICS, METRICS


@final
@dataclasses.dataclass(frozen=True)
class TrainingLog:
    """What [`podrace.progress.train_with_progress`][] measured.

    **Arguments:**

    - `frames`: environment steps done after each call (by each member, for a
        [`podrace.Population`][]).
    - `mean_episode_return`: mean return of the episodes completed during each call,
        NaN where none was (axes `[calls, members]` for a population).
    - `compile_seconds`: time of the first call minus the time of a later call,
        i.e. tracing and compiling (equals the first call's time if there is one call).
    - `frames_per_second`: environment steps per second over all calls after the first
        (of all members together, for a population).
    """

    frames: np.ndarray
    mean_episode_return: np.ndarray
    compile_seconds: float
    frames_per_second: float


def train_with_progress(
    pipeline: AbstractPipeline,
    state: Any,
    *,
    num_updates: int,
    updates_per_call: int,
    show: bool = True,
    sinks: Sequence[AbstractSink] = (),
    checkpointer: Checkpointer | None = None,
    checkpoint_every: int | None = None,
    config: Mapping[str, Any] | None = None,
    start_update: int = 0,
    on_call: Callable[[int, AbstractTrainResult], None] | None = None,
) -> tuple[Any, TrainingLog]:
    """Trains `num_updates` updates in calls of `updates_per_call`, reporting after each call.

    After each call its metrics are copied to the host, reduced by the result's
    `summary` ([`podrace.loggers.summarize`][], and a [`podrace.PBT`][]'s
    hyperparameters) and written to every sink at the step of the
    number of updates done, with `frames` (as in the log) and `frames_per_second` (of
    that call; the first call's includes compiling). With a `checkpointer`, the state
    is saved every `checkpoint_every` updates and after the last call, as the
    checkpoint of the number of updates done. To resume, restore the latest checkpoint
    and pass its step as `start_update` (see the [checkpoints guide](../checkpoints.md)).

    **Arguments:**

    - `pipeline`: any [`podrace.executors.pipeline.AbstractPipeline`][]: a
        [`podrace.Anakin`][] pipeline, a [`podrace.Population`][] or a
        [`podrace.executors.host.HostPipeline`][].
    - `state`: its state (from `pipeline.init`).
    - `num_updates`: total updates: whole calls of `updates_per_call`, then the rest in
        one shorter call.
    - `updates_per_call`: updates compiled into one call.
    - `show`: whether to draw a progress bar with the mean episode return and FPS
        (the mean over the members, for a population).
    - `sinks`: where to write the metrics of each call (see [`podrace.loggers`][]);
        the caller closes them. With sinks, every update computes all of
        [`podrace.results.METRICS`][] for them; without, the default ones (the episodes),
        which is cheaper.
    - `checkpointer`: where to save the state (see [`podrace.checkpoint.Checkpointer`][]).
    - `checkpoint_every`: updates between checkpoints, a multiple of `updates_per_call`;
        by default only the final state is saved.
    - `config`: saved with every checkpoint (how the run was built).
    - `start_update`: the updates done before this call (by the run being resumed):
        steps, frames and checkpoints count on from it.
    - `on_call`: called after each call with the number of updates done and the
        call's result (to keep a [`podrace.PBT`][] lineage, say).

    **Returns:**

    The final state and a [`podrace.progress.TrainingLog`][].
    """
    if updates_per_call <= 0 or num_updates <= 0:
        raise ValueError(f"num_updates and updates_per_call must be positive, got {num_updates}, {updates_per_call}.")
    if checkpoint_every is not None and (checkpoint_every <= 0 or checkpoint_every % updates_per_call):
        raise ValueError(
            f"checkpoint_every must be a positive multiple of updates_per_call ({updates_per_call}), got "
            f"{checkpoint_every}."
        )
    if start_update < 0:
        raise ValueError(f"start_update must be non-negative, got {start_update}.")
    # Whole calls, then the rest in one shorter call (a program of its own).
    call_sizes = [updates_per_call] * (num_updates // updates_per_call)
    if num_updates % updates_per_call:
        call_sizes.append(num_updates % updates_per_call)
    metrics = frozenset(METRICS) if sinks else DEFAULT_METRICS
    frames_per_update = pipeline.frames_per_update  # of each member
    returns, durations, updates_done = [], [], start_update
    with tqdm(total=num_updates, unit="update", disable=not show) as bar:
        for call, size in enumerate(call_sizes, start=1):
            start = time.perf_counter()
            result = pipeline.train(state, num_updates=size, metrics=metrics)
            jax.block_until_ready(result.metrics)
            durations.append(time.perf_counter() - start)
            state = result.state
            fps = pipeline.num_members * frames_per_update * size / durations[-1]
            updates_done += size
            summary = {"frames": float(frames_per_update * updates_done), "frames_per_second": fps}
            summary |= result.summary()
            for sink in sinks:
                sink.write(updates_done, summary)
            if on_call is not None:
                on_call(updates_done, result)
            if checkpointer is not None and (
                call == len(call_sizes) or (checkpoint_every is not None and updates_done % checkpoint_every == 0)
            ):
                checkpointer.save(updates_done, state, config=config)
            returns.append(np.asarray(result.metrics.mean_episode_return))
            completed = returns[-1][np.isfinite(returns[-1])]
            bar.set_postfix(mean_return=f"{completed.mean():.3f}" if completed.size else "-", fps=f"{fps:.3g}")
            bar.update(size)
    jax.block_until_ready(state)
    # The frame rate of the whole calls after the first, which compiled (as did a shorter last call).
    full = [duration for duration, size in zip(durations, call_sizes, strict=True) if size == updates_per_call]
    steady = full[1:] or durations[:1]
    steady_sizes = [updates_per_call] * len(full[1:]) or call_sizes[:1]
    log = TrainingLog(
        frames=frames_per_update * (start_update + np.cumsum(call_sizes)),
        mean_episode_return=np.asarray(returns),
        compile_seconds=durations[0] - (float(np.median(steady)) if len(full) > 1 else 0.0),
        frames_per_second=pipeline.num_members * frames_per_update * sum(steady_sizes) / sum(steady),
    )
    return state, log


def import_pyplot() -> Any:
    """`matplotlib.pyplot` on a backend that needs no screen; an `ImportError` naming the
    pip command when matplotlib is missing (call it before a run that plots at its end)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError('Plotting needs matplotlib: pip install "podrace[plot]"') from error
    return plt


def plot_learning_curve(log: TrainingLog, path: str | pathlib.Path, *, title: str = "") -> pathlib.Path:
    """Saves the mean episode return against environment steps as an image.

    For a population (returns of shape `[calls, members]`) it draws the mean over the
    members and shades one standard deviation either side, and the lowest and highest
    member in a lighter shade. Calls in which no episode ended are left out.

    Needs matplotlib (`pip install "podrace[plot]"`).

    **Arguments:**

    - `log`: from [`podrace.progress.train_with_progress`][].
    - `path`: where to write (the suffix picks the format, e.g. `.png`).
    - `title`: the figure title.

    **Returns:**

    The path written.
    """
    plt = import_pyplot()
    path = pathlib.Path(path)
    returns = log.mean_episode_return.reshape(len(log.frames), -1)
    ended = np.any(np.isfinite(returns), axis=1)
    frames, returns = log.frames[ended], returns[ended]
    figure, axes = plt.subplots(figsize=(6, 4))
    if returns.shape[1] > 1:
        mean, std = np.nanmean(returns, axis=1), np.nanstd(returns, axis=1)
        low, high = np.nanmin(returns, axis=1), np.nanmax(returns, axis=1)
        axes.fill_between(frames, low, high, color="C0", alpha=0.15, lw=0, label="lowest to highest")
        axes.fill_between(frames, mean - std, mean + std, color="C0", alpha=0.3, lw=0, label="± one std")
        axes.plot(frames, mean, color="C0", label=f"mean of {returns.shape[1]} members")
        axes.legend(loc="lower right")
    else:
        axes.plot(frames, returns[:, 0])
    axes.set_xlabel("environment steps")
    axes.set_ylabel("mean episode return")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
