"""AlphaZero's agent: mctx's search with the environment's own `step` as the model and a
network of a prior policy and a value."""

from collections.abc import Callable
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray, PyTree

from .._types import PolicyLogits, PolicyStep, TimeStep, legal_actions
from .._validation import as_float_array, check_in_unit_interval
from ..agent import AbstractMemorylessAgent, Agent
from ..envs import AbstractEnv, AbstractTurnBasedEnv, AbstractWrapper
from ..networks import AbstractNetwork, split_action_mask
from ..policies import Categorical
from ._base import AbstractEnvModelAgent
from ._mctx import import_mctx
from .operators import AbstractSearchOperator, GumbelMuZeroSearch, search_policy_step


@final
class ModelNode(eqx.Module):
    """A node of the search over an environment: its state, and whether an episode has
    ended on the way to it (then it is absorbing: no more rewards, never stepped again).
    mctx's `embedding` of the node, one per root under the search's batch axis.

    Reference: mctx, https://github.com/google-deepmind/mctx (`RootFnOutput.embedding`);
    Pgx's AlphaZero example (terminal states with value 0, as in Koyamada et al., "Pgx",
    NeurIPS 2023).

    **Arguments:**

    - `state`: the environment's state.
    - `absorbing`: whether the episode ended at this state or before it.
    """

    state: PyTree[Array]
    absorbing: Bool[Array, "*batch"]


@final
class AlphaZeroAgent(AbstractEnvModelAgent, AbstractMemorylessAgent):
    """AlphaZero: acts by mctx's search from the environment's state, with the
    environment's own `step` as the model and a network giving the prior policy and the
    value of each state it reaches.

    The root is the network's output on the current observation; each simulation steps a
    copy of the environment (without an automatic reset) and evaluates the network on the
    observation reached. In mctx's terms, the step from a node gives:

    - `reward`: the environment's reward (in a [`podrace.envs.AbstractTurnBasedEnv`][]
        such as [`podrace.envs.PgxEnv`][], that of the player who moved);
    - `discount`: `discount` times the environment's (0 where the game ends), negated
        where the player to move changes (`current_player` of a turn-based environment):
        with each value that of its own player to move, `-1` between the two players of a
        zero-sum game backs a value up as minus the opponent's;
    - `prior_logits`, `value`: the network's, on the observation reached (value 0 where
        the episode terminated); past an episode's end a node is absorbing (reward 0,
        discount 0) and the environment is not stepped.

    Legal-action masks: where observations are [`podrace.MaskedObservation`][]s, the
    illegal actions are mctx's `invalid_actions` at the root, and the network's masked
    logits (the lowest float) keep them out of the tree below it. The policy step's
    `extras` is the search's [`podrace.SearchStatistics`][]; its `log_prob` and `entropy`
    are those of the search's policy.

    Reference: Silver et al., "A general reinforcement learning algorithm that masters
    chess, shogi, and Go through self-play", Science 2018; Danihelka et al., "Policy
    improvement by planning with Gumbel", ICLR 2022; mctx,
    https://github.com/google-deepmind/mctx.

    **Arguments:**

    - `network`: a feed-forward network emitting [`podrace.PolicyLogits`][] with a value
        (an MLP torso and `PolicyLogitHead(..., with_value=True)`).
    - `search`: mctx's policy-improvement operator, [`podrace.search.GumbelMuZeroSearch`][]
        (the default) or [`podrace.search.MuZeroSearch`][].
    - `discount`: the discount of the search's returns, in [0, 1].
    """

    network: AbstractNetwork
    search: AbstractSearchOperator = eqx.field(default_factory=GumbelMuZeroSearch)
    discount: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)

    def __check_init__(self):
        check_in_unit_interval("AlphaZeroAgent", "discount", self.discount)
        if not issubclass(self.network.output_type, PolicyLogits):
            raise ValueError(
                f"AlphaZeroAgent searches with a prior policy over discrete actions, but the network emits "
                f"{self.network.output_type.__name__}: give it a PolicyLogitHead(..., with_value=True)."
            )
        if jax.tree.leaves(self.network.initial_carry()) or self.network.reads_previous_action_reward:
            raise ValueError(
                "AlphaZeroAgent evaluates the states its search reaches one by one, with no recurrent state and "
                "no previous action and reward: give it a feed-forward network (FeedForwardNetwork, or "
                "ActorCriticNetwork) on the observations alone."
            )

    def prior(self) -> Agent:
        """The network and the categorical policy of its logits: what the losses
        differentiate (and what acts without a search).

        **Returns:**

        `Agent(network, Categorical())`.
        """
        return Agent(self.network, Categorical())

    def act_in(
        self,
        env: AbstractEnv,
        env_state: PyTree[Array],
        timestep: TimeStep,
        carry: PyTree[Array],
        key: PRNGKeyArray,
    ) -> tuple[PolicyStep, PyTree[Array]]:
        step = search_in_env(
            self.search, self.discount, self._evaluate, env, env_state, timestep, key, owner="AlphaZeroAgent"
        )
        return step, carry

    def _evaluate(self, state: PyTree[Array], timestep: TimeStep, key: PRNGKeyArray) -> tuple[Array, Array]:
        """The network's prior logits and value on the observation of `timestep`."""
        del state, key
        output, _ = self.network(timestep.observation, self.network.initial_carry())
        if output.value is None:
            raise ValueError(
                "AlphaZeroAgent needs the network's value of each state: build its head with with_value=True."
            )
        return output.logits, output.value


def search_in_env(
    search: AbstractSearchOperator,
    discount: Float[Array, ""],
    evaluate: Callable[[PyTree[Array], TimeStep, PRNGKeyArray], tuple[Array, Array]],
    env: AbstractEnv,
    env_state: PyTree[Array],
    timestep: TimeStep,
    key: PRNGKeyArray,
    *,
    owner: str,
) -> PolicyStep:
    """One search from `env_state` with `env`'s own `step` as the model: the search of
    [`podrace.search.AlphaZeroAgent`][] and [`podrace.search.RolloutSearchAgent`][].

    Each node's reward, discount, prior and value are as
    [`podrace.search.AlphaZeroAgent`][] describes, with `evaluate`'s prior and value.

    **Arguments:**

    - `search`: mctx's operator.
    - `discount`: the discount of the search's returns.
    - `evaluate`: a state's prior logits and value, from the state, its time step and a key.
    - `env`: the environment, without an automatic reset.
    - `env_state`, `timestep`: the root's state and latest time step.
    - `key`: the randomness of the search, the model's steps and `evaluate`.
    - `owner`: the agent that searches, for the messages.

    **Returns:**

    The policy step, with the search's [`podrace.SearchStatistics`][] in its `extras`.
    """
    mctx = import_mctx(owner)
    check_players_visible(env, owner=owner)
    # `evaluate` draws from keys folded from the search's and the model's.
    logits, value = evaluate(env_state, timestep, jax.random.fold_in(key, 1))
    num_actions = logits.shape[-1]
    _, mask = split_action_mask(timestep.observation)
    legal = jnp.ones(num_actions, bool) if mask is None else legal_actions(mask)
    root = mctx.RootFnOutput(
        prior_logits=logits[None],
        value=value[None],
        embedding=jax.tree.map(lambda x: x[None], ModelNode(env_state, timestep.is_last)),
    )

    def model_step(node: ModelNode, action: Array, key: PRNGKeyArray) -> tuple[Any, ModelNode]:
        state, timestep = env.step(node.state, action, key)
        if isinstance(env, AbstractTurnBasedEnv):
            same_player = env.current_player(state) == env.current_player(node.state)
            sign = jnp.where(same_player, 1.0, -1.0)
        else:
            sign = jnp.ones((), jnp.float32)
        logits, value = evaluate(state, timestep, jax.random.fold_in(key, 1))
        absorbing = node.absorbing | timestep.is_last
        state = jax.tree.map(lambda old, new: jnp.where(node.absorbing, old, new), node.state, state)
        step = mctx.RecurrentFnOutput(
            reward=jnp.where(node.absorbing, 0.0, timestep.reward).astype(jnp.float32),
            discount=jnp.where(node.absorbing, 0.0, discount * timestep.discount * sign),
            prior_logits=logits,
            value=jnp.where(node.absorbing | timestep.terminated, 0.0, value),
        )
        return step, ModelNode(state, absorbing)

    def recurrent_fn(params: None, key: PRNGKeyArray, action: Array, node: ModelNode) -> tuple[Any, ModelNode]:
        del params
        return jax.vmap(model_step)(node, action, jax.random.split(key, action.shape[0]))

    return search_policy_step(search(root, recurrent_fn, ~legal[None], key))


def check_players_visible(env: AbstractEnv, *, owner: str = "AlphaZeroAgent") -> None:
    """Raises `ValueError` when a wrapper hides whose turn it is: `env` is not a
    [`podrace.envs.AbstractTurnBasedEnv`][] but wraps one (a `TimeLimit` around a
    [`podrace.envs.PgxEnv`][]), so a search over it would back the opponent's values up
    as its own instead of negating them.

    Reference: Silver et al., "Mastering the game of Go without human knowledge", Nature
    2017 (one network valuing positions for the player to move).

    **Arguments:**

    - `env`: the environment a search steps.
    - `owner`: the agent that searches, for the message.
    """
    inner = env
    while not isinstance(inner, AbstractTurnBasedEnv) and isinstance(inner, AbstractWrapper):
        inner = inner.env
        if isinstance(inner, AbstractTurnBasedEnv):
            raise ValueError(
                f"{owner} negates values where the player to move changes, reading current_player of a "
                f"turn-based environment, but {type(env).__name__} hides {type(inner).__name__}'s: search in the "
                f"{type(inner).__name__} itself (a game's own end instead of a time limit)."
            )
