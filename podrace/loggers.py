"""Metric logging from the host, between compiled calls: console, CSV, JSON lines, TensorBoard, W&B.

The compiled program only returns its per-update metrics ([`podrace.TrainMetrics`][]);
[`podrace.loggers.summarize`][] reduces those of one call to named scalars on the host
and each sink writes them, one row per call. Nothing calls back into Python while the
program runs.
"""

import abc
import contextlib
import csv
import io
import json
import operator
import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

import jax
import numpy as np
from tqdm.auto import tqdm

from .results import NotComputed, TrainMetrics


def path_names(path: Sequence[Any]) -> tuple[str, ...]:
    """The field names, dictionary keys and indices along a pytree path (as
    `jax.tree_util.tree_leaves_with_path` gives it), e.g. `("learner", "params", "0")`."""

    def name(entry: Any) -> str:
        for attribute in ("name", "key", "idx"):
            if hasattr(entry, attribute):
                return str(getattr(entry, attribute))
        return str(entry)

    return tuple(map(name, path))


def summarize(metrics: TrainMetrics) -> dict[str, float]:
    """Reduces the metrics of one call of `train` to scalars, on the host.

    The keys are `loss`, `loss/<term>` for each named term of the loss (for example
    `loss/entropy` of a policy-gradient loss), `grad_norm` (each a mean over the
    updates), `episodes` (how many episodes ended) and, only if one did,
    `episode_return` and `episode_length` (means over those episodes: no placeholder
    before the first episode ends). A metric the call did not compute (see
    [`podrace.results.METRICS`][]) has no key.

    For the stacked metrics of a [`podrace.Population`][], each member has its own
    series: the key `name/member_i` holds member `i`'s value of `name`, so that
    TensorBoard and W&B group the members' series under the name of the metric.

    **Arguments:**

    - `metrics`: from `Anakin.train` (a leading axis of updates) or `Population.train`
        (axes `[members, updates]`).

    **Returns:**

    A dictionary of Python floats.
    """
    metrics = jax.device_get(metrics)
    ndim = np.ndim(metrics.update.loss)
    if ndim == 1:
        return _summarize_run(metrics)
    if ndim == 2:
        size = len(metrics.update.loss)
        members = [_summarize_run(jax.tree.map(operator.itemgetter(i), metrics)) for i in range(size)]
        return {f"{name}/member_{i}": value for i, member in enumerate(members) for name, value in member.items()}
    raise ValueError(f"summarize: expected metrics with axes [updates] or [members, updates], got {ndim} axes.")


def _summarize_run(metrics: TrainMetrics) -> dict[str, float]:
    update = metrics.update
    summary = {"loss": float(np.mean(update.loss))}
    if not isinstance(update.terms, NotComputed):
        summary |= {f"loss/{name}": float(np.mean(term)) for name, term in update.terms.items()}
    if not isinstance(update.grad_norm, NotComputed):
        summary["grad_norm"] = float(np.mean(update.grad_norm))
    if not metrics.has_episodes:
        return summary
    episodes = int(np.sum(metrics.episodes_completed))
    summary["episodes"] = float(episodes)
    if episodes:
        summary["episode_return"] = float(np.sum(metrics.episode_return_sum)) / episodes
        summary["episode_length"] = float(np.sum(metrics.episode_length_sum)) / episodes
    return summary


class AbstractSink(abc.ABC):
    """Where the summaries of training go: a row of named scalars at each step.

    A sink is a context manager that closes on exit.
    """

    @abc.abstractmethod
    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        """Records one row.

        **Arguments:**

        - `step`: the x-axis, the number of updates done so far.
        - `metrics`: named scalars (for example from [`podrace.loggers.summarize`][]);
            a name may be missing from some rows.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Flushes and releases what the sink holds."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@final
class ConsoleSink(AbstractSink):
    """Prints one line per row (through `tqdm.write`, so that it leaves a progress bar intact).

    **Arguments:**

    - `file`: where to print; standard output by default.
    """

    def __init__(self, file: io.TextIOBase | None = None):
        self.file = file

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        values = (f"{name} {_format(value)}" for name, value in metrics.items())
        tqdm.write("  ".join([f"step {step}", *values]), file=self.file)

    def close(self) -> None:
        """Nothing to release: the console stays open."""


def _format(value: float) -> str:
    return f"{int(value)}" if float(value).is_integer() else f"{value:.4g}"


@final
class JsonLinesSink(AbstractSink):
    """Writes each row as a JSON object on its own line, `{"step": ..., name: value, ...}`.

    **Arguments:**

    - `path`: the file to write (its folder is created).
    - `resume_from`: the step a resumed run goes on from: the rows of an existing file
        up to that step are kept and later ones dropped. `None` replaces the file.
    """

    def __init__(self, path: str | pathlib.Path, *, resume_from: int | None = None):
        kept = _kept_rows([json.loads(line) for line in _lines(path, resume_from)], resume_from)
        self._file = _open(path)
        self._file.writelines(json.dumps(row) + "\n" for row in kept)

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        row = {"step": step} | {name: float(value) for name, value in metrics.items()}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


@final
class CSVSink(AbstractSink):
    """Writes a CSV table: a `step` column and one column per name.

    A name first seen in a later row (such as `episode_return`, written once an
    episode has ended) adds a column: the file is rewritten with the new header and
    the earlier rows leave that column empty.

    **Arguments:**

    - `path`: the file to write (its folder is created).
    - `resume_from`: the step a resumed run goes on from: the rows of an existing file
        up to that step are kept and later ones dropped. `None` replaces the file.
    """

    def __init__(self, path: str | pathlib.Path, *, resume_from: int | None = None):
        reader = csv.DictReader(_lines(path, resume_from))
        rows = [{name: _number(name, value) for name, value in row.items() if value != ""} for row in reader]
        self._rows: list[dict[str, float]] = _kept_rows(rows, resume_from)
        self._columns: list[str] = list(reader.fieldnames or [])
        self._file = _open(path)
        if self._columns:
            writer = csv.DictWriter(self._file, self._columns)
            writer.writeheader()
            writer.writerows(self._rows)

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        row = {"step": step} | {name: float(value) for name, value in metrics.items()}
        self._rows.append(row)
        new = [name for name in row if name not in self._columns]
        if new:
            self._columns += new
            self._file.seek(0)
            self._file.truncate()
            writer = csv.DictWriter(self._file, self._columns)
            writer.writeheader()
            writer.writerows(self._rows)
        else:
            csv.DictWriter(self._file, self._columns).writerow(row)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _lines(path: str | pathlib.Path, resume_from: int | None) -> list[str]:
    """The lines of the file a resumed run writes on (none when starting afresh)."""
    path = pathlib.Path(path)
    return path.read_text().splitlines() if resume_from is not None and path.exists() else []


def _number(name: str, text: str) -> int | float:
    return int(text) if name == "step" else float(text)


def _kept_rows(rows: list[dict[str, Any]], resume_from: int | None) -> list[dict[str, Any]]:
    """The rows up to the step a resumed run goes on from."""
    return [row for row in rows if resume_from is not None and row["step"] <= resume_from]


def _open(path: str | pathlib.Path) -> io.TextIOWrapper:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w", newline="")


@final
class TensorBoardSink(AbstractSink):
    """Writes each name as a TensorBoard scalar series, with tensorboardX.

    Needs tensorboardX (`pip install "podrace[tensorboard]"`); view with
    `tensorboard --logdir LOGDIR`.

    **Arguments:**

    - `logdir`: the folder of the event file (created if missing).
    - `resume_from`: the step a resumed run goes on from: TensorBoard hides the
        events written after it by the interrupted run.
    """

    def __init__(self, logdir: str | pathlib.Path, *, resume_from: int | None = None):
        try:
            from tensorboardX import SummaryWriter
        except ImportError as error:
            raise ImportError('TensorBoard logging needs tensorboardX: pip install "podrace[tensorboard]"') from error
        purge_step = None if resume_from is None else resume_from + 1
        self._writer = SummaryWriter(str(logdir), purge_step=purge_step)

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        for name, value in metrics.items():
            self._writer.add_scalar(name, float(value), global_step=step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


@final
class WandbSink(AbstractSink):
    """Logs each row to a Weights & Biases run.

    Needs wandb (`pip install "podrace[wandb]"`). The run is `wandb.init(project=project,
    **init_kwargs)`, so wandb's own settings apply: `mode="offline"` (or the
    environment variable `WANDB_MODE=offline`) keeps the run on disk, to upload later
    with `wandb sync`.

    **Arguments:**

    - `project`: the W&B project; by default wandb's (`WANDB_PROJECT`).
    - `init_kwargs`: further arguments of `wandb.init` (`entity`, `name`, `config`,
        `mode`, `dir`, ...).
    """

    def __init__(self, project: str | None = None, **init_kwargs: Any):
        try:
            import wandb  # pyright: ignore[reportMissingImports]
        except ImportError as error:
            raise ImportError('Weights & Biases logging needs wandb: pip install "podrace[wandb]"') from error
        self._run = wandb.init(project=project, **init_kwargs)

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        self._run.log({name: float(value) for name, value in metrics.items()}, step=step)

    def close(self) -> None:
        self._run.finish()


_MAKERS: dict[str, Callable[[pathlib.Path, int | None], AbstractSink]] = {
    "console": lambda directory, resume_from: ConsoleSink(),
    "csv": lambda directory, resume_from: CSVSink(directory / "metrics.csv", resume_from=resume_from),
    "jsonl": lambda directory, resume_from: JsonLinesSink(directory / "metrics.jsonl", resume_from=resume_from),
    "tensorboard": lambda directory, resume_from: TensorBoardSink(directory, resume_from=resume_from),
    "wandb": lambda directory, resume_from: WandbSink(dir=str(directory)),
}

SINK_NAMES = tuple(_MAKERS)
"""The names that [`podrace.loggers.make_sinks`][] knows: `console`, `csv`, `jsonl`, `tensorboard`, `wandb`."""


def make_sinks(
    names: str | Sequence[str], directory: str | pathlib.Path, *, resume_from: int | None = None
) -> list[AbstractSink]:
    """Builds sinks by name, as a command-line flag such as `--log csv,tensorboard` gives them.

    `console` is a [`podrace.loggers.ConsoleSink`][], `csv` writes
    `DIRECTORY/metrics.csv`, `jsonl` writes `DIRECTORY/metrics.jsonl`, `tensorboard`
    writes its event file into `DIRECTORY` and `wandb` starts a run whose files go to
    `DIRECTORY` (project and mode from wandb's environment variables).

    **Arguments:**

    - `names`: names from [`podrace.loggers.SINK_NAMES`][], comma-separated or as a
        sequence.
    - `directory`: the folder of the files (created if missing).
    - `resume_from`: the step a resumed run goes on from; the file sinks keep what an
        earlier run wrote up to it (see [`podrace.loggers.CSVSink`][]).

    **Returns:**

    The sinks, in the order of `names`; the caller closes them.
    """
    if isinstance(names, str):
        names = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in names if name not in SINK_NAMES]
    if unknown:
        raise ValueError(f"make_sinks: unknown sinks {unknown}; choose from {', '.join(SINK_NAMES)}.")
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as opened:  # closes the sinks made so far if one fails
        sinks = [opened.enter_context(_MAKERS[name](directory, resume_from)) for name in names]
        opened.pop_all()
    return sinks
