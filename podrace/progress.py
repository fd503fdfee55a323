"""Host-side driving of a compiled pipeline: progress bar, timing and learning curves."""

import dataclasses
import pathlib
import time
from typing import final

import jax
import numpy as np
from tqdm.auto import tqdm

from .executors.anakin import Anakin, AnakinState


@final
@dataclasses.dataclass(frozen=True)
class TrainingLog:
    """What [`podrace.progress.train_with_progress`][] measured.

    **Arguments:**

    - `frames`: environment steps done after each call.
    - `mean_episode_return`: mean return of the episodes completed during each call.
    - `compile_seconds`: time of the first call minus the time of a later call,
        i.e. tracing and compiling (equals the first call's time if there is one call).
    - `frames_per_second`: environment steps per second over all calls after the first.
    """

    frames: np.ndarray
    mean_episode_return: np.ndarray
    compile_seconds: float
    frames_per_second: float


def train_with_progress(
    pipeline: Anakin,
    state: AnakinState,
    *,
    num_updates: int,
    updates_per_call: int,
    show: bool = True,
) -> tuple[AnakinState, TrainingLog]:
    """Trains in calls of `updates_per_call` updates, reporting after each call.

    **Arguments:**

    - `pipeline`: the [`podrace.Anakin`][] pipeline.
    - `state`: its state (from `pipeline.init`).
    - `num_updates`: total updates; rounded up to whole calls.
    - `updates_per_call`: updates compiled into one call.
    - `show`: whether to draw a progress bar with the mean episode return and FPS.

    **Returns:**

    The final state and a [`podrace.progress.TrainingLog`][].
    """
    if updates_per_call <= 0 or num_updates <= 0:
        raise ValueError(f"num_updates and updates_per_call must be positive, got {num_updates}, {updates_per_call}.")
    num_calls = -(-num_updates // updates_per_call)
    frames_per_call = pipeline.frames_per_update * updates_per_call
    returns, durations = [], []
    with tqdm(total=num_calls * updates_per_call, unit="update", disable=not show) as bar:
        for _ in range(num_calls):
            start = time.perf_counter()
            result = pipeline.train(state, num_updates=updates_per_call)
            mean_return = float(result.metrics.mean_episode_return)  # waits for the call
            durations.append(time.perf_counter() - start)
            state = result.state
            returns.append(mean_return)
            fps = frames_per_call / durations[-1]
            bar.set_postfix(mean_return=f"{mean_return:.3f}", fps=f"{fps:.3g}")
            bar.update(updates_per_call)
    jax.block_until_ready(state)
    steady = durations[1:] or durations
    log = TrainingLog(
        frames=frames_per_call * np.arange(1, num_calls + 1),
        mean_episode_return=np.asarray(returns),
        compile_seconds=durations[0] - (float(np.median(steady)) if len(durations) > 1 else 0.0),
        frames_per_second=frames_per_call * len(steady) / sum(steady),
    )
    return state, log


def plot_learning_curve(log: TrainingLog, path: str | pathlib.Path, *, title: str = "") -> pathlib.Path:
    """Saves the mean episode return against environment steps as an image.

    Needs matplotlib (`pip install "podrace[plot]"`).

    **Arguments:**

    - `log`: from [`podrace.progress.train_with_progress`][].
    - `path`: where to write (the suffix picks the format, e.g. `.png`).
    - `title`: the figure title.

    **Returns:**

    The path written.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError('Plotting needs matplotlib: pip install "podrace[plot]"') from error
    path = pathlib.Path(path)
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot(log.frames, log.mean_episode_return)
    axes.set_xlabel("environment steps")
    axes.set_ylabel("mean episode return")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
