"""Policy-gradient losses (A2C, REINFORCE): terms against float64 loops, checks, learning Catch."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr

from . import helpers


NUM_STEPS, BATCH = 7, 3
LOSS = helpers.Compiled(lambda loss, network, trajectory: loss(helpers.agent(network), trajectory))


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
    grads = jax.grad(lambda network: loss(helpers.agent(network), trajectory)[0])(network)
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
        pr.losses.A2CLoss(discount=0.9)(
            helpers.agent(helpers.logit_network(jax.random.key(0))), helpers.random_trajectory(0, 3, 2)
        )


def _completed_reference(is_first: np.ndarray, is_last: np.ndarray) -> np.ndarray:
    """1 where the episode of transition t -> t + 1 ends by the trajectory's last step."""
    num_steps = len(is_first) - 1
    mask = np.zeros(num_steps)
    for t in range(num_steps):
        if is_first[t + 1]:
            continue
        s = t + 1
        while s < num_steps and not is_last[s]:
            s += 1
        mask[t] = float(is_last[s])
    return mask


@pytest.mark.parametrize("seed", range(5))
def test_completed_episode_mask_matches_a_loop(seed):
    trajectory = helpers.random_trajectory(seed, 20)
    timestep = trajectory.timestep
    expected = _completed_reference(np.asarray(timestep.is_first), np.asarray(timestep.is_last))
    np.testing.assert_array_equal(pr.losses.completed_episode_mask(trajectory), expected)
    assert 0 < expected.sum() < 20


def _reinforce_reference(loss: pr.losses.ReinforceLoss, network, trajectory: pr.Trajectory) -> dict[str, float]:
    outputs = jax.vmap(lambda o: network(o, ())[0])(trajectory.timestep.observation.reshape(-1, *helpers.OBS_SHAPE))
    logits = np.asarray(outputs.logits, np.float64).reshape(NUM_STEPS + 1, BATCH, -1)
    step = jax.tree.map(lambda x: np.asarray(x, np.float64), trajectory.timestep)
    is_first, is_last = np.asarray(trajectory.timestep.is_first), np.asarray(trajectory.timestep.is_last)
    actions, behaviour = np.asarray(trajectory.policy_step.action), np.asarray(trajectory.policy_step.log_prob)
    values = None if outputs.value is None else np.asarray(outputs.value, np.float64).reshape(NUM_STEPS + 1, BATCH)
    terms = {"policy_loss": 0.0, "entropy": 0.0} | ({"value_loss": 0.0} if loss.baseline else {})
    for b in range(BATCH):
        mask = _completed_reference(is_first[:, b], is_last[:, b])
        for t in range(NUM_STEPS):
            if not mask[t]:
                continue
            episode_return, s, scale = 0.0, t + 1, 1.0
            while True:  # the discounted return to the episode's end
                episode_return += scale * step.reward[s, b]
                if is_last[s, b]:
                    break
                scale *= float(loss.discount)
                s += 1
            log_probs = logits[t, b] - np.log(np.sum(np.exp(logits[t, b])))
            log_pi = log_probs[actions[t, b]]
            weight = min(1.0, np.exp(log_pi - behaviour[t, b]))
            advantage = episode_return - (values[t, b] if loss.baseline else 0.0)
            terms["policy_loss"] -= weight * advantage * log_pi
            terms["entropy"] -= np.sum(np.exp(log_probs) * log_probs)
            if loss.baseline:
                terms["value_loss"] += 0.5 * advantage**2
    return {name: value / (NUM_STEPS * BATCH) for name, value in terms.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("baseline", [False, True])
def test_reinforce_terms_match_a_float64_loop(seed, baseline):
    loss = pr.losses.ReinforceLoss(discount=0.9, baseline=baseline, entropy_coefficient=0.01)
    network = helpers.logit_network(jax.random.key(seed), with_value=baseline)
    trajectory = helpers.random_trajectory(seed, NUM_STEPS, BATCH)
    value, terms = LOSS(loss, network, trajectory)
    expected = _reinforce_reference(loss, network, trajectory)
    assert set(terms) == set(expected)
    for name, term in expected.items():
        np.testing.assert_allclose(terms[name], term, rtol=1e-4, atol=1e-6, err_msg=name)
    combined = expected["policy_loss"] - 0.01 * expected["entropy"] + 0.5 * expected.get("value_loss", 0.0)
    np.testing.assert_allclose(value, combined, rtol=1e-4, atol=1e-6)


def test_reinforce_checks_its_inputs():
    with pytest.raises(ValueError, match=r"discount must lie in \[0, 1\]"):
        pr.losses.ReinforceLoss(discount=-0.5)
    with pytest.raises(ValueError, match="entropy_coefficient must be non-negative"):
        pr.losses.ReinforceLoss(discount=0.9, entropy_coefficient=-1.0)
    with pytest.raises(ValueError, match="with_value=True"):
        loss = pr.losses.ReinforceLoss(discount=0.9, baseline=True)
        loss(helpers.agent(helpers.logit_network(jax.random.key(0))), helpers.random_trajectory(0, 3, 2))
