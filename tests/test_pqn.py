"""PQN's Q(lambda) returns against a float64 loop written from the paper's equation, and
their categorical counterpart against the same recursion on distributions.

Two widely copied implementations computed these returns wrongly at episode ends
(purejaxql issue 12, rejax issue 34); the trajectories here end episodes inside the
rollout, by termination and by truncation, and start with an episode already running.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr

from . import helpers


NUM_STEPS, BATCH = 12, 16


def _reference_returns(
    q_values: np.ndarray,
    reward: np.ndarray,
    discount: np.ndarray,
    is_first: np.ndarray,
    gamma: float,
    lambda_: float,
) -> np.ndarray:
    """Gallici et al. (2025), eq. for Q(lambda), one trajectory `[T + 1]`, in float64:
    `G_t = r_{t+1} + gamma d_{t+1} [(1 - lambda) max_a Q(s_{t+1}, a) + lambda G_{t+1}]`, where
    the recursion stops at the rollout's end and at the end of an episode (terminated: `d = 0`;
    truncated: bootstrap from `max_a Q(s_{t+1}, a)` alone). Transitions into a first step
    (resets) get 0."""
    num_steps = len(reward) - 1
    greedy = q_values.max(axis=-1)
    returns = np.zeros(num_steps, np.float64)
    for t in reversed(range(num_steps)):
        if is_first[t + 1]:
            continue  # a reset, not a transition: no loss is taken on it
        one_step = reward[t + 1] + gamma * discount[t + 1] * greedy[t + 1]
        episode_goes_on = t + 2 <= num_steps and not is_first[t + 2]
        if episode_goes_on:
            returns[t] = reward[t + 1] + gamma * discount[t + 1] * (
                (1 - lambda_) * greedy[t + 1] + lambda_ * returns[t + 1]
            )
        else:
            returns[t] = one_step
    return returns


@pytest.mark.parametrize("lambda_", [0.0, 0.65, 1.0])
def test_pqn_returns_equal_the_papers_equation_in_float64(lambda_):
    gamma = 0.99
    network = helpers.q_network(jax.random.key(0), layer_norm=True)
    trajectory = helpers.random_trajectory(0, NUM_STEPS, BATCH, episode_end_probability=0.3)
    timestep = trajectory.timestep
    is_first = np.asarray(timestep.is_first)
    assert is_first[1:].any() and np.asarray(timestep.terminated).any() and np.asarray(timestep.truncated).any()

    loss = pr.losses.PQNLoss(discount=gamma, lambda_=lambda_)
    agent = pr.Agent(network, pr.policies.Greedy())
    returns = np.asarray(eqx.filter_jit(loss.targets)(agent, trajectory))
    q_values = np.asarray(jax.vmap(jax.vmap(lambda o: network(o, ())[0].q_values))(timestep.observation), np.float64)
    mask = ~is_first[1:]
    for b in range(BATCH):
        expected = _reference_returns(
            q_values[:, b],
            np.asarray(timestep.reward[:, b], np.float64),
            np.asarray(timestep.discount[:, b], np.float64),
            is_first[:, b],
            gamma,
            lambda_,
        )
        np.testing.assert_allclose(returns[:, b][mask[:, b]], expected[mask[:, b]], rtol=1e-5, atol=1e-5)


def test_pqn_loss_regresses_the_chosen_values_onto_the_returns():
    network = helpers.q_network(jax.random.key(1))
    trajectory = helpers.random_trajectory(1, NUM_STEPS, BATCH)
    loss = pr.losses.PQNLoss(discount=0.9, lambda_=0.5)
    agent = pr.Agent(network, pr.policies.Greedy())
    returns = loss.targets(agent, trajectory)
    value, terms = loss(agent, trajectory, targets=returns)
    q_values = jax.vmap(jax.vmap(lambda o: network(o, ())[0].q_values))(trajectory.timestep.observation[:-1])
    chosen = jnp.take_along_axis(q_values, trajectory.policy_step.action[..., None], axis=-1)[..., 0]
    mask = ~trajectory.timestep.is_first[1:]
    expected = 0.5 * jnp.mean(mask * jnp.square(returns - chosen))
    np.testing.assert_allclose(value, expected, rtol=1e-6)
    np.testing.assert_allclose(terms["td_loss"], value)
    # Without targets given, the same returns are computed from the agent.
    np.testing.assert_allclose(loss(agent, trajectory)[0], value, rtol=1e-6)


def _reference_categorical_returns(
    probs: np.ndarray,
    atoms: np.ndarray,
    reward: np.ndarray,
    discount: np.ndarray,
    is_first: np.ndarray,
    gamma: float,
    lambda_: float,
) -> np.ndarray:
    """The same recursion on distributions, one trajectory, in float64: the mixture
    `(1 - lambda) p(s_{t+1}, a*) + lambda eta_{t+1}`, each atom `z` moved to
    `r_{t+1} + gamma d_{t+1} z` and its probability split between the two atoms around it
    (clipped to the support's ends), one atom at a time. `probs[t]` is the distribution
    of the greedy action at `t`."""
    num_steps, spacing = len(reward) - 1, atoms[1] - atoms[0]
    returns = np.zeros((num_steps, len(atoms)), np.float64)
    for t in reversed(range(num_steps)):
        if is_first[t + 1]:
            continue
        episode_goes_on = t + 2 <= num_steps and not is_first[t + 2]
        mixture = (1 - lambda_) * probs[t + 1] + lambda_ * returns[t + 1] if episode_goes_on else probs[t + 1]
        for z, p in zip(atoms, mixture, strict=True):
            moved = min(max(reward[t + 1] + gamma * discount[t + 1] * z, atoms[0]), atoms[-1])
            below = min(int(np.floor((moved - atoms[0]) / spacing)), len(atoms) - 1)
            above_share = (moved - atoms[below]) / spacing
            returns[t, below] += p * (1 - above_share)
            returns[t, min(below + 1, len(atoms) - 1)] += p * above_share
    return returns


def _categorical_case(lambda_: float, v_max: float):
    torso_key, head_key = jax.random.split(jax.random.key(2))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(helpers.OBS_SHAPE, (16,), layer_norm=True, key=torso_key),
        pr.networks.CategoricalQHead(16, helpers.NUM_ACTIONS, num_atoms=11, v_min=-v_max, v_max=v_max, key=head_key),
    )
    trajectory = helpers.random_trajectory(2, NUM_STEPS, BATCH, episode_end_probability=0.3)
    loss = pr.losses.CategoricalPQNLoss(discount=0.9, lambda_=lambda_)
    agent = pr.Agent(network, pr.policies.Greedy())
    outputs = jax.vmap(jax.vmap(lambda o: network(o, ())[0]))(trajectory.timestep.observation)
    return loss, agent, trajectory, outputs


@pytest.mark.parametrize("lambda_", [0.0, 0.65, 1.0])
def test_categorical_pqn_returns_equal_the_recursion_in_float64(lambda_):
    loss, agent, trajectory, outputs = _categorical_case(lambda_, v_max=2.0)  # rewards clip at the ends
    timestep = trajectory.timestep
    is_first = np.asarray(timestep.is_first)
    assert is_first[1:].any() and np.asarray(timestep.terminated).any() and np.asarray(timestep.truncated).any()
    returns = np.asarray(eqx.filter_jit(loss.targets)(agent, trajectory))
    greedy = np.argmax(np.asarray(outputs.q_values), axis=-1)
    probs = np.asarray(jax.nn.softmax(outputs.logits), np.float64)
    probs = np.take_along_axis(probs, greedy[..., None, None], axis=-2)[..., 0, :]
    atoms = np.asarray(outputs.atoms[0, 0], np.float64)
    mask = ~is_first[1:]
    for b in range(BATCH):
        expected = _reference_categorical_returns(
            probs[:, b],
            atoms,
            np.asarray(timestep.reward[:, b], np.float64),
            np.asarray(timestep.discount[:, b], np.float64),
            is_first[:, b],
            0.9,
            lambda_,
        )
        np.testing.assert_allclose(returns[:, b][mask[:, b]], expected[mask[:, b]], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lambda_", [0.0, 0.65])
def test_categorical_pqn_returns_have_the_scalar_returns_as_means(lambda_):
    """On a support wide enough that nothing is clipped, the projection keeps means: the
    targets' means are PQN's returns of the expected values."""
    loss, agent, trajectory, outputs = _categorical_case(lambda_, v_max=50.0)
    means = np.asarray(jnp.sum(loss.targets(agent, trajectory) * outputs.atoms[:-1], axis=-1))
    timestep = trajectory.timestep
    is_first = np.asarray(timestep.is_first)
    q_values = np.asarray(outputs.q_values, np.float64)
    for b in range(BATCH):
        expected = _reference_returns(
            q_values[:, b],
            np.asarray(timestep.reward[:, b], np.float64),
            np.asarray(timestep.discount[:, b], np.float64),
            is_first[:, b],
            0.9,
            lambda_,
        )
        mask = ~is_first[1:, b]
        np.testing.assert_allclose(means[:, b][mask], expected[mask], rtol=1e-4, atol=1e-4)


def test_categorical_pqn_loss_is_the_cross_entropy_to_the_targets():
    loss, agent, trajectory, outputs = _categorical_case(0.5, v_max=2.0)
    targets = loss.targets(agent, trajectory)
    value, terms = loss(agent, trajectory, targets=targets)
    action = trajectory.policy_step.action
    logits = jnp.take_along_axis(outputs.logits[:-1], action[..., None, None], axis=-2)[..., 0, :]
    cross_entropy = -jnp.sum(targets * jax.nn.log_softmax(logits), axis=-1)
    mask = ~trajectory.timestep.is_first[1:]
    np.testing.assert_allclose(value, jnp.mean(mask * cross_entropy), rtol=1e-6)
    np.testing.assert_allclose(terms["cross_entropy"], value)
    np.testing.assert_allclose(loss(agent, trajectory)[0], value, rtol=1e-6)
