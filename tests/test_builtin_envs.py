"""Built-in environments against their references: CartPole-v1 and Pendulum-v1 against
Gymnasium's classic-control implementations, DeepSea against gymnax's DeepSea-bsuite."""

import functools
import warnings

import equinox as eqx
import gymnasium
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr

from . import helpers


def _gymnasium(env_id: str, **kwargs) -> gymnasium.Env:
    env = gymnasium.make(env_id, **kwargs)
    env.reset(seed=0)
    return env


def _state_vector(state) -> np.ndarray:
    return np.array([np.asarray(leaf, np.float64) for leaf in jax.tree.leaves(state)])


@eqx.filter_jit
def _random_states(env, key, num_steps):
    """States visited by an auto-resetting run with random actions, and those actions."""
    auto = pr.envs.AutoReset(env)
    state, _ = auto.reset(key)

    def step(state, key):
        action_key, step_key = jax.random.split(key)
        action = env.action_space.sample(action_key)
        next_state, _ = auto.step(state, action, step_key)
        return next_state, (state.env_state, action, state.is_last)

    _, visited = jax.lax.scan(step, state, jax.random.split(key, num_steps))
    return visited


@pytest.mark.parametrize(
    ("env_id", "env", "num_states"),
    [("CartPole-v1", pr.envs.CartPole(), 400), ("Pendulum-v1", pr.envs.Pendulum(), 400)],
    ids=["cartpole", "pendulum"],
)
def test_one_step_matches_gymnasium(env_id, env, num_states):
    """From each of many visited states, one step of each action agrees with Gymnasium."""
    gym_env = _gymnasium(env_id).unwrapped  # the bare dynamics, no time limit or checks
    states, actions, after_end = _random_states(env, jax.random.key(0), num_states)
    step = helpers.Compiled(lambda env, state, action, key: env.step(state, action, key))
    compared = 0
    for i in range(num_states):
        if after_end[i]:  # the state after a terminal step is never stepped by Gymnasium
            continue
        state = helpers.index(states, i)
        action = actions[i]
        _, timestep = step(env, state, action, jax.random.key(i))
        gym_env.state = _state_vector(state)
        gym_env.steps_beyond_terminated = None  # CartPole's record of a past termination
        gym_action = int(action) if env_id.startswith("CartPole") else np.asarray(action)
        observation, reward, terminated, truncated, _ = gym_env.step(gym_action)
        np.testing.assert_allclose(timestep.observation, observation, rtol=1e-5, atol=1e-6, err_msg=f"state {i}")
        np.testing.assert_allclose(timestep.reward, reward, rtol=1e-5, atol=1e-6, err_msg=f"state {i}")
        assert bool(timestep.terminated) == terminated, i
        assert not truncated
        compared += 1
    assert compared >= num_states // 2
    assert step.num_traces == 1


def _gymnasium_episode(gym_env, initial_state, actions):
    gym_env.reset(seed=0)
    gym_env.unwrapped.state = initial_state
    observations, rewards, terminated, truncated = [], [], [], []
    for action in actions:
        observation, reward, term, trunc, _ = gym_env.step(action)
        observations.append(observation)
        rewards.append(reward)
        terminated.append(term)
        truncated.append(trunc)
        if term or trunc:
            break
    return np.array(observations), np.array(rewards), np.array(terminated), np.array(truncated)


@eqx.filter_jit
def _podrace_episode(env, key, actions):
    state, first = env.reset(key)

    def step(state, action):
        state, timestep = env.step(state, action, key)
        return state, timestep

    _, timesteps = jax.lax.scan(step, state, actions)
    return first, timesteps


@pytest.mark.parametrize("seed", range(4))
def test_cartpole_episodes_match_gymnasium(seed):
    """Whole episodes from the same initial state and actions, the time limit included."""
    max_steps = 30
    env = pr.envs.TimeLimit(pr.envs.CartPole(), max_episode_steps=max_steps)
    gym_env = _gymnasium("CartPole-v1", max_episode_steps=max_steps)
    rng = np.random.default_rng(seed)
    # Mostly balancing actions so that some episodes reach the time limit.
    actions = rng.integers(0, 2, max_steps)
    first, timesteps = _podrace_episode(env, jax.random.key(seed), jnp.asarray(actions, jnp.int32))
    initial_state = np.asarray(first.observation, np.float64)
    observations, rewards, terminated, truncated = _gymnasium_episode(gym_env, initial_state, actions)
    length = len(rewards)
    np.testing.assert_allclose(timesteps.observation[:length], observations, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(timesteps.reward[:length], rewards)
    np.testing.assert_array_equal(timesteps.terminated[:length], terminated)
    # Gymnasium flags both on a terminal step at the limit; podrace reports termination only.
    np.testing.assert_array_equal(timesteps.truncated[:length], truncated & ~terminated)
    np.testing.assert_array_equal(timesteps.discount[:length], np.where(terminated, 0.0, 1.0))
    assert terminated[-1] or truncated[-1]


def test_cartpole_truncates_at_500_and_bootstraps():
    env = pr.envs.cartpole_v1()
    # Push against the pole's lean: a simple controller that balances for 500 steps.
    state, timestep = env.reset(jax.random.key(0))

    @eqx.filter_jit
    def controlled_step(env, state, observation):
        action = (observation[2] + 0.5 * observation[3] > 0).astype(jnp.int32)
        return env.step(state, action, jax.random.key(0))

    for t in range(500):
        state, timestep = controlled_step(env, state, timestep.observation)
        if t < 499:
            assert not bool(timestep.is_last), t
    assert bool(timestep.truncated) and not bool(timestep.terminated)
    assert float(timestep.discount) == 1.0


def test_pendulum_episode_matches_gymnasium():
    env = pr.envs.pendulum_v1()
    gym_env = _gymnasium("Pendulum-v1")
    actions = np.random.default_rng(0).uniform(-2.5, 2.5, (200, 1)).astype(np.float32)  # some clipped
    first, timesteps = _podrace_episode(env, jax.random.key(0), jnp.asarray(actions))
    theta = np.arctan2(float(first.observation[1]), float(first.observation[0]))
    initial_state = np.array([theta, float(first.observation[2])])
    observations, rewards, terminated, truncated = _gymnasium_episode(gym_env, initial_state, actions)
    assert len(rewards) == 200 and truncated[-1] and not truncated[:-1].any() and not terminated.any()
    # float32 against float64 over 200 steps: agreement to a few 1e-3.
    np.testing.assert_allclose(timesteps.observation, observations, atol=5e-3)
    np.testing.assert_allclose(timesteps.reward, rewards, rtol=1e-2, atol=5e-3)
    np.testing.assert_array_equal(timesteps.truncated, truncated)
    np.testing.assert_array_equal(timesteps.discount, np.ones(200))


def test_reset_distributions_match_gymnasium():
    keys = jax.random.split(jax.random.key(0), 2000)
    cartpole = jax.vmap(lambda key: pr.envs.CartPole().reset(key)[1].observation)(keys)
    assert np.all(np.abs(cartpole) <= 0.05) and np.all(np.abs(cartpole).max(axis=0) > 0.049)
    pendulum = jax.vmap(lambda key: pr.envs.Pendulum().reset(key)[0])(keys)
    assert np.all(np.abs(pendulum.theta) <= np.pi) and np.abs(pendulum.theta).max() > 3.1
    assert np.all(np.abs(pendulum.theta_dot) <= 1.0) and np.abs(pendulum.theta_dot).max() > 0.99


def test_physics_constants_batch_with_vmap():
    lengths = jnp.array([0.25, 0.5, 1.0])
    batch = eqx.filter_vmap(lambda length: pr.envs.CartPole(pole_half_length=length))(lengths)
    state, _ = jax.vmap(pr.envs.CartPole().reset)(jax.random.split(jax.random.key(0), 3))
    action = jnp.ones((3,), jnp.int32)
    _, batched = eqx.filter_vmap(lambda env, s, a: env.step(s, a, jax.random.key(0)))(batch, state, action)
    for i, length in enumerate(lengths):
        single_state = helpers.index(state, i)
        _, single = pr.envs.CartPole(pole_half_length=length).step(single_state, action[i], jax.random.key(0))
        helpers.assert_trees_close(helpers.index(batched, i), single)
    assert len({float(o) for o in batched.observation[:, 3]}) == 3  # the length matters


# --------------------------------------------------------------------------------------
# DeepSea against gymnax's DeepSea-bsuite.
# --------------------------------------------------------------------------------------


@functools.cache
def _gymnax_deep_sea(size: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env, params = gymnax.make("DeepSea-bsuite", size=size)
    return env, params


@eqx.filter_jit
def _deep_sea_side_by_side(env, gym_env, gym_params, actions, key):
    state, first = env.reset(key)
    gym_obs, gym_state = gym_env.reset_env(key, gym_params)

    def step(carry, inputs):
        state, gym_state = carry
        action, key = inputs
        state, timestep = env.step(state, action, key)
        obs, gym_state, reward, terminated, _ = gym_env.step_env(key, gym_state, action, gym_params)
        return (state, gym_state), (timestep, obs, reward, terminated)

    keys = jax.random.split(key, actions.shape[0])
    _, (timesteps, obs, reward, terminated) = jax.lax.scan(step, (state, gym_state), (actions, keys))
    return first, gym_obs, timesteps, obs, reward, terminated


@pytest.mark.parametrize(("size", "deterministic", "seed"), [(4, True, 0), (8, True, 1), (8, False, 2), (10, False, 3)])
def test_deep_sea_matches_gymnax(size, deterministic, seed):
    gym_env, gym_params = _gymnax_deep_sea(size)
    gym_params = gym_params.replace(deterministic=deterministic)
    env = pr.envs.DeepSea(size, deterministic=deterministic)
    np.testing.assert_array_equal(env.action_mapping, gym_env.action_mapping)
    rng = np.random.default_rng(seed)
    for episode in range(20):
        # Mostly "right" so that the rewarding corner is reached in some episodes.
        right = np.asarray(env.action_mapping)
        actions = rng.integers(0, 2, size)
        if episode % 2:
            actions = right[np.arange(size), np.minimum(np.arange(size), size - 1)]
        key = jax.random.key(100 * seed + episode)
        first, gym_first, timesteps, obs, reward, terminated = _deep_sea_side_by_side(
            env, gym_env, gym_params, jnp.asarray(actions, jnp.int32), key
        )
        np.testing.assert_array_equal(first.observation, gym_first)
        np.testing.assert_array_equal(timesteps.observation, obs)
        np.testing.assert_allclose(timesteps.reward, reward, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(timesteps.terminated, terminated)
        assert bool(timesteps.terminated[-1]) and not np.any(timesteps.terminated[:-1])


def test_deep_sea_optimal_policy_earns_one_minus_cost():
    env = pr.envs.DeepSea(6)
    right = np.asarray(env.action_mapping)
    state, _ = env.reset(jax.random.key(0))
    total = 0.0
    for row in range(6):
        state, timestep = env.step(state, jnp.asarray(right[row, row]), jax.random.key(0))
        total += float(timestep.reward)
    assert total == pytest.approx(1.0 - 0.01)
    assert bool(timestep.terminated) and not np.any(np.asarray(timestep.observation))
