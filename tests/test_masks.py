"""Legal-action masks: masked observations, the outputs and networks that apply them, every
discrete policy choosing legal actions only, and `check_env`'s `legal-actions` rule."""

from typing import cast, final

import distrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, PyTree

import podrace as pr
from podrace.envs.checker import EnvCheckError, check_env

from . import helpers


MASK = np.array([True, False, True])
LEGAL = np.flatnonzero(MASK)
NUM_KEYS = 256

DISCRETE_POLICIES = [
    name for name, (_, output_type) in helpers.POLICIES.items() if issubclass(output_type, pr.AbstractMaskableOutput)
]
DISCRETE_NETWORKS = [
    name
    for name, make in helpers.NETWORKS.items()
    if issubclass(make(jax.random.key(0)).output_type, pr.AbstractMaskableOutput)
]


def _restricted(output: pr.AbstractNetworkOutput, actions: np.ndarray) -> pr.AbstractNetworkOutput:
    """The output of a game that has only `actions`: the oracle of a masked output."""
    if isinstance(output, pr.QValues):
        return pr.QValues(output.q_values[actions])
    if isinstance(output, pr.CategoricalQValues):
        return pr.CategoricalQValues(output.logits[actions], output.atoms)
    if isinstance(output, pr.QuantileQValues):
        return pr.QuantileQValues(output.quantiles[actions])
    assert isinstance(output, pr.PolicyLogits)
    return pr.PolicyLogits(output.logits[actions], output.value)


def _maskable(output_type: type, seed: int) -> pr.AbstractMaskableOutput:
    output = helpers.random_output(output_type, seed)
    assert isinstance(output, pr.AbstractMaskableOutput)
    return output


def _probs(distribution: distrax.Distribution) -> np.ndarray:
    return np.asarray(cast(distrax.Categorical, distribution).probs)


def _steps(policy, output, keys):
    return jax.vmap(lambda key: policy(output, key))(keys)


def _log_prob_and_entropy_grads(policy, output, key):
    def objective(output):
        step = policy(output, key)
        return step.log_prob + step.entropy

    return eqx.filter_grad(objective)(output)


STEPS = helpers.Compiled(_steps)
GRADS = helpers.Compiled(_log_prob_and_entropy_grads)


@pytest.mark.parametrize("name", DISCRETE_POLICIES)
def test_a_masked_policy_is_the_policy_over_the_legal_actions(name):
    make, output_type = helpers.POLICIES[name]
    policy, output = make(), _maskable(output_type, 0)
    masked = output.with_action_mask(jnp.asarray(MASK))
    steps = STEPS(policy, masked, jax.random.split(jax.random.key(1), NUM_KEYS))
    assert np.all(MASK[np.asarray(steps.action)])
    # The oracle: the same policy in a game with the legal actions alone.
    restricted = _restricted(output, LEGAL)
    oracle = policy.distribution(restricted)
    index = np.searchsorted(LEGAL, np.asarray(steps.action))
    np.testing.assert_allclose(np.exp(steps.log_prob), _probs(oracle)[index], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(steps.entropy, np.broadcast_to(oracle.entropy(), (NUM_KEYS,)), rtol=1e-5, atol=1e-6)
    probs = _probs(policy.distribution(masked))
    np.testing.assert_allclose(probs[LEGAL], _probs(oracle), rtol=1e-5, atol=1e-7)
    assert np.all(probs[~MASK] == 0)
    helpers.assert_all_finite(GRADS(policy, masked, jax.random.key(2)))


@pytest.mark.parametrize("name", DISCRETE_POLICIES)
def test_a_mask_without_legal_actions_leaves_every_action_legal(name):
    make, output_type = helpers.POLICIES[name]
    policy, output = make(), _maskable(output_type, 3)
    masked = output.with_action_mask(jnp.zeros(helpers.NUM_ACTIONS, bool))
    assert np.all(np.asarray(masked.action_mask))
    keys = jax.random.split(jax.random.key(4), NUM_KEYS)
    helpers.assert_trees_close(STEPS(policy, masked, keys), STEPS(policy, output, keys), rtol=1e-6, atol=1e-6)


def test_masked_values_leave_the_legal_ones_and_the_distributions_as_they_are():
    q_values = cast(pr.QValues, helpers.random_output(pr.QValues, 5))
    masked = q_values.with_action_mask(jnp.asarray(MASK))
    np.testing.assert_array_equal(masked.q_values[LEGAL], q_values.q_values[LEGAL])
    assert np.all(np.asarray(masked.q_values)[~MASK] == np.finfo(np.float32).min)
    for output_type in (pr.CategoricalQValues, pr.QuantileQValues):
        output = cast(pr.CategoricalQValues | pr.QuantileQValues, helpers.random_output(output_type, 6))
        masked = output.with_action_mask(jnp.asarray(MASK))
        helpers.assert_trees_close(eqx.filter(masked, eqx.is_inexact_array), eqx.filter(output, eqx.is_inexact_array))
        np.testing.assert_array_equal(masked.q_values[LEGAL], output.q_values[LEGAL])
    logits = pr.PolicyLogits(jnp.asarray([0.5, 3.0, -1.0]), jnp.asarray(2.0))
    masked = logits.with_action_mask(jnp.asarray(MASK))
    assert masked.value is not None and float(masked.value) == 2.0 and int(masked.mode()) == 0


# --------------------------------------------------------------------------------------
# Networks.
# --------------------------------------------------------------------------------------


def _masked(observations: PyTree[Array], masks: Array) -> PyTree[Array]:
    """Observations with masks, inside the previous action and reward where they have them."""
    if isinstance(observations, pr.ObservationActionReward):
        inner = pr.MaskedObservation(observations.observation, masks)
        return pr.ObservationActionReward(inner, observations.action, observations.reward)
    return pr.MaskedObservation(observations, masks)


def _outputs(network, observations, carry, is_first):
    unrolled = network.unroll(observations, carry, is_first)[0]

    def step(carry, inputs):
        observation, first = inputs
        output, carry = network(observation, network.reset_carry(carry, first))
        return carry, output

    return unrolled, jax.lax.scan(step, carry, (observations, is_first))[1]


OUTPUTS = helpers.Compiled(_outputs)
NUM_STEPS = 5


@pytest.mark.parametrize("name", DISCRETE_NETWORKS)
def test_a_network_applies_the_mask_of_each_observation(name):
    network = helpers.NETWORKS[name](jax.random.key(7))
    observations = helpers.random_observations(network, 8, NUM_STEPS)
    masks = jnp.asarray(np.random.default_rng(9).random((NUM_STEPS, helpers.NUM_ACTIONS)) < 0.5)
    carry = jax.tree.map(lambda x: x[0], helpers.random_carry(network, 10, 1))
    is_first = jnp.asarray([False, False, True, False, False])
    unrolled, stepped = OUTPUTS(network, _masked(observations, masks), carry, is_first)
    plain, _ = OUTPUTS(network, observations, carry, is_first)
    expected = jax.vmap(lambda output, mask: output.with_action_mask(mask))(plain, masks)
    helpers.assert_trees_close(unrolled, expected, rtol=1e-5, atol=1e-6)
    helpers.assert_trees_close(stepped, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(unrolled.action_mask, pr.legal_actions(masks))


def test_a_continuous_head_refuses_a_mask():
    network = helpers.NETWORKS["mlp-gaussian"](jax.random.key(11))
    observation = pr.MaskedObservation(jnp.zeros(helpers.OBS_SHAPE), jnp.asarray(MASK))
    with pytest.raises(ValueError, match=r"marks its legal actions.*GaussianParams.*discrete-action head"):
        network(observation, ())


# --------------------------------------------------------------------------------------
# Spaces and the checker.
# --------------------------------------------------------------------------------------


def test_masked_observation_space_contains_and_samples():
    space = helpers.Picks().observation_space
    sample = space.sample(jax.random.key(12))
    assert isinstance(sample, pr.MaskedObservation) and bool(space.contains(sample))
    assert bool(jnp.any(sample.action_mask))
    assert not bool(space.contains(pr.MaskedObservation(sample.observation, sample.action_mask[:2])))
    assert not bool(space.contains(sample.observation))
    zeros = space.zeros()
    assert isinstance(zeros, pr.MaskedObservation) and zeros.action_mask.dtype == jnp.bool_


def test_random_legal_actions_are_uniform_over_the_legal_ones():
    observation = pr.MaskedObservation(jnp.zeros(3), jnp.asarray(MASK))
    keys = jax.random.split(jax.random.key(13), 4000)
    actions = np.asarray(jax.jit(jax.vmap(observation.random_legal_action))(keys))
    counts = np.bincount(actions, minlength=3) / actions.size
    np.testing.assert_allclose(counts, [0.5, 0.0, 0.5], atol=0.03)


def _agent(policy: pr.policies.AbstractPolicy, network: pr.networks.AbstractNetwork | None = None) -> pr.Agent:
    if network is None:
        network = helpers.q_network(jax.random.key(14), observation_shape=(helpers.NUM_ACTIONS,))
    return pr.Agent(network, policy)


@final
class MaskIgnoringNetwork(pr.networks.AbstractNetwork[pr.QValues]):
    """A network that reads the observation and drops its mask: what the checker catches."""

    network: pr.networks.FeedForwardNetwork

    @property
    def output_type(self) -> type[pr.QValues]:
        return pr.QValues

    @property
    def num_actions(self) -> int:
        return self.network.num_actions

    def __call__(self, observation: PyTree[Array], carry: tuple[()]) -> tuple[pr.QValues, tuple[()]]:
        return self.network(pr.networks.split_action_mask(observation)[0], carry)


def test_check_env_passes_a_masked_env_and_agents_that_respect_the_mask():
    env = pr.envs.AutoReset(helpers.Picks())
    assert "legal-actions" in check_env(env, num_steps=40).passed
    for policy in (pr.policies.EpsilonGreedy(1.0), pr.policies.Greedy(), pr.policies.Softmax(0.5)):
        assert "legal-actions" in check_env(env, agent=_agent(policy), num_steps=40).passed
    network = helpers.logit_network(jax.random.key(15), observation_shape=(helpers.NUM_ACTIONS,))
    assert "legal-actions" in check_env(env, agent=_agent(pr.policies.Categorical(), network), num_steps=40).passed


def test_check_env_catches_an_agent_that_chooses_masked_actions():
    network = MaskIgnoringNetwork(helpers.q_network(jax.random.key(16), observation_shape=(helpers.NUM_ACTIONS,)))
    with pytest.raises(EnvCheckError, match=r"(?s)legal-actions.*the agent to choose only actions") as error:
        check_env(helpers.Picks(), agent=_agent(pr.policies.EpsilonGreedy(1.0), network), num_steps=40)
    assert error.value.rule == "legal-actions"


def test_a_learner_trains_and_evaluates_on_a_masked_env():
    env = pr.envs.AutoReset(helpers.Picks())
    learner = helpers.make_learner(jax.random.key(17), observation_shape=(3,), num_actions=3)
    pipeline = pr.Anakin(env, learner, num_envs=2, rollout_length=4)
    result = pipeline.train(pipeline.init(jax.random.key(18)), num_updates=2)
    helpers.assert_all_finite(result.state.learner.params)
    network = learner.network_at(result.state.learner)
    evaluation = pr.evaluate(helpers.Picks(), network, pr.policies.Greedy(), num_episodes=4, key=jax.random.key(19))
    # Only legal picks: two of them, each earning 1, end every episode.
    np.testing.assert_array_equal(evaluation.returns, np.full(4, 2.0))
