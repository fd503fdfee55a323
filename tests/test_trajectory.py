"""A batch of trajectories knows its batch axes: time-major parts `[T (+ 1), B]`, the carry `[B]`."""

import jax
import jax.numpy as jnp
import numpy as np

import podrace as pr

from . import helpers


NUM_STEPS, BATCH = 5, 6


def _batch(seed: int = 0) -> pr.Trajectory:
    carry = jax.random.normal(jax.random.key(seed), (BATCH, 3))
    return jax.tree.map(jnp.asarray, helpers.random_trajectory(seed, NUM_STEPS, BATCH, carry=carry))


def _row(trajectory: pr.Trajectory, b: int) -> pr.Trajectory:
    return pr.Trajectory(
        jax.tree.map(lambda x: x[:, b], trajectory.timestep),
        jax.tree.map(lambda x: x[:, b], trajectory.policy_step),
        jax.tree.map(lambda x: x[b], trajectory.carry),
    )


def test_map_batch_applies_the_function_to_each_trajectory_with_its_rows():
    trajectory = _batch()
    targets = jnp.arange(NUM_STEPS * BATCH, dtype=jnp.float32).reshape(NUM_STEPS, BATCH)

    def summary(one: pr.Trajectory, row: jax.Array) -> jax.Array:
        return jnp.sum(one.timestep.reward) + jnp.sum(one.carry) + row

    mapped = trajectory.map_batch(summary, targets, out_axes=1)
    assert mapped.shape == (NUM_STEPS, BATCH)
    for b in range(BATCH):
        np.testing.assert_allclose(mapped[:, b], summary(_row(trajectory, b), targets[:, b]), rtol=1e-6)


def test_take_returns_the_trajectories_at_the_indices():
    trajectory = _batch()
    indices = jnp.asarray([4, 0, 4])
    taken = trajectory.take(indices)
    assert taken.timestep.reward.shape == (NUM_STEPS + 1, 3) and taken.carry.shape == (3, 3)
    for position, b in enumerate(indices.tolist()):
        helpers.assert_trees_close(_row(taken, position), _row(trajectory, b), rtol=0, atol=0)


def test_concatenate_puts_batches_side_by_side():
    trajectory = _batch()
    first, second = trajectory.take(jnp.arange(2)), trajectory.take(jnp.arange(2, BATCH))
    helpers.assert_trees_close(pr.Trajectory.concatenate([first, second]), trajectory, rtol=0, atol=0)
