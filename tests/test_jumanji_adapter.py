"""The Jumanji adapter: every registered single-agent environment through check_env, step
by step against Jumanji's own step, flattened observations, joint discrete actions,
terminations and truncations, two devices, the command line's `jumanji:ID` and its
errors."""

import functools
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr
from podrace import cli
from podrace.envs import from_jumanji
from podrace.envs.from_jumanji import JumanjiEnv
from podrace.envs.names import make_env

from . import helpers


jumanji = pytest.importorskip("jumanji")

# The registered environments that have no podrace counterpart, and why.
EXCLUDED = {
    "Connector-v3": "multi-agent: a reward per agent",
    "LevelBasedForaging-v0": "multi-agent: a reward per agent",
    "SearchAndRescue-v0": "multi-agent: a reward per agent",
    "JobShop-v0": "21^10 joint actions, too many for one int32 Discrete action",
    "MultiCVRP-v0": "integer BoundedArray actions (a node per vehicle), neither Discrete nor a floating Box",
    "Sokoban-v0": "downloads its levels from the Hugging Face hub when built",
}
# Jumanji's BinPack scatters float32 values into int32 arrays, which JAX 0.10 warns will be
# an error in a later release (the suite turns warnings into errors).
FUTURE_WARNINGS = {"BinPack-v2": "scatter inputs have incompatible types"}
# check_env compiles and runs each environment eagerly too; the default session checks
# three small ones, `nox -s ecosystem` every one.
CHECKED_BY_DEFAULT = ("Game2048-v1", "Maze-v0", "Knapsack-v1")


@functools.cache
def _adapter(env_id: str) -> JumanjiEnv:
    """One adapter per id: its Jumanji environment is static and hashed by identity."""
    return JumanjiEnv.make(env_id)


def test_the_exclusions_are_registered_environments():
    assert set(EXCLUDED) <= set(from_jumanji.jumanji_ids())


@pytest.mark.parametrize(
    "env_id",
    helpers.every_env([i for i in from_jumanji.jumanji_ids() if i not in EXCLUDED], CHECKED_BY_DEFAULT),
)
def test_every_single_agent_env_passes_check_env(env_id):
    # A time limit of 20 steps ends episodes, so that the automatic reset is checked too.
    with warnings.catch_warnings():
        if env_id in FUTURE_WARNINGS:
            warnings.filterwarnings("ignore", FUTURE_WARNINGS[env_id], FutureWarning)
        report = pr.envs.check_env(pr.envs.TimeLimit(_adapter(env_id), 20), num_steps=60)
    assert not report.skipped, report


@pytest.mark.parametrize(
    ("env_id", "message"),
    [
        ("Connector-v3", r"JumanjiEnv: Connector gives a reward of shape \(10,\) \(one per agent\)"),
        ("JobShop-v0", r"JumanjiEnv: JobShop's actions combine 21 x 21 .* too many for one int32 Discrete"),
        ("MultiCVRP-v0", r"JumanjiEnv: MultiCVRP's action spec BoundedArray of dtype int\d+ has no podrace space"),
    ],
)
def test_environments_without_a_counterpart_are_refused_with_the_reason(env_id, message):
    with pytest.raises(ValueError, match=message):
        JumanjiEnv.make(env_id)


def test_steps_equal_jumanji_s_own_steps_with_observations_flattened():
    adapter = _adapter("Game2048-v1")
    env = adapter.env
    actions = jax.random.randint(jax.random.key(1), (12,), 0, 4)
    key = jax.random.key(0)

    def adapter_run():
        state, first = adapter.reset(key)
        return first, jax.lax.scan(lambda s, a: adapter.step(s, a, key), state, actions)[1]

    def jumanji_run():
        with jax.numpy_rank_promotion("allow"):  # as the adapter runs Jumanji's code
            state, timestep = env.reset(key)
            return timestep, jax.lax.scan(env.step, state, actions)[1]

    (first, timesteps), (jumanji_first, jumanji_steps) = jax.jit(adapter_run)(), jax.jit(jumanji_run)()
    np.testing.assert_array_equal(first.observation[:16], np.ravel(jumanji_first.observation.board))
    restored = jax.vmap(adapter.unflatten)(timesteps.observation)
    np.testing.assert_array_equal(restored.board, jumanji_steps.observation.board)
    np.testing.assert_array_equal(restored.action_mask, jumanji_steps.observation.action_mask)
    assert restored.board.dtype == jnp.int32 and restored.action_mask.dtype == jnp.bool_
    np.testing.assert_array_equal(timesteps.reward, jumanji_steps.reward)


def test_jumanji_s_action_masks_come_through_as_legal_action_masks():
    adapter = JumanjiEnv(_adapter("Game2048-v1").env, legal_action_mask=True)
    space = adapter.observation_space
    assert isinstance(space, pr.MaskedObservationSpace) and isinstance(space.observation, pr.Box)
    key = jax.random.key(0)
    actions = jax.random.randint(jax.random.key(1), (12,), 0, 4)

    def run():
        state, _ = adapter.reset(key)
        return jax.lax.scan(lambda s, a: adapter.step(s, a, key), state, actions)[1]

    timesteps = jax.jit(run)()
    assert isinstance(timesteps.observation, pr.MaskedObservation)
    restored = jax.vmap(adapter.unflatten)(timesteps.observation.observation)
    np.testing.assert_array_equal(timesteps.observation.action_mask, restored.action_mask)
    network = helpers.q_network(jax.random.key(2), observation_shape=space.observation.shape, num_actions=4)
    report = pr.envs.check_env(
        pr.envs.TimeLimit(adapter, 20), agent=pr.Agent(network, pr.policies.EpsilonGreedy(1.0)), num_steps=60
    )
    assert "legal-actions" in report.passed and not report.skipped
    with pytest.raises(ValueError, match=r"JumanjiEnv: .* not one bool per discrete action"):
        JumanjiEnv.make("RubiksCube-v0", legal_action_mask=True)


def test_a_joint_action_is_unravelled_in_row_major_order():
    adapter = _adapter("BinPack-v2")  # 40 spaces x 20 items
    assert adapter.action_space == pr.Discrete(800)
    np.testing.assert_array_equal(adapter._jumanji_action(jnp.asarray(2 * 20 + 7)), [2, 7])


def test_a_solved_puzzle_terminates_and_the_time_limit_truncates():
    # Knapsack terminates when no item fits any more or an item is taken twice: taking
    # item 0 twice ends the episode with discount 0.
    adapter = _adapter("Knapsack-v1")

    def run(key):
        state, _ = adapter.reset(key)
        return jax.lax.scan(lambda s, a: adapter.step(s, a, key), state, jnp.zeros(2, jnp.int32))[1]

    twice = jax.jit(run)(jax.random.key(0))
    np.testing.assert_array_equal(twice.terminated, [False, True])
    assert twice.discount[1] == 0 and not np.any(twice.truncated)
    # Maze-v0 truncates at its time limit (100 steps): walking into a wall never ends it sooner.
    maze = JumanjiEnv.make("Maze-v0", time_limit=3)

    def walk(key):
        state, _ = maze.reset(key)
        return jax.lax.scan(lambda s, a: maze.step(s, a, key), state, jnp.zeros(3, jnp.int32))[1]

    walked = jax.jit(walk)(jax.random.key(0))
    if np.any(walked.terminated):  # the start may be next to the target: nothing to check then
        pytest.skip("the sampled maze put the target on the walk")
    np.testing.assert_array_equal(walked.truncated, [False, False, True])
    assert np.all(walked.discount == 1)


def test_two_devices_step_the_batch_as_one_device():
    helpers.assert_two_devices_train_as_one("jumanji:Game2048-v1")


def test_an_unknown_id_names_the_nearest_ones(capsys):
    with pytest.raises(ValueError, match=r"No jumanji environment 'Game2048'\. Did you mean Game2048-v1"):
        JumanjiEnv.make("Game2048")
    assert cli.main(["train", "jumanji:Snake-v2", "--show-settings"]) == 2
    assert re.search(r"Did you mean Snake-v1.* BinPack-v2, ", capsys.readouterr().err)


def test_the_command_line_trains_jumanji_ids(capsys):
    assert cli.main(["train", "jumanji:Game2048-v1", "ppo", "--show-settings"]) == 0
    assert "jumanji:Game2048-v1 ppo" in capsys.readouterr().out
    assert isinstance(make_env("jumanji:Game2048-v1"), JumanjiEnv)


def test_missing_jumanji_raises_an_install_hint(monkeypatch):
    fresh = helpers.fresh_module_without(from_jumanji.__name__, ("jumanji",), monkeypatch)
    with pytest.raises(ImportError, match=re.escape("pip install 'podrace[jumanji]'")):
        fresh.JumanjiEnv.make("Game2048-v1")
