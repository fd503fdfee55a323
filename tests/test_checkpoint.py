"""Checkpoints: exact resume in a new process, another device count, interrupted writes.

The other process is `checkpoint_worker.py`; it builds its pipelines with the same
functions as these tests.
"""

import functools
import json
import os
import signal
import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import podrace as pr
from podrace.checkpoint import Checkpointer
from podrace.loggers import JsonLinesSink
from podrace.progress import train_with_progress

from . import checkpoint_worker, helpers


NUM_UPDATES = checkpoint_worker.NUM_UPDATES


def run_worker(*args: str, num_cpu_devices: int | None = None) -> subprocess.CompletedProcess:
    """Runs checkpoint_worker.py on this process's platform, or on `num_cpu_devices` forced CPU devices.

    The worker inherits this process's environment, so JAX picks the same default
    backend (naming it, as `jax.default_backend()` does, "gpu", is ambiguous to JAX 0.11).
    """
    env = dict(os.environ)
    if num_cpu_devices is not None:
        env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={num_cpu_devices}")
    return subprocess.run(
        [sys.executable, checkpoint_worker.__file__, *args], env=env, capture_output=True, text=True, timeout=600
    )


def assert_bit_identical(actual, expected) -> None:
    helpers.assert_trees_close(actual, expected, rtol=0, atol=0)


def test_resume_in_a_new_process_is_bit_identical(tmp_path):
    """2N updates in this process against N here, a checkpoint, and N in a new process
    from the checkpoint: every leaf equal (A2C, DQN with its replay buffer, a population)."""
    expected = {}
    for name, build in checkpoint_worker.PIPELINES.items():
        pipeline = build()
        state = pipeline.train(pipeline.init(jax.random.key(0)), num_updates=NUM_UPDATES).state
        with Checkpointer(tmp_path / name) as checkpointer:
            checkpointer.save(NUM_UPDATES, state)
        expected[name] = (pipeline, pipeline.train(state, num_updates=NUM_UPDATES).state)
    worker = run_worker("resume", str(tmp_path))
    assert worker.returncode == 0, worker.stderr
    for name, (pipeline, state) in expected.items():
        with Checkpointer(tmp_path / name) as checkpointer:
            assert checkpointer.all_steps() == [NUM_UPDATES, 2 * NUM_UPDATES], name
            assert_bit_identical(checkpointer.restore(pipeline.init(jax.random.key(7))), state)


def test_resume_on_another_device_count(tmp_path):
    """Saved on one device with 6 environments, resumed on two devices of 3 each: the run
    goes on as the one-device run does (up to the device count's rounding); a pipeline of
    another total number of environments is refused with a clear error."""
    pipeline = checkpoint_worker.a2c(num_envs=6)
    state = pipeline.train(pipeline.init(jax.random.key(0)), num_updates=NUM_UPDATES).state
    with Checkpointer(tmp_path) as checkpointer:
        checkpointer.save(NUM_UPDATES, state)
    expected = pipeline.train(state, num_updates=NUM_UPDATES).state
    worker = run_worker("other-device-count", str(tmp_path), num_cpu_devices=2)
    assert worker.returncode == 0, worker.stderr
    with Checkpointer(tmp_path) as checkpointer:
        assert checkpointer.latest_step == 2 * NUM_UPDATES
        helpers.assert_trees_close(checkpointer.restore(pipeline.init(jax.random.key(7))), expected, rtol=1e-5)
    refused = (tmp_path / "refused.txt").read_text()
    assert "has shape (6,), the state to restore into (4,)" in refused and "num_devices * num_envs" in refused


def test_an_interrupted_write_leaves_the_previous_checkpoint_usable(tmp_path):
    worker = run_worker("interrupted", str(tmp_path))
    assert worker.returncode == -signal.SIGKILL, worker.stderr
    like = {"state": checkpoint_worker.a2c().init(jax.random.key(0)), "extra": jnp.zeros(1)}
    with Checkpointer(tmp_path) as checkpointer:
        assert checkpointer.all_steps() == [1]
        assert_bit_identical(checkpointer.restore(like), like)
        checkpointer.save(2, like)
        checkpointer.wait()
        assert checkpointer.all_steps() == [1, 2]


def test_keeps_the_last_max_to_keep_and_restores_any_of_them(tmp_path):
    with Checkpointer(tmp_path, max_to_keep=2) as checkpointer:
        for step in range(1, 5):
            checkpointer.save(step, {"step": jnp.asarray(step)}, config={"step": step})
        checkpointer.wait()
        assert checkpointer.all_steps() == [3, 4]
        assert checkpointer.latest_step == 4
        assert int(checkpointer.restore({"step": jnp.asarray(0)}, step=3)["step"]) == 3
        assert checkpointer.config() == {"step": 4}
        with pytest.raises(FileNotFoundError, match="No checkpoint 1 "):
            checkpointer.restore({"step": jnp.asarray(0)}, step=1)


def test_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="max_to_keep"):
        Checkpointer(tmp_path, max_to_keep=0)
    pipeline = helpers.small_pipeline(jax.random.key(0))
    state = pipeline.init(jax.random.key(0))
    with Checkpointer(tmp_path) as checkpointer:
        with pytest.raises(FileNotFoundError, match="No checkpoint in"):
            checkpointer.restore(state)
        checkpointer.save(1, state)
        with pytest.raises(KeyError, match="without a config"):
            checkpointer.config()
        wider = helpers.small_pipeline(jax.random.key(0), hidden_sizes=(9,))
        with pytest.raises(ValueError, match=r"has shape \(3, 8\), the state to restore into \(3, 9\)"):
            checkpointer.restore(wider.init(jax.random.key(0)))
        with pytest.raises(ValueError, match="does not hold the arrays"):
            checkpointer.restore(state.learner)


def test_a_restored_agent_evaluates_as_the_trained_one(tmp_path):
    """Evaluation alone: the pipeline rebuilt by the code that built it, the state restored."""
    pipeline = helpers.small_pipeline(jax.random.key(0))
    state = pipeline.train(pipeline.init(jax.random.key(0)), num_updates=2).state
    with Checkpointer(tmp_path) as checkpointer:
        checkpointer.save(2, state)
        restored = checkpointer.restore(pipeline.init(jax.random.key(1)))

    def evaluate(learner_state):
        network = pipeline.learner.network_at(learner_state)
        return pr.evaluate(pipeline.env, network, pr.policies.Greedy(), key=jax.random.key(2), num_episodes=4)

    assert_bit_identical(evaluate(restored.learner), evaluate(state.learner))


def test_the_chunked_loop_checkpoints_every_k_updates_and_resumes_exactly(tmp_path):
    pipeline = helpers.small_pipeline(jax.random.key(0))
    train = functools.partial(train_with_progress, pipeline, updates_per_call=2, show=False)
    with Checkpointer(tmp_path / "run") as checkpointer:
        expected, _ = train(
            pipeline.init(jax.random.key(0)), num_updates=6, checkpointer=checkpointer, checkpoint_every=4
        )
        assert checkpointer.all_steps() == [4, 6]
        start = checkpointer.restore(pipeline.init(jax.random.key(1)), step=4)
    with Checkpointer(tmp_path / "resumed") as checkpointer, JsonLinesSink(tmp_path / "metrics.jsonl") as sink:
        resumed, log = train(start, num_updates=2, checkpointer=checkpointer, sinks=[sink], start_update=4)
        assert checkpointer.all_steps() == [6]
    assert_bit_identical(resumed, expected)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [6]
    assert rows[0]["frames"] == log.frames[-1] == 6 * pipeline.frames_per_update
    with pytest.raises(ValueError, match="multiple of updates_per_call"):
        train(start, num_updates=2, checkpointer=checkpointer, checkpoint_every=3)


UPDATE = eqx.filter_jit(lambda learner, state, trajectory: learner.update(state, trajectory))

# The learner families whose states hold more than one network and optimiser, a
# distributional head, or sequences with a search's statistics: each state round-trips
# exactly, and learning goes on from it alike.
ROUND_TRIP_LEARNERS = [
    "muzero-replay-categorical",
    "td3",
    "sac",
    "discrete-sac",
    "c51",
    "qr-dqn-double",
    "pqn-layer-norm-transitions",
    "gru-pqn-layer-norm",
]


@pytest.mark.parametrize("name", ROUND_TRIP_LEARNERS)
def test_a_learner_state_round_trips_bit_identically(name, tmp_path):
    case = helpers.LEARNERS[name]
    learner = case.make(jax.random.key(0))
    trajectory = case.random_trajectory(learner.initial_agent(), 0, 16, 3)
    first = jax.tree.map(lambda x: x[0], trajectory.timestep)
    update = functools.partial(UPDATE, learner)
    state, _ = update(learner.init(jax.random.key(1), first), trajectory)
    with Checkpointer(tmp_path) as checkpointer:
        checkpointer.save(1, state)
        restored = checkpointer.restore(learner.init(jax.random.key(2), first))
    assert_bit_identical(restored, state)
    assert_bit_identical(update(restored, trajectory), update(state, trajectory))
