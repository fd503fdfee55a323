"""The MuJoCo Playground adapter: every DM Control Suite environment through check_env, step
by step against Playground's own step, divergence and truncation, batches of MJX models, two
devices, the command line's `playground:ID`, the refused environments and the errors."""

import functools
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr
from podrace import cli
from podrace.envs import from_playground
from podrace.envs.from_playground import PlaygroundEnv, playground_env
from podrace.envs.names import make_env

from . import helpers


playground = pytest.importorskip("mujoco_playground")

# check_env compiles each environment and runs it eagerly too: under a minute for the
# cartpole on a 2-core CPU, several for the humanoids. The default session checks the
# cartpole; `nox -s ecosystem` every one.
CHECKED_BY_DEFAULT = ("CartpoleBalance",)


# MJX's constraint solver amplifies the float32 rounding that differs between a vmapped and a
# looped step, and between a jitted and an eager one: these environments' accelerations
# differ by more than 1e-5 (relative and absolute) and are checked at 1e-3, as Brax's are.
ROUNDING_AMPLIFIED = (
    "FishSwim",
    "WalkerRun",
    "WalkerStand",
    "WalkerWalk",
    "HumanoidRun",
    "HumanoidStand",
    "HumanoidWalk",
)
TOLERANCE = 1e-3
# The DM Control Suite environments that check_env cannot pass, and why.
EXCLUDED = {
    "CheetahRun": "its solver's warm-start accelerations (qacc_warmstart) differ by up to 2e-3 between a vmapped and "
    "a looped reset, with the solver's tolerance at 0 too: rounding amplified by the constraint solver past the 1e-3 "
    "that the other contact-rich tasks keep",
}


@functools.cache
def _playground(env_id: str):
    """One adapter per id: its environment object is static and hashed by identity, so
    sharing it shares compiled code between tests."""
    return PlaygroundEnv.make(env_id)


def test_the_exclusions_are_dm_control_suite_environments():
    assert set(EXCLUDED) | set(ROUNDING_AMPLIFIED) <= set(from_playground.playground_ids())


@pytest.mark.parametrize(
    "env_id", helpers.every_env([i for i in from_playground.playground_ids() if i not in EXCLUDED], CHECKED_BY_DEFAULT)
)
def test_every_dm_control_suite_env_passes_check_env(env_id):
    tolerance = TOLERANCE if env_id in ROUNDING_AMPLIFIED else 1e-5
    report = pr.envs.check_env(pr.envs.TimeLimit(_playground(env_id), 50), rtol=tolerance, atol=tolerance)
    assert not report.skipped, report


def test_the_ids_are_the_dm_control_suite_and_the_rest_are_refused_with_the_reason(capsys):
    registered = set(playground.registry.ALL_ENVS)
    suite = set(from_playground.playground_ids())
    assert suite == set(playground.dm_control_suite.ALL_ENVS) and len(suite) == 25
    assert set(from_playground.playground_exclusions()) == registered - suite
    with pytest.raises(ValueError, match=r"playground:Go1Getup is not available: .*MuJoCo Menagerie.*GitHub"):
        PlaygroundEnv.make("Go1Getup")
    assert cli.main(["train", "playground:PandaPickCube", "--show-settings"]) == 2
    assert "playground:PandaPickCube is not available: " in capsys.readouterr().err


def test_steps_equal_playground_s_own_steps():
    adapter = _playground("CartpoleBalance")
    env = adapter.env
    actions = jax.random.uniform(jax.random.key(1), (20, 1), minval=-1.0, maxval=1.0)

    def adapter_run(key):
        state, first = adapter.reset(key)
        return first, jax.lax.scan(lambda state, action: adapter.step(state, action, key), state, actions)[1]

    def playground_run(key):
        with jax.numpy_rank_promotion("allow"):  # Playground's code broadcasts arrays of different ranks
            state = env.reset(key)
            return state, jax.lax.scan(lambda s, a: (env.step(s, a),) * 2, state, actions)[1]

    key = jax.random.key(0)
    (first, timesteps), (own_first, own_states) = eqx.filter_jit(adapter_run)(key), jax.jit(playground_run)(key)
    np.testing.assert_array_equal(first.observation, own_first.obs)
    np.testing.assert_array_equal(timesteps.observation, own_states.obs)
    np.testing.assert_array_equal(timesteps.reward, own_states.reward)
    assert not np.any(timesteps.terminated) and not np.any(own_states.done)
    assert not np.any(timesteps.truncated)


def _episode(adapter: pr.envs.AbstractEnv, num_steps: int) -> pr.TimeStep:
    def run(key):
        state, _ = adapter.reset(key)
        step = lambda state, _: adapter.step(state, jnp.ones((1,)), key)  # noqa: E731
        return jax.lax.scan(step, state, length=num_steps)[1]

    return eqx.filter_jit(run)(jax.random.key(0))


def test_a_divergence_terminates_and_the_time_limit_truncates():
    # With negative damping the cart's motion blows up to NaN: Playground's `done`, a termination.
    model = _playground("CartpoleBalance").mjx_model
    unstable = PlaygroundEnv(_playground("CartpoleBalance").env, model.replace(dof_damping=model.dof_damping - 1e4))
    diverged = _episode(unstable, 10)
    first = int(np.argmax(diverged.terminated))
    assert diverged.terminated[first] and first > 0 and not np.any(diverged.truncated)
    assert diverged.discount[first] == 0 and np.all(diverged.discount[:first] == 1)
    assert np.isnan(diverged.observation[first]).any()
    # Left to run, the limit of playground_env truncates, with discount 1.
    limited = _episode(playground_env("CartpoleBalance", episode_length=3), 3)
    np.testing.assert_array_equal(limited.truncated, [False, False, True])
    assert not np.any(limited.terminated) and np.all(limited.discount == 1)


def test_a_batch_of_masses_is_one_vmap_and_equals_separate_adapters():
    env = _playground("CartpoleBalance").env
    masses = env.mjx_model.body_mass[None] * jnp.asarray([0.5, 1.0, 4.0])[:, None]

    def with_mass(mass):
        return PlaygroundEnv(env, env.mjx_model.replace(body_mass=mass))

    adapters = eqx.filter_vmap(with_mass)(masses)
    observations = eqx.filter_vmap(lambda adapter: _episode(adapter, 10).observation)(adapters)
    for mass, observation in zip(masses, observations, strict=True):
        np.testing.assert_allclose(_episode(with_mass(mass), 10).observation, observation, rtol=1e-5, atol=1e-6)
    assert not np.allclose(observations[0], observations[2])  # the masses change the motion


def test_spaces_and_the_refusals_of_the_constructor():
    adapter = _playground("CartpoleBalance")
    observations, actions = adapter.observation_space, adapter.action_space
    assert isinstance(observations, pr.Box) and isinstance(actions, pr.Box)
    assert observations.shape == (5,) and observations.dtype == jnp.float32
    assert np.all(np.isneginf(observations.low)) and np.all(np.isposinf(observations.high))
    assert actions.shape == (1,) and actions.dtype == jnp.float32
    assert np.all(np.asarray(actions.low) == -1) and np.all(np.asarray(actions.high) == 1)
    with pytest.raises(NotImplementedError, match="PlaygroundEnv does not draw its states"):
        pr.envs.render(adapter, adapter.reset(jax.random.key(0))[0])
    wrapped = playground.wrapper.wrap_for_brax_training(adapter.env, episode_length=10)
    with pytest.raises(ValueError, match="without Playground's training wrappers"):
        PlaygroundEnv(wrapped)


def test_two_devices_step_the_batch_as_one_device():
    helpers.assert_two_devices_train_as_one("playground:CartpoleBalance")


def test_an_unknown_id_names_the_nearest_ones(capsys):
    with pytest.raises(ValueError, match=r"No playground environment 'CartpoleBalanc'\. Did you mean CartpoleBalance"):
        PlaygroundEnv.make("CartpoleBalanc")
    assert cli.main(["train", "playground:WalkerWalks", "--show-settings"]) == 2
    assert re.search(
        r"No playground environment 'WalkerWalks'\. Did you mean WalkerWalk.* AcrobotSwingup, ", capsys.readouterr().err
    )


def test_the_command_line_trains_playground_ids(capsys):
    assert cli.main(["train", "playground:CartpoleBalance", "ppo", "--show-settings"]) == 0
    assert "playground:CartpoleBalance ppo" in capsys.readouterr().out
    env = make_env("playground:CartpoleBalance")
    assert isinstance(env, pr.envs.TimeLimit) and env.max_episode_steps == from_playground.EPISODE_LENGTH


def test_missing_playground_raises_an_install_hint(monkeypatch):
    fresh = helpers.fresh_module_without(from_playground.__name__, ("mujoco_playground",), monkeypatch)
    with pytest.raises(ImportError, match=re.escape("pip install 'podrace[playground]'")):
        fresh.PlaygroundEnv.make("CartpoleBalance")
