"""Matches in two-player games: an agent against a fixed opponent, as first and second player."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray, PyTree

from .._types import PolicyStep, TimeStep
from .._validation import check_positive_int
from ..agent import AbstractAgent
from ..envs import AbstractEnv, AbstractTurnBasedEnv
from ..results import MatchResult
from ..search import AbstractEnvModelAgent


def play_match(
    env: AbstractEnv,
    agent: AbstractAgent,
    opponent: AbstractAgent,
    *,
    num_games: int,
    key: PRNGKeyArray,
    max_steps: int = 10_000,
) -> MatchResult:
    """Plays `num_games` games of a two-player game between `agent` and `opponent`: the
    agent makes the first move in the first half of them and the second in the other.

    Self-play trains one agent for both players, so its training return says nothing of
    its strength (in tic-tac-toe, 1 for a game either side won); a match against a fixed
    opponent does: [`podrace.RandomAgent`][], a solver, or the agent of an earlier
    checkpoint. Either side may be any agent: one acting on observations
    ([`podrace.Agent`][], [`podrace.search.MuZeroAgent`][]) or one planning with the
    environment as its model ([`podrace.search.AlphaZeroAgent`][], which searches `env`).
    At each step the player to move (`env.current_player`) acts; the games run side by
    side in one compiled program (both sides are evaluated at every step, and the mover's
    action taken).

    The environment's reward is that of the player who moved
    ([`podrace.envs.AbstractTurnBasedEnv`][]); in a zero-sum game the other's is its
    negative, so a game's score for the agent is the sum of its rewards minus the
    opponent's.

    **Arguments:**

    - `env`: a bare (not auto-resetting) two-player turn-based environment, such as
        `podrace.envs.PgxEnv.make("tic_tac_toe")`.
    - `agent`: the agent the result is of.
    - `opponent`: the agent it plays against.
    - `num_games`: how many games, an even number.
    - `key`: the games' and the players' randomness.
    - `max_steps`: the step budget per game.

    **Returns:**

    A [`podrace.MatchResult`][]; `result.record(first=True)` counts the agent's wins,
    draws and losses as first player.
    """
    if not isinstance(env, AbstractTurnBasedEnv):
        raise TypeError(
            f"play_match plays turn-based games (podrace.envs.AbstractTurnBasedEnv, such as PgxEnv), got "
            f"{type(env).__name__}: for a single-agent environment, use podrace.evaluate."
        )
    check_positive_int("play_match", "num_games", num_games)
    check_positive_int("play_match", "max_steps", max_steps)
    if num_games % 2:
        raise ValueError(
            f"play_match: num_games={num_games} must be even, so that the agent moves first in half the games."
        )
    return _play_match(env, agent, opponent, key, num_games=num_games, max_steps=max_steps)


def act(
    agent: AbstractAgent, env: AbstractEnv, state: PyTree[Array], timestep: TimeStep, carry: PyTree, key: PRNGKeyArray
) -> tuple[PolicyStep, PyTree]:
    """One agent's action in one game, as [`podrace.play_match`][] chooses it: planned in
    `env` from `state` by an agent that plans with the environment as its model
    ([`podrace.search.AbstractEnvModelAgent`][]), chosen from the observation by any other.

    **Arguments:**

    - `agent`: the agent to move.
    - `env`: the game, without an automatic reset.
    - `state`: its current state (one game's).
    - `timestep`: its latest time step.
    - `carry`: the agent's recurrent state.
    - `key`: the randomness of acting.

    **Returns:**

    The policy step and the agent's next carry.
    """
    if isinstance(agent, AbstractEnvModelAgent):
        return agent.act_in(env, state, timestep, carry, key)
    return agent(timestep.observation, carry, key)


@eqx.filter_jit
def _play_match(
    env: AbstractTurnBasedEnv,
    agent: AbstractAgent,
    opponent: AbstractAgent,
    key: PRNGKeyArray,
    *,
    num_games: int,
    max_steps: int,
) -> MatchResult:
    def game(key: PRNGKeyArray, agent_first: Array) -> tuple[Array, Array, Array]:
        reset_key, key = jax.random.split(key)
        state, timestep = env.reset(reset_key)
        first_player = env.current_player(state)
        zero = jnp.zeros((), jnp.int32)
        carries = (agent.initial_carry(), opponent.initial_carry())
        init = (state, timestep, carries, key, jnp.zeros(()), zero)

        def running(loop):
            _, timestep, _, _, _, length = loop
            return ~timestep.is_last & (length < max_steps)

        def step(loop):
            state, timestep, (agent_carry, opponent_carry), key, score, length = loop
            key, agent_key, opponent_key, step_key = jax.random.split(key, 4)
            agent_moves = (env.current_player(state) == first_player) == agent_first
            agent_step, next_agent_carry = act(agent, env, state, timestep, agent_carry, agent_key)
            opponent_step, next_opponent_carry = act(opponent, env, state, timestep, opponent_carry, opponent_key)
            action = jnp.where(agent_moves, agent_step.action, opponent_step.action)
            carries = (
                jax.tree.map(lambda new, old: jnp.where(agent_moves, new, old), next_agent_carry, agent_carry),
                jax.tree.map(lambda new, old: jnp.where(agent_moves, old, new), next_opponent_carry, opponent_carry),
            )
            state, timestep = env.step(state, action, step_key)
            score = score + jnp.where(agent_moves, timestep.reward, -timestep.reward)
            return state, timestep, carries, key, score, length + 1

        _, timestep, _, _, score, length = jax.lax.while_loop(running, step, init)
        return score, length, timestep.is_last

    agent_first = jnp.arange(num_games) < num_games // 2
    scores, lengths, completed = jax.vmap(game)(jax.random.split(key, num_games), agent_first)
    return MatchResult(scores, agent_first, lengths, completed)
