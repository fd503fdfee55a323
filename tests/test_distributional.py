"""C51 and QR-DQN: the projection and the losses against rlax's, transition by transition."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

import podrace as pr

from . import helpers


NUM_STEPS, BATCH, GAMMA = 10, 6, 0.9


def test_the_categorical_projection_equals_rlaxs_l2_projection():
    rng = np.random.default_rng(0)
    atoms_onto = jnp.linspace(-3.0, 3.0, 13)
    for _ in range(5):
        # Shifted, scaled atoms, some beyond the support on either side.
        atoms_from = jnp.asarray(rng.uniform(0.5, 1.5) * np.linspace(-3, 3, 13) + rng.normal(scale=2.0), jnp.float32)
        probs = jax.nn.softmax(jnp.asarray(rng.normal(size=13), jnp.float32))
        projected = pr.losses.categorical_projection(atoms_from, probs, atoms_onto)
        np.testing.assert_allclose(projected, rlax.categorical_l2_project(atoms_from, probs, atoms_onto), atol=1e-6)
        np.testing.assert_allclose(jnp.sum(projected), 1.0, rtol=1e-6)
    # Atoms on the support (the last one included) stay where they are.
    probs = jax.nn.softmax(jnp.arange(13.0))
    np.testing.assert_allclose(pr.losses.categorical_projection(atoms_onto, probs, atoms_onto), probs, atol=1e-6)


def test_the_categorical_projection_keeps_the_mean_inside_the_support():
    atoms_onto = jnp.linspace(-2.0, 2.0, 9)
    atoms_from = 0.9 * atoms_onto + 0.1  # inside [-2, 2]
    probs = jax.nn.softmax(jnp.arange(9.0) / 3)
    projected = pr.losses.categorical_projection(atoms_from, probs, atoms_onto)
    np.testing.assert_allclose(projected @ atoms_onto, probs @ atoms_from, rtol=1e-5)


def _outputs(network, trajectory):
    return jax.vmap(jax.vmap(lambda o: network(o, ())[0]))(trajectory.timestep.observation)


def _setup(output_type):
    online = helpers.q_network(jax.random.key(0), output_type=output_type)
    target = helpers.q_network(jax.random.key(1), output_type=output_type)
    trajectory = helpers.random_trajectory(0, NUM_STEPS, BATCH, episode_end_probability=0.3)
    timestep = trajectory.timestep
    assert np.asarray(timestep.terminated).any() and np.asarray(timestep.truncated).any()
    return online, target, trajectory


def _expected_loss(per_transition, trajectory):
    """The mean over the batch of each trajectory's masked mean of `per_transition(t, b)`."""
    timestep = trajectory.timestep
    losses = np.array([[per_transition(t, b) for b in range(BATCH)] for t in range(NUM_STEPS)])
    return np.mean(~np.asarray(timestep.is_first[1:]) * losses)


@pytest.mark.filterwarnings("ignore:Rlax categorical_cross_entropy will be deprecated:PendingDeprecationWarning")
@pytest.mark.parametrize("double", [False, True])
def test_the_c51_loss_equals_rlaxs_categorical_q_learning_at_every_transition(double):
    online, target, trajectory = _setup(pr.CategoricalQValues)
    q, q_target, timestep = _outputs(online, trajectory), _outputs(target, trajectory), trajectory.timestep
    loss = pr.losses.CategoricalQLoss(discount=GAMMA, double=double)

    def per_transition(t, b):
        transition = (
            q.atoms[t, b],
            q.logits[t, b],
            trajectory.policy_step.action[t, b],
            timestep.reward[t + 1, b],
            GAMMA * timestep.discount[t + 1, b],
            q_target.atoms[t + 1, b],
            q_target.logits[t + 1, b],
        )
        if double:  # the online network picks the next action
            return rlax.categorical_double_q_learning(*transition, q.q_values[t + 1, b])
        return rlax.categorical_q_learning(*transition)

    value, terms = loss(helpers.agent(online), trajectory, target_network=target)
    np.testing.assert_allclose(value, _expected_loss(per_transition, trajectory), rtol=1e-5)
    assert set(terms) == {"cross_entropy"}


@pytest.mark.parametrize("double", [False, True])
def test_the_qr_dqn_loss_equals_rlaxs_quantile_q_learning_at_every_transition(double):
    online, target, trajectory = _setup(pr.QuantileQValues)
    q, q_target, timestep = _outputs(online, trajectory), _outputs(target, trajectory), trajectory.timestep
    loss = pr.losses.QuantileQLoss(discount=GAMMA, double=double)
    num_quantiles = q.quantiles.shape[-1]
    fractions = (jnp.arange(num_quantiles) + 0.5) / num_quantiles
    selector = q if double else q_target

    def per_transition(t, b):
        # rlax lays the quantiles out as [quantile, action].
        return rlax.quantile_q_learning(
            q.quantiles[t, b].T,
            fractions,
            trajectory.policy_step.action[t, b],
            timestep.reward[t + 1, b],
            GAMMA * timestep.discount[t + 1, b],
            selector.quantiles[t + 1, b].T,
            q_target.quantiles[t + 1, b].T,
            huber_param=1.0,
        )

    value, terms = loss(helpers.agent(online), trajectory, target_network=target)
    np.testing.assert_allclose(value, _expected_loss(per_transition, trajectory), rtol=1e-5)
    assert set(terms) == {"quantile_loss"}


def test_quantile_regression_moves_quantiles_to_the_samples_quantiles():
    samples = jnp.asarray(np.random.default_rng(0).exponential(size=400), jnp.float32)
    fractions = (jnp.arange(4) + 0.5) / 4
    grad = jax.jit(jax.grad(lambda q: pr.losses.quantile_regression_loss(q, fractions, samples, None)))
    quantiles = jnp.zeros(4)
    for _ in range(3000):
        quantiles = quantiles - 0.01 * grad(quantiles)
    np.testing.assert_allclose(quantiles, np.quantile(samples, fractions), atol=0.05)


def test_distributional_outputs_value_actions_by_their_expectation():
    categorical = pr.CategoricalQValues(jnp.log(jnp.asarray([[0.5, 0.5, 0.0], [0.0, 0.2, 0.8]])), jnp.arange(3.0))
    np.testing.assert_allclose(categorical.q_values, [0.5, 1.8], rtol=1e-6)
    quantiles = pr.QuantileQValues(jnp.asarray([[1.0, 3.0], [0.0, 1.0]]))
    np.testing.assert_allclose(quantiles.q_values, [2.0, 0.5])
    step = pr.policies.Greedy()(categorical, jax.random.key(0))
    assert int(step.action) == 1


def test_a_distributional_loss_refuses_a_network_of_another_head():
    with pytest.raises(ValueError, match="reads CategoricalQValues but the network emits QValues"):
        helpers.dqn_learner(jax.random.key(0), pr.losses.CategoricalQLoss(discount=0.99)).__class__(
            helpers.q_network(jax.random.key(0)),
            pr.losses.CategoricalQLoss(discount=0.99),
            helpers.ADAM,
            epsilon=0.1,
            buffer_size=24,
            batch_size=2,
        )


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pr.networks.CategoricalQHead(4, 2, num_atoms=1, key=jax.random.key(0)), "num_atoms >= 2"),
        (lambda: pr.networks.CategoricalQHead(4, 2, v_min=1.0, v_max=1.0, key=jax.random.key(0)), "v_min < v_max"),
        (lambda: pr.networks.QuantileQHead(4, 2, num_quantiles=0, key=jax.random.key(0)), "num_quantiles"),
        (lambda: pr.losses.QuantileQLoss(discount=0.9, huber_delta=0.0), "huber_delta must be positive"),
        (lambda: pr.losses.CategoricalQLoss(discount=1.5), r"discount must lie in \[0, 1\]"),
    ],
)
def test_distributional_parts_refuse_bad_settings(make, message):
    with pytest.raises(ValueError, match=message):
        make()
