"""A2CLoss: its terms against a float64 NumPy computation, its checks, and learning Catch."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr

from . import helpers


NUM_STEPS, BATCH = 7, 3
LOSS = helpers.Compiled(lambda loss, network, trajectory: loss(network, trajectory))


def _reference(loss: pr.losses.A2CLoss, network, trajectory: pr.Trajectory) -> dict[str, float]:
    """The A2C terms by a float64 loop over each trajectory of the batch."""
    outputs = jax.vmap(lambda o: network(o, ())[0])(trajectory.timestep.observation.reshape(-1, *helpers.OBS_SHAPE))
    logits = np.asarray(outputs.logits, np.float64).reshape(NUM_STEPS + 1, BATCH, -1)
    values = np.asarray(outputs.value, np.float64).reshape(NUM_STEPS + 1, BATCH)
    step = jax.tree.map(lambda x: np.asarray(x, np.float64), trajectory.timestep)
    actions, behaviour = np.asarray(trajectory.policy_step.action), np.asarray(trajectory.policy_step.log_prob)
    discount, lambda_ = float(loss.discount), float(loss.lambda_)
    terms = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0}
    for b in range(BATCH):
        target = values[NUM_STEPS, b]
        for t in reversed(range(NUM_STEPS)):
            lam = lambda_ * (1.0 - float(step.terminated[t + 1, b] or step.truncated[t + 1, b]))
            bootstrap = (1 - lam) * values[t + 1, b] + lam * target
            target = step.reward[t + 1, b] + discount * step.discount[t + 1, b] * bootstrap
            if step.is_first[t + 1, b]:
                continue  # the reset step is no transition
            log_probs = logits[t, b] - np.log(np.sum(np.exp(logits[t, b])))
            log_pi = log_probs[actions[t, b]]
            weight = min(1.0, np.exp(log_pi - behaviour[t, b]))
            advantage = target - values[t, b]
            terms["policy_loss"] -= weight * advantage * log_pi
            terms["value_loss"] += 0.5 * advantage**2
            terms["entropy"] -= np.sum(np.exp(log_probs) * log_probs)
    return {name: value / (NUM_STEPS * BATCH) for name, value in terms.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("discount", "lambda_"), [(0.99, 0.95), (0.9, 0.0), (1.0, 1.0)])
def test_a2c_terms_match_a_float64_loop(seed, discount, lambda_):
    loss = pr.losses.A2CLoss(discount=discount, lambda_=lambda_, value_coefficient=0.3, entropy_coefficient=0.02)
    network = helpers.logit_network(jax.random.key(seed), with_value=True)
    trajectory = helpers.random_trajectory(seed, NUM_STEPS, BATCH)
    value, terms = LOSS(loss, network, trajectory)
    expected = _reference(loss, network, trajectory)
    for name, term in expected.items():
        np.testing.assert_allclose(terms[name], term, rtol=1e-4, atol=1e-6, err_msg=name)
    combined = expected["policy_loss"] + 0.3 * expected["value_loss"] - 0.02 * expected["entropy"]
    np.testing.assert_allclose(value, combined, rtol=1e-4, atol=1e-6)


def test_a2c_gradients_are_finite_and_reach_both_heads():
    loss = pr.losses.A2CLoss(discount=0.99)
    network = helpers.logit_network(jax.random.key(0), with_value=True)
    trajectory = helpers.random_trajectory(0, NUM_STEPS, BATCH)
    grads = jax.grad(lambda network: loss(network, trajectory)[0])(network)
    helpers.assert_all_finite(grads)
    assert float(jnp.abs(grads.head.linear.weight).sum()) > 0
    assert float(jnp.abs(grads.head.value_head.linear.weight).sum()) > 0


def test_a2c_checks_its_coefficients_and_needs_a_value_head():
    for kwargs, message in [
        (dict(discount=1.5), r"discount must lie in \[0, 1\]"),
        (dict(discount=0.9, lambda_=-0.1), r"lambda_ must lie in \[0, 1\]"),
        (dict(discount=0.9, value_coefficient=-1.0), "value_coefficient must be non-negative"),
        (dict(discount=0.9, entropy_coefficient=-0.01), "entropy_coefficient must be non-negative"),
    ]:
        with pytest.raises(ValueError, match=message):
            pr.losses.A2CLoss(**kwargs)
    with pytest.raises(ValueError, match="with_value=True"):
        pr.losses.A2CLoss(discount=0.9)(helpers.logit_network(jax.random.key(0)), helpers.random_trajectory(0, 3, 2))


def test_a2c_learns_catch():
    env = pr.envs.Catch()
    torso_key, head_key, run_key = jax.random.split(jax.random.key(0), 3)
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(env.observation_space.shape, (256,), key=torso_key),
        pr.networks.PolicyLogitHead(256, 3, with_value=True, key=head_key),
    )
    learner = pr.Learner(
        network, pr.policies.Categorical(), pr.losses.A2CLoss(discount=0.99, lambda_=0.95), optax.adam(1e-3)
    )
    pipeline = pr.Anakin(env, learner, num_envs=128, rollout_length=16)
    result = pipeline.train(pipeline.init(run_key), num_updates=500)
    last = jax.tree.map(lambda x: x[-100:], result.metrics)
    assert float(last.mean_episode_return) >= 0.9  # measured: 0.99 after 500 updates
