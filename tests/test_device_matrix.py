"""The device matrix: every learner of the registry trains on 1 and on 2 forced CPU devices.

The runs are subprocesses started at collection (see `multidevice_worker.py`): one
device with `2 * MULTIDEVICE_NUM_ENVS` environments, two devices with
`MULTIDEVICE_NUM_ENVS` each. Environments own their keys, gradients are averaged over
the whole batch and minibatches take the same environments however the batch is split,
so a device-invariant learner ends with the parameters of one device, up to float
rounding (rtol 1e-5: sums run in another order). A learner that is not invariant (DQN:
each device samples its own replay) must still train on both, to finite parameters of
the same shapes.
"""

import numpy as np
import pytest

from . import helpers


def _load(path):
    with np.load(path) as data:
        return dict(data)


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
