"""PQN's Q(lambda) returns against a float64 loop written from the paper's equation.

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
