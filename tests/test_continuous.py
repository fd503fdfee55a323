"""Continuous actions: Gaussian outputs, heads and policies against float64 formulas, the
checks that parts fit a Box action space, policy-gradient losses and a Pendulum run."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr
from podrace._validation import check_agent_fits

from . import helpers


ACTION_SIZE, NUM_STEPS, BATCH = 2, 7, 3
LOSS = helpers.Compiled(lambda loss, network, trajectory: loss(helpers.agent(network), trajectory))
POLICY = helpers.Compiled(lambda policy, output, key: policy(output, key))
POLICY_BATCH = helpers.Compiled(helpers.vmap_over_last(lambda policy, output, key: policy(output, key), 1))
APPLY = helpers.Compiled(lambda network, observation: network(observation, ())[0])
APPLY_BATCH = helpers.Compiled(helpers.vmap_over_last(lambda network, observation: network(observation, ())[0], 1))


def _gaussian_log_prob(mean, log_std, action):
    """log N(action; mean, diag(exp(log_std))^2), summed over the last axis, in float64."""
    mean, log_std, action = (np.asarray(x, np.float64) for x in (mean, log_std, action))
    z = (action - mean) / np.exp(log_std)
    return np.sum(-0.5 * z**2 - log_std - 0.5 * np.log(2 * np.pi), axis=-1)


def _gaussian_entropy(log_std):
    """The entropy of a diagonal Gaussian, summed over the last axis, in float64."""
    log_std = np.asarray(log_std, np.float64)
    return np.sum(0.5 * np.log(2 * np.pi * np.e) + log_std, axis=-1)


def _output(seed: int, action_size: int = ACTION_SIZE, batch: tuple[int, ...] = ()) -> pr.GaussianParams:
    return helpers.random_output(pr.GaussianParams, seed, batch, num_actions=action_size)  # pyright: ignore[reportReturnType]


# --------------------------------------------------------------------------------------
# Outputs, heads and the policy.
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("action_size", [1, 3])
def test_gaussian_params_log_prob_and_entropy_match_float64(action_size):
    output = _output(action_size, action_size)
    actions = helpers.normal(10 + action_size, (5, action_size))
    distribution = output.distribution()
    log_probs = jax.vmap(distribution.log_prob)(actions)
    assert log_probs.shape == (5,) and log_probs.dtype == jnp.float32
    np.testing.assert_allclose(log_probs, _gaussian_log_prob(output.mean, output.log_std, actions), rtol=1e-5)
    np.testing.assert_allclose(distribution.entropy(), _gaussian_entropy(output.log_std), rtol=1e-5)
    assert isinstance(output, pr.AbstractPolicyOutput) and isinstance(
        pr.PolicyLogits(jnp.zeros(3)), pr.AbstractPolicyOutput
    )


@pytest.mark.parametrize("with_value", [False, True])
def test_gaussian_head_shapes_and_initialisation(with_value):
    network = helpers.gaussian_network(jax.random.key(0), with_value=with_value, initial_log_std=-0.5)
    assert network.output_type is pr.GaussianParams and network.num_actions == ACTION_SIZE
    output, carry = network(helpers.normal(0, helpers.OBS_SHAPE), ())
    assert carry == ()
    assert output.mean.shape == (ACTION_SIZE,) and output.log_std.shape == (ACTION_SIZE,)
    assert (output.value is not None) == with_value
    if output.value is not None:
        assert output.value.shape == ()
    np.testing.assert_array_equal(output.log_std, np.full(ACTION_SIZE, -0.5, np.float32))
    # The small mean layer starts every state near the same Gaussian around 0.
    assert float(jnp.max(jnp.abs(output.mean))) < 0.05
    outputs, _ = network.unroll(helpers.normal(1, (4, *helpers.OBS_SHAPE)), (), jnp.zeros(4, bool))
    assert outputs.mean.shape == (4, ACTION_SIZE) and outputs.log_std.shape == (4, ACTION_SIZE)


def test_gaussian_head_checks_its_sizes():
    with pytest.raises(ValueError, match="action_size must be a positive integer"):
        pr.networks.GaussianHead(8, 0, key=jax.random.key(0))
    torso = pr.networks.MLPTorso(helpers.OBS_SHAPE, (8,), key=jax.random.key(0))
    with pytest.raises(ValueError, match="in_size=8"):
        pr.networks.FeedForwardNetwork(torso, pr.networks.GaussianHead(6, 1, key=jax.random.key(1)))


def test_gaussian_policy_samples_with_their_log_prob():
    policy, output = pr.policies.Gaussian(), _output(0)
    keys = jax.random.split(jax.random.key(0), 4000)
    steps = jax.vmap(lambda key: POLICY(policy, output, key))(keys)
    assert steps.action.shape == (4000, ACTION_SIZE) and steps.action.dtype == jnp.float32
    np.testing.assert_allclose(
        steps.log_prob, _gaussian_log_prob(output.mean, output.log_std, steps.action), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(steps.entropy, _gaussian_entropy(output.log_std) * np.ones(4000), rtol=1e-5)
    # The samples follow the distribution: mean and standard deviation within a few standard errors.
    std = np.exp(np.asarray(output.log_std))
    np.testing.assert_allclose(np.mean(steps.action, axis=0), output.mean, atol=4 * np.max(std) / np.sqrt(4000))
    np.testing.assert_allclose(np.std(steps.action, axis=0), std, rtol=0.05)
    # Same key, same action.
    helpers.assert_trees_close(POLICY(policy, output, keys[0]), helpers.index(steps, 0))


def test_gaussian_policy_contract():
    policy = pr.policies.Gaussian()
    helpers.check_jit_equals_eager(POLICY, policy, _output(1), jax.random.key(2), rtol=1e-5)
    keys = jax.random.split(jax.random.key(3), 5)
    helpers.check_vmap_equals_loop(POLICY, POLICY_BATCH, (policy,), (_output(4, batch=(5,)), keys), rtol=1e-5)
    helpers.check_traced_once(POLICY, *[(policy, _output(seed), jax.random.key(seed)) for seed in range(3)])
    grads = eqx.filter_grad(lambda output: policy(output, jax.random.key(0)).log_prob)(_output(5))
    helpers.assert_all_finite(grads)
    assert float(jnp.abs(grads.log_std).sum()) > 0


def test_gaussian_network_contract():
    network = helpers.gaussian_network(jax.random.key(0), with_value=True)
    observations = helpers.normal(1, (4, *helpers.OBS_SHAPE))
    helpers.check_jit_equals_eager(APPLY, network, observations[0])
    helpers.check_vmap_equals_loop(APPLY, APPLY_BATCH, (network,), (observations,))
    calls = [(helpers.gaussian_network(jax.random.key(seed), with_value=True), observations[seed]) for seed in range(3)]
    helpers.check_traced_once(APPLY, *calls)


# --------------------------------------------------------------------------------------
# Parts that do not fit.
# --------------------------------------------------------------------------------------


def _a2c_learner(network, policy):
    return pr.Learner(network, policy, pr.losses.A2CLoss(discount=0.99), helpers.ADAM)


def test_a_gaussian_head_does_not_fit_discrete_actions():
    catch = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)
    network = helpers.gaussian_network(jax.random.key(0), action_size=3, with_value=True)
    with pytest.raises(ValueError, match=r"Gaussian samples real action vectors.*Categorical"):
        pr.Anakin(catch, _a2c_learner(network, pr.policies.Gaussian()), num_envs=2, rollout_length=3)
    # Whatever the policy says, the network's head is checked against the action space.
    observation = jax.ShapeDtypeStruct(helpers.OBS_SHAPE, jnp.float32)
    with pytest.raises(ValueError, match=r"emits GaussianParams \(continuous actions\).*PolicyLogitHead"):
        check_agent_fits(network, pr.policies.Categorical(), catch.action_space, observation, env_name="Catch")


def test_the_gaussian_head_must_match_the_action_size():
    network = helpers.gaussian_network(jax.random.key(0), observation_shape=(3,), action_size=2, with_value=True)
    learner = _a2c_learner(network, pr.policies.Gaussian())
    with pytest.raises(ValueError, match=r"action size 2 but TimeLimit's actions have shape \(1,\).*action_size=1"):
        pr.Anakin(pr.envs.pendulum_v1(), learner, num_envs=2, rollout_length=3)


def test_a_discrete_policy_does_not_fit_a_box():
    network = helpers.logit_network(jax.random.key(0), observation_shape=(3,), num_actions=1, with_value=True)
    learner = _a2c_learner(network, pr.policies.Categorical())
    with pytest.raises(ValueError, match=r"Categorical chooses among discrete actions.*policies\.Gaussian"):
        pr.Anakin(pr.envs.pendulum_v1(), learner, num_envs=2, rollout_length=3)


def test_the_gaussian_policy_needs_a_flat_float_box():
    policy = pr.policies.Gaussian()
    policy.check_action_space(pr.Box(-1.0, 1.0, (2,)))
    with pytest.raises(ValueError, match="flatten the action space"):
        policy.check_action_space(pr.Box(-1.0, 1.0, (2, 2)))
    with pytest.raises(ValueError, match="real action vectors"):
        policy.check_action_space(pr.Box(0, 3, (2,), jnp.int32))


def test_learners_pair_gaussian_networks_with_policy_gradient_losses_only():
    network = helpers.gaussian_network(jax.random.key(0), with_value=True)
    pr.Learner(network, pr.policies.Gaussian(), pr.losses.ReinforceLoss(discount=0.9), helpers.ADAM)
    with pytest.raises(ValueError, match="reads QValues but the network emits GaussianParams"):
        pr.Learner(network, pr.policies.Gaussian(), pr.losses.TDLambdaQLoss(discount=0.9, lambda_=0.9), helpers.ADAM)
    with pytest.raises(ValueError, match="reads PolicyLogits but the network emits GaussianParams"):
        _a2c_learner(network, pr.policies.Categorical())


# --------------------------------------------------------------------------------------
# Policy-gradient losses on Box actions.
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "loss",
    [
        pr.losses.A2CLoss(discount=0.99, lambda_=0.9, entropy_coefficient=0.01),
        pr.losses.ReinforceLoss(discount=0.99, baseline=True, entropy_coefficient=0.01),
    ],
    ids=["a2c", "reinforce-baseline"],
)
def test_policy_gradient_losses_on_gaussian_outputs(loss):
    network = helpers.gaussian_network(jax.random.key(0), with_value=True, initial_log_std=-0.3)
    trajectory = helpers.random_trajectory(0, NUM_STEPS, BATCH, action_size=ACTION_SIZE)
    value, terms = LOSS(loss, network, trajectory)
    helpers.assert_all_finite((value, terms))
    # The head's log-std is state-independent: every step has the same entropy.
    a2c = isinstance(loss, pr.losses.A2CLoss)
    mask = pr.losses.transition_mask if a2c else pr.losses.completed_episode_mask
    masks = jax.vmap(lambda t, p: mask(pr.Trajectory(t, p, ())), in_axes=(1, 1))(
        trajectory.timestep, trajectory.policy_step
    )
    expected_entropy = _gaussian_entropy(np.full(ACTION_SIZE, -0.3)) * np.mean(np.asarray(masks))
    np.testing.assert_allclose(terms["entropy"], expected_entropy, rtol=1e-5)

    grads = jax.grad(lambda network: loss(helpers.agent(network), trajectory)[0])(network)
    helpers.assert_all_finite(grads)
    for part in (grads.head.linear.weight, grads.head.log_std, grads.head.value_head.linear.weight):
        assert float(jnp.abs(part).sum()) > 0


def test_a2c_log_pi_of_box_actions_matches_float64():
    # On-policy (behaviour log-probabilities equal the learnt ones), one-step returns
    # and no value or entropy weight: the policy term is checked against float64.
    network = helpers.gaussian_network(jax.random.key(1), with_value=True)
    trajectory = helpers.random_trajectory(1, NUM_STEPS, BATCH, action_size=ACTION_SIZE)
    observations = trajectory.timestep.observation
    outputs = jax.vmap(jax.vmap(lambda o: network(o, ())[0]))(observations)
    log_pi = _gaussian_log_prob(outputs.mean[:-1], outputs.log_std[:-1], trajectory.policy_step.action)
    trajectory = eqx.tree_at(lambda t: t.policy_step.log_prob, trajectory, jnp.asarray(log_pi, jnp.float32))
    loss = pr.losses.A2CLoss(discount=0.9, lambda_=0.0, value_coefficient=0.0, entropy_coefficient=0.0)
    _, terms = LOSS(loss, network, trajectory)
    step = jax.tree.map(np.asarray, trajectory.timestep)
    values = np.asarray(outputs.value, np.float64)
    returns = step.reward[1:] + 0.9 * step.discount[1:] * values[1:]
    mask = ~step.is_first[1:]
    expected = -np.mean(mask * (returns - values[:-1]) * log_pi)
    np.testing.assert_allclose(terms["policy_loss"], expected, rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------------------
# A short run on Pendulum.
# --------------------------------------------------------------------------------------


def test_a2c_trains_on_pendulum():
    env = pr.envs.pendulum_v1()
    torso_key, head_key = jax.random.split(jax.random.key(0))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((3,), (16,), activation=jax.nn.tanh, key=torso_key),
        pr.networks.GaussianHead(16, 1, with_value=True, key=head_key),
    )
    learner = pr.Learner(network, pr.policies.Gaussian(), pr.losses.A2CLoss(discount=0.99), optax.adam(3e-3))
    pipeline = pr.Anakin(env, learner, num_envs=4, rollout_length=16)
    state = pipeline.init(jax.random.key(1))
    result = pipeline.train(state, num_updates=3, metrics="grad_norm")
    metrics = result.metrics
    assert metrics.update.loss.shape == (3,)
    helpers.assert_all_finite(metrics.update)
    assert np.all(np.asarray(metrics.update.grad_norm) > 0)
    helpers.assert_trees_differ(result.state.learner.params.head.log_std, state.learner.params.head.log_std)
    helpers.assert_all_finite(result.state.learner.params)


def test_a2c_learns_to_move_a_point_to_the_origin():
    # Point (tests/helpers.py): reward -|position|, the episode ends within 0.1 of 0.
    # A uniformly random start costs about -11 per episode under this time limit.
    env = pr.envs.TimeLimit(helpers.Point(), max_episode_steps=20)
    torso_key, head_key = jax.random.split(jax.random.key(0))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((1,), (32,), activation=jax.nn.tanh, key=torso_key),
        pr.networks.GaussianHead(32, 1, with_value=True, key=head_key),
    )
    loss = pr.losses.A2CLoss(discount=0.9, lambda_=0.9, entropy_coefficient=0.0)
    learner = pr.Learner(network, pr.policies.Gaussian(), loss, optax.adam(3e-3))
    pipeline = pr.Anakin(env, learner, num_envs=16, rollout_length=16)
    state = pipeline.init(jax.random.key(1))
    first = pipeline.train(state, num_updates=100)
    last = pipeline.train(pipeline.train(first.state, num_updates=400).state, num_updates=100)
    assert float(first.metrics.mean_episode_return) < -5.0
    assert float(last.metrics.mean_episode_return) > -2.0
