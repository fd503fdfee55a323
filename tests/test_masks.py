"""Legal-action masks: masked observations, the outputs and networks that apply them, every
discrete policy choosing legal actions only, `check_env`'s `legal-actions` rule, observation
normalisation, configurations and recipes on a masked environment, and the losses that
read every action's value (finite on masked trajectories; discrete SAC against the same
expectations over the legal actions alone)."""

from typing import cast, final

import distrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, PyTree

import podrace as pr
from podrace import configs
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


# --------------------------------------------------------------------------------------
# Observation normalisation, configurations and recipes.
# --------------------------------------------------------------------------------------


def _first_timesteps(seed: int, num_envs: int) -> pr.TimeStep:
    return jax.vmap(lambda key: helpers.Picks().reset(key)[1])(jax.random.split(jax.random.key(seed), num_envs))


def test_running_normalization_normalises_the_observation_inside_its_mask():
    normalization = pr.RunningNormalization(rewards=False, clip=3.0)
    first, later = _first_timesteps(30, 6), _first_timesteps(31, 6)
    state, _ = normalization.init(first)
    state, normalized = normalization.step(state, later)
    statistics = normalization.observation_statistics(state)
    assert statistics is not None
    # The statistics of the observations alone, as if they had come without masks.
    plain = pr.envs.RunningStatistics.initial((helpers.NUM_ACTIONS,))
    for timestep in (first, later):
        plain = plain.update(timestep.observation.observation, jnp.ones(6, bool))
    helpers.assert_trees_close(statistics, plain)
    assert isinstance(normalized.observation, pr.MaskedObservation)
    assert normalized.observation.action_mask.dtype == jnp.bool_
    np.testing.assert_array_equal(normalized.observation.action_mask, later.observation.action_mask)
    expected = plain.normalize(later.observation.observation, clip=3.0, epsilon=1e-8)
    np.testing.assert_allclose(normalized.observation.observation, expected, rtol=1e-6)
    # Evaluations play with the statistics frozen, the masks as they are.
    frozen = normalization.frozen(helpers.Picks(), state)
    space = frozen.observation_space
    assert isinstance(space, pr.MaskedObservationSpace) and space.action == pr.Discrete(helpers.NUM_ACTIONS)
    assert "legal-actions" in check_env(pr.envs.AutoReset(frozen), num_steps=40).passed


def test_normalisation_refuses_a_mask_around_a_structure():
    env = pr.envs.AutoReset(pr.envs.PreviousActionReward(helpers.Picks()))
    with pytest.raises(ValueError, match=r"one array of observations .*ObservationActionRewardSpace"):
        pr.RunningNormalization().check_fits(env)


def _acts_legally(network: pr.networks.AbstractNetwork) -> None:
    """The network's greedy actions in Picks are legal, under its mask."""
    timesteps = _first_timesteps(32, 8)
    actions = jax.vmap(lambda o: pr.policies.Greedy()(network(o, ())[0], jax.random.key(0)).action)(
        timesteps.observation
    )
    masks = np.asarray(timesteps.observation.action_mask)
    assert np.all(np.take_along_axis(masks, np.asarray(actions)[:, None], axis=1))


@pytest.mark.parametrize("algorithm", ["dqn", "sac", "ppo"])
def test_a_configuration_trains_on_a_masked_env_with_normalised_observations(algorithm):
    assert configs.observation_shape(helpers.Picks()) == (helpers.NUM_ACTIONS,)
    replay = dict(buffer_size=64, batch_size=8, min_replay_size=8)
    extra = dict(num_minibatches=2) if algorithm == "ppo" else replay
    config = configs.config(
        algorithm,
        num_envs=2,
        rollout_length=4,
        hidden=(8,),
        normalize_observations=True,
        normalize_rewards=True,
        **extra,
    )
    pipeline = config.pipeline(helpers.Picks(), jax.random.key(33))
    state = pipeline.init(jax.random.key(34))
    result = pipeline.train(state, num_updates=3)
    helpers.assert_all_finite(eqx.filter(result.state.learner, eqx.is_inexact_array))
    network = pipeline.network_at(result.state)
    evaluation = pr.evaluate(
        pipeline.evaluation_env(result.state),
        network,
        config.evaluation_policy(),
        num_episodes=4,
        key=jax.random.key(35),
    )
    assert np.all(np.asarray(evaluation.returns) == 2.0)  # only legal picks


def test_a_recipe_builds_its_network_for_a_masked_env():
    pipeline = pr.recipes.CLEANRL_DQN.pipeline(helpers.Picks(), jax.random.key(36))
    state = pipeline.init(jax.random.key(37))
    _acts_legally(pipeline.network_at(state))


# --------------------------------------------------------------------------------------
# Losses that read every action's value.
# --------------------------------------------------------------------------------------


def _masked_trajectory(trajectory: pr.Trajectory, seed: int) -> pr.Trajectory:
    """`trajectory` `[T + 1, B]` with random legal-action masks that allow each action taken,
    some of them (on steps where no action is taken) allowing none."""
    actions = np.asarray(trajectory.policy_step.action)
    rng = np.random.default_rng(seed)
    masks = rng.random((actions.shape[0] + 1, *actions.shape[1:], helpers.NUM_ACTIONS)) < 0.5
    masks[-1, ::2] = False
    np.put_along_axis(masks[:-1], actions[..., None], True, axis=-1)
    return eqx.tree_at(
        lambda t: t.timestep.observation,
        trajectory,
        pr.MaskedObservation(trajectory.timestep.observation, jnp.asarray(masks)),
    )


DISCRETE_LOSSES = [name for name, case in helpers.LOSSES.items() if not case.continuous]


def _loss_and_grads(loss, network, trajectory):
    return eqx.filter_value_and_grad(lambda network: loss(helpers.agent(network), trajectory), has_aux=True)(network)


LOSS_AND_GRADS = helpers.Compiled(_loss_and_grads)


@pytest.mark.parametrize("name", DISCRETE_LOSSES)
def test_a_discrete_loss_and_its_gradient_stay_finite_on_masked_trajectories(name):
    loss, network, trajectory = helpers.LOSSES[name].setup(20, 5, 4)
    (value, terms), grads = LOSS_AND_GRADS(loss, network, _masked_trajectory(trajectory, 21))
    helpers.assert_all_finite((value, terms, eqx.filter(grads, eqx.is_inexact_array)))


@pytest.mark.parametrize("temperature", [0.2, 1.0, 5.0])
def test_discrete_sac_leaves_illegal_actions_out_of_its_expectations(temperature):
    """Every objective is that of a game with the legal actions alone, finite with finite
    gradients, at temperatures on both sides of 1 (where `alpha log pi` of an illegal
    action overflows)."""
    learner = helpers.discrete_sac_learner(jax.random.key(22))
    trajectory = _masked_trajectory(helpers.random_trajectory(23, 1, 8), 24)
    transitions = pr.losses.one_step_transitions(trajectory)
    alpha, key = jnp.asarray(temperature), jax.random.key(25)
    targets = learner.critic_loss.targets(
        transitions, actor=learner.actor, target_critic=learner.critic, temperature=alpha, key=key
    )

    def actor_objective(actor):
        return learner.actor_loss(actor, transitions, critic=learner.critic, temperature=alpha, key=key)

    def critic_objective(critic):
        return learner.critic_loss(critic, transitions, targets)

    (actor_loss, terms), actor_grads = eqx.filter_value_and_grad(actor_objective, has_aux=True)(learner.actor)
    (critic_loss, _), critic_grads = eqx.filter_value_and_grad(critic_objective, has_aux=True)(learner.critic)
    helpers.assert_all_finite((targets, actor_loss, terms, actor_grads, critic_loss, critic_grads))

    # The oracle: the same expectations over the legal actions alone, in float64.
    def legal_log_policy_and_values(observation: pr.MaskedObservation):
        logits = np.asarray(jax.vmap(lambda o: learner.actor(o, ())[0].logits)(observation.observation), np.float64)
        values = np.asarray(pr.losses.stacked_q_values(learner.critic, observation.observation), np.float64)
        legal = np.asarray(pr.legal_actions(observation.action_mask))
        logits = np.where(legal, logits, -np.inf)
        log_policy = logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))
        return legal, log_policy, values.min(axis=1)

    def expectation(legal, log_policy, values):
        return np.sum(np.where(legal, np.exp(log_policy) * np.where(legal, values, 0.0), 0.0), axis=-1)

    legal, log_policy, values = legal_log_policy_and_values(transitions.next_observation)
    soft_value = expectation(legal, log_policy, values - temperature * np.where(legal, log_policy, 0.0))
    discount = float(cast(pr.losses.DiscreteSACCriticLoss, learner.critic_loss).discount)
    expected = np.asarray(transitions.reward) + discount * np.asarray(transitions.discount) * soft_value
    np.testing.assert_allclose(targets, expected, rtol=1e-5, atol=1e-5)
    legal, log_policy, values = legal_log_policy_and_values(transitions.observation)
    safe_log_policy = np.where(legal, log_policy, 0.0)
    mask = np.asarray(transitions.mask, np.float64)
    count = max(mask.sum(), 1.0)
    per_state = expectation(legal, log_policy, temperature * safe_log_policy - values)
    np.testing.assert_allclose(actor_loss, np.sum(mask * per_state) / count, rtol=1e-5, atol=1e-5)
    entropy = -expectation(legal, log_policy, safe_log_policy)
    np.testing.assert_allclose(terms["entropy"], np.sum(mask * entropy) / count, rtol=1e-5, atol=1e-5)
