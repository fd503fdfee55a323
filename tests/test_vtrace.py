"""V-trace: the pure function against rlax and a float64 loop of the paper's definition; VTraceLoss."""

import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

import podrace as pr

from . import helpers


NUM_ACTIONS = 4
assert_close = functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-5)

VTRACE = jax.jit(pr.losses.vtrace, static_argnames="associative_scan")
RLAX_VTRACE = jax.jit(rlax.vtrace_td_error_and_advantage)
RLAX_VTRACE_ERRORS = jax.jit(rlax.vtrace)
LAMBDA_RETURNS = jax.jit(pr.losses.lambda_returns)


def _inputs(seed: int, num_steps: int, per_step_lambda: bool, *, off_policy: bool = True) -> dict[str, Any]:
    """One random trajectory with terminations (discount 0), truncations (discount 1,
    lambda 0) and, off-policy, importance ratios on both sides of 1."""
    rng = np.random.default_rng(seed)
    discount = rng.uniform(0.5, 1.0, num_steps)
    lambda_ = rng.uniform(0.0, 1.0, num_steps)
    lambda_[rng.random(num_steps) < 0.2] = 1.0
    if num_steps > 1:
        discount[num_steps // 2] = 0.0
        discount[num_steps // 2 + 1 :][:1] = 1.0
        lambda_[num_steps // 2 + 1 :][:1] = 0.0
    discount[rng.random(num_steps) < 0.15] = 0.0
    log_mu = np.log(rng.dirichlet(np.ones(NUM_ACTIONS), num_steps).max(axis=-1))
    log_pi = log_mu + rng.normal(scale=0.7, size=num_steps) if off_policy else log_mu
    inputs = dict(
        r_t=rng.normal(size=num_steps),
        discount_t=discount,
        values=rng.normal(size=num_steps + 1),
        log_pi_t=log_pi,
        log_mu_t=log_mu,
        lambda_=lambda_ if per_step_lambda else np.asarray(rng.uniform(0.3, 1.0)),
    )
    return {name: jnp.asarray(value, jnp.float32) for name, value in inputs.items()}


def np_vtrace(r_t, discount_t, values, log_pi_t, log_mu_t, lambda_, rho_bar=1.0, c_bar=1.0, pg_rho_bar=1.0):
    """Equation (1) of Espeholt et al. (2018) as written, a sum over the rest of the
    trajectory, with per-step discounts and `c_s = lambda_s * min(c_bar, rho_s)`; float64."""
    r_t, discount_t, values, log_pi_t, log_mu_t = (
        np.asarray(x, np.float64) for x in (r_t, discount_t, values, log_pi_t, log_mu_t)
    )
    num_steps = len(r_t)
    lambda_ = np.broadcast_to(np.asarray(lambda_, np.float64), (num_steps,))
    ratios = np.exp(log_pi_t - log_mu_t)
    targets = np.zeros(num_steps + 1)
    targets[num_steps] = values[num_steps]
    for s in range(num_steps):
        target, trace = values[s], 1.0
        for t in range(s, num_steps):
            delta = min(rho_bar, ratios[t]) * (r_t[t] + discount_t[t] * values[t + 1] - values[t])
            target += trace * delta
            trace *= discount_t[t] * lambda_[t] * min(c_bar, ratios[t])
        targets[s] = target
    advantages = np.zeros(num_steps)
    for s in range(num_steps):
        bootstrap = (1 - lambda_[s]) * values[s + 1] + lambda_[s] * targets[s + 1]
        advantages[s] = min(pg_rho_bar, ratios[s]) * (r_t[s] + discount_t[s] * bootstrap - values[s])
    return targets[:-1], advantages


CASES = pytest.mark.parametrize(
    ("num_steps", "per_step_lambda", "seed"),
    [(1, False, 0), (1, True, 1), (2, True, 2), (7, False, 3), (7, True, 4), (32, False, 5), (32, True, 6)],
)
# (rho_bar, pg_rho_bar): rlax truncates the traces at 1 (c_bar = 1).
RLAX_THRESHOLDS = pytest.mark.parametrize(("rho_bar", "pg_rho_bar"), [(1.0, 1.0), (0.5, 2.0), (3.0, 0.7)])


@CASES
@RLAX_THRESHOLDS
def test_vtrace_matches_rlax(num_steps, per_step_lambda, seed, rho_bar, pg_rho_bar):
    inputs = _inputs(seed, num_steps, per_step_lambda)
    targets, advantages = VTRACE(**inputs, rho_bar=rho_bar, pg_rho_bar=pg_rho_bar)
    values = inputs["values"]
    rlax_inputs = dict(
        v_tm1=values[:-1],
        v_t=values[1:],
        r_t=inputs["r_t"],
        discount_t=inputs["discount_t"],
        rho_tm1=jnp.exp(inputs["log_pi_t"] - inputs["log_mu_t"]),
        lambda_=inputs["lambda_"],
        clip_rho_threshold=rho_bar,
    )
    expected = RLAX_VTRACE(**rlax_inputs, clip_pg_rho_threshold=pg_rho_bar)
    assert_close(targets, expected.errors + values[:-1])
    assert_close(advantages, expected.pg_advantage)
    assert_close(targets - values[:-1], RLAX_VTRACE_ERRORS(**rlax_inputs))


@CASES
@pytest.mark.parametrize(("rho_bar", "c_bar", "pg_rho_bar"), [(1.0, 1.0, 1.0), (2.0, 0.5, 1.5), (0.8, 1.7, 0.6)])
def test_vtrace_matches_the_papers_definition(num_steps, per_step_lambda, seed, rho_bar, c_bar, pg_rho_bar):
    inputs = _inputs(seed, num_steps, per_step_lambda)
    thresholds = dict(rho_bar=rho_bar, c_bar=c_bar, pg_rho_bar=pg_rho_bar)
    expected_targets, expected_advantages = np_vtrace(**inputs, **thresholds)
    for associative_scan in (False, True):
        targets, advantages = VTRACE(**inputs, **thresholds, associative_scan=associative_scan)
        assert_close(targets, expected_targets)
        assert_close(advantages, expected_advantages)


@CASES
@pytest.mark.parametrize("thresholds", [{}, dict(rho_bar=5.0, c_bar=5.0, pg_rho_bar=5.0)], ids=["clip-1", "clip-5"])
def test_on_policy_vtrace_is_lambda_returns(num_steps, per_step_lambda, seed, thresholds):
    inputs = _inputs(seed, num_steps, per_step_lambda, off_policy=False)
    values = inputs["values"]
    for lambda_ in (jnp.asarray(1.0), inputs["lambda_"]):
        targets, advantages = VTRACE(**(inputs | {"lambda_": lambda_}), **thresholds)
        returns = LAMBDA_RETURNS(inputs["r_t"], inputs["discount_t"], values[1:], lambda_)
        assert_close(targets, returns)
        assert_close(advantages, returns - values[:-1])


def test_vtrace_by_hand():
    """Termination stops the trace, truncation (lambda 0) bootstraps, ratios are truncated."""
    r_t = jnp.asarray([1.0, 2.0, 3.0])
    values = jnp.asarray([5.0, 6.0, 7.0, 8.0])
    log_mu = jnp.log(jnp.asarray([0.5, 0.5, 0.5]))
    log_pi = jnp.log(jnp.asarray([1.0, 0.25, 0.5]))  # ratios 2, 0.5, 1
    # Termination at step 1: v_1 = 6 + 0.5 * (2 - 6) = 4.
    targets, advantages = VTRACE(r_t, jnp.asarray([0.9, 0.0, 0.9]), values, log_pi, log_mu, 1.0)
    # v_0 = 5 + 1 * (1 + 0.9 * 6 - 5) + 0.9 * 1 * (4 - 6) = 4.6 (rho and c truncated at 1).
    np.testing.assert_allclose(targets[:2], [4.6, 4.0], rtol=1e-6)
    np.testing.assert_allclose(advantages[:2], [1 + 0.9 * 4.0 - 5.0, 0.5 * (2.0 - 6.0)], rtol=1e-6)
    # Truncation at step 1: v_1 = 6 + 0.5 * (2 + 7 - 6) = 7.5, and the trace stops there.
    targets, advantages = VTRACE(
        r_t, jnp.ones(3), values, log_pi, log_mu, jnp.asarray([1.0, 0.0, 1.0]), rho_bar=2.0, c_bar=0.5
    )
    # v_0 = 5 + 2 * (1 + 6 - 5) + 0.5 * (7.5 - 6) = 9.75.
    np.testing.assert_allclose(targets[:2], [9.75, 7.5], rtol=1e-6)
    np.testing.assert_allclose(advantages[1], 0.5 * (2.0 + 7.0 - 6.0), rtol=1e-6)


def test_vtrace_gradients_skip_the_importance_weights():
    inputs = _inputs(0, 9, per_step_lambda=True)
    weights = jnp.linspace(-1.0, 1.0, 9)

    def objective(inputs):
        targets, advantages = pr.losses.vtrace(**inputs, rho_bar=1.5, c_bar=0.9)
        return jnp.sum(weights * (targets + advantages))

    grads = jax.jit(jax.grad(objective))(inputs)
    np.testing.assert_array_equal(grads["log_pi_t"], 0.0)
    np.testing.assert_array_equal(grads["log_mu_t"], 0.0)
    assert float(jnp.max(jnp.abs(grads["values"]))) > 0
    helpers.assert_all_finite(grads)


def test_vtrace_vmap_equals_loop():
    batch = [_inputs(seed, 7, per_step_lambda=True) for seed in range(3)]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *batch)
    vmapped = jax.jit(jax.vmap(lambda inputs: pr.losses.vtrace(**inputs, c_bar=0.7)))(stacked)
    looped = helpers.stack([VTRACE(**inputs, c_bar=0.7) for inputs in batch])
    helpers.assert_trees_close(vmapped, looped, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------
# VTraceLoss.
# --------------------------------------------------------------------------------------


NUM_STEPS, BATCH = 7, 3
LOSS = helpers.Compiled(lambda loss, network, trajectory: loss(helpers.agent(network), trajectory))
GRADS = helpers.Compiled(
    lambda loss, network, trajectory: eqx.filter_grad(lambda n: loss(helpers.agent(n), trajectory)[0])(network)
)


def _log_pi(network, trajectory: pr.Trajectory) -> jax.Array:
    """The network's log-probabilities of a batch's actions, `[T, B]`."""
    agent = helpers.agent(network)

    def one(timestep, policy_step, carry):
        outputs = agent.outputs(pr.Trajectory(timestep, policy_step, carry))
        return agent.log_prob_and_entropy(outputs, policy_step.action)[0]

    log_pi = eqx.filter_vmap(one, in_axes=(1, 1, 0))(trajectory.timestep, trajectory.policy_step, trajectory.carry)
    return log_pi.T


LOG_PI = helpers.Compiled(_log_pi)


def _with_behaviour(trajectory: pr.Trajectory, log_mu: jax.Array) -> pr.Trajectory:
    return eqx.tree_at(lambda t: t.policy_step.log_prob, trajectory, log_mu)


def _off_policy_reference(loss: pr.losses.VTraceLoss, network, trajectory: pr.Trajectory) -> dict[str, float]:
    """The terms by float64 loops over each trajectory of the batch (a feed-forward logit network)."""
    outputs = jax.vmap(lambda o: network(o, ())[0])(trajectory.timestep.observation.reshape(-1, *helpers.OBS_SHAPE))
    logits = np.asarray(outputs.logits, np.float64).reshape(NUM_STEPS + 1, BATCH, -1)
    log_probs = logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))
    values = np.asarray(outputs.value, np.float64).reshape(NUM_STEPS + 1, BATCH)
    step = jax.tree.map(lambda x: np.asarray(x, np.float64), trajectory.timestep)
    actions, log_mu = np.asarray(trajectory.policy_step.action), np.asarray(trajectory.policy_step.log_prob)
    terms = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0}
    for b in range(BATCH):
        log_pi = log_probs[np.arange(NUM_STEPS), b, actions[:, b]]
        is_last = np.maximum(step.terminated[1:, b], step.truncated[1:, b])
        targets, advantages = np_vtrace(
            step.reward[1:, b],
            float(loss.discount) * step.discount[1:, b],
            values[:, b],
            log_pi,
            log_mu[:, b],
            float(loss.lambda_) * (1.0 - is_last),
            float(loss.rho_bar),
            float(loss.c_bar),
            float(loss.pg_rho_bar),
        )
        mask = 1.0 - step.is_first[1:, b]  # the reset step is no transition
        terms["policy_loss"] -= np.sum(mask * advantages * log_pi)
        terms["value_loss"] += 0.5 * np.sum(mask * (targets - values[:-1, b]) ** 2)
        terms["entropy"] -= np.sum(mask * np.sum(np.exp(log_probs[:-1, b]) * log_probs[:-1, b], axis=-1))
    return {name: value / (NUM_STEPS * BATCH) for name, value in terms.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "kwargs",
    [dict(discount=0.99, lambda_=0.95), dict(discount=0.9, lambda_=0.5, rho_bar=2.0, c_bar=0.5, pg_rho_bar=1.5)],
    ids=["defaults", "thresholds"],
)
def test_vtrace_loss_terms_match_a_float64_loop(seed, kwargs):
    loss = pr.losses.VTraceLoss(**kwargs, value_coefficient=0.3, entropy_coefficient=0.02)
    network = helpers.logit_network(jax.random.key(seed), with_value=True)
    trajectory = helpers.random_trajectory(seed, NUM_STEPS, BATCH)
    # Behaviour probabilities around the learnt policy's (1/3): ratios on both sides of 1.
    log_mu = jnp.log(jnp.asarray(np.random.default_rng(seed).uniform(0.1, 0.9, (NUM_STEPS, BATCH)), jnp.float32))
    trajectory = _with_behaviour(trajectory, log_mu)
    value, terms = LOSS(loss, network, trajectory)
    expected = _off_policy_reference(loss, network, trajectory)
    for name, term in expected.items():
        np.testing.assert_allclose(terms[name], term, rtol=1e-4, atol=1e-6, err_msg=name)
    combined = expected["policy_loss"] + 0.3 * expected["value_loss"] - 0.02 * expected["entropy"]
    np.testing.assert_allclose(value, combined, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["mlp-actor-critic", "gru-actor-critic", "mlp-gaussian-with-value"])
def test_on_policy_vtrace_loss_is_a2c(name):
    network = helpers.NETWORKS[name](jax.random.key(0))
    action_size = helpers.NUM_ACTIONS if network.output_type is pr.GaussianParams else None
    carry = helpers.random_carry(network, 0, BATCH)
    trajectory = helpers.random_trajectory(0, NUM_STEPS, BATCH, action_size=action_size, carry=carry)
    trajectory = _with_behaviour(trajectory, LOG_PI(network, trajectory))
    vtrace_loss = pr.losses.VTraceLoss(discount=0.95, lambda_=0.8, c_bar=1.5, pg_rho_bar=2.0)
    a2c_loss = pr.losses.A2CLoss(discount=0.95, lambda_=0.8)
    helpers.assert_trees_close(
        LOSS(vtrace_loss, network, trajectory), LOSS(a2c_loss, network, trajectory), rtol=1e-5, atol=1e-6
    )
    helpers.assert_trees_close(
        GRADS(vtrace_loss, network, trajectory), GRADS(a2c_loss, network, trajectory), rtol=1e-4, atol=1e-6
    )


def test_vtrace_loss_checks_its_coefficients_and_needs_a_value_head():
    for kwargs, message in [
        (dict(discount=1.5), r"VTraceLoss: discount must lie in \[0, 1\]"),
        (dict(discount=0.9, lambda_=-0.1), r"VTraceLoss: lambda_ must lie in \[0, 1\]"),
        (dict(discount=0.9, lambda_=1.1), r"VTraceLoss: lambda_ must lie in \[0, 1\]"),
        (dict(discount=0.9, rho_bar=0.0), "VTraceLoss: rho_bar must be positive"),
        (dict(discount=0.9, c_bar=-1.0), "VTraceLoss: c_bar must be positive"),
        (dict(discount=0.9, pg_rho_bar=float("nan")), "VTraceLoss: pg_rho_bar must be positive"),
        (dict(discount=0.9, value_coefficient=-1.0), "VTraceLoss: value_coefficient must be non-negative"),
        (dict(discount=0.9, entropy_coefficient=-0.01), "VTraceLoss: entropy_coefficient must be non-negative"),
    ]:
        with pytest.raises(ValueError, match=message):
            pr.losses.VTraceLoss(**kwargs)
    with pytest.raises(ValueError, match=r"VTraceLoss needs state values.*with_value=True"):
        pr.losses.VTraceLoss(discount=0.9)(
            helpers.agent(helpers.logit_network(jax.random.key(0))), helpers.random_trajectory(0, 3, 2)
        )
