"""Sebulba: actor threads on host environments, the learner on devices of its own."""

import _thread
import dataclasses
import itertools
import os
import subprocess
import sys
import threading
import time

import equinox as eqx
import gymnasium
import jax
import numpy as np
import pytest

import podrace as pr
from podrace import configs
from podrace.checkpoint import Checkpointer
from podrace.envs.from_envpool import quiet_envpool_spaces
from podrace.executors import sebulba
from podrace.executors.host import GymnasiumCollector, jitted_update
from podrace.progress import train_with_progress

from . import helpers


NUM_ENVS = 2
ROLLOUT = 8


def _learner(num_minibatches: int = 2) -> pr.Learner:
    config = configs.OnPolicyConfig(
        algorithm="ppo", hidden=(8,), rollout_length=ROLLOUT, num_minibatches=num_minibatches
    )
    return config.learner(pr.Discrete(2), (4,), jax.random.key(0))


class _Counted(gymnasium.vector.VectorWrapper):
    """CartPole environments that count their steps in `counts[slot]`, and raise (or
    interrupt the main thread) at step `fail_at`, noting when in `failed_at`."""

    def __init__(self, num_envs, counts, slot, fail_at, failure, failed_at):
        super().__init__(gymnasium.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync"))
        self.counts, self.slot, self.fail_at, self.failure, self.failed_at = counts, slot, fail_at, failure, failed_at

    def step(self, actions):
        self.counts[self.slot] += self.num_envs
        if self.counts[self.slot] == self.fail_at:
            self.failed_at.append(time.monotonic())
            if self.failure == "interrupt":
                _thread.interrupt_main()
            else:
                raise RuntimeError("the environment broke")
        return super().step(actions)


def _collector(
    learner, slot, *, counts=None, fail_at=None, failure=None, failed_at=None, num_envs=NUM_ENVS
) -> GymnasiumCollector:
    counts = [0] * (slot + 1) if counts is None else counts
    envs = _Counted(num_envs, counts, slot, fail_at, failure, failed_at)
    return GymnasiumCollector(envs, learner, rollout_length=ROLLOUT, key=jax.random.key(10 + slot), seed=100 * slot)


def _capture_updates(monkeypatch) -> list[pr.Trajectory]:
    """The trajectories Sebulba's learner updates on, recorded as it goes."""
    captured = []

    def recording(learner, state, trajectory):
        captured.append(trajectory)
        return jitted_update(learner, state, trajectory)

    monkeypatch.setattr(sebulba, "jitted_update", recording)
    return captured


def _sebulba_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("podrace-sebulba")]


@pytest.mark.parametrize("max_staleness", [0, 1, 2])
def test_one_actor_thread_updates_as_the_learner_on_the_same_trajectories(max_staleness, monkeypatch):
    learner = _learner()
    captured = _capture_updates(monkeypatch)
    pipeline = pr.Sebulba(learner, [_collector(learner, 0)], max_staleness=max_staleness)
    result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=4)
    lag = [max(k - max_staleness, 0) for k in range(4)]
    np.testing.assert_array_equal(result.versions, np.asarray(lag)[:, None])
    # The same schedule by hand: rollout k acts with the parameters after lag[k] updates,
    # and the learner updates on the trajectories Sebulba gave it, bit for bit.
    twin = _collector(learner, 0)
    states = [learner.init(jax.random.key(1))]
    for k in range(4):
        trajectory, _ = twin.collect(learner.agent(states[lag[k]]))
        helpers.assert_trees_close(captured[k], trajectory, rtol=0, atol=0)
        states.append(jitted_update(learner, states[k], captured[k])[0])
    helpers.assert_trees_close(result.state.learner, states[-1], rtol=0, atol=0)
    assert not _sebulba_threads()
    pipeline.close()


def test_every_step_is_in_one_trajectory_and_every_trajectory_in_one_update(monkeypatch):
    learner = _learner()
    captured = _capture_updates(monkeypatch)
    counts = [0, 0]
    collectors = [_collector(learner, slot, counts=counts) for slot in range(2)]
    pipeline = pr.Sebulba(learner, collectors)
    assert pipeline.frames_per_update == 2 * NUM_ENVS * ROLLOUT
    state = pipeline.init(jax.random.key(1))
    for num_updates in (5, 3):  # counts carry over from call to call
        result = pipeline.train(state, num_updates=num_updates)
        state = result.state
        np.testing.assert_array_equal(result.steps, np.full((num_updates, 2), NUM_ENVS * ROLLOUT))
        np.testing.assert_array_equal(result.versions[:, 0], [0, *range(num_updates - 1)])
    # The environments stepped exactly the steps learnt from, thread by thread.
    assert sum(counts) == 8 * pipeline.frames_per_update
    np.testing.assert_array_equal(state.actor_steps, counts)
    np.testing.assert_array_equal(state.learnt_steps, [8 * NUM_ENVS * ROLLOUT] * 2)
    np.testing.assert_array_equal(state.actor_steps, state.learnt_steps)
    # Each update's trajectories continue the previous update's: none dropped, none twice.
    assert len(captured) == 8
    for previous, trajectory in itertools.pairwise(captured):
        assert trajectory.timestep.reward.shape == (ROLLOUT + 1, 2 * NUM_ENVS)
        helpers.assert_trees_close(
            helpers.index(trajectory.timestep, 0), helpers.index(previous.timestep, -1), rtol=0, atol=0
        )
    assert int(state.learner.num_updates) == 8
    assert not _sebulba_threads()
    pipeline.close()


def _assert_stops(pipeline, error, match, failed_at):
    before = set(threading.enumerate())
    with pytest.raises(error, match=match):
        pipeline.train(pipeline.init(jax.random.key(1)), num_updates=10_000)
    stopped = time.monotonic()
    assert failed_at and stopped - failed_at[0] < 5.0, "train took too long to stop"
    assert not _sebulba_threads() and set(threading.enumerate()) <= before
    assert all(collector.envs.closed for collector in pipeline.collectors)


def test_a_failing_environment_stops_every_thread_and_is_raised():
    learner = _learner()
    counts, failed_at = [0, 0], []
    failing = _collector(learner, 1, counts=counts, fail_at=5 * ROLLOUT * NUM_ENVS, failed_at=failed_at)
    pipeline = pr.Sebulba(learner, [_collector(learner, 0, counts=counts), failing])
    _assert_stops(pipeline, RuntimeError, "the environment broke", failed_at)


_POLICY_FAILURES: list[float] = []


class _FailingPolicy(pr.policies.AbstractPolicy):
    """Categorical, but raising when it acts in an actor thread (noting when in `_POLICY_FAILURES`)."""

    input_type = pr.PolicyLogits

    def distribution(self, output):
        return pr.policies.Categorical().distribution(output)

    def __call__(self, output, key):
        if threading.current_thread().name.startswith("podrace-sebulba"):
            _POLICY_FAILURES.append(time.monotonic())
            raise ValueError("the policy broke")
        return pr.policies.Categorical()(output, key)

    def check_action_space(self, action_space):
        pr.policies.Categorical().check_action_space(action_space)

    def action(self, output):
        return pr.policies.Categorical().action(output)


def test_a_failing_policy_stops_every_thread_and_is_raised():
    learner = eqx.tree_at(lambda learner: learner.policy, _learner(), _FailingPolicy())
    _POLICY_FAILURES.clear()
    pipeline = pr.Sebulba(learner, [_collector(learner, slot) for slot in range(2)])
    _assert_stops(pipeline, ValueError, "the policy broke", _POLICY_FAILURES)


def test_a_keyboard_interrupt_stops_every_thread_and_is_raised():
    learner = _learner()
    counts, failed_at = [0, 0], []
    interrupting = _collector(
        learner, 1, counts=counts, fail_at=5 * ROLLOUT * NUM_ENVS, failure="interrupt", failed_at=failed_at
    )
    pipeline = pr.Sebulba(learner, [_collector(learner, 0, counts=counts), interrupting])
    _assert_stops(pipeline, KeyboardInterrupt, None, failed_at)


def test_sebulba_checks_its_parts():
    learner = _learner()
    one, two = _collector(learner, 0), _collector(learner, 1)
    device = jax.devices()[0]
    with pytest.raises(ValueError, match="actor_devices is empty"):
        pr.Sebulba(learner, [one], actor_devices=[])
    with pytest.raises(ValueError, match="learner_devices names a device twice"):
        pr.Sebulba(learner, [one], learner_devices=[device, device])
    with pytest.raises(ValueError, match="collectors is empty"):
        pr.Sebulba(learner, [])
    with pytest.raises(ValueError, match="a collector is given twice"):
        pr.Sebulba(learner, [one, one])
    with pytest.raises(ValueError, match="max_staleness must be an integer >= 0"):
        pr.Sebulba(learner, [one], max_staleness=-1)
    longer = GymnasiumCollector(
        gymnasium.make_vec("CartPole-v1", num_envs=NUM_ENVS), learner, rollout_length=ROLLOUT + 1, key=jax.random.key(0)
    )
    with pytest.raises(ValueError, match="rollout_length differ"):
        pr.Sebulba(learner, [one, longer])
    # The learner batch is every thread's environments: PPO's minibatches must divide it.
    with pytest.raises(ValueError, match="num_minibatches=8"):
        pr.Sebulba(_learner(num_minibatches=8), [one, two])
    pipeline = pr.Sebulba(learner, [one, two])
    with pytest.raises(ValueError, match="num_updates must be a positive integer"):
        pipeline.train(pipeline.init(jax.random.key(0)), num_updates=0)
    with pytest.raises(ValueError, match="Sebulba: there is no member 1"):
        pipeline.network_at(pipeline.init(jax.random.key(0)), 1)
    with pytest.raises(ValueError, match="Sebulba: there is no member 1"):
        pipeline.agent_at(pipeline.init(jax.random.key(0)), 1)
    for collector in (one, two, longer):
        collector.close()


def test_sebulba_keeps_the_pipeline_contract(tmp_path):
    learner = _learner()
    collectors = [_collector(learner, slot) for slot in range(2)]
    pipeline = pr.Sebulba(learner, collectors)
    assert isinstance(pipeline, pr.executors.pipeline.AbstractPipeline)
    assert (pipeline.num_members, pipeline.num_devices, pipeline.frames_per_update) == (1, 1, 2 * NUM_ENVS * ROLLOUT)
    result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=2)
    assert result.metrics.update.loss.shape == (2,) and result.metrics.has_episodes
    assert isinstance(result.metrics.update.grad_norm, pr.results.NotComputed)
    result = pipeline.train(result.state, num_updates=1, metrics=("grad_norm",))
    assert result.metrics.update.grad_norm.shape == (1,) and not result.metrics.has_episodes
    assert set(result.summary()) >= {"loss"}
    assert pipeline.observation_spec == jax.ShapeDtypeStruct((4,), np.float32)
    assert pipeline.evaluation_env(result.state) is None
    evaluation = pr.Evaluation(pr.policies.Mode(), num_episodes=2, key=jax.random.key(2), max_steps=20)
    assert pipeline.evaluate(result.state, evaluation).returns.shape == (2,)
    assert bool(np.all(collectors[0].timestep.is_first))  # restarted after the evaluation
    # Progress and checkpoints drive it as any pipeline.
    with Checkpointer(tmp_path) as checkpointer:
        state, log = train_with_progress(
            pipeline, result.state, num_updates=2, updates_per_call=1, show=False, checkpointer=checkpointer
        )
        restored = checkpointer.restore(pipeline.init(jax.random.key(5)))
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)
    assert log.frames[-1] == 2 * pipeline.frames_per_update
    np.testing.assert_array_equal(state.learnt_steps, [5 * NUM_ENVS * ROLLOUT] * 2)
    pipeline.close()


def _envpool_collectors(learner, num_envs, rollout_length, seed):
    """Two collectors of EnvPool's CartPole pools through `envpool.make_gymnasium`."""
    envpool = pytest.importorskip("envpool", reason="EnvPool is not installed: pip install 'podrace[envpool]'")
    return [
        GymnasiumCollector(
            envpool.make_gymnasium("CartPole-v1", num_envs=num_envs, seed=1000 * seed + num_envs * slot),
            learner,
            rollout_length=rollout_length,
            key=jax.random.fold_in(jax.random.key(seed), slot),
        )
        for slot in range(2)
    ]


def test_envpool_pools_feed_sebulba_through_their_gymnasium_interface():
    learner = _learner()
    with quiet_envpool_spaces():
        pipeline = pr.Sebulba(learner, _envpool_collectors(learner, NUM_ENVS, ROLLOUT, seed=0))
        result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=30)
        pipeline.close()
    np.testing.assert_array_equal(result.state.actor_steps, [30 * NUM_ENVS * ROLLOUT] * 2)
    np.testing.assert_array_equal(result.state.actor_steps, result.state.learnt_steps)
    # CartPole's reward is 1 a step: whole episodes return their length, a reset step counts for none.
    assert int(result.metrics.episodes_completed.sum()) > 10
    assert float(result.metrics.episode_return_sum.sum()) == int(result.metrics.episode_length_sum.sum())


_DEVICES_SCRIPT = """
import jax
import numpy as np
import pytest
import podrace as pr
from podrace.executors.host import jitted_update
from tests import helpers
from tests.test_sebulba import _collector, _learner

d = jax.devices()
learner = _learner(num_minibatches=1)  # the same minibatch whatever the devices

# One actor device and one learner device: the updates of the learner on the default device.
pipeline = pr.Sebulba(learner, [_collector(learner, 0)], actor_devices=[d[0]], learner_devices=[d[1]])
result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=3)
twin, states = _collector(learner, 0), [learner.init(jax.random.key(1))]
for k in range(3):
    trajectory, _ = twin.collect(learner.agent(states[max(k - 1, 0)]))
    states.append(jitted_update(learner, states[k], trajectory)[0])
assert all(leaf.devices() == {d[1]} for leaf in jax.tree.leaves(result.state.learner))
helpers.assert_trees_close(result.state.learner, states[-1], rtol=0, atol=0)

# Two actor devices, two learner devices: the batch split over the learners, as one learner.
def train(actor_devices, learner_devices):
    collectors = [_collector(learner, slot) for slot in range(2)]
    pipeline = pr.Sebulba(learner, collectors, actor_devices=actor_devices, learner_devices=learner_devices)
    result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=3)
    pipeline.close()
    return pipeline, result

split, split_result = train(d[:2], d[2:])
assert split.num_devices == 2
np.testing.assert_array_equal(split_result.state.actor_steps, [3 * 2 * 8] * 2)
np.testing.assert_array_equal(split_result.state.actor_steps, split_result.state.learnt_steps)
_, whole = train(d[:1], d[3:])
helpers.assert_trees_close(split_result.state.learner, whole.state.learner, rtol=1e-5, atol=1e-6)

# The device split is checked.
with pytest.raises(ValueError, match="share devices; give each device to the actors or to the learner"):
    pr.Sebulba(learner, [_collector(learner, 0)], actor_devices=d[:2], learner_devices=d[1:])
with pytest.raises(ValueError, match="cannot be split over 3 learner devices"):
    pr.Sebulba(learner, [_collector(learner, 0, num_envs=4)], actor_devices=d[:1], learner_devices=d[1:])
with pytest.raises(ValueError, match="cannot be spread evenly over 2 actor devices"):
    pr.Sebulba(learner, [_collector(learner, 0)], actor_devices=d[:2], learner_devices=d[2:])
# By default the actors act on the first device, the learner on the others.
assert pr.Sebulba(learner, [_collector(learner, 0)], learner_devices=d[2:]).actor_devices == (d[0],)
default = pr.Sebulba(learner, [_collector(learner, 0, num_envs=3)], actor_devices=[d[3]])
assert default.learner_mesh.devices.tolist() == d[:3]
print("equal")
"""


def test_actor_and_learner_devices_on_forced_cpu_devices():
    run = subprocess.run(
        [sys.executable, "-c", _DEVICES_SCRIPT],
        env=dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0 and "equal" in run.stdout, run.stderr[-3000:]


_PROCESS_SCRIPT = """
import pathlib, sys
import jax
import numpy as np
import podrace as pr
from tests.test_sebulba import _collector, _learner

address, process, out = sys.argv[1], int(sys.argv[2]), pathlib.Path(sys.argv[3])
pr.distributed.initialize(address, num_processes=2, process_id=process, timeout_s=120)
learner = _learner(num_minibatches=1)
counts = [0, 0]
# This process's thread acts on its first device; the learner spans the second device of each process.
pipeline = pr.Sebulba(learner, [_collector(learner, process, counts=counts)])
assert pipeline.actor_devices == (jax.local_devices()[0],)
assert [(d.process_index, d in jax.local_devices()) for d in pipeline.learner_mesh.devices.flat] == [
    (0, process == 0), (1, process == 1)
]
result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=3)
pipeline.close()
leaves = jax.tree.leaves(pr.distributed.gather(result.state.learner))
np.savez(
    out / f"process-{process}.npz",
    stepped=counts[process],
    actor_steps=result.state.actor_steps,
    learnt_steps=result.state.learnt_steps,
    frames_per_update=pipeline.frames_per_update,
    episodes=pr.distributed.gather(result.metrics.episodes_completed),
    **{f"leaf-{i:03d}": leaf for i, leaf in enumerate(leaves)},
)
"""


def test_two_processes_learn_as_one_process_with_every_step_learnt_once(tmp_path):
    # Two processes of two CPU devices each, joined by jax.distributed: in each, one actor
    # thread on the first device; the learner on the second device of both.
    finished = helpers.run_processes(
        lambda address, process: [sys.executable, "-c", _PROCESS_SCRIPT, address, str(process), str(tmp_path)],
        num_devices=2,
    )
    for process in finished:
        assert process.returncode == 0, process.stderr[-3000:]
    runs = [np.load(tmp_path / f"process-{process}.npz") for process in range(2)]
    # One process, one learner device, the same two threads' environments.
    learner = _learner(num_minibatches=1)
    pipeline = pr.Sebulba(learner, [_collector(learner, slot) for slot in range(2)])
    whole = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=3)
    pipeline.close()
    expected = jax.tree.leaves(pr.distributed.gather(whole.state.learner))
    for run in runs:
        # Each process's thread stepped 3 rollouts, and the learner learnt from each once.
        assert int(run["stepped"]) == 3 * NUM_ENVS * ROLLOUT
        np.testing.assert_array_equal(run["actor_steps"], [3 * NUM_ENVS * ROLLOUT])
        np.testing.assert_array_equal(run["learnt_steps"], run["actor_steps"])
        assert int(run["frames_per_update"]) == pipeline.frames_per_update
        np.testing.assert_array_equal(run["episodes"], whole.metrics.episodes_completed)
        leaves = [run[f"leaf-{i:03d}"] for i in range(len(expected))]
        helpers.assert_trees_close(leaves, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_ppo_solves_envpool_cartpole_through_sebulba_on_seeds_0_to_9():
    # `podrace train cartpole ppo`'s settings but for the shape of its 1,024 steps an update:
    # 32 environments of 32 steps (two actor threads of 16 EnvPool pools) for its 8 of 128,
    # a quarter of the host loop's iterations (the Gymnasium vector envs take the same
    # path, checked above).
    config = dataclasses.replace(configs.default_config("cartpole", "ppo"), num_envs=32, rollout_length=32)
    returns = []
    for seed in range(10):
        learner = config.learner(pr.Discrete(2), (4,), jax.random.key(seed))
        with quiet_envpool_spaces():
            pipeline = pr.Sebulba(learner, _envpool_collectors(learner, 16, config.rollout_length, seed))
            result = pipeline.train(pipeline.init(jax.random.key(seed)), num_updates=config.num_updates)
            evaluation = pr.Evaluation(pr.policies.Mode(), num_episodes=8, key=jax.random.key(seed), max_steps=500)
            returns.append(float(np.mean(pipeline.evaluate(result.state, evaluation).returns)))
            pipeline.close()
    threshold = configs.TUNED["cartpole", "ppo"].solved_at
    solved = sum(value >= threshold for value in returns)
    per_seed = ", ".join(f"{seed}: {value:.4g}" for seed, value in enumerate(returns))
    print(f"{solved}/10 seeds reach {threshold} (by seed: {per_seed})")  # shown by pytest -rP
    assert solved >= 9, per_seed
