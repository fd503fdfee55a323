"""Checkpoints of a pipeline's whole state, written with orbax-checkpoint.

A checkpoint holds every array of an [`podrace.AnakinState`][] (parameters, optimiser
state, target network, replay buffer, environment states, counters and typed PRNG keys,
with a population's leading member axis) and, optionally, a JSON configuration: how the
run was built. The code that built the pipeline is not stored: restoring needs a state
of the same structure (e.g. `pipeline.init(key)` of a pipeline built as before), whose
leaves say which arrays are keys and where each array is to live.

Orbax writes each checkpoint into a temporary directory that is renamed once complete,
so a write that is interrupted leaves the earlier checkpoints usable; it keeps the last
`max_to_keep`; with `jax.distributed` every process writes its own shards.
"""

import pathlib
from collections.abc import Mapping
from typing import Any, TypeVar, final

import jax
import jax.numpy as jnp
import numpy as np

from .loggers import path_names


StateT = TypeVar("StateT")


def _orbax():
    try:
        import orbax.checkpoint as ocp
    except ImportError as error:
        raise ImportError('Checkpoints are written with orbax-checkpoint: pip install "podrace[checkpoint]"') from error
    return ocp


def _is_key(leaf: Any) -> bool:
    return hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _without_keys(state: Any) -> Any:
    """Typed PRNG keys replaced by their raw data (orbax writes plain arrays only)."""
    return jax.tree.map(lambda leaf: jax.random.key_data(leaf) if _is_key(leaf) else leaf, state)


def _abstract(leaf: Any) -> jax.ShapeDtypeStruct:
    """Shape, dtype and sharding of the array to restore into `leaf`'s place."""
    if _is_key(leaf):
        leaf = jax.random.key_data(leaf)
    return jax.ShapeDtypeStruct(np.shape(leaf), leaf.dtype, sharding=getattr(leaf, "sharding", None))


def _shapes_by_path(tree: Any) -> dict[tuple[str, ...], tuple[int, ...]]:
    """Each array's shape under its path of field names, dict keys and indices."""
    return {path_names(path): tuple(leaf.shape) for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}


def _check_shapes(saved: Any, like: Any, step: int) -> None:
    """A clear error for a state that does not match the checkpoint's arrays."""
    saved_shapes, like_shapes = _shapes_by_path(saved), _shapes_by_path(like)
    if saved_shapes.keys() != like_shapes.keys():
        differences = sorted(saved_shapes.keys() ^ like_shapes.keys())[:3]
        raise ValueError(
            f"Checkpoint {step} does not hold the arrays of the state to restore into (e.g. "
            f"{', '.join('/'.join(path) for path in differences)} is in one of them only): build the "
            "pipeline as the run that wrote it did (same learner and env)."
        )
    for path, shape in saved_shapes.items():
        if shape != like_shapes[path]:
            raise ValueError(
                f"Checkpoint {step}: {'/'.join(path)} has shape {shape}, the state to restore into "
                f"{like_shapes[path]}. Build the pipeline as the run that wrote it did; onto another number of "
                "devices, keep the total number of environments (num_devices * num_envs)."
            )


@final
class Checkpointer:
    """Saves and restores states in `directory`, one numbered checkpoint per step.

    Writes are asynchronous: `save` returns once the arrays are copied off the
    devices, and the files are completed in the background (`wait` or leaving a
    `with` block waits for them).

    Restoring onto another device count works when the arrays keep their shapes,
    i.e. the same total number of environments: they are laid out as the state passed
    to `restore` is. Otherwise `restore` raises a `ValueError` naming the array.

    **Arguments:**

    - `directory`: where the checkpoints live (created if missing).
    - `max_to_keep`: how many of the latest checkpoints to keep (`None`: all).
    """

    def __init__(self, directory: str | pathlib.Path, *, max_to_keep: int | None = 3):
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError(f"Checkpointer: max_to_keep must be positive or None, got {max_to_keep}.")
        ocp = _orbax()
        self.directory = pathlib.Path(directory).absolute()
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True),
            item_handlers={"state": ocp.StandardCheckpointHandler(), "config": ocp.JsonCheckpointHandler()},
        )

    def save(self, step: int, state: Any, *, config: Mapping[str, Any] | None = None) -> None:
        """Writes `state` (and a JSON-serialisable `config`) as checkpoint `step`.

        **Arguments:**

        - `step`: the checkpoint's number, e.g. the updates done so far.
        - `state`: a pytree of arrays, typed PRNG keys included.
        - `config`: how the run was built (e.g. the command line's arguments).
        """
        ocp = _orbax()
        items: dict[str, Any] = {"state": ocp.args.StandardSave(_without_keys(state))}
        if config is not None:
            items["config"] = ocp.args.JsonSave(dict(config))
        self._manager.save(step, args=ocp.args.Composite(**items))

    @property
    def latest_step(self) -> int | None:
        """The step of the newest complete checkpoint, `None` if there is none."""
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        """The steps of every complete checkpoint kept, oldest first."""
        return sorted(self._manager.all_steps())

    def _step(self, step: int | None) -> int:
        self.wait()
        step = self.latest_step if step is None else step
        if step is None or step not in self.all_steps():
            raise FileNotFoundError(f"No checkpoint {'' if step is None else f'{step} '}in {self.directory}.")
        return step

    def restore(self, like: StateT, *, step: int | None = None) -> StateT:
        """Reads checkpoint `step` (the latest by default) into the structure of `like`.

        **Arguments:**

        - `like`: a state of the same structure as the one saved, e.g. `pipeline.init(key)`
            of a pipeline built as before; its arrays give the layout over devices and
            which leaves are typed PRNG keys (of which implementation).
        - `step`: which checkpoint.

        **Returns:**

        The saved state, laid out as `like`.
        """
        ocp = _orbax()
        step = self._step(step)
        abstract = jax.tree.map(_abstract, like)
        saved = self._manager.item_metadata(step)["state"]
        _check_shapes(saved.tree, abstract, step)
        restored = self._manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract)))[
            "state"
        ]
        restored = jax.tree.structure(like).unflatten(jax.tree.leaves(restored))
        return jax.tree.map(
            lambda data, leaf: (
                jax.random.wrap_key_data(data, impl=jax.random.key_impl(leaf)) if _is_key(leaf) else data
            ),
            restored,
            like,
        )

    def config(self, *, step: int | None = None) -> dict[str, Any]:
        """The configuration saved with checkpoint `step` (the latest by default)."""
        ocp = _orbax()
        step = self._step(step)
        if "config" not in self._manager.item_metadata(step):
            raise KeyError(f"Checkpoint {step} in {self.directory} was saved without a config.")
        return self._manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))["config"]

    def wait(self) -> None:
        """Waits for the writes in progress."""
        self._manager.wait_until_finished()

    def close(self) -> None:
        """Waits for the writes in progress and releases the directory."""
        self._manager.close()

    def __enter__(self) -> "Checkpointer":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
