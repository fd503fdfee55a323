"""Devices and processes: what the multi-device runs of `multidevice_worker.py` ended with.

The runs are subprocesses that `tests/conftest.py` starts (at collection, or under
`pytest -n` when this module's first test asks for them), all read by this module: one
device with `2 * MULTIDEVICE_NUM_ENVS` environments, two devices with
`MULTIDEVICE_NUM_ENVS` each, and two processes of one CPU device each, joined by
`jax.distributed` on 127.0.0.1, each stepping its own share of the environment batch.

Environments own their keys, gradients are averaged over the whole batch and minibatches
take the same environments however the batch is split, so a device-invariant learner
ends with the parameters of one device, up to float rounding (rtol 1e-5: sums run in
another order). A learner that is not invariant (DQN: each device samples its own
replay) must still train on both, to finite parameters of the same shapes. Two processes
run the program of two devices in one process, so every leaf they end with is
bit-identical to that run's (measured: exactly equal; asserted: exactly equal).
"""

import numpy as np
import pytest

from . import helpers


def _load(path):
    with np.load(path) as data:
        return dict(data)


def test_two_devices_equal_one_device(multidevice_runs):
    two = _load(multidevice_runs.two_devices / "anakin.npz")
    one = _load(multidevice_runs.one_device / "anakin.npz")
    assert int(two["device_count"]) == int(two["num_devices"]) == 2
    assert int(one["device_count"]) == int(one["num_devices"]) == 1
    params = sorted(name for name in one if name.startswith("param_"))
    assert params and params == sorted(name for name in two if name.startswith("param_"))
    for name in params:
        np.testing.assert_allclose(two[name], one[name], rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-5, atol=1e-6)


def test_evaluation_in_the_training_program_on_one_and_two_devices(multidevice_runs):
    for runs in (multidevice_runs.one_device, multidevice_runs.two_devices):
        run = _load(runs / "anakin.npz")
        np.testing.assert_array_equal(run["evaluation"], run["evaluation_alone"])


def test_two_device_env_batch_is_sharded(multidevice_runs):
    two = _load(multidevice_runs.two_devices / "anakin.npz")
    num_envs = helpers.MULTIDEVICE_NUM_ENVS
    # Before and after training, every leaf of the batch has one shard of num_envs per device.
    np.testing.assert_array_equal(two["shards_before"], [[num_envs, num_envs]])
    assert two["shards_after"].shape[1] == 2
    np.testing.assert_array_equal(two["shards_after"], num_envs)


def test_dqn_keeps_a_replay_buffer_per_device(multidevice_runs):
    dqn = _load(multidevice_runs.two_devices / "dqn.npz")
    num_envs = helpers.MULTIDEVICE_NUM_ENVS
    # Every leaf of the experience has one row per environment of each device.
    np.testing.assert_array_equal(dqn["rows_before"], num_envs)
    np.testing.assert_array_equal(dqn["rows_after"], num_envs)
    assert dqn["rows_after"].shape[1] == 2
    # Transitions are counted over both devices (6 steps of 2 * 3 envs per update):
    # learning starts at the second update, when 12 * 6 are in.
    assert int(dqn["num_transitions"]) == 5 * 6 * 2 * num_envs
    assert int(dqn["num_gradient_steps"]) == 4
    assert dqn["loss"][0] == 0 and np.all(dqn["loss"][1:] > 0)
    for name in (name for name in dqn if name.startswith("param_")):
        assert np.all(np.isfinite(dqn[name]))


def test_filter_pmap_equals_separate_runs(multidevice_runs):
    together = _load(multidevice_runs.two_devices / "pmap.npz")
    apart = _load(multidevice_runs.one_device / "separate.npz")
    assert together and sorted(together) == sorted(apart)
    for name, value in together.items():
        assert value.shape[0] == 2
        np.testing.assert_allclose(value, apart[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("name", ["population.npz", "pbt.npz"])
def test_population_spread_over_two_devices_equals_one_device(multidevice_runs, name):
    with (
        np.load(multidevice_runs.two_devices / name) as two,
        np.load(multidevice_runs.one_device / name) as one,
    ):
        assert int(two["num_devices"]) == 2 and int(one["num_devices"]) == 1
        assert two["shards"].tolist() == [[2, 2]] * len(two["shards"])
        names = sorted(name for name in one.files if name.startswith("leaf_"))
        assert names and names == sorted(name for name in two.files if name.startswith("leaf_"))
        for name in names:
            np.testing.assert_allclose(two[name], one[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_members_with_their_environments_split_over_devices_equal_each_member_alone(multidevice_runs):
    # Population outer, devices inner: the device-free core under vmap inside shard_map.
    with (
        np.load(multidevice_runs.two_devices / "members.npz") as two,
        np.load(multidevice_runs.one_device / "members.npz") as one,
    ):
        assert one.files and sorted(one.files) == sorted(two.files)
        for name in one.files:
            assert two[name].shape[0] == 2
            np.testing.assert_allclose(two[name], one[name], rtol=1e-5, atol=1e-6, err_msg=name)


MULTIPROCESS_FILES = [
    "anakin.npz",
    "dqn.npz",
    "population.npz",
    "pbt.npz",
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


@pytest.mark.parametrize("name", helpers.LEARNERS)
def test_learner_trains_on_one_and_two_devices(name, multidevice_runs):
    one = _load(multidevice_runs.one_device / f"learner-{name}.npz")
    two = _load(multidevice_runs.two_devices / f"learner-{name}.npz")
    assert sorted(one) == sorted(two) and any(key.startswith("param_") for key in one)
    for key in one:
        assert one[key].shape == two[key].shape, key
        assert np.all(np.isfinite(one[key])) and np.all(np.isfinite(two[key])), key
    if helpers.LEARNERS[name].device_invariant:
        for key in one:
            np.testing.assert_allclose(two[key], one[key], rtol=1e-5, atol=1e-6, err_msg=key)
    else:
        assert any(not np.allclose(two[key], one[key]) for key in one if key.startswith("param_"))
