"""The pure functions of search agents' losses (AlphaZero, MuZero): value transforms,
two-hot values, the search-policy cross-entropy and the value losses, against float64
NumPy written from the papers' equations (and rlax), in float32 and under float64."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

import podrace as pr

from . import helpers


assert_close = functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-5)
# float64 JAX against float64 NumPy: the same equations, up to rounding.
assert_close_64 = functools.partial(np.testing.assert_allclose, rtol=1e-12, atol=1e-12)
EPSILONS = pytest.mark.parametrize("epsilon", [1e-3, 0.1, 0.0])
MUZERO_SUPPORT = np.linspace(-300.0, 300.0, 601)


def _values(seed: int, size: int = 200) -> np.ndarray:
    """Values from 1e-6 to 1e5 in magnitude, of both signs, with 0 and atoms exactly."""
    rng = np.random.default_rng(seed)
    magnitudes = 10.0 ** rng.uniform(-6.0, 5.0, size)
    values = rng.choice([-1.0, 1.0], size) * magnitudes
    return np.concatenate([values, [0.0, 1.0, -1.0, 3.0, 300.0, -300.0]])


# --------------------------------------------------------------------------------------
# Float64 NumPy oracles, from the papers' equations.
# --------------------------------------------------------------------------------------


def np_signed_hyperbolic(x, epsilon):
    """Pohlen et al. (2018), Proposition A.2: h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x."""
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + epsilon * x


def np_signed_parabolic(x, epsilon):
    """Pohlen et al. (2018), Proposition A.2, h^-1's closed form (for eps > 0)."""
    z = (np.sqrt(1.0 + 4.0 * epsilon * (np.abs(x) + 1.0 + epsilon)) - 1.0) / (2.0 * epsilon)
    return np.sign(x) * (z**2 - 1.0)


def np_two_hot(x, support):
    """The two atoms around each clipped scalar, weighted by closeness, one scalar at a time."""
    flat = np.clip(np.asarray(x, np.float64).reshape(-1), support[0], support[-1])
    probs = np.zeros((flat.size, support.size))
    for row, value in enumerate(flat):
        i = min(int(np.searchsorted(support, value, side="right")) - 1, support.size - 2)
        share = (value - support[i]) / (support[i + 1] - support[i])
        probs[row, i] += 1.0 - share
        probs[row, i + 1] += share
    return probs.reshape((*np.shape(x), support.size))


def np_log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def np_search_policy_cross_entropy(logits, target, mask):
    """AlphaZero's -pi^T log p, over the legal actions of each state (all where none is)."""
    losses = np.zeros(logits.shape[0])
    for row in range(logits.shape[0]):
        legal = mask[row] if mask[row].any() else np.ones_like(mask[row])
        log_p = np_log_softmax(logits[row][legal])
        losses[row] = -np.sum(target[row][legal] * log_p)
    return losses


def np_muzero_value_targets(r_t, discount_t, v_t, n):
    """MuZero's z_t = u_{t+1} + g u_{t+2} + ... + g^{n-1} u_{t+n} + g^n v_{t+n}, with each
    step's discount (0 at a termination), cut at the trajectory's end (bootstrapping from
    its last value), as a sum of products."""
    num_steps = len(r_t)
    targets = np.zeros(num_steps)
    for t in range(num_steps):
        end = min(t + n, num_steps)
        total, scale = 0.0, 1.0
        for k in range(t, end):
            total += scale * r_t[k]
            scale *= discount_t[k]
        targets[t] = total + scale * v_t[end - 1]
    return targets


# --------------------------------------------------------------------------------------
# Value transforms.
# --------------------------------------------------------------------------------------


@EPSILONS
@pytest.mark.parametrize("seed", [0, 1])
def test_signed_hyperbolic_is_pohlen_et_als_transform(epsilon, seed):
    x = _values(seed)
    actual = pr.losses.signed_hyperbolic(jnp.asarray(x, jnp.float32), epsilon=epsilon)
    np.testing.assert_allclose(actual, np_signed_hyperbolic(x, epsilon), rtol=2e-6, atol=1e-12)
    np.testing.assert_allclose(
        actual, rlax.signed_hyperbolic(jnp.asarray(x, jnp.float32), epsilon), rtol=1e-5, atol=1e-6
    )
    with jax.enable_x64(True):
        assert_close_64(pr.losses.signed_hyperbolic(jnp.asarray(x), epsilon=epsilon), np_signed_hyperbolic(x, epsilon))


@pytest.mark.parametrize("epsilon", [1e-3, 0.1])
@pytest.mark.parametrize("seed", [0, 1])
def test_signed_parabolic_is_the_closed_form_inverse(epsilon, seed):
    y = np_signed_hyperbolic(_values(seed), epsilon)
    expected = np_signed_parabolic(y, epsilon)
    actual = pr.losses.signed_parabolic(jnp.asarray(y, jnp.float32), epsilon=epsilon)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
    with jax.enable_x64(True):
        # The closed form cancels digits (in float32, rlax's is off by 6e-5 near 0, its
        # sign wrong): in float64 it keeps about 9.
        actual = pr.losses.signed_parabolic(jnp.asarray(y), epsilon=epsilon)
        np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(actual, rlax.signed_parabolic(jnp.asarray(y), epsilon), rtol=1e-9, atol=1e-12)


@EPSILONS
@pytest.mark.parametrize("seed", [0, 1])
def test_signed_parabolic_inverts_signed_hyperbolic(epsilon, seed):
    x = _values(seed)
    y = np_signed_hyperbolic(x, epsilon)
    h, h_inverse = pr.losses.signed_hyperbolic, pr.losses.signed_parabolic
    x32, y32 = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    np.testing.assert_allclose(h_inverse(h(x32, epsilon=epsilon), epsilon=epsilon), x32, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(h(h_inverse(y32, epsilon=epsilon), epsilon=epsilon), y32, rtol=1e-5, atol=1e-7)
    with jax.enable_x64(True):
        assert_close_64(h_inverse(h(jnp.asarray(x), epsilon=epsilon), epsilon=epsilon), x)
        assert_close_64(h_inverse(jnp.asarray(y), epsilon=epsilon), x)


def test_signed_parabolic_without_epsilon_is_the_square():
    y = jnp.asarray([-3.0, -0.5, 0.0, 0.25, 9.0])
    np.testing.assert_allclose(pr.losses.signed_parabolic(y, epsilon=0.0), np.sign(y) * ((np.abs(y) + 1) ** 2 - 1))


@EPSILONS
def test_transform_gradients_are_the_derivatives(epsilon):
    """h'(x) = 1 / (2 sqrt(|x| + 1)) + eps (1/2 + eps at 0); (h^-1)'(y) = 1 / h'(h^-1(y))."""
    with jax.enable_x64(True):
        x = jnp.asarray(np.concatenate([_values(0, 20), [0.0]]))
        grad_h = jax.vmap(jax.grad(lambda x: pr.losses.signed_hyperbolic(x, epsilon=epsilon)))(x)
        expected = 1.0 / (2.0 * np.sqrt(np.abs(np.asarray(x)) + 1.0)) + epsilon
        np.testing.assert_allclose(grad_h, expected, rtol=1e-10)
        y = pr.losses.signed_hyperbolic(x, epsilon=epsilon)
        grad_inverse = jax.vmap(jax.grad(lambda y: pr.losses.signed_parabolic(y, epsilon=epsilon)))(y)
        np.testing.assert_allclose(grad_inverse, 1.0 / expected, rtol=1e-9)


def test_epsilon_is_traced_and_transforms_keep_any_shape():
    traces = []

    @jax.jit
    def round_trip(x, epsilon):
        traces.append(None)
        return pr.losses.signed_parabolic(pr.losses.signed_hyperbolic(x, epsilon=epsilon), epsilon=epsilon)

    x = jnp.asarray(_values(0, 6), jnp.float32).reshape(3, 4)
    for epsilon in (1e-3, 1e-2, 0.5):
        out = round_trip(x, jnp.asarray(epsilon, jnp.float32))
        assert out.shape == (3, 4)
        np.testing.assert_allclose(out, x, rtol=1e-5, atol=1e-6)
    assert len(traces) == 1
    epsilons = jnp.asarray([0.0, 1e-3, 0.1])
    batched = jax.vmap(lambda e: pr.losses.signed_hyperbolic(x, epsilon=e))(epsilons)
    for row, epsilon in zip(batched, [0.0, 1e-3, 0.1], strict=True):
        np.testing.assert_allclose(row, np_signed_hyperbolic(np.asarray(x, np.float64), epsilon), rtol=2e-6)


# --------------------------------------------------------------------------------------
# Two-hot values.
# --------------------------------------------------------------------------------------

SUPPORTS = pytest.mark.parametrize(
    "support", [np.linspace(-300.0, 300.0, 601), np.linspace(-1.0, 1.0, 5), np.linspace(0.0, 2.0, 2)], ids=len
)


def _scalars(support, seed, size=100):
    """Inside the support, beyond its ends, and on every atom."""
    rng = np.random.default_rng(seed)
    low, high = support[0], support[-1]
    width = high - low
    inside = rng.uniform(low, high, size)
    beyond = np.concatenate([rng.uniform(high, high + width, 5), rng.uniform(low - width, low, 5)])
    return np.concatenate([inside, beyond, support[:: max(1, len(support) // 20)], [low, high]])


@SUPPORTS
@pytest.mark.parametrize("seed", [0, 1])
def test_two_hot_splits_each_scalar_between_its_neighbouring_atoms(support, seed):
    x = _scalars(support, seed)
    probs = pr.losses.two_hot(jnp.asarray(x, jnp.float32), jnp.asarray(support, jnp.float32))
    expected = np_two_hot(x, support)
    np.testing.assert_allclose(probs, expected, atol=2e-4 * (len(support) > 100) + 1e-6)
    assert np.all(np.asarray(probs) >= 0.0)
    np.testing.assert_allclose(np.sum(probs, axis=-1), 1.0, rtol=1e-6)
    assert np.all(np.count_nonzero(np.asarray(probs), axis=-1) <= 2)
    # C51's projection of a point mass at x.
    projected = jax.vmap(lambda a: pr.losses.categorical_projection(a[None], jnp.ones(1), jnp.asarray(support)))(
        jnp.asarray(x, jnp.float32)
    )
    np.testing.assert_allclose(probs, projected, atol=1e-6)
    with jax.enable_x64(True):
        assert_close_64(pr.losses.two_hot(jnp.asarray(x), jnp.asarray(support)), expected)


@SUPPORTS
@pytest.mark.parametrize("seed", [0, 1])
def test_the_expectation_of_a_two_hot_is_the_clipped_scalar(support, seed):
    x = _scalars(support, seed)
    clipped = np.clip(x, support[0], support[-1])
    support32 = jnp.asarray(support, jnp.float32)
    log_probs = jnp.log(pr.losses.two_hot(jnp.asarray(x, jnp.float32), support32))  # -inf off the two atoms
    mean = pr.losses.categorical_expectation(log_probs, support32)
    np.testing.assert_allclose(mean, clipped, rtol=1e-5, atol=1e-5 * np.abs(support).max())
    with jax.enable_x64(True):
        support64 = jnp.asarray(support)
        mean = pr.losses.categorical_expectation(jnp.log(pr.losses.two_hot(jnp.asarray(x), support64)), support64)
        assert_close_64(mean, clipped)


def test_two_hot_matches_rlax_and_keeps_leading_shapes():
    support = jnp.linspace(-10.0, 10.0, 21)
    x = jnp.asarray(_scalars(np.asarray(support), 0, size=18)[:30].reshape(5, 6), jnp.float32)
    probs = pr.losses.two_hot(x, support)
    assert probs.shape == (5, 6, 21)
    # rlax divides by the spacing plus 1e-5.
    np.testing.assert_allclose(probs, rlax.transform_to_2hot(x, -10.0, 10.0, 21), atol=1e-4)
    np.testing.assert_allclose(probs[2, 3], pr.losses.two_hot(x[2, 3], support))
    assert pr.losses.two_hot(jnp.asarray(0.5), support).shape == (21,)
    assert pr.losses.categorical_expectation(jnp.log(probs), support).shape == (5, 6)
    np.testing.assert_allclose(pr.losses.two_hot(jnp.asarray([2.25]), support)[0, 12:14], [0.75, 0.25])


def test_two_hot_needs_two_atoms():
    with pytest.raises(ValueError, match="at least 2 atoms"):
        pr.losses.two_hot(jnp.asarray(0.0), jnp.zeros(1))


@pytest.mark.parametrize("seed", [0, 1])
def test_categorical_expectation_is_the_mean_of_the_softmax(seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=3.0, size=(4, 7, 11))
    support = np.linspace(-5.0, 5.0, 11)
    probs = np.exp(np_log_softmax(logits))
    expected = np.einsum("...i,i->...", probs, support)
    assert_close(pr.losses.categorical_expectation(jnp.asarray(logits, jnp.float32), jnp.asarray(support)), expected)
    with jax.enable_x64(True):
        assert_close_64(pr.losses.categorical_expectation(jnp.asarray(logits), jnp.asarray(support)), expected)


# --------------------------------------------------------------------------------------
# The search policy's cross-entropy.
# --------------------------------------------------------------------------------------

NUM_ACTIONS = 6
ILLEGAL_LOGITS = pytest.mark.parametrize("illegal_logit", ["-inf", "lowest", "random"])


def _policy_inputs(seed, illegal_logit, num_states=9):
    """Logits, a search policy on the legal actions and a mask; one state allows nothing."""
    rng = np.random.default_rng(seed)
    mask = rng.random((num_states, NUM_ACTIONS)) < 0.6
    mask[np.arange(num_states), rng.integers(0, NUM_ACTIONS, num_states)] = True
    mask[-1] = False  # the last time step of an episode: no action is legal
    logits = rng.normal(scale=2.0, size=(num_states, NUM_ACTIONS)).astype(np.float32)
    fill = {"-inf": -np.inf, "lowest": np.finfo(np.float32).min, "random": None}[illegal_logit]
    if fill is not None:
        logits[:-1] = np.where(mask[:-1], logits[:-1], fill)
    weights = rng.dirichlet(np.ones(NUM_ACTIONS), num_states) * np.where(mask, 1.0, 0.0)
    weights[-1] = rng.dirichlet(np.ones(NUM_ACTIONS))
    weights[0] = np.where(np.arange(NUM_ACTIONS) == np.argmax(mask[0]), 1.0, 0.0)  # a one-hot target
    search_policy = (weights / weights.sum(axis=-1, keepdims=True)).astype(np.float32)
    return jnp.asarray(logits), jnp.asarray(search_policy), jnp.asarray(mask)


@ILLEGAL_LOGITS
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_search_policy_cross_entropy_is_alphazeros_policy_loss(illegal_logit, seed):
    logits, search_policy, mask = _policy_inputs(seed, illegal_logit)
    loss = pr.losses.search_policy_cross_entropy(logits, search_policy, action_mask=mask)
    x = np.asarray(logits, np.float64), np.asarray(search_policy, np.float64), np.asarray(mask)
    expected = np_search_policy_cross_entropy(*x)
    assert_close(loss, expected)
    with jax.enable_x64(True):
        loss = pr.losses.search_policy_cross_entropy(
            jnp.asarray(x[0]), jnp.asarray(x[1]), action_mask=jnp.asarray(x[2])
        )
        assert_close_64(loss, expected)
    # Without a mask: the plain cross-entropy, finite where the target has no mass on -inf.
    unmasked = pr.losses.search_policy_cross_entropy(logits[:-1], search_policy[:-1])
    if illegal_logit == "random":
        legal_everywhere = np.ones_like(x[2][:-1])
        assert_close(unmasked, np_search_policy_cross_entropy(x[0][:-1], x[1][:-1], legal_everywhere))
    else:
        assert_close(unmasked, expected[:-1])


@ILLEGAL_LOGITS
def test_search_policy_cross_entropy_gradients_are_finite_and_skip_illegal_actions(illegal_logit):
    logits, search_policy, mask = _policy_inputs(3, illegal_logit)

    def total(logits, search_policy, stop_target_gradients):
        losses = pr.losses.search_policy_cross_entropy(
            logits, search_policy, action_mask=mask, stop_target_gradients=stop_target_gradients
        )
        return jnp.sum(losses)

    grad_logits, grad_policy = jax.grad(total, argnums=(0, 1))(logits, search_policy, True)
    helpers.assert_all_finite((grad_logits, grad_policy))
    np.testing.assert_array_equal(grad_policy, 0.0)
    # d/dlogits = softmax over the legal actions - pi; 0 for the illegal ones.
    legal = np.asarray(pr.legal_actions(mask))
    masked = np.where(legal, np.asarray(logits, np.float64), -np.inf)
    expected = np.where(legal, np.exp(np_log_softmax(masked)) - np.asarray(search_policy, np.float64), 0.0)
    np.testing.assert_allclose(grad_logits, expected, atol=1e-6)
    # Without a mask, -inf logits where the target has no mass: finite too.
    grad_unmasked = jax.grad(lambda logits: jnp.sum(pr.losses.search_policy_cross_entropy(logits, search_policy[:-1])))(
        logits[:-1]
    )
    helpers.assert_all_finite(grad_unmasked)
    if illegal_logit != "random":
        np.testing.assert_allclose(grad_unmasked, expected[:-1], atol=1e-6)
    grad_policy = jax.grad(total, argnums=1)(logits, search_policy, False)
    helpers.assert_all_finite(grad_policy)
    np.testing.assert_allclose(grad_policy, np.where(legal, -np_log_softmax(masked), 0.0), rtol=1e-5, atol=1e-5)


def test_search_policy_mass_on_illegal_actions_is_dropped():
    logits = jnp.asarray([1.0, -jnp.inf, 0.5, 2.0])
    mask = jnp.asarray([True, False, True, True])
    leaky = jnp.asarray([0.2, 0.3, 0.1, 0.4])
    loss = pr.losses.search_policy_cross_entropy(logits, leaky, action_mask=mask)
    log_p = np_log_softmax(np.asarray([1.0, 0.5, 2.0]))
    np.testing.assert_allclose(loss, -np.sum(np.asarray([0.2, 0.1, 0.4]) * log_p), rtol=1e-6)
    assert loss.shape == ()


@pytest.mark.parametrize("search", ["gumbel_muzero_policy", "muzero_policy"])
def test_search_policy_cross_entropy_learns_mctxs_action_weights_on_legal_actions(search):
    """mctx's improved policy (Gumbel MuZero's completed-Q softmax, or MuZero's visit
    counts) as the target, with invalid actions: finite, and the gradient step lowers it."""
    mctx = pytest.importorskip("mctx")
    batch, num_actions = 3, 5
    key_logits, key_rewards, key_search = jax.random.split(jax.random.key(0), 3)
    logits = jax.random.normal(key_logits, (batch, num_actions))
    rewards = jax.random.normal(key_rewards, (num_actions,))
    mask = jnp.asarray([[True, False, True, True, False], [False, False, True, False, False], [True] * 5])

    def recurrent_fn(params, key, action, embedding):
        del params, key
        output = mctx.RecurrentFnOutput(
            reward=rewards[action],
            discount=jnp.full(action.shape, 0.9),
            prior_logits=jnp.zeros((action.shape[0], num_actions)),
            value=jnp.zeros(action.shape),
        )
        return output, embedding

    root = mctx.RootFnOutput(prior_logits=pr.exclude_illegal(logits, mask), value=jnp.zeros(batch), embedding=())
    policy = getattr(mctx, search)(
        (), key_search, root, recurrent_fn, num_simulations=8, invalid_actions=~mask, max_depth=2
    )
    target = policy.action_weights
    np.testing.assert_array_equal(np.where(np.asarray(mask), 0.0, target), 0.0)

    def loss(logits):
        return jnp.mean(pr.losses.search_policy_cross_entropy(logits, target, action_mask=mask))

    illegal_as_inf = jnp.where(mask, logits, -jnp.inf)
    value, grad = jax.value_and_grad(loss)(illegal_as_inf)
    helpers.assert_all_finite((value, grad))
    np.testing.assert_array_equal(np.where(np.asarray(mask), 0.0, grad), 0.0)
    assert loss(jnp.where(mask, logits - 0.5 * grad, -jnp.inf)) < value


# --------------------------------------------------------------------------------------
# Value and reward losses.
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_scalar_value_loss_is_the_squared_error_without_a_half(seed):
    rng = np.random.default_rng(seed)
    v_t, target_t = rng.normal(size=(2, 3, 5))
    loss = pr.losses.scalar_value_loss(jnp.asarray(v_t, jnp.float32), jnp.asarray(target_t, jnp.float32))
    assert_close(loss, (target_t - v_t) ** 2)
    assert_close(loss, 2.0 * rlax.l2_loss(jnp.asarray(v_t, jnp.float32), jnp.asarray(target_t, jnp.float32)))
    with jax.enable_x64(True):
        assert_close_64(pr.losses.scalar_value_loss(jnp.asarray(v_t), jnp.asarray(target_t)), (target_t - v_t) ** 2)

    def total(v_t, target_t, stop):
        return jnp.sum(pr.losses.scalar_value_loss(v_t, target_t, stop_target_gradients=stop))

    v32, t32 = jnp.asarray(v_t, jnp.float32), jnp.asarray(target_t, jnp.float32)
    grad_v, grad_target = jax.grad(total, argnums=(0, 1))(v32, t32, True)
    assert_close(grad_v, 2.0 * (v_t - target_t))
    np.testing.assert_array_equal(grad_target, 0.0)
    assert_close(jax.grad(total, argnums=1)(v32, t32, False), 2.0 * (target_t - v_t))


def _categorical_value_inputs(seed, num_atoms=601, size=(7, 3)):
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=2.0, size=(*size, num_atoms))
    targets = rng.choice([-1.0, 1.0], size) * 10.0 ** rng.uniform(-3.0, 5.5, size)  # some beyond 300 after h
    return logits, targets


@pytest.mark.parametrize("epsilon", [1e-3, 0.1])
@pytest.mark.parametrize("seed", [0, 1])
def test_categorical_value_loss_is_muzeros_cross_entropy(epsilon, seed):
    logits, targets = _categorical_value_inputs(seed)
    expected_probs = np_two_hot(np_signed_hyperbolic(targets, epsilon), MUZERO_SUPPORT)
    expected = -np.sum(expected_probs * np_log_softmax(logits), axis=-1)
    loss = pr.losses.categorical_value_loss(
        jnp.asarray(logits, jnp.float32),
        jnp.asarray(targets, jnp.float32),
        jnp.asarray(MUZERO_SUPPORT),
        epsilon=epsilon,
    )
    assert loss.shape == targets.shape
    np.testing.assert_allclose(loss, expected, rtol=1e-5, atol=1e-4)
    with jax.enable_x64(True):
        loss = pr.losses.categorical_value_loss(
            jnp.asarray(logits), jnp.asarray(targets), jnp.asarray(MUZERO_SUPPORT), epsilon=epsilon
        )
        assert_close_64(loss, expected)
    # One state, unbatched.
    single = pr.losses.categorical_value_loss(
        jnp.asarray(logits[1, 2]), jnp.asarray(targets[1, 2]), jnp.asarray(MUZERO_SUPPORT), epsilon=epsilon
    )
    np.testing.assert_allclose(single, expected[1, 2], rtol=1e-5, atol=1e-4)


def test_categorical_value_loss_gradients_and_its_minimiser():
    logits, targets = _categorical_value_inputs(2, num_atoms=21, size=(5,))
    targets = targets / 1e4  # inside the support -10..10 after the transform, mostly
    support = jnp.linspace(-10.0, 10.0, 21)
    logits32, targets32 = jnp.asarray(logits, jnp.float32), jnp.asarray(targets, jnp.float32)

    def total(logits, targets, stop):
        return jnp.sum(pr.losses.categorical_value_loss(logits, targets, support, stop_target_gradients=stop))

    grad_logits, grad_targets = jax.grad(total, argnums=(0, 1))(logits32, targets32, True)
    probs = np_two_hot(np_signed_hyperbolic(targets, 1e-3), np.asarray(support, np.float64))
    assert_close(grad_logits, np.exp(np_log_softmax(logits)) - probs)
    np.testing.assert_array_equal(grad_targets, 0.0)
    helpers.assert_all_finite(jax.grad(total, argnums=1)(logits32, targets32, False))
    # At the target's own logits (-inf off its two atoms) the loss is its entropy, finite
    # with finite gradients, and the head's prediction is the target itself.
    own = jnp.log(pr.losses.two_hot(pr.losses.signed_hyperbolic(targets32), support))
    loss = pr.losses.categorical_value_loss(own, targets32, support)
    assert_close(loss, -np.sum(np.where(probs > 0, probs * np.log(np.where(probs > 0, probs, 1.0)), 0.0), axis=-1))
    helpers.assert_all_finite(jax.grad(total)(own, targets32, True))
    prediction = pr.losses.signed_parabolic(pr.losses.categorical_expectation(own, support))
    clipped = np_signed_parabolic(np.clip(np_signed_hyperbolic(targets, 1e-3), -10.0, 10.0), 1e-3)
    np.testing.assert_allclose(prediction, clipped, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------------------
# Value targets: MuZero's n-step returns are the library's.
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3, 5, 10, 50])
@pytest.mark.parametrize(("num_steps", "seed"), [(1, 0), (8, 1), (33, 2)])
def test_n_step_returns_are_muzeros_value_targets(n, num_steps, seed):
    rng = np.random.default_rng(seed)
    r_t = rng.normal(size=num_steps)
    discount_t = 0.997 * (rng.random(num_steps) > 0.15)  # terminations
    v_t = rng.normal(scale=5.0, size=num_steps)
    expected = np_muzero_value_targets(r_t, discount_t, v_t, n)
    inputs = [jnp.asarray(a, jnp.float32) for a in (r_t, discount_t, v_t)]
    actual = pr.losses.n_step_bootstrapped_returns(*inputs, n=n)
    assert_close(actual, expected)
    assert_close(actual, rlax.n_step_bootstrapped_returns(*inputs, n=n))
    with jax.enable_x64(True):
        assert_close_64(
            pr.losses.n_step_bootstrapped_returns(*(jnp.asarray(a) for a in (r_t, discount_t, v_t)), n=n), expected
        )


# --------------------------------------------------------------------------------------
# vmap equals a loop; jit equals eager.
# --------------------------------------------------------------------------------------


def _batch_of_states(seed):
    logits, search_policy, mask = _policy_inputs(seed, "lowest", num_states=4)
    value_logits, targets = _categorical_value_inputs(seed, num_atoms=21, size=(4,))
    return dict(
        logits=logits,
        search_policy=search_policy,
        mask=mask,
        value_logits=jnp.asarray(value_logits, jnp.float32),
        targets=jnp.asarray(targets, jnp.float32) / 1e3,
        v=jnp.asarray(targets, jnp.float32) / 1e3 + 0.5,
    )


def _all_losses(inputs):
    support = jnp.linspace(-10.0, 10.0, 21)
    return (
        pr.losses.search_policy_cross_entropy(inputs["logits"], inputs["search_policy"], action_mask=inputs["mask"]),
        pr.losses.categorical_value_loss(inputs["value_logits"], inputs["targets"], support),
        pr.losses.scalar_value_loss(inputs["v"], inputs["targets"]),
        pr.losses.categorical_expectation(inputs["value_logits"], support),
        pr.losses.two_hot(inputs["targets"], support),
    )


def test_vmap_and_jit_equal_a_loop():
    batch = [_batch_of_states(seed) for seed in range(3)]
    looped = helpers.stack([_all_losses(inputs) for inputs in batch])
    stacked = jax.tree.map(jnp.asarray, helpers.stack(batch))
    helpers.assert_trees_close(jax.vmap(_all_losses)(stacked), looped, rtol=1e-5, atol=1e-5)
    helpers.assert_trees_close(jax.jit(jax.vmap(_all_losses))(stacked), looped, rtol=1e-5, atol=1e-5)
    # The functions take any leading shape: the whole batch at once is the same.
    helpers.assert_trees_close(_all_losses(stacked), looped, rtol=1e-5, atol=1e-5)
