"""The Navix adapter: every registered environment through check_env, step by step against
Navix's own step, terminations and truncations, rendering, two devices, the command
line's `navix:ID` and its errors."""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr
from podrace import cli
from podrace.envs import from_navix
from podrace.envs.from_navix import NavixEnv
from podrace.envs.names import make_env

from . import helpers


navix = pytest.importorskip("navix")


@functools.cache
def _adapter(env_id: str, **kwargs) -> NavixEnv:
    """One adapter per id: its Navix environment is static and hashed by identity, so
    sharing it shares compiled code between tests."""
    return NavixEnv.make(env_id, **kwargs)


# check_env compiles and runs each environment eagerly too (15-30 s each on a 2-core CPU):
# the default session checks two, `nox -s ecosystem` every one.
CHECKED_BY_DEFAULT = ("Navix-Empty-5x5-v0", "Navix-DoorKey-5x5-v0")


@pytest.mark.parametrize(
    "env_id",
    helpers.every_env(from_navix.navix_ids(), CHECKED_BY_DEFAULT),
)
def test_every_registered_env_passes_check_env(env_id):
    report = pr.envs.check_env(_adapter(env_id, max_steps=20), num_steps=100)
    assert not report.skipped, report


def test_steps_equal_navix_s_own_steps():
    env = navix.make("Navix-DoorKey-5x5-v0")
    adapter = NavixEnv(env)
    actions = jax.random.randint(jax.random.key(1), (30,), 0, 7)
    key = jax.random.key(0)

    def adapter_run():
        state, first = adapter.reset(key)
        return first, jax.lax.scan(lambda s, a: adapter.step(s, a, key), state, actions)[1]

    def navix_run():
        with jax.numpy_rank_promotion("allow"):  # Navix broadcasts arrays of different ranks
            timestep = env.reset(key)
            return timestep, jax.lax.scan(lambda t, a: (env.step(t, a),) * 2, timestep, actions)[1]

    (first, timesteps), (navix_first, navix_steps) = jax.jit(adapter_run)(), jax.jit(navix_run)()
    np.testing.assert_array_equal(first.observation, navix_first.observation)
    ended = int(np.argmax(np.asarray(navix_steps.step_type) > 0)) if np.any(navix_steps.step_type > 0) else 30
    # Up to the first episode's end (after which podrace's AutoReset, not Navix, resets).
    np.testing.assert_array_equal(timesteps.observation[: ended + 1], navix_steps.observation[: ended + 1])
    np.testing.assert_array_equal(timesteps.reward[: ended + 1], navix_steps.reward[: ended + 1])


def _run(adapter: NavixEnv, actions: jax.Array) -> pr.TimeStep:
    def run(key):
        state, _ = adapter.reset(key)
        return jax.lax.scan(lambda s, a: adapter.step(s, a, key), state, actions)[1]

    return jax.jit(run)(jax.random.key(0))


def test_reaching_the_goal_terminates_and_max_steps_truncates():
    # In Empty-5x5 the agent starts in a corner facing east, the goal in the other
    # corner: forward, forward, right, forward, forward reaches it (2 is "forward").
    forward, right = 2, 1
    reached = _run(_adapter("Navix-Empty-5x5-v0"), jnp.asarray([forward, forward, right, forward, forward]))
    np.testing.assert_array_equal(reached.terminated, [False, False, False, False, True])
    assert reached.reward[-1] > 0 and reached.discount[-1] == 0 and not np.any(reached.truncated)
    # Turning on the spot never ends an episode but by its step limit: a truncation.
    turning = _run(_adapter("Navix-Empty-5x5-v0", max_steps=4), jnp.full((4,), right))
    np.testing.assert_array_equal(turning.truncated, [False, False, False, True])
    assert not np.any(turning.terminated) and np.all(turning.discount == 1)


def test_renders_navix_s_sprites_in_jax():
    adapter = _adapter("Navix-Empty-5x5-v0")
    state, _ = adapter.reset(jax.random.key(0))
    frame = jax.jit(adapter.render)(state)
    assert frame.dtype == jnp.uint8 and frame.ndim == 3 and frame.shape[-1] == 3
    assert len(np.unique(np.asarray(frame).reshape(-1, 3), axis=0)) > 2


def test_two_devices_step_the_batch_as_one_device():
    helpers.assert_two_devices_train_as_one("navix:Navix-Empty-5x5-v0")


def test_an_unknown_id_names_the_nearest_ones(capsys):
    with pytest.raises(ValueError, match=r"No navix environment 'Navix-Empty-5x5'\. Did you mean Navix-Empty-5x5-v0"):
        NavixEnv.make("Navix-Empty-5x5")
    assert cli.main(["train", "navix:Navix-FourRoom-v0", "--show-settings"]) == 2
    assert re.search(r"Did you mean Navix-FourRooms-v0.* Navix-DistShift1-v0, ", capsys.readouterr().err)


def test_the_command_line_trains_navix_ids(capsys):
    assert cli.main(["train", "navix:Navix-Empty-5x5-v0", "ppo", "--show-settings"]) == 0
    assert "navix:Navix-Empty-5x5-v0 ppo" in capsys.readouterr().out
    assert isinstance(make_env("navix:Navix-Empty-5x5-v0"), NavixEnv)


def test_missing_navix_raises_an_install_hint(monkeypatch):
    fresh = helpers.fresh_module_without(from_navix.__name__, ("navix",), monkeypatch)
    with pytest.raises(ImportError, match=re.escape("pip install 'podrace[navix]'")):
        fresh.NavixEnv.make("Navix-Empty-5x5-v0")
