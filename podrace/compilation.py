"""JAX's persistent compilation cache, switched on in one call; the command line's by default."""

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import equinox as eqx
import jax
from jax.core import Tracer


RUN_ONCE_OPTIONS: dict[str, Any] = {"xla_cpu_use_fusion_emitters": False}
"""XLA's options for the programs a run calls once (building a network, an initial state,
a check at construction), where compiling is all their cost: on a CPU, XLA's MLIR fusion
emitters make faster kernels but compile each one several times slower than its older
emitters (the start-up profile in `benchmarks/README.md`). Other backends ignore them."""

FunctionT = TypeVar("FunctionT", bound=Callable[..., Any])


def compiled_once(fun: FunctionT) -> FunctionT:
    """`eqx.filter_jit(fun)` for a program a run calls once: compiled with
    `RUN_ONCE_OPTIONS` when called at the top level on a CPU whose XLA knows them, as a
    plain part of the caller's program when traced into another (XLA takes options only
    for a whole program)."""
    nested = eqx.filter_jit(fun)
    top_level: list[Callable[..., Any]] = []  # built at the first top-level call

    @functools.wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        # Inside a program being traced (jit, scan, eval_shape), even a constant is staged out.
        traced = isinstance(jax.device_put(0), Tracer)
        options = {} if traced else _known_run_once_options()
        if not options:
            return nested(*args, **kwargs)
        if not top_level:
            # filter_jit passes compiler_options on to jax.jit (its typed overloads leave them out).
            top_level.append(eqx.filter_jit(fun, compiler_options=options))  # pyright: ignore[reportCallIssue]
        return top_level[0](*args, **kwargs)

    return call  # pyright: ignore[reportReturnType]


@functools.cache
def _known_run_once_options() -> dict[str, Any]:
    """`RUN_ONCE_OPTIONS` on a CPU whose XLA compiles with them (a trial compile once per
    process: a later XLA may drop an option), else none."""
    if jax.default_backend() != "cpu":
        return {}
    try:
        jax.jit(lambda: 0, compiler_options=RUN_ONCE_OPTIONS).lower().compile()
    except jax.errors.JaxRuntimeError:
        return {}
    return RUN_ONCE_OPTIONS


CACHE_VARIABLE = "PODRACE_COMPILATION_CACHE"
"""The environment variable that names the command line's compilation cache (empty for none)."""


def enable_compilation_cache(directory: str | os.PathLike[str]) -> None:
    """Keeps every compiled program in `directory`, so that later processes load it instead of compiling.

    A process compiles each of its programs (a pipeline's `init` and `train`, an
    evaluation, a network's construction) the first time it calls it; on a CPU, and
    for small networks anywhere, that is most of the time to a first result. With the
    cache on, XLA's executables are written to `directory`, keyed by the program, the
    jax and jaxlib versions, the backend and the compile options, and a process that
    compiles the same program again reads it from there. JAX on its own caches only
    programs that took at least a second to compile; this caches all of them, however
    quick or small, since many of a small run's programs compile in less.

    Call it before the programs it should cache are first compiled (at the top of a
    script). Only trusted processes should write to `directory`: loading a cached
    executable runs its code.

    Reference: JAX, "Persistent compilation cache"
    (https://docs.jax.dev/en/latest/persistent_compilation_cache.html).

    **Arguments:**

    - `directory`: where the compiled programs are kept (`~` is the user's home);
        created if missing, and shared by every process that is given it.
    """
    path = os.path.expanduser(os.fspath(directory))
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def default_compilation_cache() -> str | None:
    """Where the `podrace` command keeps its compiled programs unless told otherwise:
    `$PODRACE_COMPILATION_CACHE` (an empty value for no cache), else `podrace` in the
    user's cache directory (`$XDG_CACHE_HOME`, else `~/.cache`).

    A second run of the same command, the common case, then loads its programs instead
    of compiling them: on a 2-core CPU, `podrace train catch` took 13.5 s instead of
    17.4 s (`docs/cli.md`). Delete the directory to empty the cache.
    """
    if CACHE_VARIABLE in os.environ:
        return os.environ[CACHE_VARIABLE] or None
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "podrace")
