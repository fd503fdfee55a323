"""Populations: members equal separate runs, hyperparameters change without recompiling,
environment variants, population evaluation, and bad input (over devices:
`test_device_matrix.py`)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr

from . import helpers


NUM_UPDATES = 3
SIZE = 4


def _catch_member(hyperparameters) -> pr.Anakin:
    """A small Catch agent whose learning rate, lambda and network seed come from `hyperparameters`."""
    learning_rate, lambda_, key = hyperparameters
    env = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)
    torso_key, head_key = jax.random.split(key)
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(env.observation_space.shape, (16,), key=torso_key),
        pr.networks.QValueHead(16, 3, key=head_key),
    )
    loss = pr.losses.TDLambdaQLoss(discount=0.99, lambda_=lambda_)
    learner = pr.Learner(network, pr.policies.EpsilonGreedy(0.1), loss, optax.adam(learning_rate))
    return pr.Anakin(env, learner, num_envs=3, rollout_length=6)


def _catch_hyperparameters(seed: int = 0):
    learning_rates = jnp.asarray([1e-3, 1e-2, 3e-2, 1e-1], jnp.float32)
    lambdas = jnp.asarray([0.0, 0.5, 0.9, 1.0], jnp.float32)
    return learning_rates, lambdas, jax.random.split(jax.random.key(seed), SIZE)


def _traced_catch_population() -> tuple[pr.Population, list[None]]:
    """A Catch population, and a list that grows by one each time a member's pipeline is traced."""
    traces = []

    def make_pipeline(hyperparameters):
        traces.append(None)
        return _catch_member(hyperparameters)

    return pr.Population(make_pipeline, _catch_hyperparameters()), traces


def test_members_equal_separate_runs():
    population = pr.Population(_catch_member, _catch_hyperparameters())
    key = jax.random.key(1)
    result = population.train(population.init(key), num_updates=NUM_UPDATES, metrics=pr.results.METRICS)
    assert result.metrics.update.loss.shape == result.metrics.update.grad_norm.shape == (SIZE, NUM_UPDATES)
    assert result.metrics.mean_episode_return.shape == (SIZE,)
    for i, member_key in enumerate(jax.random.split(key, SIZE)):
        pipeline = population.member(i)
        alone = pipeline.train(pipeline.init(member_key), num_updates=NUM_UPDATES, metrics=pr.results.METRICS)
        helpers.assert_trees_close(helpers.index(result, i), alone, rtol=1e-5, atol=1e-6)
    # The members differ: their hyperparameters and seeds are used.
    params = result.state.learner.params
    helpers.assert_trees_differ(helpers.index(params, 0), helpers.index(params, 1))


def test_a_population_of_seeds_needs_only_a_size():
    pipeline = _catch_member(tuple(helpers.index(_catch_hyperparameters(), 0)))
    population = pr.Population(lambda _: pipeline, size=2)
    result = population.train(population.init(jax.random.key(2)), num_updates=NUM_UPDATES)
    for i, key in enumerate(jax.random.split(jax.random.key(2), 2)):
        alone = pipeline.train(pipeline.init(key), num_updates=NUM_UPDATES)
        helpers.assert_trees_close(helpers.index(result, i), alone, rtol=1e-5, atol=1e-6)


def test_new_hyperparameter_values_do_not_recompile():
    population, traces = _traced_catch_population()
    state = population.init(jax.random.key(3))
    first = population.train(state, num_updates=NUM_UPDATES)
    count = len(traces)
    learning_rates, lambdas, keys = _catch_hyperparameters()
    changed = eqx.tree_at(lambda p: p.hyperparameters, population, (learning_rates[::-1], lambdas[::-1], keys))
    second = changed.train(state, num_updates=NUM_UPDATES)
    assert len(traces) == count, "new hyperparameter values retraced the population"
    helpers.assert_trees_differ(first.state.learner.params, second.state.learner.params)


def test_environment_variants_in_one_population():
    def make_pipeline(pole_half_length):
        env = pr.envs.cartpole_v1(pole_half_length=pole_half_length)
        learner = helpers.make_learner(jax.random.key(4), observation_shape=(4,), num_actions=2)
        return pr.Anakin(env, learner, num_envs=2, rollout_length=8)

    lengths = jnp.asarray([0.25, 0.5, 1.0, 2.0], jnp.float32)
    population = pr.Population(make_pipeline, lengths)
    state = population.init(jax.random.key(5))
    np.testing.assert_array_equal(population.member(2).env.env.env.pole_half_length, 1.0)
    result = population.train(state, num_updates=NUM_UPDATES)
    for i, key in enumerate(jax.random.split(jax.random.key(5), 4)):
        pipeline = population.member(i)
        alone = pipeline.train(pipeline.init(key), num_updates=NUM_UPDATES)
        helpers.assert_trees_close(helpers.index(result, i), alone, rtol=1e-5, atol=1e-6)


def test_meta_batch_of_environment_parameters_in_one_vmap():
    network = helpers.q_network(jax.random.key(6), observation_shape=(4,), num_actions=2)

    def mean_return(pole_half_length):
        env = pr.envs.cartpole_v1(pole_half_length=pole_half_length)
        result = pr.evaluate(env, network, pr.policies.Greedy(), num_episodes=4, key=jax.random.key(7))
        return result.mean_return

    lengths = jnp.asarray([0.1, 0.5, 2.0], jnp.float32)
    together = eqx.filter_jit(eqx.filter_vmap(mean_return))(lengths)
    np.testing.assert_allclose(together, [mean_return(length) for length in lengths], rtol=1e-6)


def test_evaluate_population_equals_evaluating_each_member():
    population = pr.Population(_catch_member, _catch_hyperparameters())
    result = population.train(population.init(jax.random.key(8)), num_updates=NUM_UPDATES)
    env = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)
    networks = population.networks(result.state)
    together = pr.evaluate_population(env, networks, pr.policies.Greedy(), num_episodes=5, key=jax.random.key(9))
    assert together.returns.shape == (SIZE, 5)
    assert together.mean_return.shape == (SIZE,)
    for i in range(SIZE):
        network = helpers.index(networks, i)
        alone = pr.evaluate(env, network, pr.policies.Greedy(), num_episodes=5, key=jax.random.key(9))
        helpers.assert_trees_close(helpers.index(together, i), alone)


def test_evaluation_inside_train_equals_evaluating_the_trained_members():
    population, traces = _traced_catch_population()
    state = population.init(jax.random.key(8))
    policy = pr.policies.Greedy()
    results = {}
    for key in (9, 10):
        evaluation = pr.Evaluation(policy, num_episodes=5, key=jax.random.key(key), max_steps=20)
        results[key] = population.train(state, num_updates=NUM_UPDATES, evaluation=evaluation)
        if key == 9:
            count = len(traces)
    assert len(traces) == count, "a new evaluation key retraced the population"
    env = population.member(0).evaluation_env()
    for key, result in results.items():
        assert result.evaluation is not None and result.evaluation.returns.shape == (SIZE, 5)
        networks = population.networks(result.state)
        # Every member plays the episodes of the same key, as evaluate_population plays them.
        alone = pr.evaluate_population(env, networks, policy, num_episodes=5, key=jax.random.key(key), max_steps=20)
        helpers.assert_trees_close(result.evaluation, alone, rtol=0, atol=0)
        evaluation = pr.Evaluation(policy, num_episodes=5, key=jax.random.key(key), max_steps=20)
        helpers.assert_trees_close(population.evaluate(result.state, evaluation), alone, rtol=0, atol=0)
    assert population.train(state, num_updates=NUM_UPDATES).evaluation is None


@pytest.mark.parametrize(
    ("hyperparameters", "size", "message"),
    [
        ((jnp.zeros(3), jnp.zeros(4)), None, "same leading"),
        (jnp.asarray(1.0), None, "same leading"),
        ([1e-3, 1e-4], None, "same leading"),
        (jnp.zeros(3), 4, "size=4"),
        (None, None, "size="),
        (None, 0, "positive integer"),
    ],
)
def test_population_rejects_inconsistent_sizes(hyperparameters, size, message):
    pipeline = _catch_member(tuple(helpers.index(_catch_hyperparameters(), 0)))
    with pytest.raises(ValueError, match=message):
        pr.Population(lambda _: pipeline, hyperparameters, size=size)


def test_population_rejects_a_maker_that_builds_no_pipeline():
    with pytest.raises(TypeError, match=r"podrace\.Anakin"):
        pr.Population(lambda h: h, jnp.zeros(2))


def test_population_train_rejects_non_positive_updates():
    population = pr.Population(_catch_member, _catch_hyperparameters())
    with pytest.raises(ValueError, match="num_updates"):
        population.train(population.init(jax.random.key(0)), num_updates=0)


def test_a_population_keeps_the_pipeline_contract():
    # What progress and the command line read of any pipeline: members, devices and frames.
    population = pr.Population(_catch_member, _catch_hyperparameters())
    member = _catch_member(jax.tree.map(lambda x: x[0], _catch_hyperparameters()))
    assert isinstance(population, pr.executors.pipeline.AbstractPipeline)
    assert (population.num_members, population.num_devices) == (SIZE, jax.device_count())
    assert population.frames_per_update == member.num_envs * member.rollout_length == 18
    assert (member.num_members, member.num_devices) == (1, jax.device_count())
    assert member.frames_per_update == jax.device_count() * 18


def test_a_population_gives_each_member_s_network_environment_and_evaluation():
    # What the command line's evaluate and export take of any pipeline, member by member.
    population = pr.Population(_catch_member, _catch_hyperparameters())
    state = population.train(population.init(jax.random.key(3)), num_updates=NUM_UPDATES).state
    evaluation = pr.Evaluation(pr.policies.Greedy(), num_episodes=4, key=jax.random.key(4), max_steps=20)
    together = population.evaluate(state, evaluation)
    assert together.returns.shape == (SIZE, 4)
    env = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)
    assert population.observation_spec == jax.eval_shape(lambda: env.reset(jax.random.key(0))[1].observation)
    for i in (0, SIZE - 1):
        member, member_state = population.member(i), jax.tree.map(lambda x, i=i: x[i], state)
        network = population.network_at(state, i)
        helpers.assert_trees_close(network, member.learner.network_at(member_state.learner), rtol=0, atol=0)
        agent = population.agent_at(state, i)
        helpers.assert_trees_close(agent, member.learner.agent(member_state.learner), rtol=0, atol=0)
        assert isinstance(population.evaluation_env(state, i), pr.envs.Catch)
        alone = member.evaluate(member_state, evaluation)
        assert alone.returns.shape == (4,)
        helpers.assert_trees_close(helpers.index(together, i), alone, rtol=0, atol=0)
    for pipeline, member in ((population, SIZE), (population.member(0), 1), (population, -1)):
        with pytest.raises(ValueError, match=f"there is no member {member}"):
            pipeline.network_at(state, member)
        with pytest.raises(ValueError, match=f"there is no member {member}"):
            pipeline.evaluation_env(state, member)
        with pytest.raises(ValueError, match=f"there is no member {member}"):
            pipeline.agent_at(state, member)
