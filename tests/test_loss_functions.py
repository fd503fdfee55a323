"""Pure loss functions: against rlax, against float64 NumPy loops, under vmap / jit / grad."""

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

import podrace as pr

from . import helpers


NUM_ACTIONS = 4
# float32 against rlax (float32) and against the float64 loops.
assert_close = functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-5)
assert_grads_close = functools.partial(np.testing.assert_allclose, rtol=1e-4, atol=1e-5)


def _inputs(seed: int, num_steps: int, per_step_lambda: bool = True) -> dict[str, Any]:
    """One random trajectory with terminations (discount 0) and truncations (lambda 0)."""
    rng = np.random.default_rng(seed)
    discount = rng.uniform(0.5, 1.0, num_steps)
    lambda_ = rng.uniform(0.0, 1.0, num_steps)
    lambda_[rng.random(num_steps) < 0.2] = 1.0
    if num_steps > 1:
        # A termination in the middle and a truncation (discount 1, lambda cut) after it.
        discount[num_steps // 2] = 0.0
        discount[num_steps // 2 + 1 :][:1] = 1.0
        lambda_[num_steps // 2 + 1 :][:1] = 0.0
    discount[rng.random(num_steps) < 0.15] = 0.0
    values = rng.normal(size=num_steps + 1)
    log_mu = np.log(rng.dirichlet(np.ones(NUM_ACTIONS), num_steps).max(axis=-1))
    inputs = dict(
        r_t=rng.normal(size=num_steps),
        discount_t=discount,
        lambda_=lambda_ if per_step_lambda else np.asarray(rng.uniform()),
        values=values,
        v_tm1=values[:-1],
        v_t=values[1:],
        q_tm1=rng.normal(size=(num_steps, NUM_ACTIONS)),
        q_t=rng.normal(size=(num_steps, NUM_ACTIONS)),
        q_t_selector=rng.normal(size=(num_steps, NUM_ACTIONS)),
        logits=rng.normal(size=(num_steps, NUM_ACTIONS)),
        log_pi_t=log_mu + rng.normal(scale=0.3, size=num_steps),
        log_mu_t=log_mu,
        advantages=rng.normal(size=num_steps),
        weights=rng.uniform(0.0, 1.5, num_steps) * (rng.random(num_steps) < 0.8),
    )
    arrays: dict[str, Any] = {name: jnp.asarray(value, jnp.float32) for name, value in inputs.items()}
    arrays["a_tm1"] = jnp.asarray(rng.integers(0, NUM_ACTIONS, num_steps), jnp.int32)
    return arrays


def _pick(inputs: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: inputs[name] for name in names}


def _f64(inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        name: np.asarray(value, np.float64 if value.dtype == jnp.float32 else None) for name, value in inputs.items()
    }


CASES = pytest.mark.parametrize(
    ("num_steps", "per_step_lambda", "seed"),
    [(1, False, 0), (1, True, 1), (2, True, 2), (7, False, 3), (7, True, 4), (32, False, 5), (32, True, 6)],
)
N_STEPS = pytest.mark.parametrize("n", [1, 2, 3, 5, 40])


# --------------------------------------------------------------------------------------
# Float64 NumPy oracles: explicit loops over time.
# --------------------------------------------------------------------------------------


def np_lambda_returns(r_t, discount_t, v_t, lambda_):
    lambda_ = np.broadcast_to(lambda_, r_t.shape)
    returns = np.zeros_like(r_t)
    next_return = v_t[-1]
    for t in reversed(range(len(r_t))):
        next_return = r_t[t] + discount_t[t] * ((1 - lambda_[t]) * v_t[t] + lambda_[t] * next_return)
        returns[t] = next_return
    return returns


def np_discounted_returns(r_t, discount_t, bootstrap):
    returns = np.zeros_like(r_t)
    next_return = bootstrap
    for t in reversed(range(len(r_t))):
        next_return = r_t[t] + discount_t[t] * next_return
        returns[t] = next_return
    return returns


def np_n_step_returns(r_t, discount_t, v_t, n, lambda_):
    lambda_ = np.broadcast_to(lambda_, r_t.shape)
    num_steps = len(r_t)
    returns = np.zeros_like(r_t)
    for t in range(num_steps):
        end = min(t + n, num_steps)  # bootstrap from the value at time `end`
        g = v_t[end - 1]
        for j in reversed(range(t, end)):
            g = r_t[j] + discount_t[j] * ((1 - lambda_[j]) * v_t[j] + lambda_[j] * g)
        returns[t] = g
    return returns


def np_gae(r_t, discount_t, lambda_, values):
    lambda_ = np.broadcast_to(lambda_, r_t.shape)
    advantages = np.zeros_like(r_t)
    next_advantage = 0.0
    for t in reversed(range(len(r_t))):
        delta = r_t[t] + discount_t[t] * values[t + 1] - values[t]
        next_advantage = delta + discount_t[t] * lambda_[t] * next_advantage
        advantages[t] = next_advantage
    return advantages


def np_chosen(q, actions):
    return np.asarray([q[t, a] for t, a in enumerate(actions)])


# --------------------------------------------------------------------------------------
# Returns and advantages.
# --------------------------------------------------------------------------------------


@CASES
def test_discounted_returns(num_steps, per_step_lambda, seed):
    inputs = _pick(_inputs(seed, num_steps, per_step_lambda), "r_t", "discount_t", "v_t")
    actual = pr.losses.discounted_returns(**inputs)
    assert_close(actual, rlax.discounted_returns(**inputs))
    x = _f64(inputs)
    assert_close(actual, np_discounted_returns(x["r_t"], x["discount_t"], x["v_t"][-1]))
    # Monte Carlo: a scalar bootstrap value of zero.
    r_t, discount_t = inputs["r_t"], inputs["discount_t"]
    monte_carlo = pr.losses.discounted_returns(r_t, discount_t, jnp.zeros(()))
    np.testing.assert_allclose(
        monte_carlo, rlax.discounted_returns(r_t, discount_t, jnp.zeros(())), rtol=1e-5, atol=1e-5
    )
    assert_close(monte_carlo, np_discounted_returns(x["r_t"], x["discount_t"], 0.0))
    np.testing.assert_array_equal(pr.losses.discounted_returns(r_t, discount_t, 0.0), monte_carlo)


LONG_CASES = pytest.mark.parametrize(("num_steps", "seed"), [(1, 0), (2, 1), (7, 2), (32, 3), (129, 4)])


@LONG_CASES
def test_associative_scans_match_the_float64_loops(num_steps, seed):
    inputs = _inputs(seed, num_steps)
    x = _f64(inputs)
    r_t, discount_t, lambda_, values = (inputs[name] for name in ("r_t", "discount_t", "lambda_", "values"))
    for associative_scan in (False, True):
        assert_close(
            pr.losses.discounted_returns(r_t, discount_t, values[1:], associative_scan=associative_scan),
            np_discounted_returns(x["r_t"], x["discount_t"], x["values"][-1]),
        )
        assert_close(
            pr.losses.lambda_returns(r_t, discount_t, values[1:], lambda_, associative_scan=associative_scan),
            np_lambda_returns(x["r_t"], x["discount_t"], x["v_t"], x["lambda_"]),
        )
        assert_close(
            pr.losses.generalized_advantage_estimation(
                r_t, discount_t, lambda_, values, associative_scan=associative_scan
            ),
            np_gae(x["r_t"], x["discount_t"], x["lambda_"], x["values"]),
        )
    # Under jit and vmap, with its gradient: the same as the sequential scan.
    batch = jax.tree.map(lambda x: jnp.stack([x, 0.5 * x]), (r_t, discount_t, lambda_, values))

    def gae(associative_scan):
        def total(values, r_t, discount_t, lambda_):
            advantages = pr.losses.generalized_advantage_estimation(
                r_t, discount_t, lambda_, values, associative_scan=associative_scan
            )
            return jnp.sum(advantages), advantages

        return jax.jit(jax.vmap(jax.grad(total, has_aux=True)))(batch[3], *batch[:3])

    helpers.assert_trees_close(gae(True), gae(False), rtol=1e-5, atol=1e-5)


@CASES
@N_STEPS
def test_n_step_bootstrapped_returns(num_steps, per_step_lambda, seed, n):
    inputs = _pick(_inputs(seed, num_steps, per_step_lambda), "r_t", "discount_t", "v_t", "lambda_")
    actual = pr.losses.n_step_bootstrapped_returns(**inputs, n=n)
    rlax_inputs = dict(inputs, lambda_t=inputs.pop("lambda_"))
    assert_close(actual, rlax.n_step_bootstrapped_returns(**rlax_inputs, n=n))
    x = _f64(inputs | {"lambda_": rlax_inputs["lambda_t"]})
    expected = np_n_step_returns(x["r_t"], x["discount_t"], x["v_t"], n, x["lambda_"])
    assert_close(actual, expected)


@CASES
def test_n_step_returns_with_long_horizon_are_lambda_returns(num_steps, per_step_lambda, seed):
    inputs = _pick(_inputs(seed, num_steps, per_step_lambda), "r_t", "discount_t", "v_t", "lambda_")
    long = pr.losses.n_step_bootstrapped_returns(**inputs, n=num_steps)
    assert_close(long, pr.losses.lambda_returns(**inputs))
    one_step = pr.losses.n_step_bootstrapped_returns(**inputs, n=1)
    assert_close(one_step, inputs["r_t"] + inputs["discount_t"] * inputs["v_t"])


def test_n_step_returns_by_hand():
    r_t = jnp.asarray([1.0, 2.0, 3.0, 4.0])
    discount_t = jnp.asarray([0.5, 0.5, 0.0, 0.5])
    v_t = jnp.asarray([10.0, 20.0, 30.0, 40.0])
    # G_0 = 1 + 0.5 * (2 + 0.5 * 20); G_1 = 2 + 0.5 * 3 (terminal); G_2 = 3; G_3 = 4 + 0.5 * 40.
    np.testing.assert_allclose(pr.losses.n_step_bootstrapped_returns(r_t, discount_t, v_t, n=2), [7.0, 3.5, 3.0, 24.0])
    with pytest.raises(ValueError, match="n >= 1"):
        pr.losses.n_step_bootstrapped_returns(r_t, discount_t, v_t, n=0)


@CASES
def test_generalized_advantage_estimation(num_steps, per_step_lambda, seed):
    inputs = _pick(_inputs(seed, num_steps, per_step_lambda), "r_t", "discount_t", "lambda_", "values")
    actual = pr.losses.generalized_advantage_estimation(**inputs)
    expected = rlax.truncated_generalized_advantage_estimation(**inputs)
    assert_close(actual, expected)
    x = _f64(inputs)
    assert_close(actual, np_gae(**x))
    # The advantages are the TD(lambda) errors of the same values.
    td_errors = pr.losses.td_lambda(
        inputs["values"][:-1], inputs["r_t"], inputs["discount_t"], inputs["values"][1:], inputs["lambda_"]
    )
    assert_close(actual, td_errors)


def test_termination_and_truncation_conventions():
    """Discount 0 ends the episode; discount 1 with lambda 0 bootstraps from the next value."""
    r_t = jnp.asarray([1.0, 2.0, 3.0])
    values = jnp.asarray([5.0, 6.0, 7.0, 8.0])
    v_t = values[1:]
    terminated = jnp.asarray([0.9, 0.0, 0.9])
    truncated = jnp.asarray([0.9, 1.0, 0.9])
    cut = jnp.asarray([1.0, 0.0, 1.0])
    for returns in (
        pr.losses.lambda_returns(r_t, terminated, v_t, 1.0),
        pr.losses.n_step_bootstrapped_returns(r_t, terminated, v_t, n=3),
        pr.losses.discounted_returns(r_t, terminated, v_t),
    ):
        np.testing.assert_allclose(returns[:2], [1.0 + 0.9 * 2.0, 2.0])
    for returns in (
        pr.losses.lambda_returns(r_t, truncated, v_t, cut),
        pr.losses.n_step_bootstrapped_returns(r_t, truncated, v_t, n=3, lambda_=cut),
    ):
        np.testing.assert_allclose(returns[:2], [1.0 + 0.9 * (2.0 + 7.0), 2.0 + 7.0])
    advantages = pr.losses.generalized_advantage_estimation(r_t, terminated, 1.0, values)
    np.testing.assert_allclose(advantages[1], 2.0 - 6.0)
    advantages = pr.losses.generalized_advantage_estimation(r_t, truncated, cut, values)
    np.testing.assert_allclose(advantages[1], 2.0 + 7.0 - 6.0)
    np.testing.assert_allclose(advantages[0], 1.0 + 0.9 * 6.0 - 5.0 + 0.9 * advantages[1], rtol=1e-6)


# --------------------------------------------------------------------------------------
# Q-learning family.
# --------------------------------------------------------------------------------------


@CASES
def test_q_learning(num_steps, per_step_lambda, seed):
    inputs = _pick(_inputs(seed, num_steps, per_step_lambda), "q_tm1", "a_tm1", "r_t", "discount_t", "q_t")
    actual = jax.vmap(pr.losses.q_learning)(**inputs)
    assert_close(actual, jax.vmap(rlax.q_learning)(**inputs))
    x = _f64(inputs)
    expected = x["r_t"] + x["discount_t"] * x["q_t"].max(axis=-1) - np_chosen(x["q_tm1"], x["a_tm1"])
    assert_close(actual, expected)


@CASES
def test_double_q_learning(num_steps, per_step_lambda, seed):
    inputs = _inputs(seed, num_steps, per_step_lambda)
    inputs = _pick(inputs, "q_tm1", "a_tm1", "r_t", "discount_t", "q_t_selector") | {"q_t_value": inputs["q_t"]}
    actual = jax.vmap(pr.losses.double_q_learning)(**inputs)
    assert_close(actual, jax.vmap(rlax.double_q_learning)(**inputs))
    x = _f64(inputs)
    bootstrap = np_chosen(x["q_t_value"], x["q_t_selector"].argmax(axis=-1))
    expected = x["r_t"] + x["discount_t"] * bootstrap - np_chosen(x["q_tm1"], x["a_tm1"])
    assert_close(actual, expected)


def test_q_learning_by_hand():
    q_tm1 = jnp.asarray([1.0, 2.0, 3.0])
    q_t = jnp.asarray([4.0, 6.0, 5.0])
    q_selector = jnp.asarray([0.0, 0.0, 1.0])
    np.testing.assert_allclose(pr.losses.q_learning(q_tm1, 0, 1.0, 0.5, q_t), 1.0 + 3.0 - 1.0)
    np.testing.assert_allclose(pr.losses.q_learning(q_tm1, 2, 1.0, 0.0, q_t), 1.0 - 3.0)
    np.testing.assert_allclose(pr.losses.double_q_learning(q_tm1, 1, 1.0, 0.5, q_t, q_selector), 1.0 + 2.5 - 2.0)


@CASES
@N_STEPS
def test_n_step_q_learning(num_steps, per_step_lambda, seed, n):
    inputs = _pick(_inputs(seed, num_steps, per_step_lambda), "q_tm1", "a_tm1", "r_t", "discount_t", "q_t")
    actual = pr.losses.n_step_q_learning(**inputs, n=n)
    rlax_targets = rlax.n_step_bootstrapped_returns(inputs["r_t"], inputs["discount_t"], jnp.max(inputs["q_t"], -1), n)
    expected = jnp.asarray(rlax_targets) - jnp.asarray(rlax.batched_index(inputs["q_tm1"], inputs["a_tm1"]))
    assert_close(actual, expected)
    x = _f64(inputs)
    targets = np_n_step_returns(x["r_t"], x["discount_t"], x["q_t"].max(axis=-1), n, 1.0)
    assert_close(actual, targets - np_chosen(x["q_tm1"], x["a_tm1"]))


@CASES
def test_n_step_q_learning_with_lambda(num_steps, per_step_lambda, seed):
    inputs = _pick(_inputs(seed, num_steps, per_step_lambda), "q_tm1", "a_tm1", "r_t", "discount_t", "q_t", "lambda_")
    actual = pr.losses.n_step_q_learning(**inputs, n=3)
    x = _f64(inputs)
    targets = np_n_step_returns(x["r_t"], x["discount_t"], x["q_t"].max(axis=-1), 3, x["lambda_"])
    assert_close(actual, targets - np_chosen(x["q_tm1"], x["a_tm1"]))


@CASES
def test_q_lambda(num_steps, per_step_lambda, seed):
    inputs = _pick(_inputs(seed, num_steps, per_step_lambda), "q_tm1", "a_tm1", "r_t", "discount_t", "q_t", "lambda_")
    actual = pr.losses.q_lambda(**inputs)
    assert_close(actual, rlax.q_lambda(**inputs))
    x = _f64(inputs)
    targets = np_lambda_returns(x["r_t"], x["discount_t"], x["q_t"].max(axis=-1), x["lambda_"])
    assert_close(actual, targets - np_chosen(x["q_tm1"], x["a_tm1"]))


# --------------------------------------------------------------------------------------
# Policy gradients.
# --------------------------------------------------------------------------------------


def _log_pi(logits, actions):
    return jnp.take_along_axis(jax.nn.log_softmax(logits), actions[:, None], axis=-1)[:, 0]


@CASES
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.filterwarnings("ignore:Rlax softmax will be deprecated:PendingDeprecationWarning")
def test_policy_gradient_loss(num_steps, per_step_lambda, seed, weighted):
    inputs = _inputs(seed, num_steps, per_step_lambda)
    logits, actions, advantages = inputs["logits"], inputs["a_tm1"], inputs["advantages"]
    weights = inputs["weights"] if weighted else None

    def ours(logits):
        return pr.losses.policy_gradient_loss(_log_pi(logits, actions), advantages, weights)

    def theirs(logits):
        w_t = jnp.ones(num_steps) if weights is None else weights
        return rlax.policy_gradient_loss(logits, actions, advantages, w_t)

    assert_close(ours(logits), theirs(logits))
    assert_grads_close(jax.grad(ours)(logits), jax.grad(theirs)(logits))
    x = _f64(inputs)
    log_pi = np_chosen(x["logits"] - np.log(np.exp(x["logits"]).sum(-1, keepdims=True)), x["a_tm1"])
    w = x["weights"] if weighted else np.ones(num_steps)
    assert_close(ours(logits), -np.mean(w * x["advantages"] * log_pi))


@CASES
@pytest.mark.parametrize("clip", [1.0, 2.0, 0.5])
def test_clamped_importance_weights(num_steps, per_step_lambda, seed, clip):
    inputs = _pick(_inputs(seed, num_steps, per_step_lambda), "log_pi_t", "log_mu_t")
    actual = pr.losses.clamped_importance_weights(**inputs, clip=clip)
    x = _f64(inputs)
    expected = np.asarray([min(clip, np.exp(p - m)) for p, m in zip(x["log_pi_t"], x["log_mu_t"], strict=True)])
    assert_close(actual, expected)
    grads = jax.grad(lambda inputs: jnp.sum(pr.losses.clamped_importance_weights(**inputs, clip=clip)))(inputs)
    for grad in grads.values():
        np.testing.assert_array_equal(grad, 0.0)


@CASES
@pytest.mark.parametrize("epsilon", [0.1, 0.2, 0.5])
def test_ppo_clipped_surrogate(num_steps, per_step_lambda, seed, epsilon):
    inputs = _pick(_inputs(seed, num_steps, per_step_lambda), "log_pi_t", "log_mu_t", "advantages")

    def ours(log_pi_t):
        return pr.losses.ppo_clipped_surrogate(log_pi_t, inputs["log_mu_t"], inputs["advantages"], epsilon)

    def theirs(log_pi_t):
        ratios = jnp.exp(log_pi_t - inputs["log_mu_t"])
        return rlax.clipped_surrogate_pg_loss(ratios, inputs["advantages"], epsilon)

    log_pi_t = inputs["log_pi_t"]
    assert_close(ours(log_pi_t), theirs(log_pi_t))
    assert_grads_close(jax.grad(ours)(log_pi_t), jax.grad(theirs)(log_pi_t))
    x = _f64(inputs)
    terms = []
    for log_pi, log_mu, advantage in zip(x["log_pi_t"], x["log_mu_t"], x["advantages"], strict=True):
        ratio = np.exp(log_pi - log_mu)
        terms.append(min(ratio * advantage, np.clip(ratio, 1 - epsilon, 1 + epsilon) * advantage))
    assert_close(ours(log_pi_t), -np.mean(terms))


def test_ppo_clipped_surrogate_weights_and_clipping():
    log_mu_t = jnp.log(jnp.asarray([0.5, 0.5, 0.5]))
    log_pi_t = jnp.log(jnp.asarray([0.9, 0.6, 0.1]))  # ratios 1.8, 1.2, 0.2
    advantages = jnp.asarray([1.0, 1.0, -1.0])
    weights = jnp.asarray([1.0, 1.0, 0.0])
    loss = pr.losses.ppo_clipped_surrogate(log_pi_t, log_mu_t, advantages, 0.5, weights)
    # min(1.8, 1.5) * 1 + min(1.2, 1.2) * 1, the third step masked out.
    np.testing.assert_allclose(loss, -(1.5 + 1.2) / 3, rtol=1e-6)
    grad = jax.grad(pr.losses.ppo_clipped_surrogate)(log_pi_t, log_mu_t, advantages, 0.5, weights)
    # Clipped and masked steps have no gradient; the unclipped one has -ratio * A / T.
    np.testing.assert_allclose(grad, [0.0, -1.2 / 3, 0.0], rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------------------
# Gradients into targets.
# --------------------------------------------------------------------------------------


def _over_time(function):
    """A single-transition TD error mapped over the time axis."""

    def over_time(*, stop_target_gradients=True, **inputs):
        return jax.vmap(functools.partial(function, stop_target_gradients=stop_target_gradients))(**inputs)

    return over_time


# name -> (function, its array inputs, its predictions, static keyword arguments)
VALUE_ERRORS = {
    "generalized_advantage_estimation": (
        pr.losses.generalized_advantage_estimation,
        ("r_t", "discount_t", "lambda_", "values"),
        "values",
        {},
    ),
    "n_step_q_learning": (
        pr.losses.n_step_q_learning,
        ("q_tm1", "a_tm1", "r_t", "discount_t", "q_t", "lambda_"),
        "q_tm1",
        {"n": 3},
    ),
    "q_lambda": (pr.losses.q_lambda, ("q_tm1", "a_tm1", "r_t", "discount_t", "q_t", "lambda_"), "q_tm1", {}),
    "q_learning": (
        _over_time(pr.losses.q_learning),
        ("q_tm1", "a_tm1", "r_t", "discount_t", "q_t"),
        "q_tm1",
        {},
    ),
    "double_q_learning": (
        _over_time(pr.losses.double_q_learning),
        ("q_tm1", "a_tm1", "r_t", "discount_t", "q_t_value", "q_t_selector"),
        "q_tm1",
        {},
    ),
}


def _value_error_inputs(name, seed, num_steps=7):
    inputs = _inputs(seed, num_steps)
    inputs["q_t_value"] = inputs["q_t"]
    return _pick(inputs, *VALUE_ERRORS[name][1])


def _value_error_grads(name, inputs, stop_target_gradients):
    function, _, _, static = VALUE_ERRORS[name]
    floats = {key: value for key, value in inputs.items() if key != "a_tm1"}
    weights = jnp.linspace(0.5, 1.5, inputs["r_t"].shape[0])

    def objective(floats):
        errors = function(**(inputs | floats), **static, stop_target_gradients=stop_target_gradients)
        return jnp.sum(weights * jnp.square(errors))

    return jax.grad(objective)(floats), weights


@pytest.mark.parametrize("name", VALUE_ERRORS)
@pytest.mark.parametrize("seed", [0, 1])
def test_no_gradient_into_targets(name, seed):
    inputs = _value_error_inputs(name, seed)
    predictions = VALUE_ERRORS[name][2]
    grads, _ = _value_error_grads(name, inputs, stop_target_gradients=True)
    for key, grad in grads.items():
        if key != predictions:
            np.testing.assert_array_equal(grad, 0.0, err_msg=key)
    # The predictions get exactly the gradient of the squared errors.
    function, _, _, static = VALUE_ERRORS[name]
    errors = function(**inputs, **static)
    weights = jnp.linspace(0.5, 1.5, inputs["r_t"].shape[0])
    if predictions == "values":
        expected = jnp.concatenate([-2 * weights * errors, jnp.zeros(1)])
    else:
        expected = jax.nn.one_hot(inputs["a_tm1"], NUM_ACTIONS) * (-2 * weights * errors)[:, None]
    assert_grads_close(grads[predictions], expected)
    grads, _ = _value_error_grads(name, inputs, stop_target_gradients=False)
    assert float(jnp.max(jnp.abs(grads["r_t"]))) > 0


RLAX_VALUE_ERRORS = {
    "generalized_advantage_estimation": rlax.truncated_generalized_advantage_estimation,
    "q_lambda": rlax.q_lambda,
    "q_learning": _over_time(rlax.q_learning),
    "double_q_learning": _over_time(rlax.double_q_learning),
}


@pytest.mark.parametrize("name", RLAX_VALUE_ERRORS)
@pytest.mark.parametrize("stop_target_gradients", [True, False])
def test_gradients_match_rlax(name, stop_target_gradients):
    inputs = _value_error_inputs(name, seed=3)
    floats = {key: value for key, value in inputs.items() if key != "a_tm1"}
    weights = jnp.linspace(0.5, 1.5, inputs["r_t"].shape[0])
    rlax_function = RLAX_VALUE_ERRORS[name]

    def objective(function, static):
        def value(floats):
            errors = function(**(inputs | floats), **static)
            return jnp.sum(weights * jnp.square(errors))

        return jax.grad(value)(floats)

    actual = objective(VALUE_ERRORS[name][0], dict(stop_target_gradients=stop_target_gradients))
    if name == "generalized_advantage_estimation" and stop_target_gradients:
        # rlax stops the whole advantage; podrace, like td_lambda, only its target.
        expected = objective(
            lambda r_t, discount_t, lambda_, values: rlax.td_lambda(values[:-1], r_t, discount_t, values[1:], lambda_),
            {},
        )
    else:
        expected = objective(rlax_function, dict(stop_target_gradients=stop_target_gradients))
    helpers.assert_trees_close(actual, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["policy_gradient_loss", "ppo_clipped_surrogate"])
def test_policy_losses_have_no_gradient_into_advantages_or_weights(name):
    inputs = _pick(_inputs(0, 7), "log_pi_t", "log_mu_t", "advantages", "weights")
    if name == "policy_gradient_loss":
        del inputs["log_mu_t"]
        function = pr.losses.policy_gradient_loss
    else:
        function = lambda **inputs: pr.losses.ppo_clipped_surrogate(**inputs, epsilon=0.2)  # noqa: E731
    grads = jax.grad(lambda inputs: function(**inputs))(inputs)
    for key, grad in grads.items():
        if key != "log_pi_t":
            np.testing.assert_array_equal(grad, 0.0, err_msg=key)
    assert float(jnp.max(jnp.abs(grads["log_pi_t"]))) > 0


# --------------------------------------------------------------------------------------
# Every function: vmap over a batch equals a loop; jit with traced hyperparameters.
# --------------------------------------------------------------------------------------

# name -> (function, its array inputs, static keyword arguments)
FUNCTIONS = {
    "lambda_returns": (pr.losses.lambda_returns, ("r_t", "discount_t", "v_t", "lambda_"), {}),
    "td_lambda": (pr.losses.td_lambda, ("v_tm1", "r_t", "discount_t", "v_t", "lambda_"), {}),
    "discounted_returns": (pr.losses.discounted_returns, ("r_t", "discount_t", "v_t"), {}),
    "n_step_bootstrapped_returns": (
        pr.losses.n_step_bootstrapped_returns,
        ("r_t", "discount_t", "v_t", "lambda_"),
        {"n": 3},
    ),
    "generalized_advantage_estimation": (
        pr.losses.generalized_advantage_estimation,
        ("r_t", "discount_t", "lambda_", "values"),
        {},
    ),
    "q_learning": (pr.losses.q_learning, ("q_tm1", "a_tm1", "r_t", "discount_t", "q_t"), {}),
    "double_q_learning": (
        pr.losses.double_q_learning,
        ("q_tm1", "a_tm1", "r_t", "discount_t", "q_t_value", "q_t_selector"),
        {},
    ),
    "n_step_q_learning": (
        pr.losses.n_step_q_learning,
        ("q_tm1", "a_tm1", "r_t", "discount_t", "q_t", "lambda_"),
        {"n": 3},
    ),
    "q_lambda": (pr.losses.q_lambda, ("q_tm1", "a_tm1", "r_t", "discount_t", "q_t", "lambda_"), {}),
    "policy_gradient_loss": (pr.losses.policy_gradient_loss, ("log_pi_t", "advantages", "weights"), {}),
    "clamped_importance_weights": (pr.losses.clamped_importance_weights, ("log_pi_t", "log_mu_t"), {}),
    "ppo_clipped_surrogate": (pr.losses.ppo_clipped_surrogate, ("log_pi_t", "log_mu_t", "advantages"), {}),
}
TRANSITION_FUNCTIONS = {"q_learning", "double_q_learning"}
SCALAR_HYPERPARAMETER = {"ppo_clipped_surrogate": "epsilon", "clamped_importance_weights": "clip"}


def _function_inputs(name, seed, num_steps=6):
    inputs = _inputs(seed, num_steps)
    inputs["q_t_value"] = inputs["q_t"]
    if name in TRANSITION_FUNCTIONS:
        inputs = jax.tree.map(lambda x: x[num_steps // 2], inputs)
    inputs = _pick(inputs, *FUNCTIONS[name][1])
    if name in SCALAR_HYPERPARAMETER:
        inputs[SCALAR_HYPERPARAMETER[name]] = jnp.asarray(0.2 + 0.1 * seed, jnp.float32)
    return inputs


@pytest.mark.parametrize("name", FUNCTIONS)
def test_vmap_equals_loop(name):
    function, _, static = FUNCTIONS[name]
    batch = [_function_inputs(name, seed) for seed in range(3)]
    batched = jax.vmap(lambda inputs: function(**inputs, **static))(helpers.stack(batch))
    looped = helpers.stack([function(**inputs, **static) for inputs in batch])
    helpers.assert_trees_close(batched, looped, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_jit_traces_hyperparameters(name):
    """Lambda, epsilon and clip are traced arrays: new values do not retrace."""
    function, _, static = FUNCTIONS[name]
    traces = []

    @jax.jit
    def jitted(inputs):
        traces.append(None)
        return function(**inputs, **static)

    for seed in range(3):
        inputs = _function_inputs(name, seed)
        if "lambda_" in inputs:
            inputs["lambda_"] = jnp.asarray(0.3 * seed, jnp.float32)
        helpers.assert_trees_close(jitted(inputs), function(**inputs, **static), rtol=1e-5, atol=1e-5)
    assert len(traces) == 1


def test_vmap_over_lambda():
    inputs = _pick(_inputs(0, 7), "r_t", "discount_t", "values")
    lambdas = jnp.asarray([0.0, 0.5, 0.95, 1.0])
    advantages = jax.vmap(lambda lambda_: pr.losses.generalized_advantage_estimation(lambda_=lambda_, **inputs))(
        lambdas
    )
    for row, lambda_ in zip(advantages, lambdas, strict=True):
        expected = pr.losses.generalized_advantage_estimation(lambda_=float(lambda_), **inputs)
        assert_close(row, expected)
