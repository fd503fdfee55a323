"""The off-policy actor-critic learners (TD3, DDPG, SAC): what their updates do.

The learner contract, the device matrix and jit-versus-eager run them from
`helpers.LEARNERS`; the Pendulum learning tests are in `tests/test_learning.py`.
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import podrace as pr
from podrace import _cli_tasks as tasks

from . import helpers, off_policy_actor_critic


def _train(learner: pr.learners.AbstractLearner, num_updates: int) -> pr.networks.AbstractNetwork:
    pipeline = pr.Anakin(pr.envs.pendulum_v1(), learner, num_envs=4, rollout_length=1)
    result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=num_updates)
    return learner.network_at(result.state.learner)


def test_the_ddpg_learner_written_outside_the_library_equals_the_librarys():
    """`tests/off_policy_actor_critic.py` learns as `podrace.learners.ddpg` at the same
    settings: the library's Pendulum learning test speaks for it too."""
    settings = dataclasses.replace(
        tasks.default_settings("pendulum", "ddpg"), hidden=(16, 16), batch_size=32, min_replay_size=64
    )
    env = pr.envs.pendulum_v1()
    key = jax.random.key(0)
    library = tasks.make_learner(settings, tasks.env_spaces(env), key)
    outside = off_policy_actor_critic.ddpg_learner(
        key,
        env.observation_space.shape,
        1,
        low=-2.0,
        high=2.0,
        hidden_sizes=settings.hidden,
        optimizer=optax.adam(settings.learning_rate),
        buffer_size=settings.buffer_size,
        batch_size=settings.batch_size,
        min_replay_size=settings.min_replay_size,
        gradient_steps=settings.gradient_steps,
    )
    trained = _train(library, 60)
    helpers.assert_trees_close(_train(outside, 60), trained, rtol=1e-5, atol=1e-6)
    # It learnt: the actor moved away from its initial parameters.
    assert not np.allclose(jax.tree.leaves(trained)[0], jax.tree.leaves(library.actor)[0])


def _moved(after, before) -> bool:
    return not all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(before), strict=True))


def test_td3_moves_the_actor_and_the_targets_every_policy_delay_critic_steps():
    default = helpers.td3_learner(jax.random.key(0))
    learner = pr.learners.TD3Learner(
        default.actor,
        default.critic,
        helpers.ADAM,
        helpers.ADAM,
        buffer_size=240,
        batch_size=4,
        min_replay_size=12,
        policy_delay=3,
    )
    case = helpers.LEARNERS["td3"]
    trajectory = case.random_trajectory(learner.initial_agent(), 0, 6, 3)
    state = learner.init(jax.random.key(0), jax.tree.map(lambda x: x[0], trajectory.timestep))
    update = eqx.filter_jit(learner.update)
    moved = []
    for _ in range(6):
        new_state, _ = update(state, trajectory)
        if new_state.num_gradient_steps > state.num_gradient_steps:
            actor_moved = _moved(new_state.actor_params, state.actor_params)
            target_moved = _moved(new_state.target_critic_params, state.target_critic_params)
            assert actor_moved == target_moved
            moved.append((int(new_state.num_gradient_steps), actor_moved))
        state = new_state
    assert [step for step, actor_moved in moved if actor_moved] == [step for step, _ in moved if step % 3 == 0]
    assert any(step % 3 == 0 for step, _ in moved)


def test_sac_temperature_falls_while_the_policy_is_more_random_than_its_target_entropy():
    learner = helpers.sac_learner(jax.random.key(0))
    # A target entropy far below any Gaussian of std >= exp(-5) on one dimension.
    learner = eqx.tree_at(lambda sac: sac.target_entropy, learner, jnp.asarray(-20.0))
    case = helpers.LEARNERS["sac"]
    trajectory = case.random_trajectory(learner.initial_agent(), 0, 6, 3)
    state = learner.init(jax.random.key(0), jax.tree.map(lambda x: x[0], trajectory.timestep))
    update = eqx.filter_jit(learner.update)
    for _ in range(4):
        state, _ = update(state, trajectory)
    assert int(state.num_gradient_steps) > 0
    assert float(state.log_temperature) < float(jnp.log(learner.initial_temperature))
