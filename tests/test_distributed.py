"""`podrace.distributed` in one process: a coordinator that cannot be reached, bad
arguments, and `gather`. What two processes joined by `jax.distributed` end with is
checked against two devices of one process in `test_device_matrix.py`."""

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
    waiting = f"process 1 waiting up to 3 s for the coordinator (process 0) to answer at 127.0.0.1:{port}"
    assert waiting in process.stderr
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
