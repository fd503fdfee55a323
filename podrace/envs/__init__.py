"""Environments: the abstract interface, built-in JAX environments and wrappers."""

from ._base import AbstractEnv as AbstractEnv
from .catch import Catch as Catch, CatchState as CatchState
from .wrappers import (
    AutoReset as AutoReset,
    AutoResetState as AutoResetState,
    TimeLimit as TimeLimit,
    TimeLimitState as TimeLimitState,
)


__all__ = ["AbstractEnv", "Catch", "CatchState", "AutoReset", "AutoResetState", "TimeLimit", "TimeLimitState"]
