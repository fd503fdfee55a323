"""Construction-time checks that give a clear message instead of a deep XLA trace."""

import jax
import numpy as np
from jaxtyping import ArrayLike


def _concrete(value: ArrayLike) -> np.ndarray | None:
    """The value as NumPy, or `None` while it is traced (inside jit or vmap)."""
    try:
        return np.asarray(value)
    except jax.errors.TracerArrayConversionError:
        return None


def check_in_unit_interval(owner: str, name: str, value: ArrayLike) -> None:
    """Raises `ValueError` unless every element of `value` lies in [0, 1]."""
    array = _concrete(value)
    if array is not None and not np.all((array >= 0) & (array <= 1)):
        raise ValueError(f"{owner}: {name} must lie in [0, 1], got {array}.")


def check_positive(owner: str, name: str, value: ArrayLike) -> None:
    """Raises `ValueError` unless every element of `value` is > 0."""
    array = _concrete(value)
    if array is not None and not np.all(array > 0):
        raise ValueError(f"{owner}: {name} must be positive, got {array}.")
