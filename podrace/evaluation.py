"""Evaluating a policy: returns and lengths of whole episodes, in JAX or Gymnasium envs."""

from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._validation import check_agent_fits, check_positive_int
from .envs import AbstractEnv
from .networks import AbstractNetwork
from .policies import AbstractPolicy


@final
class EvaluationResult(eqx.Module):
    """Per-episode results of [`podrace.evaluate`][].

    **Arguments:**

    - `returns`: the undiscounted return of each episode.
    - `lengths`: its number of steps.
    - `completed`: whether it ended (terminated or truncated) within the step budget;
        an episode that did not reports its return and length so far.
    """

    returns: Float[Array, "*population episodes"]
    lengths: Int[Array, "*population episodes"]
    completed: Bool[Array, "*population episodes"]

    @property
    def mean_return(self) -> Float[Array, "*population"]:
        """The mean return over the episodes (of each member, for [`podrace.evaluate_population`][])."""
        return jnp.mean(self.returns, axis=-1)


def evaluate(
    env: AbstractEnv | Any,
    network: AbstractNetwork,
    policy: AbstractPolicy,
    *,
    num_episodes: int,
    key: PRNGKeyArray,
    max_steps: int = 10_000,
    seed: int | None = None,
) -> EvaluationResult:
    """Runs a policy for `num_episodes` whole episodes and reports each one.

    Acting greedily or stochastically is the choice of `policy` (e.g.
    [`podrace.policies.Greedy`][] or [`podrace.policies.Softmax`][]).

    With a JAX environment, the episodes run side by side, one environment each, in
    one compiled program. With a `gymnasium.vector.VectorEnv` (next-step autoreset
    mode), each of its `B` environments plays `num_episodes // B` episodes, the first
    `num_episodes % B` one more, so that short episodes are not over-represented.

    **Arguments:**

    - `env`: a bare (not auto-resetting) [`podrace.envs.AbstractEnv`][], or a
        `gymnasium.vector.VectorEnv`.
    - `network`: the network, with the parameters to evaluate
        (`learner.network_with(state.params)`).
    - `policy`: the policy over the network's outputs.
    - `num_episodes`: how many episodes.
    - `key`: the policy's (and a JAX env's) randomness.
    - `max_steps`: the step budget per episode (JAX) or per environment (Gymnasium).
    - `seed`: seeds the Gymnasium environments' reset (ignored for JAX envs).

    **Returns:**

    An [`podrace.EvaluationResult`][].
    """
    check_positive_int("evaluate", "num_episodes", num_episodes)
    check_positive_int("evaluate", "max_steps", max_steps)
    if isinstance(env, AbstractEnv):
        observation = jax.eval_shape(lambda: env.reset(jax.random.key(0))[1].observation)
        check_agent_fits(network, policy, env.action_space, observation, env_name=type(env).__name__)
        return _evaluate_jax(env, network, policy, key, num_episodes=num_episodes, max_steps=max_steps)
    from .host import evaluate_on_host

    return evaluate_on_host(env, network, policy, num_episodes=num_episodes, key=key, max_steps=max_steps, seed=seed)


@eqx.filter_jit
def _evaluate_jax(
    env: AbstractEnv, network: AbstractNetwork, policy: AbstractPolicy, key: PRNGKeyArray, *, num_episodes, max_steps
) -> EvaluationResult:
    def episode(key):
        reset_key, key = jax.random.split(key)
        state, timestep = env.reset(reset_key)
        zero = jnp.zeros((), jnp.int32)
        init = (state, timestep, network.initial_carry(), key, jnp.zeros(()), zero, jnp.asarray(False))

        def running(carry):
            *_, length, ended = carry
            return ~ended & (length < max_steps)

        def step(carry):
            state, timestep, net_carry, key, episode_return, length, _ = carry
            key, act_key, step_key = jax.random.split(key, 3)
            output, net_carry = network(timestep.observation, net_carry)
            action = policy(output, act_key).action
            state, timestep = env.step(state, action, step_key)
            return state, timestep, net_carry, key, episode_return + timestep.reward, length + 1, timestep.is_last

        *_, episode_return, length, ended = jax.lax.while_loop(running, step, init)
        return episode_return, length, ended

    returns, lengths, completed = jax.vmap(episode)(jax.random.split(key, num_episodes))
    return EvaluationResult(returns, lengths, completed)
