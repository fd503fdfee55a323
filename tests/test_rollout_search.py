"""Plain Monte-Carlo tree search: UCT's visit counts against a reference written from UCB1's
formula, the value of a random rollout, legal moves, a match, and the refusals.

(Its play late in tic-tac-toe games, beside AlphaZero's searches with no knowledge, is in
`tests/test_alphazero_tictactoe.py`.)
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr


pgx = pytest.importorskip("pgx")
pytest.importorskip("mctx")


@eqx.filter_jit
def _act(agent: pr.search.AbstractEnvModelAgent, env: pr.envs.AbstractEnv, key: jax.Array) -> pr.PolicyStep:
    state, timestep = env.reset(key)
    return agent.act_in(env, state, timestep, (), key)[0]


def _ucb1_visits(values: list[float], exploration: float, num_simulations: int) -> list[int]:
    """UCB1 over actions whose every trial ends the episode with a fixed reward: each action
    once, then the highest `Q + c * sqrt(log(N) / n)`, with `N` the root's visits (mctx
    counts the root's own expansion as one)."""
    visits = [0] * len(values)
    for simulation in range(num_simulations):
        untried = [action for action, count in enumerate(visits) if count == 0]
        if untried:
            visits[untried[0]] += 1
            continue
        root_visits = simulation + 1
        scores = [q + exploration * math.sqrt(math.log(root_visits) / n) for q, n in zip(values, visits, strict=True)]
        visits[int(np.argmax(scores))] += 1
    return visits


@pytest.mark.parametrize("exploration", [0.5, 2.0, 5.0])
def test_uct_visits_the_actions_of_a_bandit_as_ucb1_does(exploration):
    """Probe 4: one step, reward +1 for action 1 and -1 for action 0, so every simulation
    through an action backs up its reward exactly."""
    agent = pr.search.RolloutSearchAgent(2, pr.search.UCTSearch(40, exploration=exploration))
    step = _act(agent, pr.envs.probes.ActionRewardProbe(), jax.random.key(0))
    expected = _ucb1_visits([-1.0, 1.0], exploration, 40)
    np.testing.assert_array_equal(np.asarray(step.extras.visit_counts), expected)
    np.testing.assert_allclose(np.asarray(step.extras.policy), np.asarray(expected) / 40, rtol=1e-6)
    assert int(step.action) == 1


def test_a_rollout_values_a_state_by_the_rewards_that_follow_it():
    """Probe 3: rewards 0 then +1 over two steps, whatever the actions. A search of one
    simulation backs up the rollout from the state after the first step (worth
    `discount * 1`) and the root's own rollout (`discount * 1` as well): the root's value
    is their mean, whichever action is tried."""
    for discount in (1.0, 0.5):
        agent = pr.search.RolloutSearchAgent(2, pr.search.UCTSearch(1), discount=discount)
        step = _act(agent, pr.envs.probes.DelayedRewardProbe(), jax.random.key(1))
        # The root's rollout: 0 + discount * 1. The child: reward 0, then its rollout's 1,
        # discounted once: discount * 1.
        np.testing.assert_allclose(float(step.extras.value), discount, rtol=1e-6)


TIC_TAC_TOE = pr.envs.PgxEnv.make("tic_tac_toe")


def test_plain_mcts_beats_a_random_player_on_either_seat():
    """64 simulations of UCT with random rollouts against uniformly random legal moves win
    most games and lose few (not none: with random rollouts, an early trap can escape
    such a budget); a search that took the opponent's wins as its own, or moved
    illegally (which loses at once in Pgx), would lose many."""
    agent = pr.search.RolloutSearchAgent(9, pr.search.UCTSearch(64))
    result = pr.play_match(TIC_TAC_TOE, agent, pr.RandomAgent(9), num_games=40, key=jax.random.key(2))
    (first_wins, _, first_losses), (second_wins, _, second_losses) = (
        result.record(first=True),
        result.record(first=False),
    )
    assert first_wins >= 18 and first_losses <= 1, result.record(first=True)
    assert second_wins >= 12 and second_losses <= 2, result.record(first=False)


def test_uct_searches_with_a_networks_values_and_ignores_its_prior():
    """`UCTSearch` serves AlphaZero's agent too: with a network that gives every legal move
    the same prior and every position the value 0, it takes a win in one (X has 0 and 1,
    O has 3 and 4: X wins at 2)."""
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((3, 3, 2), (8,), key=jax.random.key(0)),
        pr.networks.PolicyLogitHead(8, 9, with_value=True, key=jax.random.key(1)),
    )
    agent = pr.search.AlphaZeroAgent(network, pr.search.UCTSearch(64))
    state, timestep = TIC_TAC_TOE.reset(jax.random.key(0))
    for move in (0, 3, 1, 4):
        state, timestep = TIC_TAC_TOE.step(state, jnp.asarray(move, jnp.int32), jax.random.key(0))
    step = eqx.filter_jit(agent.act_in)(TIC_TAC_TOE, state, timestep, (), jax.random.key(3))[0]
    assert int(step.action) == 2
    # Occupied cells are never visited.
    assert np.all(np.asarray(step.extras.visit_counts)[[0, 1, 3, 4]] == 0)


def test_bad_settings_are_refused_at_construction():
    with pytest.raises(ValueError, match="UCTSearch: num_simulations"):
        pr.search.UCTSearch(0)
    with pytest.raises(ValueError, match="UCTSearch: exploration"):
        pr.search.UCTSearch(8, exploration=-1.0)
    with pytest.raises(ValueError, match="RolloutSearchAgent: num_actions"):
        pr.search.RolloutSearchAgent(0)
    with pytest.raises(ValueError, match="RolloutSearchAgent: max_rollout_steps"):
        pr.search.RolloutSearchAgent(9, max_rollout_steps=0)
    with pytest.raises(ValueError, match="RolloutSearchAgent: discount"):
        pr.search.RolloutSearchAgent(9, discount=1.5)
    with pytest.raises(TypeError, match="act_in"):
        pr.search.RolloutSearchAgent(9)(jnp.zeros(3), (), jax.random.key(0))


def test_a_wrapper_that_hides_whose_turn_it_is_is_refused_naming_the_agent():
    hidden = pr.envs.TimeLimit(TIC_TAC_TOE, 9)
    state, timestep = hidden.reset(jax.random.key(0))
    with pytest.raises(ValueError, match=r"RolloutSearchAgent negates values .* TimeLimit hides PgxEnv's"):
        pr.search.RolloutSearchAgent(9).act_in(hidden, state, timestep, (), jax.random.key(0))
