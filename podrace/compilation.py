"""JAX's persistent compilation cache, switched on in one call."""

import os

import jax


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
