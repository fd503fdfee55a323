"""The XLand-MiniGrid adapter: every registered environment through check_env, step by step
against XLand-MiniGrid's own step, terminations and truncations, a batch of rulesets, two
devices, the command line's `xminigrid:ID` and its errors."""

import functools
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr
from podrace import cli
from podrace.envs import from_xminigrid
from podrace.envs.from_xminigrid import XMiniGridEnv
from podrace.envs.names import make_env

from . import helpers


xminigrid = pytest.importorskip("xminigrid")

# check_env compiles and runs each environment eagerly too; the default session checks
# two small ones, `nox -s ecosystem` every one.
CHECKED_BY_DEFAULT = ("MiniGrid-Empty-5x5", "XLand-MiniGrid-R1-9x9")


@functools.cache
def _adapter(env_id: str, **kwargs) -> XMiniGridEnv:
    """One adapter per id: its XLand-MiniGrid environment is static and hashed by identity."""
    return XMiniGridEnv.make(env_id, **kwargs)


@pytest.mark.parametrize(
    "env_id",
    helpers.every_env(from_xminigrid.xminigrid_ids(), CHECKED_BY_DEFAULT),
)
def test_every_registered_env_passes_check_env(env_id):
    report = pr.envs.check_env(_adapter(env_id, max_steps=20), num_steps=60)
    assert not report.skipped, report


def test_steps_equal_xminigrid_s_own_steps():
    adapter = _adapter("MiniGrid-DoorKey-5x5")
    env, params = adapter.env, adapter.params
    actions = jax.random.randint(jax.random.key(1), (30,), 0, 6)
    key = jax.random.key(0)

    def adapter_run():
        state, first = adapter.reset(key)
        return first, jax.lax.scan(lambda s, a: adapter.step(s, a, key), state, actions)[1]

    def xminigrid_run():
        with jax.numpy_rank_promotion("allow"):  # as the adapter runs XLand-MiniGrid's code
            timestep = env.reset(params, key)
            return timestep, jax.lax.scan(lambda t, a: (env.step(params, t, a),) * 2, timestep, actions)[1]

    (first, timesteps), (own_first, own_steps) = eqx.filter_jit(adapter_run)(), eqx.filter_jit(xminigrid_run)()
    np.testing.assert_array_equal(first.observation, own_first.observation)
    np.testing.assert_array_equal(timesteps.observation, own_steps.observation)
    np.testing.assert_array_equal(timesteps.reward, own_steps.reward)


def _run(adapter: XMiniGridEnv, actions: jax.Array) -> pr.TimeStep:
    def run(key):
        state, _ = adapter.reset(key)
        return jax.lax.scan(lambda s, a: adapter.step(s, a, key), state, actions)[1]

    return eqx.filter_jit(run)(jax.random.key(0))


def test_reaching_the_goal_terminates_and_max_steps_truncates():
    # In Empty-5x5 the agent starts in the top-left corner facing right and the goal is in
    # the bottom-right: forward, forward, turn right (to face down), forward, forward
    # reaches it (0 is forward, 1 turns right, 2 turns left).
    forward, right, left = 0, 1, 2
    reached = _run(_adapter("MiniGrid-Empty-5x5"), jnp.asarray([forward, forward, right, forward, forward]))
    np.testing.assert_array_equal(reached.terminated, [False, False, False, False, True])
    assert reached.reward[-1] > 0 and reached.discount[-1] == 0 and not np.any(reached.truncated)
    turning = _run(_adapter("MiniGrid-Empty-5x5", max_steps=4), jnp.full((4,), left))
    np.testing.assert_array_equal(turning.truncated, [False, False, False, True])
    assert not np.any(turning.terminated) and np.all(turning.discount == 1)


def _ruleset(colour: int):
    """A task: one ball of `colour` on the grid, reached by standing on it."""
    from xminigrid.core.constants import TILES_REGISTRY, Tiles
    from xminigrid.core.goals import AgentOnTileGoal
    from xminigrid.core.rules import EmptyRule
    from xminigrid.types import RuleSet

    ball = TILES_REGISTRY[Tiles.BALL, colour]
    return RuleSet(goal=AgentOnTileGoal(tile=ball).encode(), rules=EmptyRule().encode()[None], init_tiles=ball[None])


def test_a_batch_of_rulesets_is_one_vmap_and_equals_separate_adapters():
    from xminigrid.core.constants import Colors

    base = _adapter("XLand-MiniGrid-R1-9x9")
    rulesets = [_ruleset(Colors.RED), _ruleset(Colors.BLUE)]
    batch = eqx.filter_vmap(lambda r: XMiniGridEnv(base.env, base.params.replace(ruleset=r)))(
        jax.tree.map(lambda *x: jnp.stack(x), *rulesets)
    )
    reset = eqx.filter_jit(eqx.filter_vmap(lambda adapter: adapter.reset(jax.random.key(0))[1].observation))
    observations = reset(batch)
    for ruleset, observation in zip(rulesets, observations, strict=True):
        alone = XMiniGridEnv(base.env, base.params.replace(ruleset=ruleset))
        np.testing.assert_array_equal(eqx.filter_jit(alone.reset)(jax.random.key(0))[1].observation, observation)
    assert not np.array_equal(observations[0], observations[1])  # the balls' colours differ


def test_spaces_and_no_rendering():
    adapter = _adapter("MiniGrid-Empty-5x5")
    assert adapter.action_space == pr.Discrete(6)
    assert adapter.observation_space.shape == (7, 7, 2) and adapter.observation_space.dtype == jnp.uint8
    with pytest.raises(NotImplementedError, match="XMiniGridEnv does not draw its states"):
        pr.envs.render(adapter, adapter.reset(jax.random.key(0))[0])


def test_two_devices_step_the_batch_as_one_device():
    helpers.assert_two_devices_train_as_one("xminigrid:MiniGrid-Empty-5x5")


def test_an_unknown_id_names_the_nearest_ones(capsys):
    with pytest.raises(
        ValueError, match=r"No xminigrid environment 'MiniGrid-Empty-5'\. Did you mean MiniGrid-Empty-5x5"
    ):
        XMiniGridEnv.make("MiniGrid-Empty-5")
    assert cli.main(["train", "xminigrid:XLand-MiniGrid-R1-9", "--show-settings"]) == 2
    assert re.search(r"Did you mean XLand-MiniGrid-R1-9x9.* MiniGrid-BlockedUnlockPickUp, ", capsys.readouterr().err)


def test_the_command_line_trains_xminigrid_ids(capsys):
    assert cli.main(["train", "xminigrid:MiniGrid-Empty-5x5", "ppo", "--show-settings"]) == 0
    assert "xminigrid:MiniGrid-Empty-5x5 ppo" in capsys.readouterr().out
    assert isinstance(make_env("xminigrid:MiniGrid-Empty-5x5"), XMiniGridEnv)


def test_missing_xminigrid_raises_an_install_hint(monkeypatch):
    fresh = helpers.fresh_module_without(from_xminigrid.__name__, ("xminigrid",), monkeypatch)
    with pytest.raises(ImportError, match=re.escape("pip install 'podrace[xminigrid]'")):
        fresh.XMiniGridEnv.make("MiniGrid-Empty-5x5")
