"""Host environments: the Gymnasium collector, training on host rollouts, evaluation."""

import inspect

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr
from podrace.envs.gymnasium import space_from_gymnasium
from podrace.executors.host import GymnasiumCollector, HostPipeline, evaluate_on_host, train_on_host

from . import helpers


NUM_ENVS = 4
ROLLOUT = 12
MAX_EPISODE_STEPS = 5  # short episodes: truncations inside every rollout


def _cartpole_vec(num_envs: int = NUM_ENVS, **kwargs) -> gymnasium.vector.VectorEnv:
    return gymnasium.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync", **kwargs)


def _learner(
    *, epsilon: float = 0.5, hidden: tuple[int, ...] = (16,), num_actions: int = 2, lr: float = 1e-3
) -> pr.Learner:
    torso_key, head_key = jax.random.split(jax.random.key(0))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((4,), hidden, key=torso_key), pr.networks.QValueHead(hidden[-1], num_actions, key=head_key)
    )
    loss = pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9)
    return pr.Learner(network, pr.policies.EpsilonGreedy(epsilon), loss, optax.adam(lr))


def _replay(actions: np.ndarray, seed: int, **kwargs) -> dict[str, np.ndarray]:
    """Steps a fresh vector env with the given actions `[T, B]`, recording what it returns."""
    envs = _cartpole_vec(**kwargs)
    observation, _ = envs.reset(seed=seed)
    record = dict(observation=[observation], reward=[np.zeros(NUM_ENVS)], terminated=[], truncated=[])
    record["terminated"].append(np.zeros(NUM_ENVS, bool))
    record["truncated"].append(np.zeros(NUM_ENVS, bool))
    for action in actions:
        observation, reward, terminated, truncated, _ = envs.step(action)
        for name, value in zip(record, (observation, reward, terminated, truncated), strict=True):
            record[name].append(value)
    return {name: np.stack(values) for name, values in record.items()}


def test_collector_matches_a_plain_gymnasium_loop():
    collector = GymnasiumCollector(
        _cartpole_vec(max_episode_steps=MAX_EPISODE_STEPS),
        _learner(),
        rollout_length=ROLLOUT,
        key=jax.random.key(0),
        seed=7,
    )
    behaviour = collector.learner.agent(collector.learner.init(jax.random.key(0)))
    first, _ = collector.collect(behaviour)
    second, _ = collector.collect(behaviour)
    # Rollouts chain: each starts with the previous one's last time step.
    helpers.assert_trees_close(helpers.index(second.timestep, 0), helpers.index(first.timestep, -1), rtol=0, atol=0)

    actions = np.concatenate([first.policy_step.action, second.policy_step.action])
    replay = _replay(actions, seed=7, max_episode_steps=MAX_EPISODE_STEPS)
    timestep = jax.tree.map(lambda a, b: np.concatenate([a, b[1:]]), first.timestep, second.timestep)
    np.testing.assert_array_equal(timestep.observation, replay["observation"])
    np.testing.assert_array_equal(timestep.reward, replay["reward"].astype(np.float32))
    terminated, truncated = replay["terminated"], replay["truncated"] & ~replay["terminated"]
    np.testing.assert_array_equal(timestep.terminated, terminated)
    np.testing.assert_array_equal(timestep.truncated, truncated)
    np.testing.assert_array_equal(timestep.discount, np.where(terminated, 0.0, 1.0))
    # Next-step autoreset: a first step follows every last step, and only those.
    is_last = terminated | truncated
    np.testing.assert_array_equal(timestep.is_first[1:], is_last[:-1])
    assert timestep.is_first[0].all()
    assert truncated.any(), "the time limit should truncate some episodes"
    # The final observation of an episode is kept: it differs from the next reset's.
    t, b = np.argwhere(is_last[:-1])[0]
    assert not np.array_equal(timestep.observation[t, b], timestep.observation[t + 1, b])
    assert timestep.reward[t + 1, b] == 0.0


def test_trajectory_has_the_on_device_rollout_types():
    learner = _learner()
    collector = GymnasiumCollector(_cartpole_vec(), learner, rollout_length=ROLLOUT, key=jax.random.key(1), seed=0)
    behaviour = learner.agent(learner.init(jax.random.key(0)))
    trajectory, _ = collector.collect(behaviour)
    anakin = pr.Anakin(pr.envs.CartPole(), learner, num_envs=NUM_ENVS, rollout_length=ROLLOUT)
    _, on_device, _ = pr.executors.anakin.rollout(anakin.env, behaviour, anakin.init(jax.random.key(0)).envs, ROLLOUT)
    structure = lambda tree: jax.tree.map(lambda x: (x.shape, x.dtype), tree)  # noqa: E731
    assert structure(trajectory) == structure(on_device)
    # The learner updates on it as it does on the on-device rollout.
    state, metrics = learner.update(learner.init(jax.random.key(0)), trajectory)
    helpers.assert_all_finite(metrics)
    helpers.assert_trees_differ(state.params, learner.init(jax.random.key(0)).params)


def test_episode_statistics_count_whole_episodes():
    collector = GymnasiumCollector(
        _cartpole_vec(max_episode_steps=MAX_EPISODE_STEPS), _learner(), rollout_length=60, key=jax.random.key(2), seed=1
    )
    trajectory, episodes = collector.collect(collector.learner.agent(collector.learner.init(jax.random.key(0))))
    assert len(episodes.returns) == int(np.sum(trajectory.timestep.is_last[1:]))
    np.testing.assert_array_equal(episodes.returns, episodes.lengths)  # CartPole: reward 1 per step
    assert np.all((episodes.lengths >= 1) & (episodes.lengths <= MAX_EPISODE_STEPS))
    assert np.any(episodes.lengths == MAX_EPISODE_STEPS)


@pytest.mark.parametrize("overlap", [False, True])
def test_train_on_host_is_reproducible_and_lags_by_one_update_with_overlap(overlap):
    learner = _learner()

    def run():
        collector = GymnasiumCollector(_cartpole_vec(), learner, rollout_length=8, key=jax.random.key(3), seed=2)
        return train_on_host(learner, collector, num_updates=5, key=jax.random.key(0), overlap=overlap)

    result = run()
    helpers.assert_trees_close(result, run(), rtol=0, atol=0)
    assert result.metrics.update.loss.shape == (5,)

    # The same schedule by hand: rollout k acts with the parameters after k updates
    # (sequential) or after k - 1 updates (overlapped; the initial ones for k = 0).
    collector = GymnasiumCollector(_cartpole_vec(), learner, rollout_length=8, key=jax.random.key(3), seed=2)
    states = [learner.init(jax.random.key(0))]
    for k in range(5):
        acting = states[max(k - 1, 0)] if overlap else states[k]
        trajectory, _ = collector.collect(learner.agent(acting))
        states.append(learner.update(states[k], trajectory)[0])
    helpers.assert_trees_close(result.state.params, states[-1].params, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_td_lambda_learner_improves_on_gymnasium_cartpole():
    learner = _learner(epsilon=0.05, hidden=(64, 64), lr=1e-3)
    collector = GymnasiumCollector(
        gymnasium.make_vec("CartPole-v1", num_envs=8), learner, rollout_length=32, key=jax.random.key(0), seed=0
    )
    result = train_on_host(learner, collector, num_updates=1500, key=jax.random.key(0))  # about 40 s
    returns = np.asarray(result.metrics.episode_return_sum)
    counts = np.asarray(result.metrics.episodes_completed)
    early = returns[:200].sum() / counts[:200].sum()
    late = returns[-200:].sum() / counts[-200:].sum()
    assert late >= 40 and late >= 3 * early, (early, late)  # measured: about 10 -> 60


def test_collector_checks_its_inputs():
    learner = _learner()
    with pytest.raises(ValueError, match="NEXT_STEP"):
        same_step = {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}
        GymnasiumCollector(_cartpole_vec(vector_kwargs=same_step), learner, rollout_length=4, key=jax.random.key(0))
    with pytest.raises(ValueError, match="num_actions=2"):
        GymnasiumCollector(_cartpole_vec(), _learner(num_actions=3), rollout_length=4, key=jax.random.key(0))
    with pytest.raises(ValueError, match="discrete actions"):
        pendulum = gymnasium.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")
        GymnasiumCollector(pendulum, learner, rollout_length=4, key=jax.random.key(0))
    with pytest.raises(ValueError, match="rollout_length must be a positive integer"):
        GymnasiumCollector(_cartpole_vec(), learner, rollout_length=0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="VectorEnv"):
        GymnasiumCollector(gymnasium.make("CartPole-v1"), learner, rollout_length=4, key=jax.random.key(0))


def test_spaces_from_gymnasium():
    assert space_from_gymnasium(gymnasium.spaces.Discrete(3)) == pr.Discrete(3)
    box = space_from_gymnasium(gymnasium.spaces.Box(-1.0, 2.0, (2, 3), np.float32))
    assert isinstance(box, pr.Box) and box.shape == (2, 3) and box.dtype == jnp.float32
    np.testing.assert_array_equal(box.high, np.full((2, 3), 2.0))
    with pytest.raises(ValueError, match="start at 0"):
        space_from_gymnasium(gymnasium.spaces.Discrete(3, start=1))
    with pytest.raises(ValueError, match="not supported"):
        space_from_gymnasium(gymnasium.spaces.MultiBinary(3))


# --------------------------------------------------------------------------------------
# Evaluation.
# --------------------------------------------------------------------------------------


def _greedy_network():
    return _learner().network


def test_evaluate_jax_env_matches_a_python_loop():
    env = pr.envs.TimeLimit(pr.envs.CartPole(), max_episode_steps=50)
    network, policy = _greedy_network(), pr.policies.Greedy()
    result = pr.evaluate(env, network, policy, num_episodes=3, key=jax.random.key(0))
    assert result.returns.shape == (3,) and bool(result.completed.all())
    for i, key in enumerate(jax.random.split(jax.random.key(0), 3)):
        reset_key, key = jax.random.split(key)
        state, timestep = env.reset(reset_key)
        total, length = 0.0, 0
        while not bool(timestep.is_last):
            key, act_key, step_key = jax.random.split(key, 3)
            action = policy(network(timestep.observation, ())[0], act_key).action
            state, timestep = env.step(state, action, step_key)
            total, length = total + float(timestep.reward), length + 1
        assert float(result.returns[i]) == pytest.approx(total) and int(result.lengths[i]) == length


def test_evaluate_reports_episodes_cut_by_the_budget():
    env = pr.envs.Catch()  # episodes of 9 steps
    network = helpers.q_network(jax.random.key(0), observation_shape=(10, 5, 1), num_actions=3)
    result = pr.evaluate(env, network, pr.policies.Greedy(), num_episodes=2, key=jax.random.key(0), max_steps=7)
    np.testing.assert_array_equal(result.lengths, [7, 7])
    assert not bool(result.completed.any())
    whole = pr.evaluate(env, network, pr.policies.Greedy(), num_episodes=2, key=jax.random.key(0))
    np.testing.assert_array_equal(whole.lengths, [9, 9])
    assert bool(whole.completed.all()) and set(np.asarray(whole.returns)) <= {-1.0, 1.0}


def test_evaluate_on_host_gives_each_env_its_share():
    envs = _cartpole_vec(num_envs=3, max_episode_steps=MAX_EPISODE_STEPS)
    result = evaluate_on_host(
        envs, _greedy_network(), pr.policies.Greedy(), num_episodes=8, key=jax.random.key(0), seed=0
    )
    assert result.returns.shape == (8,) and bool(result.completed.all())
    np.testing.assert_array_equal(result.returns, result.lengths)
    assert np.all(np.asarray(result.lengths) <= MAX_EPISODE_STEPS)
    cut = evaluate_on_host(
        envs, _greedy_network(), pr.policies.Greedy(), num_episodes=8, key=jax.random.key(0), max_steps=3
    )
    assert cut.returns.shape == (8,) and not bool(cut.completed.any())


@pytest.mark.parametrize("seed", [{}, {"seed": 0}], ids=["without-seed", "with-seed"])
def test_evaluate_points_a_gymnasium_env_to_evaluate_on_host(seed):
    # The earlier docs passed a Gymnasium environment's seed to evaluate: the same pointer.
    envs = _cartpole_vec(num_envs=2, max_episode_steps=MAX_EPISODE_STEPS)
    # Under the tests' type-checking import hook, the annotation refuses it first.
    evaluate = inspect.unwrap(pr.evaluate)
    with pytest.raises(TypeError, match=r"got SyncVectorEnv; .* podrace\.executors\.host\.evaluate_on_host\.$"):
        evaluate(envs, _greedy_network(), pr.policies.Greedy(), num_episodes=2, key=jax.random.key(0), **seed)


def test_evaluate_refuses_a_seed_for_a_jax_env():
    network = helpers.q_network(jax.random.key(0), observation_shape=(10, 5, 1), num_actions=3)
    with pytest.raises(TypeError, match=r"takes no seed: Catch's randomness comes from key.*evaluate_on_host"):
        pr.evaluate(pr.envs.Catch(), network, pr.policies.Greedy(), num_episodes=1, key=jax.random.key(0), seed=0)


def test_evaluate_checks_the_agent_fits():
    with pytest.raises(ValueError, match="num_actions=2"):
        pr.evaluate(
            pr.envs.CartPole(),
            _learner(num_actions=3).network,
            pr.policies.Greedy(),
            num_episodes=1,
            key=jax.random.key(0),
        )
    with pytest.raises(ValueError, match="num_episodes must be a positive integer"):
        pr.evaluate(pr.envs.CartPole(), _greedy_network(), pr.policies.Greedy(), num_episodes=0, key=jax.random.key(0))


def test_the_host_pipeline_keeps_the_pipeline_contract():
    learner = _learner()
    collector = GymnasiumCollector(_cartpole_vec(), learner, rollout_length=7, key=jax.random.key(0), seed=0)
    pipeline = HostPipeline(learner, collector)
    assert isinstance(pipeline, pr.executors.pipeline.AbstractPipeline)
    assert (pipeline.num_members, pipeline.num_devices, pipeline.frames_per_update) == (1, 1, NUM_ENVS * 7)
    result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=2)
    assert result.metrics.update.loss.shape == (2,) and int(result.state.num_updates) == 2
    # Metrics as Anakin reports them: the default ones unless asked.
    assert isinstance(result.metrics.update.grad_norm, pr.results.NotComputed) and result.metrics.has_episodes
    result = pipeline.train(result.state, num_updates=1, metrics=("grad_norm",))
    assert result.metrics.update.grad_norm.shape == (1,) and not result.metrics.has_episodes
    collector.close()


def test_the_host_pipeline_evaluates_in_its_environments_and_restarts_them():
    learner = _learner(epsilon=0.0)
    collector = GymnasiumCollector(_cartpole_vec(), learner, rollout_length=7, key=jax.random.key(0), seed=3)
    pipeline = HostPipeline(learner, collector)
    state = pipeline.init(jax.random.key(1))
    collector.collect(learner.agent(state))  # episodes under way
    evaluation = pr.Evaluation(pr.policies.Greedy(), num_episodes=6, key=jax.random.key(2), max_steps=50)
    result = pipeline.evaluate(state, evaluation)
    # The same episodes as evaluate_on_host in environments seeded and stepped as the collector's.
    twin = _cartpole_vec()
    twin_collector = GymnasiumCollector(twin, learner, rollout_length=7, key=jax.random.key(0), seed=3)
    twin_collector.collect(learner.agent(state))
    expected = evaluate_on_host(
        twin, learner.network_at(state), pr.policies.Greedy(), num_episodes=6, key=jax.random.key(2), max_steps=50
    )
    helpers.assert_trees_close(result, expected, rtol=0, atol=0)
    # The collector starts new episodes from the environments' reset, and learns on.
    assert bool(np.all(collector.timestep.is_first))
    trained = pipeline.train(state, num_updates=1)
    assert int(trained.state.num_updates) == 1
    assert pipeline.observation_spec == jax.ShapeDtypeStruct((4,), jnp.float32)
    helpers.assert_trees_close(pipeline.network_at(state), learner.network_at(state), rtol=0, atol=0)
    helpers.assert_trees_close(pipeline.agent_at(state), learner.agent(state), rtol=0, atol=0)
    assert pipeline.evaluation_env(state) is None
    with pytest.raises(ValueError, match="HostPipeline: there is no member 1"):
        pipeline.network_at(state, 1)
    with pytest.raises(ValueError, match="HostPipeline: there is no member 1"):
        pipeline.agent_at(state, 1)
    collector.close()
    twin_collector.close()
