"""Losses: pure functions against rlax, loss modules against an rlax oracle, checks."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import rlax

import podrace as pr

from . import helpers


# --------------------------------------------------------------------------------------
# Pure functions against rlax.
# --------------------------------------------------------------------------------------


def _td_inputs(seed: int, num_steps: int, per_step_lambda: bool):
    rng = np.random.default_rng(seed)
    discount = rng.uniform(0.5, 1.0, num_steps)
    # Terminations: zero discounts sprinkled in (always one when T > 1).
    terminal = rng.random(num_steps) < 0.25
    if num_steps > 1:
        terminal[num_steps // 2] = True
    discount[terminal] = 0.0
    if per_step_lambda:
        lambda_ = rng.uniform(0.0, 1.0, num_steps)
        # Cuts (0) and full traces (1) too.
        lambda_[rng.random(num_steps) < 0.2] = 0.0
        lambda_[0] = 1.0
    else:
        lambda_ = np.asarray(rng.uniform())
    inputs = dict(
        v_tm1=rng.normal(size=num_steps),
        r_t=rng.normal(size=num_steps),
        discount_t=discount,
        v_t=rng.normal(size=num_steps),
        lambda_=lambda_,
    )
    return {name: jnp.asarray(value, jnp.float32) for name, value in inputs.items()}


CASES = pytest.mark.parametrize(
    ("num_steps", "per_step_lambda", "seed"),
    [(1, False, 0), (1, True, 1), (7, False, 2), (7, True, 3), (32, False, 4), (32, True, 5)],
)


@CASES
def test_lambda_returns_match_rlax(num_steps, per_step_lambda, seed):
    inputs = _td_inputs(seed, num_steps, per_step_lambda)
    del inputs["v_tm1"]
    actual = pr.losses.lambda_returns(**inputs)
    expected = rlax.lambda_returns(**inputs)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@CASES
def test_td_lambda_matches_rlax(num_steps, per_step_lambda, seed):
    inputs = _td_inputs(seed, num_steps, per_step_lambda)
    np.testing.assert_allclose(pr.losses.td_lambda(**inputs), rlax.td_lambda(**inputs), rtol=1e-5, atol=1e-5)


@CASES
@pytest.mark.parametrize("stop_target_gradients", [True, False])
def test_td_lambda_gradients_match_rlax(num_steps, per_step_lambda, seed, stop_target_gradients):
    inputs = _td_inputs(seed, num_steps, per_step_lambda)
    weights = jnp.linspace(0.5, 1.5, num_steps)

    def objective(td_lambda):
        def value(inputs):
            errors = td_lambda(**inputs, stop_target_gradients=stop_target_gradients)
            return jnp.sum(weights * jnp.square(errors))

        return jax.grad(value)(inputs)

    actual = objective(pr.losses.td_lambda)
    expected = objective(rlax.td_lambda)
    helpers.assert_trees_close(actual, expected, rtol=1e-4, atol=1e-5)
    if stop_target_gradients:
        for name in ("r_t", "discount_t", "v_t", "lambda_"):
            np.testing.assert_array_equal(actual[name], 0.0)
    else:
        assert float(jnp.max(jnp.abs(actual["r_t"]))) > 0


@pytest.mark.parametrize("seed", [0, 1])
def test_lambda_returns_gradients_match_rlax(seed):
    inputs = _td_inputs(seed, 9, per_step_lambda=True)
    del inputs["v_tm1"]
    weights = jnp.linspace(-1.0, 1.0, 9)

    def grads(lambda_returns):
        return jax.grad(lambda inputs: jnp.sum(weights * lambda_returns(**inputs)))(inputs)

    helpers.assert_trees_close(grads(pr.losses.lambda_returns), grads(rlax.lambda_returns), rtol=1e-4, atol=1e-5)


def test_lambda_returns_by_hand():
    returns = pr.losses.lambda_returns(
        r_t=jnp.asarray([1.0, 2.0]),
        discount_t=jnp.asarray([0.5, 0.0]),
        v_t=jnp.asarray([10.0, 20.0]),
        lambda_=0.5,
    )
    # G_1 = 2 (terminal); G_0 = 1 + 0.5 * (0.5 * 10 + 0.5 * 2) = 4.
    np.testing.assert_allclose(returns, [4.0, 2.0])
    # lambda = 0 is one-step TD; lambda = 1 with discount 1 is the sum of rewards plus the last value.
    r = jnp.asarray([1.0, 2.0, 3.0])
    v = jnp.asarray([4.0, 5.0, 6.0])
    np.testing.assert_allclose(pr.losses.lambda_returns(r, jnp.ones(3), v, 0.0), r + v)
    np.testing.assert_allclose(pr.losses.lambda_returns(r, jnp.ones(3), v, 1.0), [12.0, 11.0, 9.0])
    errors = pr.losses.td_lambda(jnp.asarray([1.0, 1.0, 1.0]), r, jnp.ones(3), v, 0.0)
    np.testing.assert_allclose(errors, r + v - 1.0)


# --------------------------------------------------------------------------------------
# Contract of every loss module.
# --------------------------------------------------------------------------------------

NUM_STEPS, BATCH = 6, 3


def _batch_loss(loss, network, trajectory):
    return loss(helpers.agent(network), trajectory)


def _trajectory_loss(loss, network, trajectory):
    return loss.trajectory_loss(helpers.agent(network), trajectory)


def _grads(loss, network, trajectory):
    return eqx.filter_grad(lambda network: loss(helpers.agent(network), trajectory)[0])(network)


def _reference(loss, network, trajectories):
    """The oracle's mean loss over a stack of trajectories `[B, T + 1]`."""
    per_trajectory = jax.vmap(
        lambda trajectory: helpers.reference_td_lambda_q_loss(
            network, trajectory, discount=loss.discount, lambda_=loss.lambda_
        )
    )(trajectories)
    return jnp.mean(per_trajectory)


def _reference_grads(loss, network, trajectories):
    return eqx.filter_grad(lambda network: _reference(loss, network, trajectories))(network)


BATCH_LOSS = helpers.Compiled(_batch_loss)
REFERENCE = helpers.Compiled(_reference)
REFERENCE_GRADS = helpers.Compiled(_reference_grads)
REFERENCE_ONE = helpers.Compiled(
    lambda loss, network, trajectory: helpers.reference_td_lambda_q_loss(
        network, trajectory, discount=loss.discount, lambda_=loss.lambda_
    )
)
TRAJECTORY_LOSS = helpers.Compiled(_trajectory_loss)
TRAJECTORY_LOSS_BATCH = helpers.Compiled(helpers.vmap_over_last(_trajectory_loss, 2))
GRADS = helpers.Compiled(_grads)


def _setup(name, seed=0):
    return helpers.LOSSES[name].setup(seed, NUM_STEPS, BATCH)


def _unbatched(trajectory):
    """`[T + 1, B]` -> a stack of B trajectories `[B, T + 1]` (carry already batch-first)."""
    swap = lambda tree: jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), tree)  # noqa: E731
    return pr.Trajectory(swap(trajectory.timestep), swap(trajectory.policy_step), trajectory.carry)


@pytest.mark.parametrize("name", helpers.LOSSES)
def test_loss_is_a_finite_scalar_with_named_terms(name):
    loss, network, trajectory = _setup(name)
    value, terms = BATCH_LOSS(loss, network, trajectory)
    assert value.shape == () and np.isfinite(float(value))
    assert terms
    for term in terms.values():
        assert term.shape == () and np.isfinite(float(term))
    if issubclass(loss.input_type, pr.AbstractActionValues):
        (term,) = terms.values()  # a Q loss has one term: the loss
        np.testing.assert_allclose(value, term, rtol=1e-6)
        assert float(value) > 0


@pytest.mark.parametrize("name", helpers.LOSSES)
def test_loss_jit_equals_eager(name):
    loss, network, trajectory = _setup(name)
    helpers.check_jit_equals_eager(BATCH_LOSS, loss, network, trajectory, rtol=1e-5)


# PPOLoss standardises advantages over the whole minibatch: not a mean of per-trajectory losses.
PER_TRAJECTORY_LOSSES = [name for name, case in helpers.LOSSES.items() if hasattr(case.make(), "trajectory_loss")]


@pytest.mark.parametrize("name", PER_TRAJECTORY_LOSSES)
def test_loss_vmap_equals_loop(name):
    loss, network, trajectory = _setup(name)
    per_trajectory = helpers.check_vmap_equals_loop(
        TRAJECTORY_LOSS, TRAJECTORY_LOSS_BATCH, (loss, network), (_unbatched(trajectory),), rtol=1e-5
    )
    # The module's batched call is the mean over the batch.
    value, terms = BATCH_LOSS(loss, network, trajectory)
    np.testing.assert_allclose(value, jnp.mean(per_trajectory[0]), rtol=1e-5)
    for name, term in terms.items():
        np.testing.assert_allclose(term, jnp.mean(per_trajectory[1][name]), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", helpers.LOSSES)
def test_loss_is_deterministic(name):
    first, second = _setup(name), _setup(name)
    helpers.assert_trees_close(BATCH_LOSS(*first), BATCH_LOSS(*second), rtol=0, atol=0)


@pytest.mark.parametrize("name", helpers.LOSSES)
def test_loss_gradients_are_finite(name):
    grads = GRADS(*_setup(name))
    helpers.assert_all_finite(grads)
    assert float(optax.tree.norm(eqx.filter(grads, eqx.is_inexact_array))) > 0


@pytest.mark.parametrize("name", helpers.LOSSES)
def test_loss_traces_once(name):
    calls = [_setup(name, seed) for seed in range(3)]
    helpers.check_traced_once(BATCH_LOSS, *calls)


def _with_target(loss, network, target_network, trajectory):
    return loss(helpers.agent(network), trajectory, target_network=target_network)


def _target_grads(loss, network, target_network, trajectory):
    """The loss and its gradient with respect to the target network (one program for both)."""
    return eqx.filter_value_and_grad(lambda target: _with_target(loss, network, target, trajectory)[0])(target_network)


WITH_TARGET = helpers.Compiled(_with_target)
TARGET_GRADS = helpers.Compiled(_target_grads)
BOOTSTRAPPING_LOSSES = [name for name in helpers.LOSSES if not name.startswith("reinforce")]


@pytest.mark.parametrize("name", BOOTSTRAPPING_LOSSES)
def test_a_loss_bootstraps_from_the_target_network_it_is_given(name):
    loss, network, trajectory = _setup(name)
    # The network itself as its target: the loss of no target network.
    helpers.assert_trees_close(
        WITH_TARGET(loss, network, network, trajectory), BATCH_LOSS(loss, network, trajectory), rtol=1e-5, atol=1e-6
    )
    # Another network's estimates change the targets, and no gradient flows into them.
    _, other, _ = _setup(name, seed=7)
    value, grads = TARGET_GRADS(loss, network, other, trajectory)
    assert not np.isclose(float(value), float(BATCH_LOSS(loss, network, trajectory)[0]))
    assert float(optax.tree.norm(eqx.filter(grads, eqx.is_inexact_array))) == 0.0


@pytest.mark.parametrize("name", [name for name in helpers.LOSSES if name.startswith("reinforce")])
def test_a_monte_carlo_loss_refuses_a_target_network(name):
    loss, network, trajectory = _setup(name)
    with pytest.raises(ValueError, match="bootstraps from no network"):
        loss(helpers.agent(network), trajectory, target_network=network)


# --------------------------------------------------------------------------------------
# TDLambdaQLoss against the rlax oracle.
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [name for name in helpers.LOSSES if name.startswith("td-lambda")])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_td_lambda_q_loss_matches_the_rlax_oracle(name, seed):
    loss, network, trajectory = _setup(name, seed)
    assert isinstance(loss, pr.losses.TDLambdaQLoss)
    trajectories = _unbatched(trajectory)
    # Terminations, truncations and resets all occur in these trajectories.
    timestep = trajectory.timestep
    for flag in (timestep.terminated, timestep.truncated, timestep.is_first[1:]):
        assert bool(jnp.any(flag))

    value, _ = BATCH_LOSS(loss, network, trajectory)
    np.testing.assert_allclose(value, REFERENCE(loss, network, trajectories), rtol=1e-5, atol=1e-7)
    helpers.assert_trees_close(
        GRADS(loss, network, trajectory), REFERENCE_GRADS(loss, network, trajectories), rtol=1e-4, atol=1e-7
    )


def _with_episode_end(trajectory, t, *, terminated):
    """One trajectory whose only episode boundary is an end at `t` and a reset at `t + 1`."""
    timestep = trajectory.timestep
    none = jnp.zeros_like(timestep.is_first)
    timestep = eqx.tree_at(
        lambda ts: (ts.is_first, ts.terminated, ts.truncated, ts.discount, ts.reward),
        timestep,
        (
            none.at[t + 1].set(True),
            none.at[t].set(terminated),
            none.at[t].set(not terminated),
            jnp.ones_like(timestep.discount).at[t].set(0.0 if terminated else 1.0),
            timestep.reward.at[t + 1].set(0.0),
        ),
    )
    return pr.Trajectory(timestep, trajectory.policy_step, trajectory.carry)


@pytest.mark.parametrize("terminated", [True, False], ids=["terminated", "truncated"])
def test_td_lambda_q_loss_at_an_episode_boundary(terminated):
    loss = pr.losses.TDLambdaQLoss(discount=0.9, lambda_=0.8)
    network = helpers.q_network(jax.random.key(0))
    trajectory = _with_episode_end(helpers.random_trajectory(1, NUM_STEPS), 2, terminated=terminated)
    value = lambda trajectory: TRAJECTORY_LOSS(loss, network, trajectory)[0]  # noqa: E731
    np.testing.assert_allclose(value(trajectory), REFERENCE_ONE(loss, network, trajectory), rtol=1e-5)
    # The reward of the reset step enters no loss.
    reward_changed = eqx.tree_at(lambda t: t.timestep.reward, trajectory, trajectory.timestep.reward.at[3].add(10.0))
    np.testing.assert_allclose(value(reward_changed), value(trajectory), rtol=1e-6)
    # The final observation is bootstrapped from after a truncation, not after a termination.
    final_changed = eqx.tree_at(
        lambda t: t.timestep.observation, trajectory, trajectory.timestep.observation.at[2].add(3.0)
    )
    if terminated:
        np.testing.assert_allclose(value(final_changed), value(trajectory), rtol=1e-6)
    else:
        assert abs(float(value(final_changed)) - float(value(trajectory))) > 1e-6


def test_transition_mask():
    trajectory = helpers.random_trajectory(0, 12)
    mask = pr.losses.transition_mask(trajectory)
    assert mask.shape == (12,) and mask.dtype == jnp.float32
    np.testing.assert_array_equal(mask, 1.0 - np.asarray(trajectory.timestep.is_first[1:], np.float32))


def test_loss_hyperparameters_vmap_without_recompiling():
    network = helpers.q_network(jax.random.key(0))
    trajectory = helpers.random_trajectory(1, NUM_STEPS, BATCH)
    lambdas = jnp.asarray([0.0, 0.5, 1.0])

    def value(lambda_):
        return pr.losses.TDLambdaQLoss(discount=0.95, lambda_=lambda_)(helpers.agent(network), trajectory)[0]

    vmapped = jax.jit(jax.vmap(value))(lambdas)
    loss = pr.losses.TDLambdaQLoss(discount=0.95, lambda_=0.0)
    looped = [
        BATCH_LOSS(eqx.tree_at(lambda loss: loss.lambda_, loss, lambda_), network, trajectory)[0] for lambda_ in lambdas
    ]
    np.testing.assert_allclose(vmapped, looped, rtol=1e-5)
    assert len(set(np.asarray(vmapped).tolist())) == 3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(discount=1.1, lambda_=0.5), r"TDLambdaQLoss: discount must lie in \[0, 1\]"),
        (dict(discount=-0.1, lambda_=0.5), r"TDLambdaQLoss: discount must lie in \[0, 1\]"),
        (dict(discount=0.9, lambda_=1.01), r"TDLambdaQLoss: lambda_ must lie in \[0, 1\]"),
        (dict(discount=0.9, lambda_=-1.0), r"TDLambdaQLoss: lambda_ must lie in \[0, 1\]"),
        (dict(discount=0.9, lambda_=float("nan")), r"TDLambdaQLoss: lambda_ must lie in \[0, 1\]"),
        (dict(discount=0.9, lambda_=jnp.asarray([0.5, 2.0])), r"TDLambdaQLoss: lambda_ must lie in \[0, 1\]"),
    ],
)
def test_td_lambda_q_loss_rejects_coefficients_outside_the_unit_interval(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pr.losses.TDLambdaQLoss(**kwargs)


def test_td_lambda_q_loss_accepts_the_bounds():
    for value in (0.0, 1.0):
        loss = pr.losses.TDLambdaQLoss(discount=value, lambda_=value)
        assert loss.discount.dtype == loss.lambda_.dtype == jnp.float32
    assert pr.losses.TDLambdaQLoss.input_type is pr.QValues
