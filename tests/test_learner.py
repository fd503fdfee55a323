"""Learners: the shared contract, the update's arithmetic, NaN checks, fit checks."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr

from . import helpers


NUM_STEPS, BATCH = 6, 3


def _update(learner, state, trajectory):
    return learner.update(state, trajectory)


def _act(learner, state, observation, key):
    agent = learner.agent(state)
    return agent(observation, agent.initial_carry(), key)


def _act_initially(learner, observation, key):
    agent = learner.initial_agent()
    return agent(observation, agent.initial_carry(), key)


def _updates(learner, state, trajectory, num_updates):
    def body(state, _):
        state, metrics = learner.update(state, trajectory)
        return state, metrics.loss

    return jax.lax.scan(body, state, length=num_updates)


UPDATE = helpers.Compiled(_update)
ACT = helpers.Compiled(_act)
ACT_BATCH = helpers.Compiled(helpers.vmap_over_last(_act, 2))
ACT_INITIALLY_BATCH = helpers.Compiled(helpers.vmap_over_last(_act_initially, 1))
UPDATES = helpers.Compiled(_updates)


def _setup(name, seed=0):
    case = helpers.LEARNERS[name]
    learner = case.make(jax.random.key(seed))
    trajectory = case.random_trajectory(learner.initial_agent(), seed, NUM_STEPS, BATCH)
    first = jax.tree.map(lambda x: x[0], trajectory.timestep)
    return learner, learner.init(jax.random.key(0), first), trajectory


@pytest.mark.parametrize("name", helpers.LEARNERS)
def test_learner_init(name):
    learner, state, trajectory = _setup(name)
    assert isinstance(learner.initial_agent(), pr.AbstractAgent) and isinstance(learner.agent(state), pr.AbstractAgent)
    assert isinstance(learner.network_at(state), pr.networks.AbstractNetwork)
    helpers.assert_trees_close(
        state, learner.init(jax.random.key(0), jax.tree.map(lambda x: x[0], trajectory.timestep))
    )
    # Until the first update, the state acts as the learner's initial agent.
    observations = jax.tree.map(lambda x: x[:4, 0], trajectory.timestep.observation)
    keys = jax.random.split(jax.random.key(2), 4)
    helpers.assert_trees_close(
        ACT_BATCH(learner, state, observations, keys), ACT_INITIALLY_BATCH(learner, observations, keys)
    )
    # The device-local leaves name a prefix of the state.
    jax.tree.map(lambda local, _: None, learner.device_local(state), state)


@pytest.mark.parametrize(
    "name", [name for name, case in helpers.LEARNERS.items() if hasattr(case.make(jax.random.key(0)), "optimizer")]
)
def test_learner_init_holds_the_initial_network_and_a_fresh_optimiser_state(name):
    learner, state, _ = _setup(name)
    assert int(state.num_updates) == 0 and state.num_updates.dtype == jnp.int32
    helpers.assert_trees_close(state.opt_state, learner.optimizer.init(state.params), rtol=0, atol=0)
    # The state's network is the learner's own until the first update.
    helpers.assert_trees_close(learner.network_at(state), learner.initial_agent().network, rtol=0, atol=0)
    agent = learner.agent(state)
    assert agent.network is not None
    if not helpers.LEARNERS[name].search:  # a search agent acts with its search, not a policy
        assert agent.policy.input_type is not None


@pytest.mark.parametrize("name", helpers.LEARNERS)
def test_learner_update_jit_equals_eager(name):
    learner, state, trajectory = _setup(name)
    helpers.check_jit_equals_eager(UPDATE, learner, state, trajectory, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", helpers.LEARNERS)
def test_learner_update_is_deterministic_and_finite(name):
    learner, state, trajectory = _setup(name)
    first, second = UPDATE(learner, state, trajectory), UPDATE(learner, state, trajectory)
    helpers.assert_trees_close(first, second, rtol=0, atol=0)
    new_state, metrics = first
    assert isinstance(metrics, pr.UpdateMetrics)
    assert int(new_state.num_updates) == 1
    # Every transition of the rollout counts (exploration schedules read the count).
    assert int(new_state.num_transitions) == NUM_STEPS * BATCH
    helpers.assert_all_finite(new_state)
    for value in (metrics.loss, metrics.grad_norm, *metrics.terms.values()):
        assert value.shape == () and np.isfinite(float(value))
    assert float(metrics.grad_norm) > 0
    helpers.assert_trees_differ(
        eqx.filter(learner.network_at(new_state), eqx.is_inexact_array),
        eqx.filter(learner.network_at(state), eqx.is_inexact_array),
    )


@pytest.mark.parametrize("name", helpers.LEARNERS)
def test_learner_update_traces_once(name):
    learner, state, _ = _setup(name)
    calls = []
    for seed in range(3):
        trajectory = helpers.LEARNERS[name].random_trajectory(learner.initial_agent(), seed, NUM_STEPS, BATCH)
        calls.append((learner, state, trajectory))
        state, _ = UPDATE(learner, state, trajectory)
    helpers.check_traced_once(UPDATE, *calls)


@pytest.mark.parametrize("name", helpers.LEARNERS)
def test_learner_act_vmap_equals_loop(name):
    learner, state, trajectory = _setup(name)
    observations = jax.tree.map(lambda x: x[:4, 0], trajectory.timestep.observation)
    keys = jax.random.split(jax.random.key(2), 4)
    steps, carry = helpers.check_vmap_equals_loop(ACT, ACT_BATCH, (learner, state), (observations, keys))
    assert jax.tree.structure(carry) == jax.tree.structure(learner.initial_agent().initial_carry())
    assert steps.action.shape[0] == 4
    if not helpers.LEARNERS[name].continuous:
        assert steps.action.dtype == jnp.int32 and np.all((steps.action >= 0) & (steps.action < helpers.NUM_ACTIONS))
    if isinstance(getattr(learner, "policy", None), pr.policies.Greedy):  # greedy learners act with their argmax
        q_values = jax.vmap(lambda o: learner.network(o, learner.network.initial_carry())[0].q_values)(observations)
        np.testing.assert_array_equal(steps.action, jnp.argmax(q_values, axis=-1))


# Policy-gradient objectives need not fall (an advantage-weighted log-probability has no
# floor), and DQN learns from its replay buffer rather than the batch it is given.
Q_LEARNERS = [
    name
    for name, case in helpers.LEARNERS.items()
    if getattr(getattr(case.make(jax.random.key(0)), "loss", None), "input_type", None) is pr.QValues
    and case.device_invariant
]


@pytest.mark.parametrize("name", Q_LEARNERS)
def test_learner_updates_reduce_the_loss_on_a_fixed_batch(name):
    learner, state, trajectory = _setup(name)
    _, losses = UPDATES(learner, state, trajectory, 100)
    losses = np.asarray(losses)
    assert np.all(np.isfinite(losses))
    assert losses[-10:].mean() < 0.5 * losses[:10].mean()


def test_update_applies_the_gradient_of_the_loss():
    learning_rate = helpers.SGD_LEARNING_RATE
    learner = helpers.make_learner(jax.random.key(0), optimizer=helpers.SGD)
    state = learner.init(jax.random.key(0))
    trajectory = helpers.random_trajectory(3, NUM_STEPS, BATCH)
    new_state, metrics = UPDATE(learner, state, trajectory)

    def objective(params):
        return learner.loss(pr.Agent(learner.network_with(params), learner.policy), trajectory)[0]

    loss, grads = eqx.filter_jit(jax.value_and_grad(objective))(state.params)
    np.testing.assert_allclose(metrics.loss, loss, rtol=1e-6)
    np.testing.assert_allclose(metrics.grad_norm, optax.tree.norm(grads), rtol=1e-5)
    expected = jax.tree.map(lambda p, g: p - learning_rate * g, state.params, grads)
    helpers.assert_trees_close(new_state.params, expected, rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------------------
# NaN checks.
# --------------------------------------------------------------------------------------


def _nan_params(state):
    return eqx.tree_at(lambda s: s.params, state, jax.tree.map(lambda x: jnp.full_like(x, jnp.nan), state.params))


def test_check_nans_names_the_non_finite_loss_term():
    learner = helpers.make_learner(jax.random.key(0), check_nans=True)
    state = _nan_params(learner.init(jax.random.key(0)))
    trajectory = helpers.random_trajectory(0, NUM_STEPS, BATCH)
    with pytest.raises(eqx.EquinoxRuntimeError, match="loss term 'td_loss' is not finite"):
        jax.block_until_ready(UPDATE(learner, state, trajectory))


def test_check_nans_passes_finite_updates():
    learner = helpers.make_learner(jax.random.key(0), check_nans=True)
    _, metrics = UPDATE(learner, learner.init(jax.random.key(0)), helpers.random_trajectory(0, NUM_STEPS, BATCH))
    assert np.isfinite(float(metrics.loss))


def test_without_check_nans_a_nan_loss_is_returned():
    learner = helpers.make_learner(jax.random.key(0))
    _, metrics = UPDATE(
        learner, _nan_params(learner.init(jax.random.key(0))), helpers.random_trajectory(0, NUM_STEPS, BATCH)
    )
    assert np.isnan(float(metrics.loss)) and np.isnan(float(metrics.terms["td_loss"]))


def _sac_with_temperature_optimizer(key, temperature_optimizer):
    actor_key, critic_key = jax.random.split(key)
    actor = helpers.bounded_network(actor_key, pr.networks.TanhGaussianHead, helpers.POINT_OBS_SHAPE, 1)
    critic = pr.networks.MLPCritic(helpers.POINT_OBS_SHAPE, 1, (8,), key=critic_key)
    optimizers = (optax.adam(1e-3), optax.adam(1e-3), temperature_optimizer)
    return pr.learners.SACLearner(actor, critic, *optimizers, buffer_size=8, batch_size=4)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda key: helpers.make_learner(key, optimizer=optax.adam(float("nan"))), "Learner: the optimizer's"),
        (helpers.dqn_learner, "DQNLearner: the optimizer's"),
        (helpers.td3_learner, "TD3Learner: the actor_optimizer's"),
        (helpers.sac_learner, "SACLearner: the actor_optimizer's"),
        (helpers.discrete_sac_learner, "DiscreteSACLearner: the actor_optimizer's"),
        (lambda key: _sac_with_temperature_optimizer(key, optax.sgd(float("inf"))), "the temperature_optimizer's"),
    ],
)
def test_a_non_finite_learning_rate_is_refused_when_the_learner_is_built(build, message, monkeypatch):
    monkeypatch.setattr(helpers, "ADAM", optax.adam(float("nan")))  # the optimiser of the registry's learners
    with pytest.raises(ValueError, match=f"{message} first step is not finite: give it finite hyperparameters"):
        build(jax.random.key(0))


def _sac_with_critic_optimizer(key, critic_optimizer):
    actor_key, critic_key = jax.random.split(key)
    actor = helpers.bounded_network(actor_key, pr.networks.TanhGaussianHead, helpers.POINT_OBS_SHAPE, 1)
    critic = pr.networks.MLPCritic(helpers.POINT_OBS_SHAPE, 1, (8,), key=critic_key)
    optimizers = (optax.adam(1e-3), critic_optimizer, optax.adam(1e-3))
    return pr.learners.SACLearner(actor, critic, *optimizers, buffer_size=8, batch_size=4)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda key: helpers.make_learner(key, optimizer=optax.adam(-3e-4)), "Learner: the optimizer's"),
        (helpers.dqn_learner, "DQNLearner: the optimizer's"),
        (helpers.td3_learner, "TD3Learner: the actor_optimizer's"),
        (helpers.sac_learner, "SACLearner: the actor_optimizer's"),
        (helpers.discrete_sac_learner, "DiscreteSACLearner: the actor_optimizer's"),
        (lambda key: _sac_with_critic_optimizer(key, optax.adam(-3e-4)), "SACLearner: the critic_optimizer's"),
        (lambda key: _sac_with_temperature_optimizer(key, optax.sgd(-1e-3)), "SACLearner: the temperature_optimizer's"),
        (
            lambda key: helpers.make_learner(
                key, optimizer=optax.chain(optax.clip_by_global_norm(0.5), optax.rmsprop(-1e-3))
            ),
            "Learner: the optimizer's",
        ),
    ],
)
def test_a_negative_learning_rate_is_refused_when_the_learner_is_built(build, message, monkeypatch):
    monkeypatch.setattr(helpers, "ADAM", optax.adam(-3e-4))  # the optimiser of the registry's learners
    with pytest.raises(
        ValueError, match=f"{message} first step goes uphill.* a learning rate must be positive; optax minimises"
    ):
        build(jax.random.key(0))


@pytest.mark.parametrize(
    "optimizer",
    [
        optax.sgd(1e-2, momentum=0.9, nesterov=True),
        optax.rmsprop(1e-3),
        optax.adamw(1e-3, weight_decay=1e-2),
        optax.chain(optax.clip_by_global_norm(0.5), optax.adam(1e-3)),
        optax.adam(optax.linear_schedule(1e-3, 0.0, 100)),  # the command line's --anneal-learning-rate
        optax.adam(optax.linear_schedule(0.0, 1e-3, 100)),  # a warm-up from 0
        optax.adam(0.0),  # a frozen part
    ],
)
def test_optimizers_that_descend_or_stand_still_are_accepted(optimizer):
    assert isinstance(helpers.make_learner(jax.random.key(0), optimizer=optimizer), pr.Learner)


def test_a_learning_rate_traced_in_a_population_is_not_checked():
    learners = eqx.filter_vmap(lambda rate: helpers.make_learner(jax.random.key(0), optimizer=optax.adam(rate)))(
        jnp.asarray([1e-3, jnp.nan])
    )
    assert isinstance(learners, pr.Learner)


# --------------------------------------------------------------------------------------
# Parts that do not fit.
# --------------------------------------------------------------------------------------


def test_learner_rejects_a_policy_for_another_network_output():
    network = helpers.q_network(jax.random.key(0))
    loss = pr.losses.TDLambdaQLoss(discount=0.9, lambda_=0.9)
    with pytest.raises(ValueError, match="policy Categorical reads PolicyLogits but the network emits QValues"):
        pr.Learner(network, pr.policies.Categorical(), loss, optax.adam(1e-3))


def test_learner_rejects_a_loss_for_another_network_output():
    network = helpers.logit_network(jax.random.key(0))
    loss = pr.losses.TDLambdaQLoss(discount=0.9, lambda_=0.9)
    with pytest.raises(ValueError, match="loss TDLambdaQLoss reads QValues but the network emits PolicyLogits"):
        pr.Learner(network, pr.policies.Categorical(), loss, optax.adam(1e-3))


def test_a_policy_on_a_schedule_explores_on_it_with_the_on_policy_learner():
    # Epsilon-greedy on a schedule over environment transitions, with any Q learner.
    schedule = optax.linear_schedule(1.0, 0.1, 40)
    network = helpers.q_network(jax.random.key(0))
    learner = pr.Learner(
        network, pr.policies.EpsilonGreedy(schedule), pr.losses.TDLambdaQLoss(discount=0.9, lambda_=0.8), optax.sgd(0.1)
    )
    state = learner.init(jax.random.key(1))
    assert float(learner.agent(state).policy.epsilon) == 1.0
    for num_updates in (1, 2):
        state, _ = UPDATE(learner, state, helpers.random_trajectory(num_updates, NUM_STEPS, BATCH))
        assert int(state.num_transitions) == num_updates * NUM_STEPS * BATCH
        np.testing.assert_allclose(learner.agent(state).policy.epsilon, schedule(state.num_transitions), rtol=1e-6)
    # Without a schedule, the policy acts as built.
    fixed = pr.policies.EpsilonGreedy(0.3)
    assert fixed.epsilon_schedule is None and fixed.at(jnp.asarray(100)) is fixed
