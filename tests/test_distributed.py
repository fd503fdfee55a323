"""Multi-host Anakin: two processes joined by `jax.distributed` on 127.0.0.1.

Each process has one CPU device and steps its own share of the environment batch
(`multidevice_worker.py` with `--coordinator-address`). The program is the one that
runs in a single process over two forced CPU devices, so every leaf it ends with is
bit-identical to that run's (measured: exactly equal; asserted: exactly equal), on
both processes.
"""

import os
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr

from . import helpers


MULTIPROCESS_FILES = [
    "anakin.npz",
    "dqn.npz",
    "population.npz",
    "members.npz",
    *(f"learner-{name}.npz" for name in helpers.MULTIPROCESS_LEARNERS),
]
LAYOUT_KEYS = {"device_count", "num_devices", "shards_before", "shards_after", "rows_before", "rows_after", "shards"}


@pytest.mark.parametrize("process_id", [0, 1])
@pytest.mark.parametrize("name", MULTIPROCESS_FILES)
def test_two_processes_equal_two_devices_of_one_process(name, process_id, multidevice_runs):
    with (
        np.load(multidevice_runs.two_devices / name) as two_devices,
        np.load(multidevice_runs.two_processes / f"process-{process_id}" / name) as two_processes,
    ):
        assert sorted(two_devices) == sorted(two_processes)
        for key in two_devices:
            if key not in LAYOUT_KEYS:
                np.testing.assert_array_equal(two_processes[key], two_devices[key], err_msg=key)


def test_each_process_holds_its_own_share_of_the_environments(multidevice_runs):
    for process_id in range(2):
        with np.load(multidevice_runs.two_processes / f"process-{process_id}" / "anakin.npz") as run:
            assert int(run["num_devices"]) == int(run["device_count"]) == 2
            # One addressable shard per leaf, of this process's `MULTIDEVICE_NUM_ENVS` environments.
            assert run["shards_before"].shape[1] == 1
            assert np.all(run["shards_after"] == helpers.MULTIDEVICE_NUM_ENVS)


def test_a_process_that_cannot_reach_the_coordinator_fails_clearly_and_in_time():
    port = helpers.free_port()
    script = textwrap.dedent(
        f"""
        import podrace as pr
        pr.distributed.initialize("127.0.0.1:{port}", num_processes=2, process_id=1, timeout_s=3)
        """
    )
    start = time.monotonic()
    process = subprocess.run(
        [sys.executable, "-c", script],
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - start
    assert process.returncode == 1, process.stderr
    assert "ConnectionError: podrace.distributed.initialize: could not reach the coordinator" in process.stderr
    assert f"127.0.0.1:{port} within 3 s" in process.stderr
    assert elapsed < 60


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (dict(coordinator_address="localhost", num_processes=2, process_id=0), "must be 'host:port'"),
        (dict(coordinator_address="localhost:99999", num_processes=2, process_id=0), "must be 'host:port'"),
        (dict(coordinator_address="localhost:1234", num_processes=0, process_id=0), "num_processes"),
        (dict(coordinator_address="localhost:1234", num_processes=2, process_id=2), "process_id"),
        (dict(coordinator_address="localhost:1234", num_processes=2, process_id=-1), "process_id"),
        (dict(coordinator_address="localhost:1234", num_processes=2, process_id=0, timeout_s=0.0), "timeout_s"),
    ],
)
def test_initialize_refuses_bad_arguments_before_touching_jax(arguments, message):
    with pytest.raises(ValueError, match=message):
        pr.distributed.initialize(**arguments)


def test_gather_returns_whole_arrays_and_raw_keys_in_one_process():
    gathered = pr.distributed.gather({"x": jnp.arange(3.0), "key": jax.random.key(7)})
    np.testing.assert_array_equal(gathered["x"], np.arange(3.0))
    np.testing.assert_array_equal(gathered["key"], np.asarray(jax.random.key_data(jax.random.key(7))))
