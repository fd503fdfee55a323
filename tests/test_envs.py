"""Environments: the shared contract, Catch against gymnax, wrappers and spaces."""

import functools
import typing
import warnings

import equinox as eqx
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float, Int, PRNGKeyArray

import podrace as pr

from . import helpers


# --------------------------------------------------------------------------------------
# Contract of every environment.
# --------------------------------------------------------------------------------------


NUM_STEPS = 6


def _run(env, num_steps, key):
    return helpers.run_env(env, key, num_steps)


def _step(env, state, action, key):
    return env.step(state, action, key)


RUN = helpers.Compiled(_run)
RUN_BATCH = helpers.Compiled(helpers.vmap_over_last(_run, 2))
STEP = helpers.Compiled(_step)
STEP_BATCH = helpers.Compiled(lambda env, states, actions, keys: env.step_batch(states, actions, keys))


@pytest.mark.parametrize("name", helpers.ENVS)
def test_env_reset_and_step_types(name):
    env = helpers.ENVS[name]()
    _, timesteps, actions = RUN(env, NUM_STEPS, jax.random.key(0))
    assert isinstance(timesteps, pr.TimeStep)
    assert timesteps.reward.dtype == jnp.float32 and timesteps.reward.shape == (NUM_STEPS + 1,)
    assert timesteps.discount.dtype == jnp.float32
    for flag in (timesteps.is_first, timesteps.terminated, timesteps.truncated):
        assert flag.dtype == jnp.bool_ and flag.shape == (NUM_STEPS + 1,)
    first, terminated, truncated = map(np.asarray, (timesteps.is_first, timesteps.terminated, timesteps.truncated))
    is_last = terminated | truncated
    # A reset starts the run; later first steps follow last steps, and only those.
    assert first[0]
    np.testing.assert_array_equal(first[1:], is_last[:-1] & first[1:])
    assert not np.any(terminated & truncated) and not np.any(first & is_last)
    np.testing.assert_array_equal(timesteps.discount, np.where(terminated, 0.0, 1.0))
    for t in range(NUM_STEPS + 1):
        observation = helpers.index(timesteps.observation, t)
        assert bool(env.observation_space.contains(observation)), (t, observation)
    for action in np.asarray(actions):
        assert bool(env.action_space.contains(action))


@pytest.mark.parametrize("name", helpers.ENVS)
def test_env_jit_equals_eager(name):
    env = helpers.ENVS[name]()
    helpers.check_jit_equals_eager(RUN, env, NUM_STEPS, jax.random.key(1))


@pytest.mark.parametrize("name", helpers.ENVS)
def test_env_vmap_equals_loop(name):
    env = helpers.ENVS[name]()
    keys = jax.random.split(jax.random.key(2), 3)
    helpers.check_vmap_equals_loop(RUN, RUN_BATCH, (env, NUM_STEPS), (keys,))


@pytest.mark.parametrize("name", helpers.ENVS)
def test_env_is_deterministic_under_a_key(name):
    env = helpers.ENVS[name]()
    key = jax.random.key(3)
    helpers.assert_trees_close(RUN(env, NUM_STEPS, key), RUN(env, NUM_STEPS, key), rtol=0, atol=0)
    # Different keys give different runs.
    keys = jax.random.split(jax.random.key(4), 3)
    runs = RUN_BATCH(env, NUM_STEPS, keys)
    leaves = jax.tree.leaves(runs[1].observation)
    observations = np.concatenate([np.asarray(leaf, np.float32).reshape(3, -1) for leaf in leaves], axis=1)
    assert len({row.tobytes() for row in observations}) > 1


@pytest.mark.parametrize("name", helpers.ENVS)
def test_env_step_traces_once(name):
    env = helpers.ENVS[name]()
    state, _ = env.reset(jax.random.key(4))
    calls = []
    for seed in range(3):
        action = env.action_space.sample(jax.random.key(seed))
        calls.append((env, state, action, jax.random.key(10 + seed)))
        state, _ = env.step(state, action, jax.random.key(seed))
    helpers.check_traced_once(STEP, *calls)


# --------------------------------------------------------------------------------------
# An environment as a user writes one: only what defines it.
# --------------------------------------------------------------------------------------


@typing.final
class CorridorState(eqx.Module):
    position: Int[Array, ""]


@typing.final
class Corridor(pr.envs.AbstractEnv[CorridorState]):
    """The corridor of docs/environments.md with `reset`, `step` and its two spaces only."""

    step_cost: Float[Array, ""]
    length: int = eqx.field(static=True)

    def __init__(self, step_cost=0.01, length=4):
        self.step_cost = jnp.asarray(step_cost, jnp.float32)
        self.length = length

    @property
    def observation_space(self) -> pr.Box:
        return pr.Box(0.0, 1.0, (self.length,))

    @property
    def action_space(self) -> pr.Discrete:
        return pr.Discrete(2)

    def reset(self, key: PRNGKeyArray) -> tuple[CorridorState, pr.TimeStep]:
        state = CorridorState(jax.random.randint(key, (), 0, self.length // 2, dtype=jnp.int32))
        return state, pr.TimeStep.first(jax.nn.one_hot(state.position, self.length))

    def step(self, state: CorridorState, action: Array, key: PRNGKeyArray) -> tuple[CorridorState, pr.TimeStep]:
        del key
        state = CorridorState(jnp.clip(state.position + 2 * action - 1, 0, self.length - 1).astype(jnp.int32))
        terminated = state.position == self.length - 1
        reward = jnp.where(terminated, 1.0, -self.step_cost)
        return state, pr.TimeStep.transition(jax.nn.one_hot(state.position, self.length), reward, terminated)


def test_an_environment_with_only_what_defines_it_runs_through_the_pipeline():
    env = Corridor()
    assert "auto-reset" in pr.envs.check_env(env, num_steps=40).passed  # raises on a broken rule
    learner = helpers.make_learner(jax.random.key(0), observation_shape=(4,), num_actions=2)
    pipeline = pr.Anakin(env, learner, num_envs=2, rollout_length=4)
    result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=2)
    helpers.assert_all_finite(result.state.learner.params)
    network = learner.network_at(result.state.learner)
    evaluation = pr.evaluate(env, network, pr.policies.Greedy(), num_episodes=2, key=jax.random.key(2), max_steps=8)
    assert evaluation.returns.shape == (2,)
    # It does not draw, and saying so is podrace's job, not a method it writes.
    with pytest.raises(NotImplementedError, match="Corridor does not draw its states"):
        pr.envs.render(env, env.reset(jax.random.key(0))[0])


def test_truncation_as_termination_ends_a_time_limit_without_bootstrap():
    limited = pr.envs.TimeLimit(pr.envs.CartPole(), max_episode_steps=3)
    env = pr.envs.TruncationAsTermination(limited)
    state, first = env.reset(jax.random.key(0))
    expected_state, expected = limited.reset(jax.random.key(0))
    helpers.assert_trees_close(first, expected, rtol=0, atol=0)
    for step in range(3):
        action = jnp.asarray(step % 2)
        state, timestep = env.step(state, action, jax.random.key(step))
        expected_state, expected = limited.step(expected_state, action, jax.random.key(step))
        helpers.assert_trees_close(state, expected_state, rtol=0, atol=0)
        assert bool(expected.truncated) == (step == 2) and not bool(expected.terminated)
        assert not bool(timestep.truncated)
        assert bool(timestep.terminated) == (step == 2)
        assert float(timestep.discount) == (0.0 if step == 2 else 1.0)
        np.testing.assert_array_equal(timestep.observation, expected.observation)
        assert float(timestep.reward) == float(expected.reward)


def test_truncation_as_termination_keeps_a_termination():
    env = pr.envs.TruncationAsTermination(pr.envs.Catch(rows=3, columns=3))
    state, _ = env.reset(jax.random.key(0))
    for step in range(2):
        state, timestep = env.step(state, jnp.asarray(1), jax.random.key(step))
    assert bool(timestep.terminated) and not bool(timestep.truncated) and float(timestep.discount) == 0.0


def test_env_array_hyperparameters_are_leaves_and_sizes_static():
    env = pr.envs.AutoReset(pr.envs.TimeLimit(pr.envs.Catch(rows=7, columns=4), max_episode_steps=5))
    # Sizes are static: the whole environment is array-free and hashes as a jit key.
    assert jax.tree.leaves(env) == []
    assert hash(env) == hash(pr.envs.AutoReset(pr.envs.TimeLimit(pr.envs.Catch(rows=7, columns=4), 5)))


# --------------------------------------------------------------------------------------
# Catch against gymnax's Catch-bsuite.
# --------------------------------------------------------------------------------------


@functools.cache
def _gymnax_catch(rows: int, columns: int):
    with warnings.catch_warnings():
        # gymnax's registry may warn about optional dependencies; only Catch is used.
        warnings.simplefilter("ignore")
        env, params = gymnax.make("Catch-bsuite")
    if (rows, columns) != (env.rows, env.columns):
        env = type(env)(rows=rows, columns=columns)
    return env, params


def _gymnax_state_like(gym_state, catch_state: pr.envs.CatchState, rows: int):
    """gymnax's state for a podrace Catch state (at the start of an episode)."""
    return gym_state.replace(
        ball_x=catch_state.ball_column,
        ball_y=catch_state.ball_row,
        paddle_x=catch_state.paddle_column,
        paddle_y=jnp.asarray(rows - 1, jnp.int32),
        prev_done=jnp.asarray(False),
        time=jnp.asarray(0, jnp.int32),
    )


@eqx.filter_jit
def _run_side_by_side(env, gym_env, gym_params, key, actions):
    """Steps podrace's AutoReset(Catch) and gymnax's Catch-bsuite with the same actions.

    Both start from the same state. gymnax resets inside its terminal step, podrace on
    the step after (which ignores its action): on podrace's first steps the gymnax
    step is discarded and its state re-synced to podrace's new initial state.
    """
    rows = env.env.rows
    key, reset_key, gym_reset_key = jax.random.split(key, 3)
    state, first = env.reset(reset_key)
    _, gym_state = gym_env.reset(gym_reset_key, gym_params)
    gym_state = _gymnax_state_like(gym_state, state.env_state, rows)
    initial_board = gym_env.get_obs(gym_state)

    def step(carry, inputs):
        state, gym_state = carry
        action, key = inputs
        step_key, gym_key = jax.random.split(key)
        state, timestep = env.step(state, action, step_key)
        gym_obs, gym_next, reward, terminated, truncated, info = gym_env.step(gym_key, gym_state, action, gym_params)
        raw_obs, _, raw_reward, raw_terminated, _ = gym_env.step_env(gym_key, gym_state, action, gym_params)
        synced = _gymnax_state_like(gym_next, state.env_state, rows)
        gym_next = jax.tree.map(lambda a, b: jnp.where(timestep.is_first, a, b), synced, gym_next)
        gym = dict(
            obs=gym_obs,
            final_observation=info["final_observation"],
            discount=info["discount"],
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            raw_obs=raw_obs,
            raw_reward=raw_reward,
            raw_terminated=raw_terminated,
            # The state gymnax held before this step, and its board after a re-sync.
            state_before=gym_state,
            synced_board=gym_env.get_obs(gym_next),
        )
        return (state, gym_next), (timestep, gym)

    keys = jax.random.split(key, actions.shape[0])
    _, (timesteps, gym) = jax.lax.scan(step, (state, gym_state), (actions, keys))
    return first, initial_board, timesteps, gym


@pytest.mark.parametrize(("rows", "columns", "seed"), [(10, 5, 0), (10, 5, 1), (10, 5, 2), (6, 3, 3)])
def test_catch_matches_gymnax_step_by_step(rows, columns, seed):
    num_steps = 200
    env = pr.envs.AutoReset(pr.envs.Catch(rows=rows, columns=columns))
    gym_env, gym_params = _gymnax_catch(rows, columns)
    actions = jnp.asarray(np.random.default_rng(seed).integers(0, 3, num_steps), jnp.int32)
    first, initial_board, timesteps, gym = _run_side_by_side(env, gym_env, gym_params, jax.random.key(seed), actions)
    np.testing.assert_array_equal(initial_board, first.observation[..., 0])

    board = np.asarray(timesteps.observation[..., 0])
    is_first = np.asarray(timesteps.is_first)
    terminated = np.asarray(timesteps.terminated)
    stepped = ~is_first
    # Episodes of rows - 1 steps, each followed by podrace's reset step.
    assert is_first.sum() >= num_steps // rows - 1
    np.testing.assert_array_equal(np.flatnonzero(is_first), np.flatnonzero(terminated)[: is_first.sum()] + 1)
    assert not np.any(np.asarray(timesteps.truncated))
    assert not np.any(np.asarray(gym["truncated"]))

    # Steps inside an episode: same boards, rewards, ends and discounts.
    np.testing.assert_array_equal(np.asarray(gym["final_observation"])[stepped], board[stepped])
    np.testing.assert_array_equal(np.asarray(gym["raw_obs"])[stepped], board[stepped])
    np.testing.assert_array_equal(np.asarray(gym["reward"])[stepped], np.asarray(timesteps.reward)[stepped])
    np.testing.assert_array_equal(np.asarray(gym["raw_reward"])[stepped], np.asarray(timesteps.reward)[stepped])
    np.testing.assert_array_equal(np.asarray(gym["terminated"])[stepped], terminated[stepped])
    np.testing.assert_array_equal(np.asarray(gym["raw_terminated"])[stepped], terminated[stepped])
    np.testing.assert_array_equal(np.asarray(gym["discount"])[stepped], np.asarray(timesteps.discount)[stepped])
    # Before a terminal step both show the same next board; on it gymnax already shows a reset.
    running = stepped & ~terminated
    np.testing.assert_array_equal(np.asarray(gym["obs"])[running], board[running])
    assert set(np.asarray(timesteps.reward)[terminated].tolist()) <= {-1.0, 1.0}
    assert np.all(np.asarray(timesteps.discount)[terminated] == 0.0)

    # podrace's first steps: no reward, discount 1; gymnax held a reset state (ball on
    # top, paddle centred) which, re-synced to podrace's ball column, shows its board.
    assert np.all(np.asarray(timesteps.reward)[is_first] == 0.0)
    assert np.all(np.asarray(timesteps.discount)[is_first] == 1.0)
    before = gym["state_before"]
    assert np.all(np.asarray(before.ball_y)[is_first] == 0)
    assert np.all(np.asarray(before.paddle_x)[is_first] == columns // 2)
    assert not np.any(np.asarray(before.prev_done)[is_first])
    np.testing.assert_array_equal(np.asarray(gym["synced_board"])[is_first], board[is_first])


def test_catch_hand_computed_episode():
    env = pr.envs.Catch(rows=3, columns=3)
    state, timestep = env.reset(jax.random.key(0))
    column = int(state.ball_column)
    expected = np.zeros((3, 3, 1), np.float32)
    expected[0, column] = expected[2, 1] = 1.0
    np.testing.assert_array_equal(timestep.observation, expected)
    # Move the paddle under the ball: two steps, the paddle moves each time.
    moves = [np.sign(column - 1) + 1, 1]
    state, timestep = env.step(state, jnp.asarray(moves[0], jnp.int32), jax.random.key(1))
    assert float(timestep.reward) == 0.0 and not bool(timestep.is_last)
    state, timestep = env.step(state, jnp.asarray(moves[1], jnp.int32), jax.random.key(2))
    assert bool(timestep.terminated) and float(timestep.reward) == 1.0 and float(timestep.discount) == 0.0
    expected = np.zeros((3, 3, 1), np.float32)
    expected[2, column] = 1.0
    np.testing.assert_array_equal(timestep.observation, expected)
    # The paddle is clipped at the walls.
    state, _ = env.reset(jax.random.key(0))
    for _ in range(2):
        state, timestep = env.step(state, jnp.asarray(0, jnp.int32), jax.random.key(0))
    assert int(state.paddle_column) == 0
    assert float(timestep.reward) == (1.0 if column == 0 else -1.0)


def test_catch_initial_ball_column_is_uniform():
    env = pr.envs.Catch(rows=4, columns=5)
    states, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 5000))
    counts = np.bincount(np.asarray(states.ball_column), minlength=5)
    assert counts.shape == (5,)
    np.testing.assert_allclose(counts / 5000, 0.2, atol=0.03)
    assert np.all(np.asarray(states.paddle_column) == 2) and np.all(np.asarray(states.ball_row) == 0)


# --------------------------------------------------------------------------------------
# Wrappers.
# --------------------------------------------------------------------------------------


def _steps(env, actions, key=0):
    state, timestep = env.reset(jax.random.key(key))
    out = [timestep]
    for t, action in enumerate(actions):
        state, timestep = env.step(state, jnp.asarray(action, jnp.int32), jax.random.key(100 + t))
        out.append(timestep)
    return state, out


def test_time_limit_truncates_and_keeps_discount_one():
    env = pr.envs.TimeLimit(pr.envs.Catch(rows=10), max_episode_steps=3)
    state, timesteps = _steps(env, [1, 1, 1])
    for timestep in timesteps[1:3]:
        assert not bool(timestep.is_last)
    last = timesteps[3]
    assert bool(last.truncated) and not bool(last.terminated) and bool(last.is_last)
    assert float(last.discount) == 1.0
    assert int(state.elapsed_steps) == 3


def test_time_limit_termination_on_the_limit_step_is_terminated_only():
    env = pr.envs.TimeLimit(pr.envs.Catch(rows=4), max_episode_steps=3)
    _, timesteps = _steps(env, [1, 1, 1])
    last = timesteps[3]
    assert bool(last.terminated) and not bool(last.truncated)
    assert float(last.discount) == 0.0


def test_time_limit_longer_than_episode_changes_nothing():
    catch = pr.envs.Catch(rows=5)
    _, wrapped = _steps(pr.envs.TimeLimit(catch, max_episode_steps=100), [0, 2, 1, 1])
    _, bare = _steps(catch, [0, 2, 1, 1])
    helpers.assert_trees_close(wrapped, bare, rtol=0, atol=0)


def test_auto_reset_shows_final_observation_then_starts_a_new_episode():
    catch = pr.envs.Catch(rows=3, columns=3)
    env = pr.envs.AutoReset(catch)
    state, timesteps = _steps(env, [1, 1])
    last = timesteps[2]
    assert bool(last.terminated) and float(last.discount) == 0.0
    # The final observation: the ball on the bottom row.
    assert float(jnp.sum(last.observation[-1])) >= 1.0 and float(jnp.sum(last.observation[:-1])) == 0.0
    assert bool(state.is_last)
    # The next step ignores its action and returns the first step of a reset with its key.
    key = jax.random.key(7)
    after = [env.step(state, jnp.asarray(action, jnp.int32), key) for action in range(3)]
    for next_state, timestep in after:
        assert bool(timestep.is_first) and not bool(timestep.is_last)
        assert float(timestep.reward) == 0.0 and float(timestep.discount) == 1.0
        helpers.assert_trees_close((next_state, timestep), after[0], rtol=0, atol=0)
    reset_state, reset_timestep = catch.reset(key)
    helpers.assert_trees_close(after[0][0].env_state, reset_state, rtol=0, atol=0)
    helpers.assert_trees_close(after[0][1], reset_timestep, rtol=0, atol=0)


def test_auto_reset_of_a_time_limit_resets_the_step_count():
    env = pr.envs.AutoReset(pr.envs.TimeLimit(pr.envs.Catch(rows=10), max_episode_steps=2))
    state, timesteps = _steps(env, [0, 1, 2, 1, 1])
    flags = [(bool(t.is_first), bool(t.truncated)) for t in timesteps]
    assert flags == [(True, False), (False, False), (False, True), (True, False), (False, False), (False, True)]
    assert [float(t.discount) for t in timesteps] == [1.0] * 6
    assert int(state.env_state.elapsed_steps) == 2


def test_auto_reset_agrees_with_a_bare_environment_within_an_episode():
    catch = pr.envs.Catch(rows=6)
    _, wrapped = _steps(pr.envs.AutoReset(catch), [0, 1, 2, 2, 0])
    _, bare = _steps(catch, [0, 1, 2, 2, 0])
    helpers.assert_trees_close(wrapped, bare, rtol=0, atol=0)


def _batch_ending_at(env, num_envs, ending):
    """A batch of auto-reset Catch states whose episodes in `ending` have just ended,
    with an action and a key for each environment."""
    keys = jax.random.split(jax.random.key(3), num_envs)
    states, _ = jax.vmap(env.reset)(keys)
    is_last = jnp.zeros(num_envs, bool).at[jnp.asarray(ending, jnp.int32)].set(True)
    actions = jnp.arange(num_envs, dtype=jnp.int32) % 3
    return (
        eqx.tree_at(lambda state: state.is_last, states, is_last),
        actions,
        jax.random.split(jax.random.key(4), num_envs),
    )


RESETS_CATCH = pr.envs.Catch(rows=6, columns=7)


@pytest.mark.parametrize("ending", [[], [5], [1, 4, 6]], ids=["none", "one", "three"])
def test_limited_resets_change_nothing_while_few_episodes_end(ending):
    limited = pr.envs.AutoReset(RESETS_CATCH, resets_per_step=3)
    batch = _batch_ending_at(limited, 8, ending)
    expected = jax.vmap(pr.envs.AutoReset(RESETS_CATCH).step)(*batch)
    helpers.assert_trees_close(STEP_BATCH(limited, *batch), expected, rtol=0, atol=0)


def test_limited_resets_copy_the_first_resets_to_the_later_ones():
    limited = pr.envs.AutoReset(RESETS_CATCH, resets_per_step=2)
    batch = _batch_ending_at(limited, 8, [0, 2, 3, 5, 7])
    states, timesteps = STEP_BATCH(limited, *batch)
    expected_states, expected = jax.vmap(pr.envs.AutoReset(RESETS_CATCH).step)(*batch)
    # The 3rd, 4th and 5th to start copy the 1st, 2nd and 1st; the others are as usual.
    source = np.array([0, 1, 2, 0, 4, 2, 6, 0])
    helpers.assert_trees_close(
        (states, timesteps), jax.tree.map(lambda leaf: leaf[source], (expected_states, expected)), rtol=0, atol=0
    )
    assert not np.array_equal(expected.observation[3], expected.observation[0])  # the copy is visible


def test_limited_resets_in_a_pipeline_start_simultaneous_episodes_alike():
    """All Catch episodes of a batch end together: with one reset a step, they restart as one."""
    catch = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)
    learner = helpers.LEARNERS["ppo-two-epochs-three-minibatches"].make(jax.random.key(0))
    ball_columns = []
    for resets_per_step in (None, 1):
        pipeline = pr.Anakin(
            pr.envs.AutoReset(catch, resets_per_step=resets_per_step), learner, num_envs=6, rollout_length=6
        )
        state = pipeline.train(pipeline.init(jax.random.key(0)), num_updates=1).state
        assert np.all(state.envs.env_state.env_state.ball_row == 1)  # one step into the second episodes
        ball_columns.append(set(np.asarray(state.envs.env_state.env_state.ball_column).tolist()))
    assert len(ball_columns[0]) > 1 and len(ball_columns[1]) == 1


@pytest.mark.parametrize("resets_per_step", [0, -2])
def test_auto_reset_rejects_non_positive_resets_per_step(resets_per_step):
    with pytest.raises(ValueError, match="resets_per_step > 0 or None"):
        pr.envs.AutoReset(pr.envs.Catch(), resets_per_step=resets_per_step)


def test_wrappers_forward_spaces():
    catch = pr.envs.Catch(rows=7, columns=4)
    for env in (pr.envs.AutoReset(catch), pr.envs.TimeLimit(catch, max_episode_steps=3)):
        assert env.observation_space.shape == (7, 4, 1)
        assert env.action_space == pr.Discrete(3)


@pytest.mark.parametrize("max_episode_steps", [0, -1])
def test_time_limit_rejects_non_positive_limits(max_episode_steps):
    with pytest.raises(ValueError, match="max_episode_steps > 0"):
        pr.envs.TimeLimit(pr.envs.Catch(), max_episode_steps=max_episode_steps)


@pytest.mark.parametrize(("rows", "columns"), [(1, 5), (0, 5), (10, 0)])
def test_catch_rejects_degenerate_boards(rows, columns):
    with pytest.raises(ValueError, match="rows >= 2 and columns >= 1"):
        pr.envs.Catch(rows=rows, columns=columns)


# --------------------------------------------------------------------------------------
# Spaces.
# --------------------------------------------------------------------------------------


def test_discrete_contains():
    space = pr.Discrete(3)
    for value in range(3):
        assert bool(space.contains(jnp.asarray(value, jnp.int32)))
    for value in (-1, 3):
        assert not bool(space.contains(jnp.asarray(value, jnp.int32)))
    assert not bool(space.contains(jnp.asarray(1.0)))
    assert not bool(space.contains(jnp.asarray([1], jnp.int32)))


def test_discrete_sample_is_uniform_over_its_values():
    space = pr.Discrete(4)
    samples = jax.vmap(space.sample)(jax.random.split(jax.random.key(0), 4000))
    assert samples.dtype == jnp.int32 and samples.shape == (4000,)
    assert bool(jnp.all(jax.vmap(space.contains)(samples)))
    np.testing.assert_allclose(np.bincount(np.asarray(samples), minlength=4) / 4000, 0.25, atol=0.03)


@pytest.mark.parametrize("num_values", [0, -2])
def test_discrete_rejects_empty_spaces(num_values):
    with pytest.raises(ValueError, match="num_values > 0"):
        pr.Discrete(num_values)


def test_box_contains():
    space = pr.Box(jnp.asarray([-1.0, 0.0]), 2.0, (2,))
    assert space.low.shape == space.high.shape == (2,)
    assert bool(space.contains(jnp.asarray([-1.0, 2.0])))
    assert bool(space.contains(jnp.asarray([0.5, 0.0])))
    assert not bool(space.contains(jnp.asarray([-1.5, 1.0])))
    assert not bool(space.contains(jnp.asarray([0.0, 2.5])))
    assert not bool(space.contains(jnp.asarray([0.0, 1.0, 1.0])))
    assert not bool(space.contains(jnp.asarray([0, 1], jnp.int32)))


@pytest.mark.parametrize(
    "space",
    [
        pr.Box(-1.0, 1.0, (3, 2)),
        pr.Box(jnp.asarray([0.0, 5.0]), jnp.asarray([1.0, 6.0]), (2,)),
        pr.Box(0, 2, (5,), jnp.int32),
    ],
    ids=["float", "per-element-bounds", "int"],
)
def test_box_sample_lies_in_the_box(space):
    samples = jax.vmap(space.sample)(jax.random.split(jax.random.key(0), 500))
    assert samples.shape == (500, *space.shape) and samples.dtype == space.dtype
    assert bool(jnp.all(jax.vmap(space.contains)(samples)))
    if jnp.issubdtype(space.dtype, jnp.integer):
        # Integer boxes include both bounds.
        assert set(np.unique(np.asarray(samples)).tolist()) == {0, 1, 2}
    # Samples spread over the box: each coordinate comes near both bounds.
    low, high = np.asarray(space.low), np.asarray(space.high)
    span = high - low
    assert np.all(np.asarray(samples).min(axis=0) <= low + 0.1 * span)
    assert np.all(np.asarray(samples).max(axis=0) >= high - 0.1 * span)


def test_zeros_have_the_shape_and_dtype_of_the_elements():
    box, discrete = pr.Box(0, 2, (5,), jnp.int32), pr.Discrete(3)
    helpers.assert_trees_close(box.zeros(), jnp.zeros(5, jnp.int32), rtol=0, atol=0)
    helpers.assert_trees_close(discrete.zeros(), jnp.asarray(0, jnp.int32), rtol=0, atol=0)
    zeros = pr.ObservationActionRewardSpace(pr.Box(-1.0, 1.0, (2,)), discrete).zeros()
    expected = pr.ObservationActionReward(jnp.zeros(2), jnp.asarray(0, jnp.int32), jnp.asarray(0.0))
    helpers.assert_trees_close(zeros, expected, rtol=0, atol=0)


def test_catch_spaces():
    env = pr.envs.Catch(rows=6, columns=4)
    assert env.observation_space.shape == (6, 4, 1) and env.observation_space.dtype == jnp.float32
    assert env.action_space.num_values == 3


def test_the_earlier_cannot_render_is_refused_with_what_to_write_instead():
    with pytest.raises(AttributeError, match=r"subclasses podrace\.envs\.AbstractRenderableEnv"):
        pr.envs.cannot_render  # noqa: B018
