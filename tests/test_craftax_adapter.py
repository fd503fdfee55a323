"""The Craftax adapter: its environments through check_env, terminations apart from the
time limit, rendering, params as arrays, the command line's `craftax:ID` and its errors."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr
from podrace import cli
from podrace.envs import from_craftax
from podrace.envs.from_craftax import CRAFTAX_IDS, CraftaxEnv
from podrace.envs.names import make_env

from . import helpers


pytest.importorskip("craftax")

# A minute or more of compiling each: the default session checks Classic's symbolic one,
# `nox -s ecosystem` every one.
CHECKED_BY_DEFAULT = ("Craftax-Classic-Symbolic-v1",)
CLASSIC_SYMBOLIC = CHECKED_BY_DEFAULT[0]


@pytest.mark.parametrize(
    "env_id",
    helpers.every_env(list(CRAFTAX_IDS), CHECKED_BY_DEFAULT),
)
def test_every_env_passes_check_env(env_id):
    report = pr.envs.check_env(pr.envs.TimeLimit(CraftaxEnv(env_id), 20), num_steps=60)
    assert not report.skipped, report


def _steps(env: CraftaxEnv, num_steps: int) -> pr.TimeStep:
    def run(key):
        state, _ = env.reset(key)
        return jax.lax.scan(lambda s, _: env.step(s, jnp.asarray(0), key), state, length=num_steps)[1]

    return eqx.filter_jit(run)(jax.random.key(0))


def test_the_time_limit_truncates_and_dying_terminates():
    env = CraftaxEnv(CLASSIC_SYMBOLIC)
    # Craftax's own limit, lowered to 3 steps: a truncation, discount 1.
    limited = eqx.tree_at(lambda e: e.gymnax.params.max_timesteps, env, jnp.asarray(3))
    timesteps = _steps(limited, 3)
    np.testing.assert_array_equal(timesteps.truncated, [False, False, True])
    assert not np.any(timesteps.terminated) and np.all(timesteps.discount == 1)
    # At zero health the player is dead: a termination, discount 0.
    state, _ = eqx.filter_jit(env.reset)(jax.random.key(0))
    dying = eqx.tree_at(lambda s: s.player_health, state, jnp.asarray(0.0, state.player_health.dtype))
    _, timestep = eqx.filter_jit(env.step)(dying, jnp.asarray(0), jax.random.key(1))
    assert timestep.terminated and not timestep.truncated and timestep.discount == 0


@pytest.mark.slow  # Craftax processes its textures on first use: 40 s
def test_renders_the_agent_s_view_in_jax():
    env = CraftaxEnv(CLASSIC_SYMBOLIC)
    state, _ = eqx.filter_jit(env.reset)(jax.random.key(0))
    frame = eqx.filter_jit(env.render)(state)
    assert frame.dtype == jnp.uint8 and frame.ndim == 3 and frame.shape[-1] == 3
    assert len(np.unique(np.asarray(frame).reshape(-1, 3), axis=0)) > 10


def test_an_unknown_id_names_the_nearest_ones(capsys):
    with pytest.raises(ValueError, match=r"No craftax environment 'Craftax-Classic'\. Did you mean Craftax-Classic-"):
        CraftaxEnv("Craftax-Classic")
    assert cli.main(["train", "craftax:Craftax-Symbolic", "--show-settings"]) == 2
    assert re.search(r"Did you mean Craftax-Symbolic-v1", capsys.readouterr().err)


def test_the_command_line_trains_craftax_ids(capsys):
    assert cli.main(["train", f"craftax:{CLASSIC_SYMBOLIC}", "ppo", "--show-settings"]) == 0
    assert f"craftax:{CLASSIC_SYMBOLIC} ppo" in capsys.readouterr().out
    assert isinstance(make_env(f"craftax:{CLASSIC_SYMBOLIC}"), CraftaxEnv)


def test_missing_craftax_raises_an_install_hint(monkeypatch):
    fresh = helpers.fresh_module_without(from_craftax.__name__, ("craftax", "craftax.craftax_env"), monkeypatch)
    with pytest.raises(ImportError, match=re.escape("pip install 'podrace[craftax]'")):
        fresh.CraftaxEnv(CLASSIC_SYMBOLIC)
