"""AlphaZero's acting on Pgx's tic-tac-toe: podrace's search agent inside its compiled
Anakin rollout against a bare mctx loop written as Pgx's AlphaZero example writes it.

Both programs run the same work in each step of a batch of `B` games: the network (an MLP
with one hidden layer, a prior policy and a value) on the current positions, mctx's
`gumbel_muzero_policy` with `S` simulations whose recurrent function steps the game with
Pgx's `step` and evaluates the network on the positions reached, and one step of every
game with the chosen actions, a finished game starting again. A compiled call runs `T`
such steps in a `lax.scan`.

- `podrace`: `podrace.search.AlphaZeroAgent(network, GumbelMuZeroSearch(S))` acting in
  `AutoReset(PgxEnv.make("tic_tac_toe"))` through `podrace.executors.anakin.rollout`, the
  rollout of `podrace.Anakin`'s program (what an AlphaZero learner's update acts with),
  jitted alone; the call returns the batch and the trajectory the learner would read.
- `bare`: `jax.jit` of a `lax.scan` of `mctx.gumbel_muzero_policy` over the batch, with
  a plain function network on a dict of the same weights, a hand-written `recurrent_fn`
  calling `jax.vmap(env.step)` of Pgx directly (the mover's reward, discount -1 between
  the players and 0 where the game ended, the value 0 there), and Pgx's
  `pgx.experimental.auto_reset`; each step records what Pgx's example records (the
  observations, rewards, ends, the search's policy and discounts).

- `bare_per_game`: the bare loop with one change, each game's search a search of one
  root under `vmap` with a key per game, as podrace's agent searches: what that choice
  costs, apart from the rest of the framework.

The two differ where a framework must: podrace's agent searches each game's tree under
`vmap` (its `act_in` is written for one environment), draws per-game keys, steps copies
of any environment (absorbing nodes past an episode's end, the player to move read from
the environment), and its `AutoReset` starts a new game on the step after a game ends,
where Pgx's `auto_reset` replaces the final position within the same step. Every step of
either program is one search per game, so the work per step is the same.

Figures: search steps per second (`T * B` per call over the seconds per call) for each,
and `ratio_vs_bare`, podrace's over the bare loop's. Calls are interleaved, each round
in a rotated order, and the median call is reported (see `_compare.py`); compile seconds
(the first call over the median) are reported apart.

`--check` first plays `CHECK_STEPS` steps from the same games with `gumbel_scale=0` on
both sides and asserts the same network outputs at the roots, the same actions, visit
counts and search policies. With the Gumbel noise on, the two draw their randomness
differently (podrace one key per game, the bare loop one key for the batch, as Pgx's
example does), so only the noiseless search can be compared step for step. The first
five moves of tic-tac-toe cannot end a game, so no reset enters the comparison.

    python benchmarks/search_mctx.py [--batch 64] [--simulations 16] [--rollout 100]
        [--repeats 10] [--check]
"""

import argparse
import sys
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import mctx
import numpy as np
import optax
import pgx
from _compare import Method, max_difference, print_results, time_interleaved
from jax import lax
from pgx.experimental import auto_reset

import podrace
from podrace.executors.anakin import init_state, rollout


HIDDEN = 64
GAME = "tic_tac_toe"
CHECK_STEPS = 5


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="AlphaZero's search on tic-tac-toe: podrace against a bare mctx loop.")
    parser.add_argument("--batch", type=int, default=64, help="games searched at once (B)")
    parser.add_argument("--simulations", type=int, default=16, help="simulations per search (S)")
    parser.add_argument("--rollout", type=int, default=100, help="steps per compiled call (T)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per method, interleaved")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="first check podrace against the bare loop")
    return parser.parse_args(argv)


# --------------------------------------------------------------------------------------
# (a) podrace
# --------------------------------------------------------------------------------------


def make_agent(env: podrace.envs.PgxEnv, simulations: int, gumbel_scale: float, key: jax.Array):
    torso_key, head_key = jax.random.split(key)
    network = podrace.networks.FeedForwardNetwork(
        podrace.networks.MLPTorso(env.observation_shape, (HIDDEN,), key=torso_key),
        podrace.networks.PolicyLogitHead(HIDDEN, env.num_actions, with_value=True, key=head_key),
    )
    search = podrace.search.GumbelMuZeroSearch(simulations, gumbel_scale=gumbel_scale)
    return podrace.search.AlphaZeroAgent(network, search)


def initial_games(env: podrace.envs.AutoReset, agent: podrace.search.AlphaZeroAgent, key: jax.Array, batch: int):
    """The batch of games that `podrace.Anakin.init` starts from `key` (the learner's
    optimiser is not timed)."""
    learner = podrace.learners.AlphaZeroLearner(agent, podrace.losses.AlphaZeroLoss(), optax.sgd(0.0))
    return init_state(env, learner, key, num_envs=batch).envs


@eqx.filter_jit
def podrace_rollout(env: podrace.envs.AutoReset, agent: podrace.search.AlphaZeroAgent, envs: Any, length: int):
    """`length` steps of the batch: the batch after them and the trajectory."""
    last, trajectory, _ = rollout(env, agent, envs, length)
    return last, trajectory


# --------------------------------------------------------------------------------------
# (b) a bare mctx loop, as Pgx's AlphaZero example writes it
# --------------------------------------------------------------------------------------


def bare_params(agent: podrace.search.AlphaZeroAgent) -> dict[str, jax.Array]:
    """The agent's weights as a dict, `[out, in]` as Equinox stores them."""
    network: Any = agent.network
    hidden, head = network.torso.layers[0], network.head
    return {
        "w1": hidden.weight,
        "b1": hidden.bias,
        "w_logits": head.linear.weight,
        "b_logits": head.linear.bias,
        "w_value": head.value_head.linear.weight,
        "b_value": head.value_head.linear.bias,
    }


def bare_network(params: dict[str, jax.Array], observation: jax.Array, legal: jax.Array):
    """Prior logits (illegal moves at the lowest float, as mctx masks) and values of a batch."""
    x = observation.reshape(observation.shape[0], -1).astype(jnp.float32)
    h = jax.nn.relu(x @ params["w1"].T + params["b1"])
    logits = h @ params["w_logits"].T + params["b_logits"]
    value = (h @ params["w_value"].T + params["b_value"])[:, 0]
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min), value


def make_bare(game: Any, simulations: int, gumbel_scale: float, *, per_game: bool = False):
    """The bare search and self-play loop over `game` (a Pgx environment); with
    `per_game`, each game's search is a search of one root under `vmap`, with a key per
    game, as podrace's agent searches."""

    def recurrent_fn(params, rng_key, action, state):
        del rng_key
        current_player = state.current_player
        state = jax.vmap(game.step)(state, action)
        logits, value = bare_network(params, state.observation, state.legal_action_mask)
        reward = state.rewards[jnp.arange(state.rewards.shape[0]), current_player]
        value = jnp.where(state.terminated, 0.0, value)
        discount = jnp.where(state.terminated, 0.0, -jnp.ones_like(value))
        # chex's dataclasses hide their fields from pyright.
        output = mctx.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=logits, value=value)  # pyright: ignore[reportCallIssue]
        return output, state

    def search(params, key, state):
        logits, value = bare_network(params, state.observation, state.legal_action_mask)
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=state)  # pyright: ignore[reportCallIssue]
        return mctx.gumbel_muzero_policy(
            params=params,
            rng_key=key,
            root=root,
            recurrent_fn=recurrent_fn,
            num_simulations=simulations,
            invalid_actions=~state.legal_action_mask,
            gumbel_scale=gumbel_scale,
        )

    def search_each(params, key, state):
        """Each game's search alone: `B` searches of one root under `vmap`."""

        def search_one(key, state):
            output: Any = search(params, key, jax.tree.map(lambda x: x[None], state))
            return output.action[0], output.action_weights[0]

        return jax.vmap(search_one)(jax.random.split(key, state.current_player.shape[0]), state)

    step_game = jax.vmap(auto_reset(game.step, game.init))

    def selfplay(params, state, key, length: int):
        def step_fn(state, key):
            key1, key2 = jax.random.split(key)
            observation = state.observation
            if per_game:
                action, action_weights = search_each(params, key1, state)
            else:
                policy_output = search(params, key1, state)
                action, action_weights = policy_output.action, policy_output.action_weights
            keys = jax.random.split(key2, state.current_player.shape[0])
            state = step_game(state, action, keys)
            discount = jnp.where(state.terminated, 0.0, -jnp.ones(state.terminated.shape))
            record = (observation, state.rewards, state.terminated, action_weights, discount)
            return state, record

        key, scan_key = jax.random.split(key)
        state, records = lax.scan(step_fn, state, jax.random.split(scan_key, length))
        return state, key, records

    return jax.jit(search), jax.jit(selfplay, static_argnames="length")


# --------------------------------------------------------------------------------------
# Faithfulness check: the noiseless search from the same games
# --------------------------------------------------------------------------------------


class Searched(NamedTuple):
    logits: np.ndarray
    value: np.ndarray
    action: np.ndarray
    visit_counts: np.ndarray
    policy: np.ndarray


def check(batch: int, simulations: int, seed: int) -> None:
    """Plays `CHECK_STEPS` steps with `gumbel_scale=0` both ways from the same games and
    asserts the same root outputs, actions, visit counts and search policies."""
    with jax.default_matmul_precision("highest"):
        env = podrace.envs.PgxEnv.make(GAME)
        auto = podrace.envs.AutoReset(env)
        network_key, run_key = jax.random.split(jax.random.key(seed))
        agent = make_agent(env, simulations, 0.0, network_key)
        envs = initial_games(auto, agent, run_key, batch)
        games: Any = envs.env_state.env_state  # pyright: ignore[reportAttributeAccessIssue]
        _, trajectory = podrace_rollout(auto, agent, envs, CHECK_STEPS)
        steps = trajectory.policy_step
        observation: Any = trajectory.timestep.observation
        output, _ = jax.vmap(jax.vmap(agent.network, in_axes=(0, None)), in_axes=(0, None))(observation, ())
        ours = Searched(
            *map(
                np.asarray,
                (
                    output.logits[:-1],
                    output.value[:-1],
                    steps.action,
                    steps.extras.visit_counts,
                    steps.extras.policy,
                ),
            )
        )

        game = env.env
        search, _ = make_bare(game, simulations, 0.0)
        params = bare_params(agent)
        state = games
        records = []
        for step in range(CHECK_STEPS):
            found = search(params, jax.random.key(step), state)
            logits, value = bare_network(params, state.observation, state.legal_action_mask)
            summary = found.search_tree.summary()
            records.append((logits, value, found.action, summary.visit_counts, found.action_weights))
            assert not np.any(np.asarray(state.terminated)), "a game ended within the checked steps"
            state = jax.vmap(game.step)(state, found.action)
        theirs = Searched(*(np.stack([np.asarray(r[i]) for r in records]) for i in range(5)))

    legal = np.asarray(trajectory.timestep.observation.action_mask[:-1])  # pyright: ignore[reportAttributeAccessIssue]
    logits_diff = max_difference(np.where(legal, ours.logits, 0), np.where(legal, theirs.logits, 0))
    value_diff = max_difference(ours.value, theirs.value)
    policy_diff = max_difference(ours.policy, theirs.policy)
    same_actions = np.array_equal(ours.action, theirs.action)
    same_visits = np.array_equal(ours.visit_counts, theirs.visit_counts)
    print(
        f"check ({CHECK_STEPS} steps, {batch} games, {simulations} simulations, gumbel_scale 0): "
        f"max |podrace - bare| root logits {logits_diff:.3g}, root values {value_diff:.3g}, "
        f"search policies {policy_diff:.3g}; same actions: {same_actions}; same visit counts: {same_visits}"
    )
    assert logits_diff <= 1e-5 and value_diff <= 1e-5, "the two networks differ"
    assert same_actions and same_visits, "the two searches chose differently"
    assert policy_diff <= 1e-5, f"the search policies differ by {policy_diff:.3g}"


# --------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------


def build(batch: int, simulations: int, length: int, seed: int) -> list[tuple[Method, Any]]:
    env = podrace.envs.PgxEnv.make(GAME)
    auto = podrace.envs.AutoReset(env)
    network_key, run_key = jax.random.split(jax.random.key(seed))
    agent = make_agent(env, simulations, 1.0, network_key)
    envs = initial_games(auto, agent, run_key, batch)
    ours = Method("podrace", lambda s: podrace_rollout(auto, agent, s, length), lambda out: out[0])

    _, selfplay = make_bare(env.env, simulations, 1.0)
    _, selfplay_per_game = make_bare(env.env, simulations, 1.0, per_game=True)
    params = bare_params(agent)
    games = (envs.env_state.env_state, jax.random.key(seed + 1))  # pyright: ignore[reportAttributeAccessIssue]
    bare = Method("bare", lambda s: selfplay(params, *s, length=length), lambda out: out[:2])
    per_game = Method("bare_per_game", lambda s: selfplay_per_game(params, *s, length=length), lambda out: out[:2])
    return [(ours, envs), (bare, games), (per_game, games)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    steps = args.batch * args.rollout
    print(
        f"jax {jax.__version__}, mctx {mctx.__version__}, pgx {pgx.__version__} on {jax.default_backend()} "
        f"({jax.devices()[0].device_kind}); {GAME}, B={args.batch} S={args.simulations} T={args.rollout}: "
        f"{steps} search steps per call, {args.repeats} repeats"
    )
    if args.check:
        check(args.batch, args.simulations, args.seed)
    built = build(args.batch, args.simulations, args.rollout, args.seed)
    first, seconds = time_interleaved([method for method, _ in built], {m.name: s for m, s in built}, args.repeats)
    median = print_results(first, seconds, steps, [("podrace", "bare"), ("bare_per_game", "bare")])
    print("(FPS here: search steps per second, one search per game and step)")
    print(f"ratio_vs_bare={median['podrace'] / median['bare']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
