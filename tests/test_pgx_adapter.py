"""The Pgx adapter: games through check_env (also with an agent), legal moves only under a
random masked policy, rewards and ends against Pgx's own step on scripted games, the
command line's `pgx:ID` and its errors."""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr
from podrace import cli, configs
from podrace.envs import from_pgx
from podrace.envs.from_pgx import PgxEnv
from podrace.envs.names import make_env

from . import helpers


pgx = pytest.importorskip("pgx")

# check_env compiles and runs each game eagerly too; the default session checks the two
# small ones, `nox -s ecosystem` every one.
CHECKED_BY_DEFAULT = ("tic_tac_toe", "connect_four")


@functools.cache
def _adapter(env_id: str) -> PgxEnv:
    """One adapter per id: its Pgx environment is static and hashed by identity."""
    return PgxEnv.make(env_id)


@pytest.mark.parametrize("env_id", helpers.every_env(from_pgx.pgx_ids(), CHECKED_BY_DEFAULT))
def test_every_game_passes_check_env(env_id):
    # A time limit ends the long games' episodes, so that the automatic reset is checked too.
    report = pr.envs.check_env(pr.envs.TimeLimit(_adapter(env_id), 60), num_steps=120)
    assert not report.skipped, report


def test_spaces_hold_the_board_and_the_legal_moves():
    env = _adapter("connect_four")
    assert env.action_space == pr.Discrete(7)
    space = env.observation_space
    assert isinstance(space, pr.MaskedObservationSpace) and isinstance(space.observation, pr.Box)
    assert space.observation.shape == (6, 7, 2)
    assert float(space.observation.low.min()) == 0.0 and float(space.observation.high.max()) == 1.0
    _, first = env.reset(jax.random.key(0))
    assert first.observation.observation.dtype == jnp.float32
    np.testing.assert_array_equal(first.observation.action_mask, np.ones(7, bool))


def test_check_env_with_an_agent_never_finds_a_masked_move():
    env = _adapter("connect_four")
    network = helpers.logit_network(jax.random.key(0), observation_shape=(6, 7, 2), num_actions=7)
    report = pr.envs.check_env(env, agent=pr.Agent(network, pr.policies.Categorical()), num_steps=120)
    assert "legal-actions" in report.passed and not report.skipped


NUM_ENVS, NUM_STEPS = 16, 300


def _random_play(env, agent, key):
    """`NUM_STEPS` steps of `NUM_ENVS` auto-resetting games: each step's observation, action and time step."""

    def one_env(key):
        reset_key, key = jax.random.split(key)
        state, timestep = env.reset(reset_key)

        def step(loop, key):
            state, timestep = loop
            act_key, step_key = jax.random.split(key)
            if agent is None:
                action = env.action_space.sample(act_key)
            else:
                action = agent(timestep.observation, (), act_key)[0].action
            next_state, next_timestep = env.step(state, action, step_key)
            return (next_state, next_timestep), (timestep.observation.action_mask, action, next_timestep)

        return jax.lax.scan(step, (state, timestep), jax.random.split(key, NUM_STEPS))[1]

    return jax.vmap(one_env)(jax.random.split(key, NUM_ENVS))


RANDOM_PLAY = helpers.Compiled(_random_play)


def test_a_random_masked_policy_never_makes_an_illegal_move():
    env = pr.envs.AutoReset(_adapter("tic_tac_toe"))
    network = helpers.q_network(jax.random.key(1), observation_shape=(3, 3, 2), num_actions=9)
    masks, actions, timesteps = RANDOM_PLAY(env, pr.Agent(network, pr.policies.EpsilonGreedy(1.0)), jax.random.key(2))
    masks, actions = np.asarray(masks), np.asarray(actions)
    assert np.all(np.take_along_axis(masks, actions[..., None], axis=-1))
    # Pgx's own verdict: in tic-tac-toe a legal move wins (+1) or not (0); only an illegal
    # one costs its player -1. Many games end, with wins and draws.
    reward, terminated = np.asarray(timesteps.reward), np.asarray(timesteps.terminated)
    assert not np.any(reward < 0)
    assert terminated.sum() > 200 and np.any(reward[terminated] == 1) and np.any(reward[terminated] == 0)
    # Uniformly random actions, which ignore the mask, make illegal moves: the oracle sees them.
    _, _, unmasked = RANDOM_PLAY(env, None, jax.random.key(2))
    assert np.any(np.asarray(unmasked.reward) == -1)


def _scripted(env_id: str, moves: list[int]):
    """The adapter's time steps and Pgx's own states, move by move, from the same key."""
    adapter, game = _adapter(env_id), _adapter(env_id).env
    key = jax.random.key(3)
    actions = jnp.asarray(moves, jnp.int32)

    def adapter_run():
        state, _ = adapter.reset(key)
        return jax.lax.scan(lambda s, a: adapter.step(s, a, key), state, actions)[1]

    def pgx_run():
        def step(state, action):
            next_state = game.step(state, action, key)
            return next_state, (state.current_player, next_state)

        return jax.lax.scan(step, game.init(key), actions)[1]

    return jax.jit(adapter_run)(), jax.jit(pgx_run)()


def _check_against_pgx(timesteps: pr.TimeStep, movers: jax.Array, states) -> None:
    rewards = np.take_along_axis(np.asarray(states.rewards), np.asarray(movers)[:, None], 1)[:, 0]
    np.testing.assert_array_equal(timesteps.reward, rewards)
    np.testing.assert_array_equal(timesteps.terminated, states.terminated)
    np.testing.assert_array_equal(timesteps.truncated, states.truncated)
    np.testing.assert_array_equal(timesteps.discount, np.where(states.terminated, 0.0, 1.0))
    np.testing.assert_array_equal(timesteps.observation.observation, states.observation.astype(np.float32))
    np.testing.assert_array_equal(timesteps.observation.action_mask, states.legal_action_mask)


def test_a_scripted_tic_tac_toe_win_agrees_with_pgx():
    # The first player takes the top row (0, 1, 2) while the second plays 3 and 4.
    timesteps, (movers, states) = _scripted("tic_tac_toe", [0, 3, 1, 4, 2])
    _check_against_pgx(timesteps, movers, states)
    np.testing.assert_array_equal(timesteps.reward, [0, 0, 0, 0, 1])
    np.testing.assert_array_equal(timesteps.terminated, [False] * 4 + [True])
    assert not np.any(timesteps.truncated)
    # The players alternate, and every observation is that of the player to move next.
    np.testing.assert_array_equal(movers, np.asarray(movers[0]) ^ np.array([0, 1, 0, 1, 0]))
    masks = np.asarray(timesteps.observation.action_mask)
    np.testing.assert_array_equal(masks[3], [False, False, True, False, False, True, True, True, True])


def test_a_scripted_connect_four_illegal_move_ends_the_game_with_a_penalty():
    # Six moves fill column 0; a seventh there is illegal and loses its player the game.
    timesteps, (movers, states) = _scripted("connect_four", [0] * 7)
    _check_against_pgx(timesteps, movers, states)
    np.testing.assert_array_equal(timesteps.reward, [0] * 6 + [-1])
    np.testing.assert_array_equal(timesteps.terminated, [False] * 6 + [True])
    assert not bool(timesteps.observation.action_mask[5, 0])


def test_a_time_limit_truncates_a_game_and_keeps_the_discount():
    env = pr.envs.TimeLimit(_adapter("connect_four"), 3)

    def run(key):
        state, _ = env.reset(key)
        return jax.lax.scan(lambda s, a: env.step(s, a, key), state, jnp.arange(3, dtype=jnp.int32))[1]

    timesteps = jax.jit(run)(jax.random.key(4))
    np.testing.assert_array_equal(timesteps.truncated, [False, False, True])
    assert not np.any(timesteps.terminated) and np.all(timesteps.discount == 1)


def test_a_learner_trains_by_self_play():
    env = pr.envs.AutoReset(_adapter("tic_tac_toe"))
    learner = helpers.make_learner(jax.random.key(5), observation_shape=(3, 3, 2), num_actions=9)
    pipeline = pr.Anakin(env, learner, num_envs=2, rollout_length=4)
    result = pipeline.train(pipeline.init(jax.random.key(6)), num_updates=2)
    helpers.assert_all_finite(result.state.learner.params)


def test_the_command_line_builds_networks_for_the_board_without_the_mask(capsys):
    assert configs.base.observation_shape(_adapter("tic_tac_toe")) == (3, 3, 2)
    assert cli.main(["train", "pgx:tic_tac_toe", "ppo", "--show-settings"]) == 0
    assert "pgx:tic_tac_toe ppo" in capsys.readouterr().out


def test_an_unknown_id_names_the_nearest_ones():
    with pytest.raises(ValueError, match=r"No pgx environment 'tictactoe'\. Did you mean tic_tac_toe"):
        PgxEnv.make("tictactoe")
    assert isinstance(make_env("pgx:tic_tac_toe"), PgxEnv)


def test_missing_pgx_raises_an_install_hint(monkeypatch):
    fresh = helpers.fresh_module_without(from_pgx.__name__, ("pgx",), monkeypatch)
    with pytest.raises(ImportError, match=re.escape("pip install 'podrace[pgx]'")):
        fresh.PgxEnv.make("tic_tac_toe")


def test_two_devices_step_the_batch_as_one_device():
    # Masked observations, split over two devices, train as one device's batch; normalised
    # too, the masks outside the statistics that the devices merge.
    helpers.assert_two_devices_train_as_one("pgx:tic_tac_toe")
    helpers.assert_two_devices_train_as_one("pgx:tic_tac_toe", normalized=True)
