"""AlphaZero: mctx's search with the environment as its model, inside Anakin's program.

Legal moves on tic-tac-toe, the search's outputs in the trajectory, value negation between
the players on hand-made positions, the loss's targets by hand, the pipeline's refusals,
the command line with checkpoints, and learning Catch on seeds 0-9.
"""

import dataclasses
import os
import re
import subprocess
import sys
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, PRNGKeyArray

import podrace as pr
from podrace import cli, configs
from podrace.checkpoint import Checkpointer
from podrace.executors.anakin import init_state, rollout

from . import helpers


pgx = pytest.importorskip("pgx")
pytest.importorskip("mctx")

# Built once: the adapter holds Pgx's environment by identity, so compiled programs are shared.
TIC_TAC_TOE = pr.envs.PgxEnv.make("tic_tac_toe")
NUM_SIMULATIONS = 8


@final
class NotTurnBased(pr.envs.AbstractEnv[Any]):
    """A game, without saying whose turn it is: a search over it takes every player's
    reward as its own (no value negation)."""

    game: pr.envs.AbstractEnv[Any]

    @property
    def observation_space(self) -> pr.AbstractSpace:
        return self.game.observation_space

    @property
    def action_space(self) -> pr.AbstractSpace:
        return self.game.action_space

    def reset(self, key: PRNGKeyArray) -> tuple[Any, pr.TimeStep]:
        return self.game.reset(key)

    def step(self, state: Any, action: Array, key: PRNGKeyArray) -> tuple[Any, pr.TimeStep]:
        return self.game.step(state, action, key)


def _config(search: str = "gumbel", **changes: Any) -> configs.AlphaZeroConfig:
    settings = dict(hidden=(16,), num_simulations=NUM_SIMULATIONS, num_envs=6, rollout_length=12) | changes
    return configs.AlphaZeroConfig(algorithm="alphazero", search=search, **settings)


def _pipeline(env: pr.envs.AbstractEnv, search: str = "gumbel", **changes: Any) -> pr.Anakin:
    return _config(search, **changes).pipeline(env, jax.random.key(0))


def _trajectory(pipeline: pr.Anakin, key: PRNGKeyArray) -> pr.Trajectory:
    """A rollout `[T + 1, B]` of the pipeline's initial agent."""
    state = init_state(pipeline.env, pipeline.learner, key, num_envs=pipeline.num_envs)
    agent = pipeline.learner.agent(state.learner)
    return rollout(pipeline.env, agent, state.envs, pipeline.rollout_length)[1]


_rollout = eqx.filter_jit(_trajectory)


def _acting(trajectory: pr.Trajectory) -> np.ndarray:
    """Where someone acts: every step but an episode's last, `[T, B]`."""
    return ~np.asarray(trajectory.timestep.is_last[:-1])


# --------------------------------------------------------------------------------------
# Legal moves and the search's outputs in the trajectory.
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("search", ["gumbel", "muzero"])
def test_the_agent_never_picks_an_illegal_move_on_tic_tac_toe(search):
    pipeline = _pipeline(TIC_TAC_TOE, search, num_envs=8, rollout_length=30)
    trajectory = _rollout(pipeline, jax.random.key(1))
    acting = _acting(trajectory)
    masks = np.asarray(trajectory.timestep.observation.action_mask[:-1])
    actions = np.asarray(trajectory.policy_step.action)
    chosen_legal = np.take_along_axis(masks, actions[..., None], axis=-1)[..., 0]
    assert acting.sum() > 100 and np.all(chosen_legal[acting])
    # Many games were played to their end, none lost by an illegal move (Pgx's -1 to the mover).
    assert int(np.sum(trajectory.timestep.terminated)) >= 10
    statistics = trajectory.policy_step.extras
    for per_action in (statistics.policy, statistics.visit_counts):
        assert np.all(np.asarray(per_action)[acting][~masks[acting]] == 0)


def test_search_outputs_travel_in_the_trajectory_with_their_shapes():
    pipeline = _pipeline(pr.envs.Catch(rows=5, columns=3), discount=0.9)
    trajectory = _rollout(pipeline, jax.random.key(2))
    num_steps, num_envs, num_actions = pipeline.rollout_length, pipeline.num_envs, 3
    statistics = trajectory.policy_step.extras
    assert isinstance(statistics, pr.SearchStatistics)
    assert statistics.policy.shape == statistics.visit_counts.shape == (num_steps, num_envs, num_actions)
    assert statistics.value.shape == statistics.discount.shape == (num_steps, num_envs)
    acting = _acting(trajectory)
    policy, actions = np.asarray(statistics.policy), np.asarray(trajectory.policy_step.action)
    np.testing.assert_allclose(policy.sum(axis=-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(statistics.visit_counts).sum(axis=-1), NUM_SIMULATIONS)
    # The action's log-probability and the entropy are the search policy's.
    chosen = np.take_along_axis(policy, actions[..., None], axis=-1)[..., 0]
    np.testing.assert_allclose(np.asarray(trajectory.policy_step.log_prob), np.log(chosen), rtol=1e-5, atol=1e-6)
    entropy = -np.sum(np.where(policy > 0, policy * np.log(np.maximum(policy, 1e-30)), 0.0), axis=-1)
    np.testing.assert_allclose(np.asarray(trajectory.policy_step.entropy), entropy, rtol=1e-4, atol=1e-6)
    # One player: the search's discount of the step taken is the agent's times the environment's.
    expected = 0.9 * np.asarray(trajectory.timestep.discount[1:])
    np.testing.assert_allclose(np.asarray(statistics.discount)[acting], expected[acting], rtol=1e-6)
    assert np.all(np.isfinite(np.asarray(statistics.value)))


def test_the_searchs_discount_is_minus_one_between_the_players_and_zero_at_the_end():
    trajectory = _rollout(_pipeline(TIC_TAC_TOE, num_envs=4, rollout_length=20, discount=1.0), jax.random.key(3))
    acting = _acting(trajectory)
    ends = np.asarray(trajectory.timestep.terminated[1:])
    discount = np.asarray(trajectory.policy_step.extras.discount)
    np.testing.assert_array_equal(discount[acting & ends], 0.0)
    np.testing.assert_array_equal(discount[acting & ~ends], -1.0)
    assert np.any(acting & ends) and np.any(acting & ~ends)


# --------------------------------------------------------------------------------------
# Value negation on hand-made positions.
# --------------------------------------------------------------------------------------


def _position(moves: list[int]) -> tuple[Any, pr.TimeStep]:
    """Tic-tac-toe after `moves` (cells 0-8, row by row, the first player first)."""
    state, timestep = TIC_TAC_TOE.reset(jax.random.key(0))
    for move in moves:
        state, timestep = TIC_TAC_TOE.step(state, jnp.asarray(move, jnp.int32), jax.random.key(0))
    assert not bool(timestep.is_last)
    return state, timestep


def _network(key: PRNGKeyArray) -> pr.networks.FeedForwardNetwork:
    torso_key, head_key = jax.random.split(key)
    torso = pr.networks.MLPTorso((3, 3, 2), (16,), key=torso_key)
    return pr.networks.FeedForwardNetwork(torso, pr.networks.PolicyLogitHead(16, 9, with_value=True, key=head_key))


@eqx.filter_jit
def _search(agent: pr.search.AlphaZeroAgent, env: pr.envs.AbstractEnv, state: Any, timestep: pr.TimeStep):
    return agent.act_in(env, state, timestep, (), jax.random.key(5))[0]


SEARCHES = {
    "gumbel": pr.search.GumbelMuZeroSearch(64, gumbel_scale=0.0),
    "muzero": pr.search.MuZeroSearch(200, dirichlet_fraction=0.0, temperature=1e-3),
}


@pytest.mark.parametrize("search", SEARCHES)
def test_the_search_blocks_the_opponents_win_only_with_value_negation(search):
    """X (first player) has 0 and 8, O has 3 and 4 and threatens 5; X has no win in one.
    With the opponent's values negated, every move but 5 backs up O's win as a loss and the
    search blocks; a search that takes O's reward as its own (no negation) does not."""
    state, timestep = _position([0, 3, 8, 4])
    agent = pr.search.AlphaZeroAgent(_network(jax.random.key(3)), SEARCHES[search])
    step = _search(agent, TIC_TAC_TOE, state, timestep)
    assert int(step.action) == 5 and int(np.argmax(step.extras.policy)) == 5
    assert float(step.extras.discount) == -1.0
    blind = _search(agent, NotTurnBased(TIC_TAC_TOE), state, timestep)
    assert int(blind.action) != 5 and float(blind.extras.discount) == 1.0


def test_the_search_takes_a_win_in_one_and_values_it_for_the_player_to_move():
    """X has 0 and 1, O has 3 and 4: X wins at 2 (reward +1 to the mover, discount 0)."""
    state, timestep = _position([0, 3, 1, 4])
    agent = pr.search.AlphaZeroAgent(_network(jax.random.key(4)), SEARCHES["muzero"])
    step = _search(agent, TIC_TAC_TOE, state, timestep)
    assert int(step.action) == 2 and float(step.extras.discount) == 0.0
    assert float(step.extras.value) > 0.5  # most simulations end in the win


def _hand_made_trajectory(observations: Array) -> pr.Trajectory:
    """One game of two moves `[3]`: player A moves, player B moves and wins (+1 to B)."""
    timestep = eqx.tree_at(
        lambda t: (t.observation, t.reward, t.discount, t.is_first, t.terminated, t.truncated),
        pr.TimeStep.first(observations[0]),
        (
            observations,
            jnp.asarray([0.0, 0.0, 1.0]),
            jnp.asarray([1.0, 1.0, 0.0]),
            jnp.asarray([True, False, False]),
            jnp.asarray([False, False, True]),
            jnp.asarray([False, False, False]),
        ),
    )
    statistics = pr.SearchStatistics(
        policy=jnp.asarray([[0.5, 0.25, 0.25], [0.0, 1.0, 0.0]]),
        value=jnp.zeros(2),
        visit_counts=jnp.asarray([[4.0, 2.0, 2.0], [0.0, 8.0, 0.0]]),
        discount=jnp.asarray([-1.0, -1.0]),
    )
    return pr.Trajectory(timestep, pr.PolicyStep(jnp.asarray([0, 1]), jnp.zeros(2), jnp.zeros(2), statistics), ())


def test_the_loss_negates_the_value_target_of_the_player_who_lost():
    network = helpers.logit_network(jax.random.key(6), with_value=True)
    observations = helpers.normal(7, (3, *helpers.OBS_SHAPE))
    trajectory = jax.tree.map(lambda x: x[:, None], _hand_made_trajectory(observations))  # a batch of one
    loss = pr.losses.AlphaZeroLoss(value_coefficient=0.5)
    value, terms = loss(helpers.agent(network), trajectory)
    outputs = [network(observation, ())[0] for observation in observations]
    # B's move won: target +1 for B at step 1; A, to move at step 0, lost: target -1.
    expected_value = np.mean([(-1.0 - outputs[0].value) ** 2, (1.0 - outputs[1].value) ** 2])
    log_policy = [jax.nn.log_softmax(output.logits) for output in outputs[:2]]
    expected_policy = np.mean(
        [-(0.5 * log_policy[0][0] + 0.25 * (log_policy[0][1] + log_policy[0][2])), -log_policy[1][1]]
    )
    np.testing.assert_allclose(terms["value_loss"], expected_value, rtol=1e-5)
    np.testing.assert_allclose(terms["policy_loss"], expected_policy, rtol=1e-5)
    np.testing.assert_allclose(value, expected_policy + 0.5 * expected_value, rtol=1e-5)


# --------------------------------------------------------------------------------------
# Refusals and the missing package.
# --------------------------------------------------------------------------------------


def test_a_wrapper_that_hides_whose_turn_it_is_is_refused():
    pipeline = _pipeline(pr.envs.TimeLimit(TIC_TAC_TOE, max_episode_steps=20))
    with pytest.raises(ValueError, match="but TimeLimit hides PgxEnv's"):
        eqx.filter_eval_shape(_trajectory, pipeline, jax.random.key(0))


def test_the_pipeline_refuses_normalised_observations_with_a_search_agent():
    config = _config(normalize_observations=True)
    with pytest.raises(ValueError, match="without observation normalisation"):
        config.pipeline(pr.envs.Catch(), jax.random.key(0))


def test_evaluate_agent_plays_an_alphazero_agent_searching_in_the_environments_state():
    """Searching CartPole's own states (a uniform prior, a value of 0), the agent sees the
    pole fall a few steps ahead and keeps it up far longer than random play does."""
    env = pr.envs.CartPole()
    search = pr.search.GumbelMuZeroSearch(32, gumbel_scale=0.0)
    agent = pr.search.AlphaZeroAgent(helpers.uninformed_network(env.action_space, (4,)), search)
    key = jax.random.key(0)
    searched = pr.evaluate_agent(env, agent, num_episodes=4, key=key, max_steps=200)
    random = pr.random_policy_episodes(env, num_episodes=4, key=key, max_steps=200)
    assert np.all(searched.completed | (searched.lengths == 200))
    assert float(np.mean(searched.returns)) > 2.5 * float(np.mean(random.returns)), (searched.returns, random.returns)


def test_the_search_agent_refuses_to_act_from_an_observation_alone():
    agent = _pipeline(pr.envs.Catch()).learner.initial_agent()
    with pytest.raises(TypeError, match=re.escape("act with agent.act_in(env, env_state, timestep, carry, key)")):
        agent(jnp.zeros((10, 5, 1)), (), jax.random.key(0))


def test_alphazero_refuses_continuous_actions_and_recurrent_networks():
    with pytest.raises(ValueError, match="alphazero searches over discrete actions"):
        _config().pipeline(pr.envs.pendulum_v1(), jax.random.key(0))
    network = helpers.recurrent_network(jax.random.key(0))
    with pytest.raises(ValueError, match="give it a feed-forward network"):
        pr.search.AlphaZeroAgent(network)


def test_a_missing_mctx_names_the_search_extra(monkeypatch):
    pipeline = _pipeline(pr.envs.Catch(rows=5, columns=3))
    monkeypatch.setitem(sys.modules, "mctx", None)
    with pytest.raises(
        ImportError, match=re.escape("needs mctx, which is not installed: pip install 'podrace[search]'")
    ):
        eqx.filter_eval_shape(_trajectory, pipeline, jax.random.key(0))


_TWO_DEVICES_SCRIPT = """
import jax
import numpy as np
import podrace as pr
from podrace import configs

config = configs.AlphaZeroConfig(
    algorithm="alphazero", hidden=(16,), num_simulations=4, rollout_length=4, num_epochs=2, num_minibatches=2
)
env = pr.envs.PgxEnv.make("tic_tac_toe")
learner = config.learner(env.action_space, configs.observation_shape(env), jax.random.key(0))

def train(devices, num_envs):
    mesh = jax.sharding.Mesh(jax.devices()[:devices], ("devices",))
    pipeline = pr.Anakin(env, learner, num_envs=num_envs, rollout_length=4, mesh=mesh)
    result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=2)
    return jax.tree.leaves(result.state.learner.params) + [result.metrics.episode_return_sum]

for one, two in zip(train(1, 8), train(2, 4), strict=True):
    np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-5)  # sums in another order
print("equal")
"""


def test_two_devices_search_and_learn_as_one():
    """Self-play on tic-tac-toe, split over two forced CPU devices (four games each), ends
    with the parameters of one device with eight: each game's search draws from its own
    key, and the gradients are averaged over the devices (in a subprocess)."""
    run = subprocess.run(
        [sys.executable, "-c", _TWO_DEVICES_SCRIPT],
        env=dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0 and "equal" in run.stdout, run.stderr[-3000:]


# --------------------------------------------------------------------------------------
# The command line, checkpoints, and learning.
# --------------------------------------------------------------------------------------


def test_podrace_train_catch_alphazero_checkpoints_and_resumes_to_the_same_state(tmp_path, capsys):
    run = ["train", "catch", "alphazero", "--num-envs", "4", "--rollout-length", "4", "--hidden", "8"]
    directory = tmp_path / "run"
    saving = ["--checkpoint-dir", str(directory), "--checkpoint-every", "1", "--updates-per-call", "1"]
    output = ["--output", str(tmp_path / "c.png")]
    assert cli.main([*run, "--num-updates", "1", *saving, *output]) == 0
    assert cli.main([*run, "--num-updates", "2", *saving, *output, "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "mean episode reward" in printed and f"resumed from update 1 in {directory}" in printed, printed
    run = helpers.cli_run(
        "catch", "alphazero", num_envs=4, rollout_length=4, hidden=(8,), num_updates=2, updates_per_call=1
    )
    pipeline, key = run.make()
    with Checkpointer(directory) as checkpointer:
        assert checkpointer.all_steps() == [1, 2]
        restored = checkpointer.restore(pipeline.init(key))
    state = pipeline.init(key)
    for _ in range(2):
        state = pipeline.train(state, num_updates=1).state
    helpers.assert_trees_close(restored, state, rtol=0, atol=0)
    # `podrace evaluate` plays the agent with its search, without the noise, in its video too.
    video = tmp_path / "episode.gif"
    assert cli.main(["evaluate", str(directory), "--num-episodes", "3", "--video", str(video)]) == 0
    printed = capsys.readouterr().out
    assert video.read_bytes().startswith(b"GIF8")
    assert f"video: {video} (the agent's gumbel search of 8 simulations, no noise)" in printed, printed
    greedy = eqx.tree_at(lambda agent: agent.search, pipeline.agent_at(restored), run.config.evaluation_search())
    assert greedy.search.gumbel_scale == 0.0
    key = jax.random.split(jax.random.key(0))[0]
    episodes = pr.evaluate_agent(pipeline.evaluation_env(restored), greedy, num_episodes=3, key=key)
    expected = f"mean return {float(np.mean(episodes.returns)):.3f} +- {float(np.std(episodes.returns)):.3f} over 3"
    assert expected in printed and "the agent's gumbel search of 8 simulations, no noise" in printed, printed


@pytest.mark.slow
def test_alphazero_learns_catch_on_ten_seeds():
    """`podrace train catch alphazero`'s settings on seeds 0-9, one population in one
    program: the search agent's training returns over the last 50 updates, and its prior
    network's, played by its mode without a search, reach 0.9 on at least 9 seeds."""
    run = dataclasses.replace(helpers.cli_run("catch", "alphazero"), seed=0, seeds=10)
    population, key = run.make()
    result = population.train(population.init(key), num_updates=run.config.num_updates)
    metrics = result.metrics  # [seeds, updates]
    searched = np.asarray(
        metrics.episode_return_sum[:, -50:].sum(axis=1) / metrics.episodes_completed[:, -50:].sum(axis=1)
    )
    evaluation = pr.evaluate_population(
        pr.envs.Catch(),
        population.networks(result.state),
        run.config.evaluation_policy(),
        num_episodes=100,
        key=jax.random.key(10),
    )
    prior = np.asarray(evaluation.returns).mean(axis=1)
    print(f"search agent by seed: {np.round(searched, 3)}; prior's mode by seed: {np.round(prior, 3)}")
    assert np.sum(searched >= 0.9) >= 9, searched
    assert np.sum(prior >= configs.TUNED["catch", "alphazero"].solved_at) >= 9, prior
