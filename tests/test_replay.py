"""The replay part: what goes in comes out as sequences of consecutive time steps of one environment."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr

from . import helpers


NUM_ENVS, NUM_STEPS = 3, 4


def _rollout(start: int) -> pr.Trajectory:
    """Environment `b`'s time step `start + t` has reward `100 b + start + t`, where it takes action `start + t`."""
    trajectory = jax.tree.map(jnp.asarray, helpers.random_trajectory(0, NUM_STEPS, NUM_ENVS))
    steps = start + np.arange(NUM_STEPS + 1)[:, None]
    reward = jnp.asarray(100 * np.arange(NUM_ENVS)[None, :] + steps, jnp.float32)
    action = jnp.asarray(np.broadcast_to(steps[:-1], (NUM_STEPS, NUM_ENVS)), jnp.int32)
    return eqx.tree_at(lambda t: (t.timestep.reward, t.policy_step.action), trajectory, (reward, action))


def _empty(replay: pr.learners.SequenceReplay) -> object:
    rollout = _rollout(0)
    return replay.init(
        jax.tree.map(lambda x: x[0], rollout.timestep), jax.tree.map(lambda x: x[0, 0], rollout.policy_step)
    )


def test_sampled_sequences_are_consecutive_steps_of_one_environment_with_their_actions():
    replay = pr.learners.SequenceReplay(buffer_size=NUM_ENVS * 16, sequence_length=3)
    state = _empty(replay)
    assert not bool(replay.ready(state))
    for start in (0, NUM_STEPS):  # the second rollout starts where the first ended
        state = replay.add(state, _rollout(start))
    assert bool(replay.ready(state))
    sequences = replay.sample(state, jax.random.key(0), 64)
    reward, action = np.asarray(sequences.timestep.reward), np.asarray(sequences.policy_step.action)
    assert reward.shape == (3, 64) and action.shape == (2, 64) and sequences.carry == ()
    env, step = reward // 100, reward % 100
    assert np.all(env == env[0]) and np.all(np.diff(step, axis=0) == 1)
    np.testing.assert_array_equal(action, step[:-1])
    assert step.max() <= 2 * NUM_STEPS - 1  # the last time step waits for its action


def test_the_stored_experience_is_device_local():
    replay = pr.learners.SequenceReplay(buffer_size=NUM_ENVS * 16, sequence_length=2)
    state = _empty(replay)
    local = replay.device_local(state)
    assert all(jax.tree.leaves(local.experience)) and not any(
        jax.tree.leaves(eqx.tree_at(lambda s: s.experience, local, None))
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(buffer_size=0, sequence_length=2), "buffer_size must be a positive integer"),
        (dict(buffer_size=8, sequence_length=1), "sequence_length must be an integer >= 2"),
    ],
)
def test_replay_rejects_bad_sizes(options, message):
    with pytest.raises(ValueError, match=message):
        pr.learners.SequenceReplay(**options)


def test_replay_rejects_a_buffer_shorter_than_a_sequence_per_environment():
    with pytest.raises(ValueError, match=r"leaves 2 steps per environment, fewer than sequence_length=3"):
        _empty(pr.learners.SequenceReplay(buffer_size=NUM_ENVS * 2, sequence_length=3))
