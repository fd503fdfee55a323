"""Running normalisation of observations and rewards (`podrace.RunningNormalization`)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np
import pytest

import podrace as pr
from podrace.checkpoint import Checkpointer

from . import helpers


PRIOR = 1e-4  # the weight of the statistics' starting point: mean 0, variance 1
DISCOUNT, CLIP, EPSILON = 0.9, 10.0, 1e-8


def _pooled(samples: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Count, mean and variance of `samples` (float64) pooled with the starting point,
    from their definition: a pseudo-sample of weight `PRIOR` with mean 0 and variance 1."""
    count = PRIOR + len(samples)
    mean = samples.sum(axis=0) / count
    var = (PRIOR * (1.0 + mean**2) + np.square(samples - mean).sum(axis=0)) / count
    return count, mean, var


def test_running_statistics_equal_the_pooled_moments_of_every_sample_kept():
    rng = np.random.default_rng(0)
    statistics = pr.envs.RunningStatistics.initial((3,))
    seen = []
    for size in (5, 1, 7, 4):
        batch = rng.normal(3.0, 2.0, (size, 3)).astype(np.float32)
        mask = rng.random(size) < 0.7
        statistics = statistics.update(jnp.asarray(batch), jnp.asarray(mask))
        seen += list(batch[mask].astype(np.float64))
        count, mean, var = _pooled(np.asarray(seen))
        np.testing.assert_allclose(statistics.count, count, rtol=1e-6)
        np.testing.assert_allclose(statistics.mean, mean, rtol=1e-5)
        np.testing.assert_allclose(statistics.var, var, rtol=1e-5)


def test_an_empty_mask_leaves_the_statistics_as_they_were():
    statistics = pr.envs.RunningStatistics.initial((2,)).update(jnp.ones((3, 2)), jnp.ones(3, bool))
    unchanged = statistics.update(jnp.full((3, 2), 7.0), jnp.zeros(3, bool))
    helpers.assert_trees_close(unchanged, statistics, rtol=0, atol=0)


def _zero_agent(network):
    """An agent whose actions do not depend on what it observes: its network is zeros."""
    parameters, static = eqx.partition(network, eqx.is_inexact_array)
    return helpers.agent(eqx.combine(jax.tree.map(jnp.zeros_like, parameters), static))


CASES = {
    # Catch terminates with rewards of +1 or -1; the point on a line is truncated after 4
    # steps or terminates near 0, with dense rewards.
    "catch": lambda key: (
        pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS),
        helpers.make_learner(key),
        helpers.logit_network(key, with_value=True),
    ),
    "time-limit-point": lambda key: (
        pr.envs.TimeLimit(helpers.Point(), 4),
        helpers.policy_gradient_learner(key, pr.losses.A2CLoss(discount=0.99), continuous=True),
        helpers.gaussian_network(key, helpers.POINT_OBS_SHAPE, action_size=1, with_value=True),
    ),
}


def _rollouts(env, learner, agent, normalization, *, num_envs=5, length=6, rollouts=2):
    """The time steps `[1 + rollouts * length, B]` of consecutive rollouts from `init_state`."""
    env = pr.envs.AutoReset(env)
    state = pr.executors.anakin.init_state(
        env, learner, jax.random.key(3), num_envs=num_envs, normalization=normalization
    )
    envs, steps = state.envs, [jax.tree.map(lambda x: x[None], state.envs.timestep)]
    for _ in range(rollouts):
        envs, trajectory, _ = pr.executors.anakin.rollout(env, agent, envs, length, normalization)
        steps.append(jax.tree.map(lambda x: x[1:], trajectory.timestep))
    return jax.tree.map(lambda *x: np.concatenate(x).astype(np.float64), *steps), envs


def _reference(raw: pr.TimeStep) -> tuple[np.ndarray, np.ndarray]:
    """Observations and rewards normalised by a float64 loop over the time steps: every
    observation so far (this step's included) sets the observations' statistics; every
    discounted return so far, but at resets, the rewards' scale."""
    observations, rewards = np.zeros_like(raw.observation), np.zeros_like(raw.reward)
    seen_observations, seen_returns = [], []
    discounted_return = np.zeros(raw.reward.shape[1])
    for t in range(len(raw.reward)):
        seen_observations += list(raw.observation[t])
        _, mean, var = _pooled(np.asarray(seen_observations))
        observations[t] = np.clip((raw.observation[t] - mean) / np.sqrt(var + EPSILON), -CLIP, CLIP)
        discounted_return = DISCOUNT * discounted_return + raw.reward[t]
        seen_returns += list(discounted_return[~raw.is_first[t].astype(bool)])
        _, _, returns_var = _pooled(np.asarray(seen_returns)) if seen_returns else (0, 0, 1.0)
        rewards[t] = np.clip(raw.reward[t] / np.sqrt(returns_var + EPSILON), -CLIP, CLIP)
        discounted_return = np.where(raw.terminated[t] + raw.truncated[t], 0.0, discounted_return)
    return observations, rewards


@pytest.mark.parametrize("case", CASES)
def test_normalised_time_steps_equal_a_float64_loop(case):
    env, learner, network = CASES[case](jax.random.key(0))
    agent = _zero_agent(network)
    raw, _ = _rollouts(env, learner, agent, None)
    assert raw.terminated.any() and (case == "catch" or raw.truncated.any())
    normalization = pr.RunningNormalization(discount=DISCOUNT, clip=CLIP, epsilon=EPSILON)
    normalized, envs = _rollouts(env, learner, agent, normalization)
    # The agent acts alike on both, so the environments went through the same steps.
    np.testing.assert_array_equal(normalized.is_first, raw.is_first)
    np.testing.assert_array_equal(normalized.discount, raw.discount)
    observations, rewards = _reference(raw)
    np.testing.assert_allclose(normalized.observation, observations, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(normalized.reward, rewards, rtol=1e-4, atol=1e-5)
    # Every environment holds the same copy of the statistics.
    for leaf in jax.tree.leaves(envs.normalization.observations):
        np.testing.assert_array_equal(leaf, jnp.broadcast_to(leaf[0], leaf.shape))


def test_the_pipeline_reports_the_environments_own_returns_and_evaluates_with_the_statistics():
    env = pr.envs.TimeLimit(helpers.Point(), 4)
    learner = helpers.policy_gradient_learner(jax.random.key(0), pr.losses.A2CLoss(discount=0.99), continuous=True)
    returns = {}
    for name, normalization in (("raw", None), ("scaled", pr.RunningNormalization(observations=False))):
        pipeline = pr.Anakin(env, learner, num_envs=4, rollout_length=5, normalization=normalization)
        returns[name] = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=1).metrics.episode_return_sum
    # The first rollout acts alike; its episodes' returns are the environment's rewards
    # either way, though the learner saw them scaled.
    np.testing.assert_allclose(returns["scaled"], returns["raw"], rtol=1e-6)
    pipeline = pr.Anakin(env, learner, num_envs=4, rollout_length=5, normalization=pr.RunningNormalization())
    state = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=1).state
    with pytest.raises(ValueError, match=r"pass the state whose statistics normalise them: evaluation_env\(state\)"):
        pipeline.evaluation_env()
    evaluation_env = pipeline.evaluation_env(state)
    assert isinstance(evaluation_env, pr.envs.NormalizeObservation)
    _, timestep = evaluation_env.reset(jax.random.key(2))
    statistics = pipeline.normalization.observation_statistics(state.envs.normalization)
    _, raw = env.reset(jax.random.key(2))
    expected = (raw.observation - statistics.mean) / jnp.sqrt(statistics.var + 1e-8)
    np.testing.assert_allclose(timestep.observation, expected, rtol=1e-6)


def test_observations_that_are_not_one_array_are_refused_with_what_to_do():
    env = pr.envs.PreviousActionReward(helpers.Point())
    learner = helpers.recurrent_learner(
        jax.random.key(0), pr.losses.A2CLoss(discount=0.99), continuous=True, previous_action_reward=True
    )
    with pytest.raises(ValueError, match=r"needs one array of observations .* Normalise inside the network instead"):
        pr.Anakin(env, learner, num_envs=2, rollout_length=2, normalization=pr.RunningNormalization())
    # Rewards alone may be normalised whatever the observations.
    pr.Anakin(env, learner, num_envs=2, rollout_length=2, normalization=pr.RunningNormalization(observations=False))
    with pytest.raises(ValueError, match="normalise observations, rewards or both"):
        pr.RunningNormalization(observations=False, rewards=False)


def test_a_population_member_normalises_as_its_pipeline_alone():
    env = pr.envs.TimeLimit(helpers.Point(), 4)
    learner = helpers.policy_gradient_learner(jax.random.key(0), pr.losses.A2CLoss(discount=0.99), continuous=True)

    def make_pipeline(discount):
        normalization = pr.RunningNormalization(discount=discount)
        return pr.Anakin(env, learner, num_envs=3, rollout_length=4, normalization=normalization)

    discounts = jnp.asarray([0.9, 0.5])
    population = pr.Population(make_pipeline, discounts)
    state = population.train(population.init(jax.random.key(5)), num_updates=2).state
    for member in range(2):
        alone = make_pipeline(discounts[member])
        key = jax.random.split(jax.random.key(5), 2)[member]
        alone_state = alone.train(alone.init(key), num_updates=2).state
        helpers.assert_trees_close(helpers.index(state, member), alone_state, rtol=1e-5, atol=1e-6)


def test_two_devices_merge_their_statistics_as_one_device_with_the_whole_batch():
    helpers.assert_two_devices_train_as_one("pendulum", normalized=True)


def test_the_statistics_are_checkpointed_and_a_resumed_run_is_bit_identical(tmp_path):
    env = pr.envs.TimeLimit(helpers.Point(), 4)
    learner = helpers.policy_gradient_learner(jax.random.key(0), pr.losses.A2CLoss(discount=0.99), continuous=True)
    pipeline = pr.Anakin(env, learner, num_envs=3, rollout_length=4, normalization=pr.RunningNormalization())
    state = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=2).state
    with Checkpointer(tmp_path) as checkpointer:
        checkpointer.save(2, state)
        restored = checkpointer.restore(pipeline.init(jax.random.key(2)))
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)
    helpers.assert_trees_close(
        pipeline.train(restored, num_updates=2), pipeline.train(state, num_updates=2), rtol=0, atol=0
    )


@pytest.mark.parametrize("replayed", ["raw", "normalized"])
def test_a_replay_learner_stores_raw_observations_and_learns_from_batches_normalised_now(replayed):
    env = pr.envs.TimeLimit(helpers.Point(), 4)
    normalization = pr.RunningNormalization(rewards=False, replayed_observations=replayed)
    pipeline = pr.Anakin(
        env, helpers.td3_learner(jax.random.key(0)), num_envs=3, rollout_length=2, normalization=normalization
    )
    start = pipeline.init(jax.random.key(1))
    state = pipeline.train(start, num_updates=1).state
    stored = state.learner.replay.experience[0].observation[:, 0]  # each environment's first step
    if replayed == "raw":
        assert start.envs.raw_observation is not None
        helpers.assert_trees_close(stored, start.envs.raw_observation, rtol=0, atol=0)
        assert not np.allclose(stored, start.envs.timestep.observation)  # the agent saw them normalised
    else:
        assert start.envs.raw_observation is None
        helpers.assert_trees_close(stored, start.envs.timestep.observation, rtol=0, atol=0)
    # A sampled batch of raw observations comes out normalised by the statistics given.
    normalize = normalization.frozen(env, state.envs.normalization).normalize
    replay = pr.learners.SequenceReplay(pipeline.learner.replay.buffer_size, 2, normalize_observations=normalize)
    key = jax.random.key(2)
    sampled = replay.sample(state.learner.replay, key, 5).timestep.observation
    as_stored = pipeline.learner.replay.sample(state.learner.replay, key, 5).timestep.observation
    helpers.assert_trees_close(sampled, normalize(as_stored), rtol=0, atol=0)
    # (The test session's type checks refuse it first, by its annotation.)
    with pytest.raises((ValueError, jaxtyping.TypeCheckError), match="replayed_observations"):
        pr.RunningNormalization(replayed_observations="stale")
