"""Many processes, one program: starting `jax.distributed` for multi-host Anakin.

JAX runs one Python process per host (multi-controller): every process runs the same
script, and after [`podrace.distributed.initialize`][] `jax.devices()` lists the
devices of all of them. [`podrace.Anakin`][] and [`podrace.Population`][] build their
default mesh over those devices, so the same script that trains on one machine trains
over many, each process stepping the share of the environment batch that lives on its
own devices. A run over `P` processes equals a single-process run on the same total
number of devices.

Every process must make the same calls with the same arguments (construction, `init`,
`train`, evaluation): they are parts of one program. Values that are replicated (the
learner state, the metrics) can be read on every process; the environment batch is
split, and each process holds its own part.

On a SLURM allocation or a Cloud TPU pod slice, JAX finds the coordinator, the process
count and the process id by itself: call `initialize()` with no arguments. Elsewhere
give them explicitly (the CLI's `--coordinator-address`, `--num-processes`,
`--process-id`). Reference: [JAX, multi-process environments](
https://docs.jax.dev/en/latest/multi_process.html).
"""

import socket
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jaxtyping import Array, PyTree

from ._validation import check_positive_int


def _host_and_port(coordinator_address: str) -> tuple[str, int]:
    host, separator, port = coordinator_address.rpartition(":")
    if not separator or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"podrace.distributed.initialize: coordinator_address must be 'host:port', got {coordinator_address!r}."
        )
    return host.strip("[]"), int(port)


def _wait_for_coordinator(coordinator_address: str, timeout_s: float) -> None:
    """Returns once a TCP connection to the coordinator succeeds; raises after `timeout_s`."""
    host, port = _host_and_port(coordinator_address)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=max(0.1, min(1.0, deadline - time.monotonic()))):
                return
        except OSError as error:
            if time.monotonic() >= deadline:
                raise ConnectionError(
                    f"podrace.distributed.initialize: could not reach the coordinator at {coordinator_address} "
                    f"within {timeout_s:g} s ({error}). Start process 0 first, with the same address, and check "
                    "that this host can reach it (host name, port, firewall)."
                ) from error
            time.sleep(0.1)


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    local_device_ids: list[int] | None = None,
    timeout_s: float = 300.0,
) -> None:
    """Joins this process to a multi-process JAX run (`jax.distributed.initialize`).

    Call it once, first thing, in every process: before any other JAX call.

    A process other than the coordinator (process 0) first waits for the
    coordinator's port to accept connections and raises a `ConnectionError` if it
    does not within `timeout_s`, instead of the abort with which JAX ends a process
    that cannot connect. The coordinator itself waits up to `timeout_s` for every
    process to join; JAX aborts it with `DEADLINE_EXCEEDED` if one never does.

    **Arguments:**

    - `coordinator_address`: `host:port` of process 0, reachable from every process;
        `None` to let JAX find it (SLURM, TPU pods).
    - `num_processes`: the number of processes; `None` to let JAX find it.
    - `process_id`: this process's index in `[0, num_processes)`; `None` to let JAX
        find it.
    - `local_device_ids`: the devices of this host that this process uses (all of them
        by default).
    - `timeout_s`: how long to wait for the coordinator and the other processes.
    """
    if not timeout_s > 0:
        raise ValueError(f"podrace.distributed.initialize: timeout_s must be positive, got {timeout_s}.")
    if num_processes is not None:
        check_positive_int("podrace.distributed.initialize", "num_processes", num_processes)
    if process_id is not None and (
        isinstance(process_id, bool)
        or not isinstance(process_id, int)
        or process_id < 0
        or (num_processes is not None and process_id >= num_processes)
    ):
        raise ValueError(
            f"podrace.distributed.initialize: process_id must be an integer in [0, num_processes), got {process_id}."
        )
    if coordinator_address is not None:
        _host_and_port(coordinator_address)
        if process_id not in (None, 0):
            print(
                f"podrace: process {process_id} waiting up to {timeout_s:g} s for the coordinator (process 0) to "
                f"answer at {coordinator_address}",
                file=sys.stderr,
                flush=True,
            )
            _wait_for_coordinator(coordinator_address, timeout_s)
        elif num_processes not in (None, 1):
            print(
                f"podrace: coordinator at {coordinator_address}, waiting up to {timeout_s:g} s for "
                f"{num_processes} processes",
                file=sys.stderr,
                flush=True,
            )
    jax.distributed.initialize(
        coordinator_address,
        num_processes,
        process_id,
        local_device_ids=local_device_ids,
        initialization_timeout=max(1, round(timeout_s)),
    )


def is_coordinator() -> bool:
    """Whether this is process 0, the one that should print, plot and save."""
    return jax.process_index() == 0


def gather(tree: PyTree[Array]) -> PyTree[np.ndarray]:
    """Every leaf as a whole NumPy array, on every process.

    A leaf split over the devices of several processes (a population's members, the
    environment batch) is gathered from all of them; the others are read locally.
    Every process must call it with the same structure. PRNG keys come back as their
    raw data (`jax.random.key_data`).

    **Arguments:**

    - `tree`: arrays, e.g. a [`podrace.Population`][]'s metrics.

    **Returns:**

    The same structure with NumPy leaves.
    """

    def whole(leaf: Array) -> np.ndarray:
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        if leaf.is_fully_addressable or leaf.is_fully_replicated:
            return np.asarray(leaf)
        return np.asarray(multihost_utils.process_allgather(leaf, tiled=True))

    return jax.tree.map(whole, tree)
