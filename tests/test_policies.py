"""Policies: the shared contract, sampling frequencies, argument checks."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
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


def _outputs(policy, seed, batch):
    return helpers.random_output(policy.input_type, seed, (batch,))


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_step_is_consistent_with_its_distribution(name):
    policy = helpers.POLICIES[name]()
    output = helpers.random_output(policy.input_type, 0)
    step = ACT(policy, output, jax.random.key(1))
    assert isinstance(step, pr.PolicyStep)
    assert step.action.dtype == jnp.int32 and step.action.shape == ()
    assert bool(pr.Discrete(helpers.NUM_ACTIONS).contains(step.action))
    distribution = policy.distribution(output)
    np.testing.assert_allclose(step.log_prob, distribution.log_prob(step.action), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(step.entropy, distribution.entropy(), rtol=1e-5, atol=1e-6)
    assert float(step.log_prob) <= 0.0 and float(step.entropy) >= 0.0


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_jit_equals_eager(name):
    policy = helpers.POLICIES[name]()
    output = helpers.random_output(policy.input_type, 2)
    helpers.check_jit_equals_eager(ACT, policy, output, jax.random.key(3), rtol=1e-5)


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_vmap_equals_loop(name):
    policy = helpers.POLICIES[name]()
    outputs = _outputs(policy, 4, 5)
    keys = jax.random.split(jax.random.key(5), 5)
    helpers.check_vmap_equals_loop(ACT, ACT_BATCH, (policy,), (outputs, keys), rtol=1e-5)


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_is_deterministic_under_a_key(name):
    policy = helpers.POLICIES[name]()
    outputs = _outputs(policy, 6, 16)
    keys = jax.random.split(jax.random.key(7), 16)
    first, second = ACT_BATCH(policy, outputs, keys), ACT_BATCH(policy, outputs, keys)
    helpers.assert_trees_close(first, second, rtol=0, atol=0)
    if name != "greedy":
        # The same output with other keys gives other actions.
        output = helpers.random_output(policy.input_type, 8)
        assert np.count_nonzero(_frequencies(policy, output)) > 1


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_gradients_are_finite(name):
    policy = helpers.POLICIES[name]()
    output = helpers.random_output(policy.input_type, 8)
    helpers.assert_all_finite(GRADS(policy, output, jax.random.key(9)))


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_traces_once(name):
    policy = helpers.POLICIES[name]()
    calls = [(policy, helpers.random_output(policy.input_type, seed), jax.random.key(20 + seed)) for seed in range(3)]
    helpers.check_traced_once(ACT, *calls)


@pytest.mark.parametrize("name", helpers.POLICIES)
def test_policy_refuses_continuous_actions(name):
    policy = helpers.POLICIES[name]()
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
    assert pr.policies.Greedy.input_type is pr.QValues
    assert pr.policies.EpsilonGreedy.input_type is pr.QValues
    assert pr.policies.Softmax.input_type is pr.QValues
    assert pr.policies.Categorical.input_type is pr.PolicyLogits


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
