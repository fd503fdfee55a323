"""Plain Monte-Carlo tree search: the environment as the model, values from random rollouts."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._types import PolicyStep, TimeStep, exclude_illegal, legal_actions
from .._validation import as_float_array, check_in_unit_interval, check_positive_int
from ..agent import AbstractMemorylessAgent, RandomAgent
from ..envs import AbstractEnv, AbstractTurnBasedEnv
from ..networks import split_action_mask
from ._base import AbstractEnvModelAgent
from .alphazero import search_in_env
from .operators import AbstractSearchOperator, UCTSearch


@final
class RolloutSearchAgent(AbstractEnvModelAgent, AbstractMemorylessAgent):
    """Plain Monte-Carlo tree search, the baseline a learnt search is measured against:
    the environment's own `step` as the model (as [`podrace.search.AlphaZeroAgent`][]),
    no network, each state valued by one rollout of uniformly random legal actions to the
    end of the episode. With [`podrace.search.UCTSearch`][] (the default) it is UCT.

    A rollout's value is the discounted sum of the rewards that follow the state, each
    counted for the player to move at the state (in a [`podrace.envs.AbstractTurnBasedEnv`][],
    the other player's rewards negated, as in a zero-sum game); a rollout stops after
    `max_rollout_steps` steps. The prior is uniform over the legal actions.

    Reference: Kocsis and Szepesvari, "Bandit based Monte-Carlo planning", ECML 2006;
    Silver et al., "A general reinforcement learning algorithm that masters chess, shogi,
    and Go through self-play", Science 2018 (AlphaZero against such searches); OpenSpiel's
    `MCTSBot` with its `RandomRolloutEvaluator`.

    **Arguments:**

    - `num_actions`: the number of discrete actions (`env.action_space.num_values`).
    - `search`: the search operator, [`podrace.search.UCTSearch`][] by default.
    - `discount`: the discount of the search's returns and of the rollouts', in [0, 1].
    - `max_rollout_steps`: the longest rollout.
    """

    num_actions: int = eqx.field(static=True)
    search: AbstractSearchOperator = eqx.field(default_factory=UCTSearch)
    discount: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)
    max_rollout_steps: int = eqx.field(static=True, default=1_000, kw_only=True)

    def __check_init__(self):
        check_positive_int("RolloutSearchAgent", "num_actions", self.num_actions)
        check_positive_int("RolloutSearchAgent", "max_rollout_steps", self.max_rollout_steps)
        check_in_unit_interval("RolloutSearchAgent", "discount", self.discount)

    def act_in(
        self,
        env: AbstractEnv,
        env_state: PyTree[Array],
        timestep: TimeStep,
        carry: PyTree[Array],
        key: PRNGKeyArray,
    ) -> tuple[PolicyStep, PyTree[Array]]:
        def evaluate(state: PyTree[Array], timestep: TimeStep, key: PRNGKeyArray) -> tuple[Array, Array]:
            return self._uniform_logits(timestep.observation), self._rollout(env, state, timestep, key)

        step = search_in_env(
            self.search, self.discount, evaluate, env, env_state, timestep, key, owner="RolloutSearchAgent"
        )
        return step, carry

    def _uniform_logits(self, observation: PyTree[Array]) -> Array:
        """Zero for each legal action, the lowest float for the others."""
        zeros = jnp.zeros(self.num_actions, jnp.float32)
        _, mask = split_action_mask(observation)
        return zeros if mask is None else exclude_illegal(zeros, legal_actions(mask))

    def _rollout(self, env: AbstractEnv, state: PyTree[Array], timestep: TimeStep, key: PRNGKeyArray) -> Array:
        """One random rollout's discounted return from `state`, for its player to move."""
        random_player = RandomAgent(self.num_actions)
        game = env if isinstance(env, AbstractTurnBasedEnv) else None
        player = None if game is None else game.current_player(state)

        def running(loop):
            _, timestep, _, _, _, steps = loop
            return ~timestep.is_last & (steps < self.max_rollout_steps)

        def step(loop):
            state, timestep, key, total, scale, steps = loop
            key, act_key, step_key = jax.random.split(key, 3)
            action = random_player(timestep.observation, (), act_key)[0].action
            sign = 1.0 if game is None else jnp.where(game.current_player(state) == player, 1.0, -1.0)
            state, timestep = env.step(state, action, step_key)
            total = total + scale * sign * timestep.reward
            return state, timestep, key, total, scale * self.discount * timestep.discount, steps + 1

        zero = jnp.zeros((), jnp.float32)
        init = (state, timestep, key, zero, jnp.ones((), jnp.float32), jnp.zeros((), jnp.int32))
        return jax.lax.while_loop(running, step, init)[3]
