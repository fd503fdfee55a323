"""Evaluating a policy: returns and lengths of whole episodes, in JAX or Gymnasium envs."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import PRNGKeyArray

from .._validation import check_agent_fits, check_positive_int
from ..agent import AbstractAgent
from ..envs import AbstractEnv
from ..networks import AbstractNetwork
from ..policies import AbstractPolicy
from ..results import EvaluationResult
from .match import act as act_in_game


def evaluate(
    env: AbstractEnv,
    network: AbstractNetwork,
    policy: AbstractPolicy,
    *,
    num_episodes: int,
    key: PRNGKeyArray,
    max_steps: int = 10_000,
    seed: int | None = None,
) -> EvaluationResult:
    """Runs a policy for `num_episodes` whole episodes of a JAX environment and reports each one.

    Acting deterministically or stochastically is the choice of `policy`: e.g.
    [`podrace.policies.Greedy`][] or [`podrace.policies.Softmax`][] over action
    values, [`podrace.policies.Mode`][] or [`podrace.policies.Categorical`][] over a
    policy head. The parts are checked to fit first, as [`podrace.Anakin`][] checks
    them: the policy must read the kind of output the network emits and suit the
    environment's action space, and the network must take its observations.

    The episodes run side by side, one environment each, in one compiled program. A
    Gymnasium environment is evaluated on the host by
    [`podrace.executors.host.evaluate_on_host`][].

    **Arguments:**

    - `env`: a bare (not auto-resetting) [`podrace.envs.AbstractEnv`][].
    - `network`: the network, with the parameters to evaluate
        (`learner.network_at(state)`, which every learner has).
    - `policy`: the policy over the network's outputs (it must read the network's
        `output_type`).
    - `num_episodes`: how many episodes.
    - `key`: the policy's and the environment's randomness.
    - `max_steps`: the step budget per episode.
    - `seed`: refused: a JAX environment's randomness is `key`, and the seed of a
        Gymnasium environment's reset goes to
        [`podrace.executors.host.evaluate_on_host`][].

    **Returns:**

    An [`podrace.EvaluationResult`][].
    """
    check_positive_int("evaluate", "num_episodes", num_episodes)
    check_positive_int("evaluate", "max_steps", max_steps)
    if not isinstance(env, AbstractEnv):
        raise TypeError(
            f"evaluate runs JAX environments (podrace.envs.AbstractEnv), got {type(env).__name__}; evaluate a "
            "gymnasium.vector.VectorEnv with podrace.executors.host.evaluate_on_host."
        )
    if seed is not None:
        raise TypeError(
            f"evaluate takes no seed: {type(env).__name__}'s randomness comes from key. A seed is for the reset of "
            "a gymnasium.vector.VectorEnv, which podrace.executors.host.evaluate_on_host evaluates."
        )
    return _evaluate_jax(env, network, policy, key, num_episodes=num_episodes, max_steps=max_steps)


@final
class Evaluation(eqx.Module):
    """Episodes to play at the end of a [`podrace.Anakin.train`][] call, in the same compiled program.

    The trained network plays `num_episodes` whole episodes with `policy`, as
    [`podrace.evaluate`][] plays them (the same episodes for the same key), and the call
    returns them in its `evaluation`. Evaluating inside the training program saves
    compiling a second program. The key is an array, so a new key each call does not
    recompile.

    **Arguments:**

    - `policy`: the policy over the network's outputs (e.g. [`podrace.policies.Greedy`][]).
    - `num_episodes`: how many episodes.
    - `key`: the policy's and the environment's randomness.
    - `max_steps`: the step budget per episode.
    """

    policy: AbstractPolicy
    key: PRNGKeyArray
    num_episodes: int = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)

    def __init__(self, policy: AbstractPolicy, *, num_episodes: int, key: PRNGKeyArray, max_steps: int = 10_000):
        check_positive_int("Evaluation", "num_episodes", num_episodes)
        check_positive_int("Evaluation", "max_steps", max_steps)
        self.policy, self.key, self.num_episodes, self.max_steps = policy, key, num_episodes, max_steps

    def play(self, env: AbstractEnv, network: AbstractNetwork) -> EvaluationResult:
        """The episodes, traced into the caller's program."""
        return play_episodes(
            env, network, self.policy, self.key, num_episodes=self.num_episodes, max_steps=self.max_steps
        )


def play_episodes(
    env: AbstractEnv, network: AbstractNetwork, policy: AbstractPolicy, key: PRNGKeyArray, *, num_episodes, max_steps
) -> EvaluationResult:
    """`num_episodes` episodes side by side, one environment each (to be traced: see `evaluate`).

    The policy and network are checked to fit the env, as [`podrace.Anakin`][] checks
    them, while the program is traced: once per compilation, not on every call.
    """
    observation = jax.eval_shape(lambda: env.reset(jax.random.key(0))[1].observation)
    check_agent_fits(network, policy, env.action_space, observation, env_name=type(env).__name__)

    def act(state, timestep, carry, key):
        del state
        output, carry = network(timestep.observation, carry)
        return policy(output, key).action, carry

    return _episodes(env, act, network.initial_carry(), key, num_episodes=num_episodes, max_steps=max_steps)


@eqx.filter_jit
def evaluate_agent(
    env: AbstractEnv, agent: AbstractAgent, *, num_episodes: int, key: PRNGKeyArray, max_steps: int = 10_000
) -> EvaluationResult:
    """Runs an agent for `num_episodes` whole episodes of a JAX environment, in one compiled call.

    Where [`podrace.evaluate`][] plays a network and a policy over its outputs, this
    plays any [`podrace.AbstractAgent`][] as it acts in training: a search agent with its
    search ([`podrace.search.MuZeroAgent`][] over its model, an
    [`podrace.search.AbstractEnvModelAgent`][] such as [`podrace.search.AlphaZeroAgent`][]
    in the environment's own state), a recurrent agent with its carry. For a greedy
    search, give the agent a search without noise (e.g.
    `GumbelMuZeroSearch(n, gumbel_scale=0.0)`). The episodes run side by side, one
    environment each.

    **Arguments:**

    - `env`: a bare (not auto-resetting) [`podrace.envs.AbstractEnv`][].
    - `agent`: the agent (e.g. `learner.agent(state)`).
    - `num_episodes`: how many episodes.
    - `key`: the agent's and the environment's randomness.
    - `max_steps`: the step budget per episode.

    **Returns:**

    An [`podrace.EvaluationResult`][].
    """
    check_positive_int("evaluate_agent", "num_episodes", num_episodes)
    check_positive_int("evaluate_agent", "max_steps", max_steps)

    def act(state, timestep, carry, key):
        policy_step, carry = act_in_game(agent, env, state, timestep, carry, key)
        return policy_step.action, carry

    return _episodes(env, act, agent.initial_carry(), key, num_episodes=num_episodes, max_steps=max_steps)


@eqx.filter_jit
def random_policy_episodes(
    env: AbstractEnv, *, num_episodes: int, key: PRNGKeyArray, max_steps: int = 10_000
) -> EvaluationResult:
    """Plays `num_episodes` whole episodes with uniformly random actions, in one compiled call.

    Each action is drawn from the action space's `sample`: a uniform choice of a
    discrete action, a uniform point of a box. A random policy's return is the floor
    that published results are measured against (e.g. the verdicts of
    [`podrace.recipes`][]).

    **Arguments:**

    - `env`: a bare (not auto-resetting) JAX environment.
    - `num_episodes`: how many episodes.
    - `key`: the actions' and the environment's randomness.
    - `max_steps`: the step budget per episode.

    **Returns:**

    An [`podrace.EvaluationResult`][].
    """
    check_positive_int("random_policy_episodes", "num_episodes", num_episodes)
    return _episodes(
        env,
        lambda state, timestep, carry, key: (env.action_space.sample(key), carry),
        (),
        key,
        num_episodes=num_episodes,
        max_steps=max_steps,
    )


def _episodes(env: AbstractEnv, act, initial_carry, key: PRNGKeyArray, *, num_episodes, max_steps) -> EvaluationResult:
    """Episodes side by side, one environment each, acting with `act(state, timestep, carry, key)`,
    which returns the action and the next carry."""

    def episode(key):
        reset_key, key = jax.random.split(key)
        state, timestep = env.reset(reset_key)
        zero = jnp.zeros((), jnp.int32)
        init = (state, timestep, initial_carry, key, jnp.zeros(()), zero, jnp.asarray(False))

        def running(carry):
            *_, length, ended = carry
            return ~ended & (length < max_steps)

        def step(carry):
            state, timestep, net_carry, key, episode_return, length, _ = carry
            key, act_key, step_key = jax.random.split(key, 3)
            action, net_carry = act(state, timestep, net_carry, act_key)
            state, timestep = env.step(state, action, step_key)
            return state, timestep, net_carry, key, episode_return + timestep.reward, length + 1, timestep.is_last

        *_, episode_return, length, ended = jax.lax.while_loop(running, step, init)
        return episode_return, length, ended

    returns, lengths, completed = jax.vmap(episode)(jax.random.split(key, num_episodes))
    return EvaluationResult(returns, lengths, completed)


_evaluate_jax = eqx.filter_jit(play_episodes)
