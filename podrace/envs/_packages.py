"""What the adapters of other packages' environments share: importing the package on first
use, holding its environment object as a static field, and strongly typed states."""

import contextlib
import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any, Generic, TypeVar, final

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer


T = TypeVar("T")


def import_package(module: str, *, extra: str, owner: str) -> ModuleType:
    """`module`, imported on first use so that podrace imports without it; an `ImportError`
    naming the pip command of podrace's `extra` when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        package = module.partition(".")[0]
        raise ImportError(f"{owner} needs {package}, which is not installed: pip install 'podrace[{extra}]'") from error


@contextlib.contextmanager
def default_numpy_rules() -> Iterator[None]:
    """JAX's default NumPy promotion rules, which other packages' environments are written
    for (many broadcast arrays of different ranks), whatever the caller's config."""
    with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
        yield


@final
class ByIdentity(Generic[T]):
    """An object held as a static field of an adapter, hashed and compared by identity: a
    package's environment object, which may hold arrays and so not be hashable. Build it
    once and share it, so that compiled programs are shared too."""

    __slots__ = ("value",)

    def __init__(self, value: T):
        self.value = value

    def __repr__(self) -> str:
        return type(self.value).__name__


def strongly_typed(tree: Any) -> Any:
    """`tree` with its Python numbers and weakly typed leaves (a constant reward of 1.0, an
    `info` counter started from 0.0) made arrays of their strong dtype, which stay the
    same from step to step (a `lax.scan` carry and a jitted step's cache key need it)."""
    return jax.tree.map(_strongly_typed_leaf, tree)


def _strongly_typed_leaf(leaf: Any) -> Any:
    if isinstance(leaf, jax.Array) and not getattr(leaf, "weak_type", False):
        return leaf  # typed keys included
    array = jnp.asarray(leaf)
    return jnp.asarray(array, array.dtype)


def uncommitted(tree: Any) -> Any:
    """`tree` with its arrays that are committed to one device (Brax and MJX put their
    models on the default device) made uncommitted, so that a pipeline can place them on
    every device of its mesh. Traced leaves (a model built under `vmap`) are left as they are."""
    return jax.tree.map(_uncommitted_leaf, tree)


def _uncommitted_leaf(leaf: Any) -> Any:
    if isinstance(leaf, jax.Array) and not isinstance(leaf, Tracer) and leaf.committed:
        return jnp.asarray(np.asarray(leaf))
    return leaf
