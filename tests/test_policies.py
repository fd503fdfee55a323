"""Policies: the shared contract, sampling frequencies, argument checks."""

import typing

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr

from . import helpers


NUM_SAMPLES = 20_000


def _act(policy, output, key):
    return policy(output, key)


def _log_prob_and_entropy(policy, output, key):
    def objective(output):
        step = policy(output, key)
        return step.log_prob + step.entropy

    return eqx.filter_grad(objective)(output)


def _action_frequencies(policy, output, keys):
    actions = jax.vmap(lambda key: policy(output, key).action)(keys)
    return jnp.bincount(actions, length=helpers.NUM_ACTIONS) / keys.shape[0]


ACT = helpers.Compiled(_act)
ACT_BATCH = helpers.Compiled(helpers.vmap_over_last(_act, 1))
GRADS = helpers.Compiled(_log_prob_and_entropy)
FREQUENCIES = helpers.Compiled(_action_frequencies)


# Registry entries whose policies act without randomness, and those that act in Box
# action spaces (with their continuous entries).
DETERMINISTIC = {"greedy", "greedy-categorical", "mode", "mode-gaussian", "mode-tanh-gaussian", "deterministic"}
CONTINUOUS = {
    "gaussian",
    "mode-gaussian",
    "tanh-gaussian",
    "mode-tanh-gaussian",
    "deterministic",
    "gaussian-noise",
    "gaussian-noise-random-actions",
    "tanh-gaussian-random-actions",
}
ALSO_CONTINUOUS = {"mode", *CONTINUOUS}


def _policy(name):
    return helpers.POLICIES[name][0]()


def _output(name, seed):
    return helpers.random_output(helpers.POLICIES[name][1], seed)


def _outputs(name, seed, batch):
    return helpers.random_output(helpers.POLICIES[name][1], seed, (batch,))


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_step_is_consistent_with_its_distribution(name):
    policy = _policy(name)
    output = _output(name, 0)
    step = ACT(policy, output, jax.random.key(1))
    assert isinstance(step, pr.PolicyStep)
    if name in CONTINUOUS:
        assert step.action.dtype == jnp.float32 and step.action.shape == (helpers.NUM_ACTIONS,)
    else:
        assert step.action.dtype == jnp.int32 and step.action.shape == ()
        assert bool(pr.Discrete(helpers.NUM_ACTIONS).contains(step.action))
        assert float(step.log_prob) <= 0.0 and float(step.entropy) >= 0.0
    distribution = policy.distribution(output)
    np.testing.assert_allclose(step.log_prob, distribution.log_prob(step.action), rtol=1e-5, atol=1e-6)
    # The distribution's entropy, or minus the log-probability where it has no closed form.
    entropy = pr.entropy_or_estimate(distribution, distribution.log_prob(step.action))
    np.testing.assert_allclose(step.entropy, entropy, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_jit_equals_eager(name):
    policy = _policy(name)
    output = _output(name, 2)
    helpers.check_jit_equals_eager(ACT, policy, output, jax.random.key(3), rtol=1e-5)


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_vmap_equals_loop(name):
    policy = _policy(name)
    outputs = _outputs(name, 4, 5)
    keys = jax.random.split(jax.random.key(5), 5)
    helpers.check_vmap_equals_loop(ACT, ACT_BATCH, (policy,), (outputs, keys), rtol=1e-5)


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_is_deterministic_under_a_key(name):
    policy = _policy(name)
    outputs = _outputs(name, 6, 16)
    keys = jax.random.split(jax.random.key(7), 16)
    first, second = ACT_BATCH(policy, outputs, keys), ACT_BATCH(policy, outputs, keys)
    helpers.assert_trees_close(first, second, rtol=0, atol=0)
    if name not in DETERMINISTIC:
        # The same output with other keys gives other actions.
        output = _output(name, 8)
        actions = ACT_BATCH(policy, jax.tree.map(lambda x: jnp.stack([x] * 16), output), keys).action
        assert len({tuple(np.asarray(a).ravel()) for a in actions}) > 1


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_gradients_are_finite(name):
    policy = _policy(name)
    output = _output(name, 8)
    helpers.assert_all_finite(GRADS(policy, output, jax.random.key(9)))


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_traces_once(name):
    policy = _policy(name)
    calls = [(policy, _output(name, seed), jax.random.key(20 + seed)) for seed in range(3)]
    helpers.check_traced_once(ACT, *calls)


@pytest.mark.parametrize("name", [name for name in helpers.POLICIES if name not in ALSO_CONTINUOUS])
def test_policy_refuses_continuous_actions(name):
    policy = _policy(name)
    policy.check_action_space(pr.Discrete(4))
    with pytest.raises(ValueError, match=r"chooses among discrete actions.*Box"):
        policy.check_action_space(helpers.Point().action_space)


def test_greedy_takes_the_first_maximising_action():
    policy = pr.policies.Greedy()
    step = policy(pr.QValues(jnp.asarray([0.5, 2.0, -1.0])), jax.random.key(0))
    assert int(step.action) == 1
    np.testing.assert_allclose(step.log_prob, 0.0, atol=1e-6)
    np.testing.assert_allclose(step.entropy, 0.0, atol=1e-6)
    tie = policy(pr.QValues(jnp.asarray([1.0, 3.0, 3.0])), jax.random.key(0))
    assert int(tie.action) == 1
    # Uniform over the two maximisers.
    np.testing.assert_allclose(tie.log_prob, np.log(0.5), rtol=1e-6)


def _frequencies(policy, output, seed=0):
    keys = jax.random.split(jax.random.key(seed), NUM_SAMPLES)
    return np.asarray(FREQUENCIES(policy, output, keys))


# Four standard deviations of a frequency estimated from NUM_SAMPLES draws.
TOLERANCE = 4 * np.sqrt(0.25 / NUM_SAMPLES)


@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0])
def test_epsilon_greedy_frequencies(epsilon):
    q_values = jnp.asarray([0.1, 0.7, -0.2])
    expected = np.full(3, epsilon / 3)
    expected[1] += 1 - epsilon
    np.testing.assert_allclose(
        _frequencies(pr.policies.EpsilonGreedy(epsilon), pr.QValues(q_values)), expected, atol=TOLERANCE
    )


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_softmax_frequencies(temperature):
    q_values = jnp.asarray([0.1, 0.7, -0.2])
    expected = np.asarray(jax.nn.softmax(q_values / temperature))
    np.testing.assert_allclose(
        _frequencies(pr.policies.Softmax(temperature), pr.QValues(q_values)), expected, atol=TOLERANCE
    )


def test_categorical_frequencies():
    logits = jnp.asarray([1.0, -0.5, 0.3])
    expected = np.asarray(jax.nn.softmax(logits))
    frequencies = _frequencies(pr.policies.Categorical(), pr.PolicyLogits(logits, jnp.asarray(0.0)))
    np.testing.assert_allclose(frequencies, expected, atol=TOLERANCE)


def test_policies_read_their_input_type():
    assert pr.policies.Greedy.input_type is pr.AbstractActionValues
    assert pr.policies.EpsilonGreedy.input_type is pr.AbstractActionValues
    assert pr.policies.Softmax.input_type is pr.AbstractActionValues
    assert pr.policies.Categorical.input_type is pr.PolicyLogits
    assert pr.policies.Gaussian.input_type is pr.GaussianParams
    assert pr.policies.Mode.input_type is pr.AbstractPolicyOutput


def test_policy_hyperparameters_are_array_leaves():
    # A population of exploration rates is one vmap, without recompiling.
    epsilons = jnp.asarray([0.0, 0.5, 1.0])
    policies = eqx.filter_vmap(pr.policies.EpsilonGreedy)(epsilons)
    np.testing.assert_array_equal(policies.epsilon, epsilons)
    assert jax.tree.leaves(pr.policies.Softmax(0.3))[0].dtype == jnp.float32


@pytest.mark.parametrize("epsilon", [-0.1, 1.5, float("nan"), [0.2, 1.2]])
def test_epsilon_greedy_rejects_epsilon_outside_the_unit_interval(epsilon):
    with pytest.raises(ValueError, match=r"EpsilonGreedy: epsilon must lie in \[0, 1\]"):
        pr.policies.EpsilonGreedy(jnp.asarray(epsilon))


@pytest.mark.parametrize("temperature", [0.0, -1.0])
def test_softmax_rejects_non_positive_temperatures(temperature):
    with pytest.raises(ValueError, match="Softmax: temperature must be positive"):
        pr.policies.Softmax(temperature)


# --------------------------------------------------------------------------------------
# Mode: the deterministic policy over policy heads.
# --------------------------------------------------------------------------------------

ACTION_SIZE = 2


def _gaussian(seed, batch=()):
    return helpers.random_output(pr.GaussianParams, seed, batch, num_actions=ACTION_SIZE)


def test_mode_takes_the_argmax_of_the_logits():
    policy = pr.policies.Mode()
    logits = jnp.asarray([0.3, 1.5, -2.0])
    step = ACT(policy, pr.PolicyLogits(logits, jnp.asarray(0.7)), jax.random.key(0))
    assert step.action.dtype == jnp.int32 and step.action.shape == () and int(step.action) == 1
    log_softmax = np.asarray(jax.nn.log_softmax(logits), np.float64)
    np.testing.assert_allclose(step.log_prob, log_softmax[1], rtol=1e-6)
    np.testing.assert_allclose(step.entropy, -np.sum(np.exp(log_softmax) * log_softmax), rtol=1e-6)
    # The first maximiser on ties, whatever the key.
    tie = pr.PolicyLogits(jnp.asarray([1.0, 3.0, 3.0]))
    actions = {int(ACT(policy, tie, jax.random.key(seed)).action) for seed in range(3)}
    assert actions == {1}
    outputs = _outputs("mode", 11, 16)
    batch = ACT_BATCH(policy, outputs, jax.random.split(jax.random.key(12), 16))
    np.testing.assert_array_equal(batch.action, np.argmax(np.asarray(outputs.logits), axis=-1))


def test_mode_takes_the_mean_of_a_gaussian():
    policy, output = pr.policies.Mode(), _gaussian(0)
    step = ACT(policy, output, jax.random.key(0))
    assert step.action.dtype == jnp.float32 and step.action.shape == (ACTION_SIZE,)
    np.testing.assert_array_equal(step.action, output.mean)
    # The density at the mean, and the entropy, of the head's Gaussian (float64 formulas).
    log_std = np.asarray(output.log_std, np.float64)
    np.testing.assert_allclose(step.log_prob, np.sum(-log_std - 0.5 * np.log(2 * np.pi)), rtol=1e-5)
    np.testing.assert_allclose(step.entropy, np.sum(0.5 * np.log(2 * np.pi * np.e) + log_std), rtol=1e-5)
    # The standard deviations do not move the mode; other keys do not either.
    wider = eqx.tree_at(lambda o: o.log_std, output, output.log_std + 1.0)
    np.testing.assert_array_equal(ACT(policy, wider, jax.random.key(1)).action, output.mean)


def test_mode_acts_in_discrete_spaces_and_flat_float_boxes():
    policy = pr.policies.Mode()
    policy.check_action_space(pr.Discrete(4))
    policy.check_action_space(helpers.Point().action_space)
    with pytest.raises(ValueError, match=r"Mode takes flat action vectors.*flatten the action space"):
        policy.check_action_space(pr.Box(-1.0, 1.0, (2, 2)))
    with pytest.raises(ValueError, match=r"Mode acts among discrete actions or with real action vectors.*int32"):
        policy.check_action_space(pr.Box(0, 3, (2,), jnp.int32))


# --------------------------------------------------------------------------------------
# Evaluation: the policy must read the network's outputs.
# --------------------------------------------------------------------------------------


def _catch():
    return pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)


def test_evaluate_refuses_a_policy_that_cannot_read_the_network():
    key = jax.random.key(0)
    logits = helpers.logit_network(key, with_value=True)
    with pytest.raises(
        ValueError,
        match=r"The policy Greedy reads AbstractActionValues but the network emits PolicyLogits; "
        r".*podrace\.policies\.Mode",
    ):
        pr.evaluate(_catch(), logits, pr.policies.Greedy(), num_episodes=1, key=key)
    with pytest.raises(
        ValueError,
        match=r"The policy Mode reads AbstractPolicyOutput but the network emits QValues; .*podrace\.policies\.Greedy",
    ):
        pr.evaluate(_catch(), helpers.q_network(key), pr.policies.Mode(), num_episodes=1, key=key)
    with pytest.raises(ValueError, match=r"emits PolicyLogits \(discrete actions\).*GaussianHead"):
        network = helpers.logit_network(key, observation_shape=(3,), num_actions=1)
        pr.evaluate(pr.envs.pendulum_v1(), network, pr.policies.Mode(), num_episodes=1, key=key)


def test_evaluate_with_the_mode_of_a_logits_network():
    network = helpers.logit_network(jax.random.key(0), with_value=True)
    result = pr.evaluate(_catch(), network, pr.policies.Mode(), num_episodes=4, key=jax.random.key(1))
    assert bool(result.completed.all())
    np.testing.assert_array_equal(result.lengths, np.full(4, helpers.CATCH_ROWS - 1))
    assert set(np.asarray(result.returns).tolist()) <= {-1.0, 1.0}
    # Acting by the mode is acting greedily on the logits read as action values.
    as_q_values = helpers.q_network(jax.random.key(2))
    as_q_values = eqx.tree_at(lambda n: n.torso, as_q_values, network.torso)
    as_q_values = eqx.tree_at(lambda n: n.head.linear, as_q_values, network.head.linear)
    greedy = pr.evaluate(_catch(), as_q_values, pr.policies.Greedy(), num_episodes=4, key=jax.random.key(1))
    helpers.assert_trees_close(result, greedy)


def test_evaluate_with_the_mode_of_a_gaussian_network_on_pendulum():
    env = pr.envs.pendulum_v1()
    steps = 20

    def run(initial_log_std):
        network = helpers.gaussian_network(
            jax.random.key(0), observation_shape=(3,), action_size=1, initial_log_std=initial_log_std
        )
        return pr.evaluate(env, network, pr.policies.Mode(), num_episodes=3, key=jax.random.key(1), max_steps=steps)

    result = run(0.0)
    np.testing.assert_array_equal(result.lengths, np.full(3, steps))
    assert np.all(np.isfinite(result.returns)) and np.all(np.asarray(result.returns) <= 0.0)
    # The mode is the mean: the standard deviation changes nothing.
    helpers.assert_trees_close(run(1.5), result)


BOUNDED = [name for name, (_, output_type) in helpers.POLICIES.items() if hasattr(output_type, "low")]


@pytest.mark.parametrize("name", BOUNDED)
def test_bounded_policies_act_inside_the_bounds_of_their_outputs(name):
    policy = _policy(name)
    outputs = _outputs(name, 30, 64)
    steps = ACT_BATCH(policy, outputs, jax.random.split(jax.random.key(31), 64))
    assert np.all(steps.action >= outputs.low) and np.all(steps.action <= outputs.high)
    assert np.all(np.isfinite(steps.log_prob)) and np.all(np.isfinite(steps.entropy))


def test_the_mode_of_a_tanh_gaussian_is_its_squashed_mean():
    output = pr.TanhGaussianParams(jnp.asarray([0.0, 1.0]), jnp.zeros(2), jnp.asarray([-1.0, 0.0]), jnp.full(2, 2.0))
    step = pr.policies.Mode()(output, jax.random.key(0))
    np.testing.assert_allclose(step.action, [0.5, 1.0 + np.tanh(1.0)], rtol=1e-6)


def test_a_tanh_gaussian_log_prob_includes_the_squashing():
    # One dimension in [-1, 1]: log pi(a) = log N(u) - log(1 - tanh(u)^2) at a = tanh(u).
    output = pr.TanhGaussianParams(jnp.asarray([0.3]), jnp.asarray([-0.2]), -jnp.ones(1), jnp.ones(1))
    step = pr.policies.TanhGaussian()(output, jax.random.key(4))
    u = np.arctanh(float(step.action[0]))
    std = np.exp(-0.2)
    expected = -0.5 * ((u - 0.3) / std) ** 2 - np.log(std * np.sqrt(2 * np.pi)) - np.log(1 - np.tanh(u) ** 2)
    np.testing.assert_allclose(float(step.log_prob), expected, rtol=1e-4)
    np.testing.assert_allclose(float(step.entropy), -expected, rtol=1e-4)


def test_gaussian_noise_scales_with_the_action_range():
    output = pr.DeterministicAction(jnp.zeros(2), jnp.asarray([-1.0, -4.0]), jnp.asarray([1.0, 4.0]))
    keys = jax.random.split(jax.random.key(0), NUM_SAMPLES)
    actions = jax.vmap(lambda key: pr.policies.GaussianNoise(0.1)(output, key).action)(keys)
    np.testing.assert_allclose(np.std(np.asarray(actions), axis=0), [0.1, 0.4], rtol=0.05)


@pytest.mark.parametrize(
    "policy, output",
    [
        (
            pr.policies.GaussianNoise(0.1, 1.0),
            pr.DeterministicAction(jnp.zeros(2), jnp.asarray([-1.0, 0.0]), jnp.asarray([1.0, 4.0])),
        ),
        (
            pr.policies.TanhGaussian(1.0),
            pr.TanhGaussianParams(jnp.zeros(2), jnp.zeros(2), jnp.asarray([-1.0, 0.0]), jnp.asarray([1.0, 4.0])),
        ),
    ],
    ids=["gaussian-noise", "tanh-gaussian"],
)
def test_random_actions_are_uniform_within_the_bounds(policy, output):
    steps = jax.vmap(lambda key: policy(output, key))(jax.random.split(jax.random.key(0), NUM_SAMPLES))
    width = np.asarray(output.high - output.low)
    assert np.all(np.abs(np.mean(steps.action, axis=0) - (np.asarray(output.low) + width / 2)) < 0.05 * width)
    np.testing.assert_allclose(np.std(steps.action, axis=0), width / np.sqrt(12), rtol=0.05)
    np.testing.assert_allclose(steps.log_prob, -np.log(np.prod(width)), rtol=1e-6)


def test_random_first_steps_follow_their_schedule():
    output = pr.DeterministicAction(jnp.zeros(1), -jnp.ones(1), jnp.ones(1))
    policy = pr.policies.GaussianNoise(0.01, optax.piecewise_constant_schedule(1.0, {100: 0.0}))
    keys = jax.random.split(jax.random.key(0), NUM_SAMPLES)
    for step, spread in ((0, 1 / np.sqrt(3)), (99, 1 / np.sqrt(3)), (100, 0.01)):
        acting = policy.at(jnp.asarray(step))
        actions = jax.vmap(lambda key, acting=acting: acting(output, key).action)(keys)
        np.testing.assert_allclose(np.std(actions), spread, rtol=0.05)


# --------------------------------------------------------------------------------------
# Capabilities: choosing without randomness, parameters on schedules.
# --------------------------------------------------------------------------------------

SCHEDULED = {
    "epsilon-greedy",
    "epsilon-greedy-quantiles",
    "tanh-gaussian",
    "gaussian-noise",
    "gaussian-noise-random-actions",
    "tanh-gaussian-random-actions",
}


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_the_policies_that_choose_without_randomness_are_deterministic_policies(name):
    policy = _policy(name)
    assert isinstance(policy, pr.policies.AbstractDeterministicPolicy) == (name in DETERMINISTIC)
    assert isinstance(policy, pr.policies.AbstractScheduledPolicy) == (name in SCHEDULED)
    if isinstance(policy, pr.policies.AbstractDeterministicPolicy):
        output = _output(name, 9)
        step = ACT(policy, output, jax.random.key(10))
        helpers.assert_trees_close(step.action, policy.action(output), rtol=0, atol=0)
        np.testing.assert_allclose(step.log_prob, policy.distribution(output).log_prob(step.action), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(SCHEDULED))
def test_a_scheduled_policy_without_schedules_acts_as_built(name):
    policy = _policy(name)
    assert policy.at(jnp.asarray(1_000)) is policy


def test_each_schedule_moves_its_own_parameter():
    policy = pr.policies.GaussianNoise(optax.linear_schedule(0.5, 0.1, 100), 0.25)
    acting = policy.at(jnp.asarray(50))
    assert isinstance(acting, pr.policies.GaussianNoise)
    np.testing.assert_allclose(acting.std, 0.3, rtol=1e-6)
    assert float(acting.random_action_probability) == 0.25
    assert float(policy.std) == 0.5  # the policy as built starts from the schedule's first value
    probability = pr.policies.TanhGaussian(optax.linear_schedule(1.0, 0.0, 10)).at(jnp.asarray(5))
    assert isinstance(probability, pr.policies.TanhGaussian)
    np.testing.assert_allclose(probability.random_action_probability, 0.5, rtol=1e-6)


@typing.final
class _LinearGreedy(pr.policies.AbstractScheduledPolicy[pr.QValues]):
    """A user's scheduled policy: its epsilon falls from 1 to 0 over `horizon` steps."""

    epsilon: jax.Array
    horizon: int = eqx.field(static=True)
    exploration_schedule: str = eqx.field(static=True, default="linear")  # a name, not a schedule to call
    input_type = pr.QValues

    def scheduled_at(self, step):
        epsilon = jnp.clip(1 - step / self.horizon, 0.0, 1.0).astype(jnp.float32)
        return eqx.tree_at(lambda policy: policy.epsilon, self, epsilon)

    def distribution(self, output):
        return pr.policies.EpsilonGreedy(self.epsilon).distribution(output)

    def __call__(self, output, key):
        return pr.policies.EpsilonGreedy(self.epsilon)(output, key)

    def check_action_space(self, action_space):
        pr.policies.EpsilonGreedy(self.epsilon).check_action_space(action_space)


def test_a_policy_declares_its_schedules_through_scheduled_at():
    policy = _LinearGreedy(jnp.asarray(1.0), 10)
    acting = policy.at(jnp.asarray(4))
    np.testing.assert_allclose(acting.epsilon, 0.6, rtol=1e-6)
    assert acting.exploration_schedule == "linear"
    # A policy of none of the capabilities is its own acting policy at every step.
    categorical = pr.policies.Categorical()
    assert categorical.at(jnp.asarray(4)) is categorical
