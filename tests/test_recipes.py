"""Recipes of published experiments: the registry, the settings they build, the measures, the verdicts.

The default session checks that every recipe builds the pipeline its source describes;
the slow session runs the classic-control and bsuite recipes that reach their
published results for 3 seeds and asserts their verdicts.
"""

import dataclasses
import math

import equinox as eqx
import jax
import numpy as np
import pytest

import podrace as pr
from podrace import recipes, reproduction


def _member(recipe: recipes.Recipe) -> pr.Anakin:
    """The recipe's pipeline, its parameters as shapes (no compilation); the environment a
    constant, as in `reproduction.reproduce` (a bounded head reads its action bounds)."""
    if recipe.suite == "envpool":
        pytest.importorskip("envpool")  # Linux only
    env = recipe.env()
    return eqx.filter_eval_shape(lambda key: recipe.settings.pipeline(env, key), jax.random.key(0))


def test_recipe_names_are_their_keys_and_unique():
    assert all(name == recipe.name for name, recipe in recipes.RECIPES.items())
    assert len({recipe.name for recipe in recipes.RECIPES.values()}) == len(recipes.RECIPES)


@pytest.mark.parametrize("name", recipes.RECIPES)
def test_every_recipe_spends_its_published_budget(name):
    recipe = recipes.RECIPES[name]
    member = _member(recipe)
    settings = recipe.settings
    budget = {
        recipes.GymnaxBlinesPPO: lambda s: s.num_train_steps,
        recipes.CleanRLPPO: lambda s: s.total_timesteps,
        recipes.CleanRLAtariPPO: lambda s: s.total_timesteps,
        recipes.CleanRLDQN: lambda s: s.total_timesteps,
        recipes.CleanRLC51: lambda s: s.total_timesteps,
        recipes.CleanRLPQN: lambda s: s.total_timesteps,
        recipes.PurejaxqlPQN: lambda s: s.total_timesteps,
        recipes.RLZooTD3: lambda s: s.n_timesteps,
        recipes.RLZooSAC: lambda s: s.n_timesteps,
    }[type(settings)](settings)
    env_steps = settings.num_updates * member.num_envs * member.rollout_length
    assert budget - member.num_envs * member.rollout_length < env_steps <= budget


@pytest.mark.parametrize("name", [name for name in recipes.RECIPES if name.startswith("gymnax-ppo")])
def test_gymnax_blines_recipes_build_its_ppo(name):
    recipe = recipes.RECIPES[name]
    settings = recipe.settings
    assert isinstance(settings, recipes.GymnaxBlinesPPO)
    learner = _member(recipe).learner
    assert isinstance(learner, pr.Learner)
    assert learner.minibatches_of == "transitions"
    assert (learner.num_epochs, learner.num_minibatches) == (settings.epoch_ppo, settings.n_minibatch)
    assert learner.loss.clip_value and learner.loss.normalize_advantages
    network = learner.network
    assert isinstance(network, pr.networks.ActorCriticNetwork)
    hidden = [layer.weight.shape[0] for layer in network.actor_torso.layers]
    assert hidden == [settings.num_hidden_units] * settings.num_hidden_layers
    assert network.actor_torso.activation is jax.nn.relu
    if isinstance(network.head, pr.networks.GaussianHead):
        assert isinstance(network.head.log_std, eqx.nn.Linear)  # softplus of a state-dependent output


def test_gymnax_blines_loss_takes_the_published_coefficients():
    recipe = recipes.RECIPES["gymnax-ppo-mountaincar-v0"]
    settings = recipe.settings
    assert isinstance(settings, recipes.GymnaxBlinesPPO)
    loss = settings.pipeline(recipe.env(), jax.random.key(0)).learner.loss
    assert isinstance(loss, pr.losses.PPOLoss)
    values = [loss.discount, loss.lambda_, loss.clip_epsilon, loss.value_coefficient, loss.entropy_coefficient]
    expected = [settings.gamma, settings.gae_lambda, settings.clip_eps, settings.critic_coeff, settings.entropy_coeff]
    np.testing.assert_allclose(values, expected, rtol=1e-6)


def test_gymnax_blines_learning_rate_moves_over_its_warmup_in_gradient_steps():
    settings = recipes.RECIPES["gymnax-ppo-mountaincar-v0"].settings
    assert isinstance(settings, recipes.GymnaxBlinesPPO)
    rates = [float(settings.learning_rate_at(count)) for count in (0, 6_250, 12_500, 100_000)]
    np.testing.assert_allclose(rates, [5e-3, 2.75e-3, 5e-4, 5e-4], rtol=1e-5)


@pytest.mark.parametrize("name", ["cleanrl-ppo-cartpole-v1", "cleanrl-pqn-cartpole-v1"])
def test_cleanrl_learning_rate_anneals_once_per_update(name):
    settings = recipes.RECIPES[name].settings
    assert isinstance(settings, recipes.CleanRLPPO | recipes.CleanRLPQN)
    per_update = settings.update_epochs * settings.num_minibatches  # 16 gradient steps
    rates = [float(settings.learning_rate_at(count)) for count in (0, per_update - 1, per_update, 975 * per_update)]
    np.testing.assert_allclose(rates, [2.5e-4, 2.5e-4, 2.5e-4 * (1 - 1 / 976), 2.5e-4 / 976], rtol=1e-4)


def test_recipe_optimizers_step_at_their_learning_rate():
    # Adam's first step moves each parameter by the learning rate (its bias-corrected ratio
    # is 1), and so does RAdam's (its first steps are momentum alone, bias-corrected).
    for name in ("gymnax-ppo-mountaincar-v0", "cleanrl-ppo-cartpole-v1", "cleanrl-pqn-cartpole-v1"):
        optimizer = _member(recipes.RECIPES[name]).learner.optimizer
        params = {"w": np.zeros(3, np.float32)}
        updates, _ = optimizer.update({"w": np.ones(3, np.float32)}, optimizer.init(params), params)
        np.testing.assert_allclose(-updates["w"], recipes.RECIPES[name].settings.learning_rate_at(0), rtol=1e-3)


def test_cleanrl_c51_recipe_builds_its_c51():
    recipe = recipes.RECIPES["cleanrl-c51-cartpole-v1"]
    settings = recipe.settings
    assert isinstance(settings, recipes.CleanRLC51)
    member = _member(recipe)
    learner = member.learner
    assert isinstance(learner, pr.learners.DQNLearner) and isinstance(learner.loss, pr.losses.CategoricalQLoss)
    head = learner.network.head
    assert isinstance(head, pr.networks.CategoricalQHead)
    assert (head.num_atoms, head.v_min, head.v_max) == (101, -100.0, 100.0)
    assert (member.num_envs, member.rollout_length) == (1, settings.train_frequency)
    assert learner.target_update_period * settings.train_frequency == settings.target_network_frequency
    assert (learner.replay.buffer_size, learner.batch_size, learner.min_replay_size) == (10_000, 128, 10_000)


def test_cleanrl_pqn_recipe_builds_its_pqn():
    recipe = recipes.RECIPES["cleanrl-pqn-cartpole-v1"]
    settings = recipe.settings
    assert isinstance(settings, recipes.CleanRLPQN)
    member = _member(recipe)
    learner = member.learner
    assert isinstance(learner, pr.Learner) and isinstance(learner.loss, pr.losses.PQNLoss)
    assert (member.num_envs, member.rollout_length) == (4, 128)
    assert (learner.num_epochs, learner.num_minibatches, learner.minibatches_of) == (4, 4, "transitions")
    torso = learner.network.torso
    assert [layer.weight.shape[0] for layer in torso.layers] == [120, 84] and torso.norms is not None
    epsilon = learner.policy.epsilon_schedule
    assert callable(epsilon)
    np.testing.assert_allclose(
        [epsilon(0), epsilon(125_000), epsilon(250_000), epsilon(400_000)], [1, 0.525, 0.05, 0.05]
    )


def test_purejaxql_pqn_recipe_builds_its_pqn():
    recipe = recipes.RECIPES["purejaxql-pqn-breakout-minatar"]
    settings = recipe.settings
    assert isinstance(settings, recipes.PurejaxqlPQN)
    member = _member(recipe)
    learner = member.learner
    assert isinstance(learner, pr.Learner) and isinstance(learner.loss, pr.losses.PQNLoss)
    assert (member.num_envs, member.rollout_length) == (128, 32)
    assert (learner.num_epochs, learner.num_minibatches, learner.minibatches_of) == (2, 32, "transitions")
    torso = learner.network.torso
    assert isinstance(torso, pr.networks.ConvTorso)
    assert [conv.weight.shape for conv in torso.convs] == [(16, 4, 3, 3)]  # Breakout's 4 channels
    assert [layer.weight.shape for layer in torso.layers] == [(128, 8 * 8 * 16)]  # no padding: 10x10 -> 8x8
    assert torso.norms is not None and [norm.eps for norm in torso.norms] == [1e-6, 1e-6]
    assert torso.observation_scale == 1 / 255
    # Epsilon moves once per update (4096 steps), from 1 to 0.05 over a tenth of the 2441 updates.
    epsilon = learner.policy.epsilon_schedule
    assert callable(epsilon)
    steps = [0, 4095, 4096, 122 * 4096, 245 * 4096, 2000 * 4096]
    np.testing.assert_allclose(
        [epsilon(step) for step in steps], [1, 1, 1 - 0.95 / 244.1, 1 - 0.95 * 122 / 244.1, 0.05, 0.05], rtol=1e-5
    )
    # The learning rate decays linearly per gradient step, 64 a rollout, towards 0 at the end.
    total = 2441 * 64
    rates = [float(settings.learning_rate_at(count)) for count in (0, total // 2, total)]
    np.testing.assert_allclose(rates, [5e-4, 2.5e-4, 1e-20], rtol=1e-4)
    assert recipe.published.value is None and recipe.published.deterministic


def test_a_recipe_with_nothing_published_has_no_verdict(tmp_path):
    run = _reproduction([90.0, 100.0], 0.5, recipe="purejaxql-pqn-breakout-minatar")
    assert run.threshold is None and run.reaches_published is None
    assert run.to_json()["reaches_published"] is None
    paths = reproduction.save(run, tmp_path, plot=True)  # a curve with no published line
    assert reproduction.load(tmp_path)[run.recipe].scores == run.scores and paths[1].is_file()


def test_recipes_train_in_about_twenty_calls_with_a_shorter_last_one_where_no_divisor_fits():
    assert reproduction._call_sizes(976) == [61] * 16  # CleanRL's 500k steps: one compiled program
    assert reproduction._call_sizes(1220) == [61] * 20
    assert reproduction._call_sizes(2441) == [123] * 19 + [104]  # purejaxql's MinAtar run: 2441 is prime
    assert reproduction._call_sizes(7) == [1] * 7


def test_cleanrl_atari_ppo_recipe_builds_its_network_and_ppo_on_envpool():
    pytest.importorskip("envpool")
    recipe = recipes.RECIPES["cleanrl-ppo-atari-pong-v5"]
    env = recipe.env()
    assert isinstance(env, pr.envs.EnvPoolEnv) and dict(env.options) == {"episodic_life": True, "reward_clip": True}
    member = _member(recipe)
    assert (member.num_envs, member.rollout_length) == (8, 128)
    learner = member.learner
    assert isinstance(learner, pr.Learner)
    assert (learner.num_epochs, learner.num_minibatches, learner.minibatches_of) == (4, 4, "transitions")
    loss = recipe.settings.pipeline(env, jax.random.key(0)).learner.loss  # with its values
    assert isinstance(loss, pr.losses.PPOLoss) and not loss.clip_value and loss.normalize_advantages
    np.testing.assert_allclose([loss.clip_epsilon, loss.entropy_coefficient, loss.value_coefficient], [0.1, 0.01, 0.5])
    # The Nature DQN torso over the four stacked 84x84 frames, channels first, shared by the two heads.
    network = member.learner.network
    assert isinstance(network, pr.networks.FeedForwardNetwork)
    torso = network.torso
    assert isinstance(torso, pr.networks.ConvTorso) and torso.channels_first
    assert [conv.weight.shape for conv in torso.convs] == [(32, 4, 8, 8), (64, 32, 4, 4), (64, 64, 3, 3)]
    assert [layer.weight.shape for layer in torso.layers] == [(512, 7 * 7 * 64)]
    assert torso.observation_scale == 1 / 255 and network.head.value_head is not None


def test_reproducing_a_recipe_on_envpool_trains_each_seed_on_a_pool_of_its_own(monkeypatch):
    pytest.importorskip("envpool")
    settings = dataclasses.replace(recipes.CLEANRL_PPO, total_timesteps=2 * 4 * 16, num_steps=16)
    published = recipes.Published(500.0, 0.0, 3, "a test", "training", 5)
    recipe = recipes.Recipe("envpool-cartpole", "CartPole-v1", settings, published, suite="envpool")
    monkeypatch.setitem(recipes.RECIPES, recipe.name, recipe)
    run = reproduction.reproduce(recipe, num_seeds=2, seed=3, show=False)
    assert run.seeds == (3, 4) and len(run.scores) == 2 and np.shape(run.curves) == (2, 2)
    assert run.env_steps == (64, 128) and 9 < run.random_return < 40
    # Seed 4 alone, as `reproduce` trains it: the same pool seed and keys give the same episodes.
    pipeline = settings.pipeline(recipe.env(reproduction.POOL_SEED_STRIDE * 4), jax.random.key(4))
    state = pipeline.init(jax.random.fold_in(jax.random.key(3), 4))
    for call in range(2):
        result = pipeline.train(state, num_updates=1)
        state = result.state
        np.testing.assert_array_equal(run.curves[call][1], np.asarray(result.metrics.mean_episode_return))
    with pytest.raises(ValueError, match="measured on its training episodes"):
        dataclasses.replace(recipe, published=dataclasses.replace(published, measure="evaluation"))


def test_cleanrl_dqn_recipe_builds_its_dqn():
    recipe = recipes.RECIPES["cleanrl-dqn-cartpole-v1"]
    settings = recipe.settings
    assert isinstance(settings, recipes.CleanRLDQN)
    member = _member(recipe)
    learner = member.learner
    assert isinstance(learner, pr.learners.DQNLearner)
    assert (member.num_envs, member.rollout_length) == (1, settings.train_frequency)
    assert learner.target_update_period * settings.train_frequency == settings.target_network_frequency
    assert (learner.replay.buffer_size, learner.batch_size, learner.min_replay_size) == (10_000, 128, 10_000)
    epsilon = learner.policy.epsilon_schedule
    assert callable(epsilon)
    np.testing.assert_allclose(
        [epsilon(0), epsilon(125_000), epsilon(250_000), epsilon(400_000)], [1, 0.525, 0.05, 0.05]
    )


def test_find_recipe_names_the_nearest_recipes():
    assert recipes.find_recipe("cleanrl-dqn-cartpole-v1").env_id == "CartPole-v1"
    with pytest.raises(KeyError, match=r"Did you mean gymnax-ppo-cartpole-v1.*The recipes: gymnax-ppo-cartpole-v1"):
        recipes.find_recipe("gymnax-ppo-cartpole")


def _reproduction(scores, random_return, recipe="cleanrl-ppo-cartpole-v1") -> reproduction.Reproduction:
    return reproduction.Reproduction(
        recipe=recipe,
        seeds=tuple(range(len(scores))),
        scores=tuple(scores),
        random_return=random_return,
        env_steps=(100, 200),
        curves=((1.0,) * len(scores), (math.nan,) * len(scores)),
        wall_seconds=1.0,
        platform="test",
    )


def test_the_verdict_allows_the_larger_of_the_spread_and_a_tenth_of_the_distance_from_random():
    # CleanRL CartPole: 490.04 ± 6.12; a random policy near 22: a tenth of the distance (46.8) is larger.
    run = _reproduction([450.0, 446.0, 444.0], 22.0)
    np.testing.assert_allclose(run.threshold, 490.04 - 0.1 * (490.04 - 22.0))
    assert run.reaches_published
    assert not _reproduction([440.0, 441.0, 442.0], 22.0).reaches_published
    # Near the published value, the spread is the larger: gymnax DeepSea 0 (no spread), random -0.01.
    deep_sea = _reproduction([-0.0005, -0.0005], -0.01, recipe="gymnax-ppo-deepsea-bsuite")
    np.testing.assert_allclose(deep_sea.threshold, -0.001)
    assert deep_sea.reaches_published
    np.testing.assert_allclose(deep_sea.std, 0.0)


def test_reproductions_save_and_load_as_they_were(tmp_path):
    run = _reproduction([450.0, 446.0, 444.0], 22.0)
    paths = reproduction.save(run, tmp_path, plot=True)
    assert [path.name for path in paths] == ["cleanrl-ppo-cartpole-v1.json", "cleanrl-ppo-cartpole-v1.png"]
    loaded = reproduction.load(tmp_path)["cleanrl-ppo-cartpole-v1"]
    assert dataclasses.astuple(loaded)[:3] == dataclasses.astuple(run)[:3]
    assert loaded.curves[0] == run.curves[0] and math.isnan(loaded.curves[1][0])
    assert loaded.reaches_published == run.reaches_published


def test_the_training_measure_reads_the_last_updates_holding_enough_episodes():
    sums = np.asarray([10.0, 0.0, 30.0, 20.0])
    counts = np.asarray([5, 0, 3, 2])
    assert reproduction._last_episodes_mean(sums, counts, 2) == 10.0  # the last update holds 2
    assert reproduction._last_episodes_mean(sums, counts, 4) == 50.0 / 5  # the last two hold 5
    assert reproduction._last_episodes_mean(sums, counts, 100) == 60.0 / 10  # every update


# --------------------------------------------------------------------------------------
# The published numbers, reproduced (slow).
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["td3", "ddpg"])
def test_rl_zoo_td3_recipes_build_stable_baselines3s_td3_and_ddpg(algorithm):
    recipe = recipes.RECIPES[f"rl-zoo-{algorithm}-pendulum-v1"]
    assert recipe.published.deterministic
    member = recipe.settings.pipeline(recipe.env(), jax.random.key(0))  # with its values: small networks
    learner = member.learner
    assert isinstance(learner, pr.learners.TD3Learner)
    assert (member.num_envs, member.rollout_length, learner.gradient_steps) == (1, 1, 1)
    assert [layer.weight.shape[0] for layer in learner.actor.torso.layers] == [400, 300]
    assert learner.critic.layers[0].weight.shape[1] == 400
    twin = algorithm == "td3"
    assert learner.critic.num_critics == (2 if twin else 1)
    assert learner.policy_delay == (2 if twin else 1)
    assert (learner.replay.buffer_size, learner.batch_size, learner.min_replay_size) == (200_000, 256, 10_000)
    np.testing.assert_allclose(
        [learner.discount, learner.tau, learner.target_noise, learner.target_noise_clip],
        [0.98, 0.005, 0.2 if twin else 0.0, 0.5],
    )
    exploration = learner.exploration
    assert isinstance(exploration, pr.policies.GaussianNoise)
    np.testing.assert_allclose(exploration.std, 0.1)
    random_actions = exploration.random_action_probability_schedule
    assert callable(random_actions)
    np.testing.assert_allclose([random_actions(0), random_actions(9_999), random_actions(10_000)], [1, 1, 0])


def test_rl_zoo_sac_recipe_builds_stable_baselines3s_sac():
    recipe = recipes.RECIPES["rl-zoo-sac-pendulum-v1"]
    member = recipe.settings.pipeline(recipe.env(), jax.random.key(0))
    learner = member.learner
    assert isinstance(learner, pr.learners.SACLearner)
    assert [layer.weight.shape[0] for layer in learner.actor.torso.layers] == [256, 256]
    head = learner.actor.head
    assert isinstance(head, pr.networks.TanhGaussianHead)
    assert (head.min_log_std, head.max_log_std) == (-20.0, 2.0)
    assert (learner.replay.buffer_size, learner.batch_size, learner.min_replay_size) == (1_000_000, 256, 100)
    np.testing.assert_allclose(
        [learner.discount, learner.tau, learner.initial_temperature, learner.target_entropy], [0.99, 0.005, 1, -1]
    )
    random_actions = learner.exploration.random_action_probability_schedule
    assert callable(random_actions)
    np.testing.assert_allclose([random_actions(99), random_actions(100)], [1, 0])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("rl-zoo-sac-pendulum-v1", pr.policies.Mode),
        ("rl-zoo-td3-pendulum-v1", pr.policies.Deterministic),
        ("cleanrl-ppo-cartpole-v1", pr.policies.Categorical),
        ("gymnax-ppo-pendulum-v1", pr.policies.Gaussian),
        ("purejaxql-pqn-asterix-minatar", pr.policies.Greedy),
    ],
)
def test_published_evaluations_act_as_the_source_measured(name, expected):
    recipe = recipes.RECIPES[name]
    output_type = _member(recipe).learner.initial_agent().network.output_type
    policy = recipe.published.evaluation_policy(recipe.env(), output_type)
    assert isinstance(policy, expected)
    # The policy reads what the trained network emits.
    assert issubclass(output_type, policy.input_type)


# The classic-control and bsuite rows whose 5-seed measurement reaches the published
# result (the results page lists the others, below published, with their diagnosis).
SLOW_RECIPES = [
    "gymnax-ppo-catch-bsuite",
    "gymnax-ppo-cartpole-v1",
    "gymnax-ppo-acrobot-v1",
    "gymnax-ppo-umbrellachain-bsuite",
    "gymnax-ppo-deepsea-bsuite",
    "gymnax-ppo-discountingchain-bsuite",
    "cleanrl-ppo-cartpole-v1",
    "cleanrl-ppo-acrobot-v1",
    "cleanrl-ppo-mountaincar-v0",
    "cleanrl-dqn-cartpole-v1",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_RECIPES)
def test_recipe_reaches_its_published_result(name):
    run = reproduction.reproduce(recipes.RECIPES[name], num_seeds=3, show=False)
    print(f"{name}: {run.mean:.4g} ± {run.std:.2g} (threshold {run.threshold:.4g}), scores {run.scores}")
    assert run.reaches_published, (run.scores, run.threshold)
