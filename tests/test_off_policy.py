"""The off-policy actor-critic learners (TD3, DDPG, SAC, discrete SAC): what their updates do.

The learner contract, the device matrix and jit-versus-eager run them from
`helpers.LEARNERS`; the Pendulum learning tests are in `tests/test_learning.py`.
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np
import optax
import pytest

import podrace as pr
from podrace import configs

from . import helpers, off_policy_actor_critic


def _train(learner: pr.learners.AbstractLearner, num_updates: int) -> pr.networks.AbstractNetwork:
    pipeline = pr.Anakin(pr.envs.pendulum_v1(), learner, num_envs=4, rollout_length=1)
    result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=num_updates)
    return learner.network_at(result.state.learner)


def test_the_ddpg_learner_written_outside_the_library_equals_the_librarys():
    """`tests/off_policy_actor_critic.py` learns as `podrace.learners.ddpg` at the same
    settings: the library's Pendulum learning test speaks for it too."""
    config = dataclasses.replace(
        configs.default_config("pendulum", "ddpg"), hidden=(16, 16), batch_size=32, min_replay_size=64
    )
    env = pr.envs.pendulum_v1()
    key = jax.random.key(0)
    library = config.learner(env.action_space, env.observation_space.shape, key)
    outside = off_policy_actor_critic.ddpg_learner(
        key,
        env.observation_space.shape,
        1,
        low=-2.0,
        high=2.0,
        hidden_sizes=config.hidden,
        optimizer=optax.adam(config.learning_rate),
        buffer_size=config.buffer_size,
        batch_size=config.batch_size,
        min_replay_size=config.min_replay_size,
        gradient_steps=config.gradient_steps,
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


def test_sac_update_order_decides_which_step_sees_the_others_update():
    """Critics first, the actor's step reads the critics' new parameters and not the
    reverse; actor first, the other way round: which optimiser each step depends on."""
    base = helpers.sac_learner(jax.random.key(0))
    case = helpers.LEARNERS["sac"]
    trajectory = case.random_trajectory(base.initial_agent(), 0, 6, 3)
    state = base.init(jax.random.key(0), jax.tree.map(lambda x: x[0], trajectory.timestep))
    for _ in range(3):
        state, _ = eqx.filter_jit(base.update)(state, trajectory)

    def learn_step(update_order: str, actor_optimizer, critic_optimizer) -> pr.learners.SACState:
        learner = pr.learners.SACLearner(
            base.actor,
            base.critic,
            actor_optimizer,
            critic_optimizer,
            helpers.ADAM,
            buffer_size=240,
            batch_size=4,
            min_replay_size=12,
            update_order=update_order,
        )
        return eqx.filter_jit(learner.learn_step)(state, jax.random.key(1), None)[0]

    slow, fast = optax.adam(1e-3), optax.adam(1e-1)
    for update_order, actor_reads_critics in (("critics_first", True), ("actor_first", False)):
        reference = learn_step(update_order, slow, slow)
        other_critic_step = learn_step(update_order, slow, fast)
        other_actor_step = learn_step(update_order, fast, slow)
        assert _moved(other_critic_step.actor_params, reference.actor_params) == actor_reads_critics
        assert _moved(other_actor_step.critic_params, reference.critic_params) != actor_reads_critics
    # The test session's type checks refuse it before the constructor's ValueError can.
    with pytest.raises((ValueError, jaxtyping.TypeCheckError), match="update_order"):
        pr.learners.SACLearner(
            base.actor,
            base.critic,
            slow,
            slow,
            slow,
            buffer_size=240,
            batch_size=4,
            update_order="critic_first",
        )


def test_discrete_sac_step_takes_the_papers_three_objectives():
    """One `learn_step` of discrete SAC against the objectives written out in float64 from
    Christodoulou (2019), eq. 10-12, on the batch it replays: the critics' loss, the actor's
    (on the critics just updated), the temperature's, and the Polyak step of the targets."""
    learner = helpers.discrete_sac_learner(jax.random.key(0))
    learner = eqx.tree_at(lambda sac: sac.target_entropy, learner, jnp.asarray(0.4))
    case = helpers.LEARNERS["discrete-sac"]
    trajectory = case.random_trajectory(learner.initial_agent(), 0, 6, 3)
    state = learner.init(jax.random.key(0), jax.tree.map(lambda x: x[0], trajectory.timestep))
    state, _ = eqx.filter_jit(learner.update)(state, trajectory)  # fills the replay and learns a little
    learn_step = eqx.filter_jit(lambda state, key: learner.learn_step(state, key, None))
    masked = 0
    for seed in range(8):
        key = jax.random.key(seed)
        masked += _check_discrete_sac_step(learner, state, key, *learn_step(state, key))
    assert masked > 0  # some replayed transitions crossed an episode's end, and were left out


def _check_discrete_sac_step(learner, state, key, new_state, metrics) -> int:
    """Checks one step's objectives; returns how many of its replayed transitions were masked out."""
    batch = learner.replay.sample(state.replay, key, learner.batch_size)
    mask = np.asarray(batch.map_batch(pr.losses.transition_mask)[:, 0], np.float64)
    observation, next_observation = batch.timestep.observation[0], batch.timestep.observation[1]
    action = np.asarray(batch.policy_step.action[0])
    reward = np.asarray(batch.timestep.reward[1], np.float64)
    discount = np.asarray(batch.timestep.discount[1], np.float64)

    def log_policy(actor_params, observations):
        actor = pr.learners.with_params(learner.actor, actor_params)
        logits = np.asarray(jax.vmap(lambda o: actor(o, ())[0].logits)(observations), np.float64)
        return logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))

    def q_values(critic_params, observations):  # [critics, batch, actions], one critic at a time
        stacked = pr.learners.with_params(learner.critic, critic_params)

        def values_of(index):
            critic = jax.tree.map(lambda x: x[index] if eqx.is_array(x) else x, stacked)
            return jax.vmap(lambda o: critic(o, ())[0].q_values)(observations)

        return np.asarray([values_of(index) for index in range(learner.num_critics)], np.float64)

    alpha = float(np.exp(np.float64(state.log_temperature)))
    next_log_policy = log_policy(state.actor_params, next_observation)
    next_values = np.min(q_values(state.target_critic_params, next_observation), axis=0)
    soft_value = np.sum(np.exp(next_log_policy) * (next_values - alpha * next_log_policy), axis=-1)
    target = reward + float(learner.discount) * discount * soft_value
    taken = q_values(state.critic_params, observation)[:, np.arange(len(action)), action]
    critic_loss = np.mean(mask * np.sum((taken - target) ** 2, axis=0))

    log_pi = log_policy(state.actor_params, observation)
    pi = np.exp(log_pi)
    updated_values = np.min(q_values(new_state.critic_params, observation), axis=0)
    count = max(np.sum(mask), 1.0)
    actor_loss = np.sum(mask * np.sum(pi * (alpha * log_pi - updated_values), axis=-1)) / count
    entropy = np.sum(mask * -np.sum(pi * log_pi, axis=-1)) / count
    temperature_loss = float(state.log_temperature) * (entropy - 0.4)

    terms = {name: float(value) for name, value in metrics.terms.items()}
    np.testing.assert_allclose(
        [terms["critic"], terms["actor"], terms["entropy"], terms["temperature"]],
        [critic_loss, actor_loss, entropy, temperature_loss],
        rtol=1e-4,
        atol=1e-6,
    )
    expected_targets = jax.tree.map(
        lambda target, online: (1 - float(learner.tau)) * target + float(learner.tau) * online,
        state.target_critic_params,
        new_state.critic_params,
    )
    helpers.assert_trees_close(new_state.target_critic_params, expected_targets, rtol=1e-6, atol=1e-7)
    # The temperature steps against the entropy's excess over its target.
    assert (float(new_state.log_temperature) < float(state.log_temperature)) == (entropy > 0.4)
    return int(len(mask) - np.sum(mask))


def test_discrete_sac_refuses_critics_that_do_not_fit():
    actor = helpers.logit_network(jax.random.key(0))
    critic = helpers.q_network(jax.random.key(1))
    kwargs = dict(buffer_size=240, batch_size=4)
    adam = helpers.ADAM
    with pytest.raises(ValueError, match="needs at least one critic"):
        pr.learners.DiscreteSACLearner(actor, [], adam, adam, adam, **kwargs)
    wider = helpers.q_network(jax.random.key(2), hidden_sizes=(16,))
    with pytest.raises(ValueError, match="critic 1 differs in structure or shapes from critic 0"):
        pr.learners.DiscreteSACLearner(actor, [critic, wider], adam, adam, adam, **kwargs)
    four_actions = helpers.q_network(jax.random.key(3), num_actions=4)
    with pytest.raises(ValueError, match="the critics value 4 actions but the actor has 3"):
        pr.learners.DiscreteSACLearner(actor, [four_actions, four_actions], adam, adam, adam, **kwargs)
    with pytest.raises(ValueError, match="needs critics emitting QValues"):
        pr.learners.DiscreteSACLearner(actor, [actor, actor], adam, adam, adam, **kwargs)
    with pytest.raises(ValueError, match="needs an actor emitting PolicyLogits"):
        pr.learners.DiscreteSACLearner(critic, [critic, critic], adam, adam, adam, **kwargs)
