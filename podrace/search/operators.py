"""mctx's policy-improvement operators: a search from a root, over a model given as a
recurrent function, that proposes an action and an improved policy."""

import abc
import functools
from collections.abc import Callable
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from .._types import PolicyStep, SearchStatistics
from .._validation import as_float_array, check_in_unit_interval, check_non_negative, check_positive, check_positive_int
from ..envs._packages import default_numpy_rules
from ._mctx import import_mctx


class AbstractSearchOperator(eqx.Module):
    """One of mctx's policy-improvement operators, with its settings.

    Its sizes (the number of simulations) are static; its coefficients are array leaves,
    which a population can `vmap` over.

    Reference: mctx, https://github.com/google-deepmind/mctx (`muzero_policy`,
    `gumbel_muzero_policy`); Danihelka et al., "Policy improvement by planning with
    Gumbel", ICLR 2022.
    """

    num_simulations: eqx.AbstractVar[int]

    @abc.abstractmethod
    def __call__(
        self,
        root: Any,
        recurrent_fn: Callable[..., Any],
        invalid_actions: Bool[Array, "batch num_actions"],
        key: PRNGKeyArray,
    ) -> Any:
        """Searches from a batch of roots.

        **Arguments:**

        - `root`: mctx's `RootFnOutput` (prior logits, value and model state of each root).
        - `recurrent_fn`: the model, mctx's `(params, key, action, embedding) ->
            (RecurrentFnOutput, embedding)`; its `params` are `None`.
        - `invalid_actions`: `True` for each action that may not be chosen at a root.
        - `key`: the randomness of the search.

        **Returns:**

        mctx's `PolicyOutput`: the proposed actions, the improved policies
        (`action_weights`) and the search trees.
        """


@final
class GumbelMuZeroSearch(AbstractSearchOperator):
    """Gumbel MuZero's search (mctx's `gumbel_muzero_policy`): sequential halving with
    Gumbel noise over the root's actions, and the improved policy
    `softmax(logits + sigma(completed Q))`. It improves the policy even with few
    simulations (2 or more), where PUCT's visit counts do not: the default for small
    budgets.

    Reference: Danihelka et al., "Policy improvement by planning with Gumbel", ICLR 2022.

    **Arguments:**

    - `num_simulations`: simulations per search.
    - `max_num_considered_actions`: the most actions sequential halving starts from.
    - `gumbel_scale`: the scale of the Gumbel noise of the root's choice (0 acts greedily,
        as when evaluating).
    - `rescale_values`: whether the completed Q-values are min-max rescaled into [0, 1]
        over each node's children before `sigma` (mctx's default). A learnt model's
        Q-values differ between actions by noise at first, which the rescaling blows up
        to the whole range: MuZero's agent searches without it, its Q-values then in the
        units of the rewards (`sigma(q) = (50 + max visits) * 0.1 * q`).
    """

    num_simulations: int = eqx.field(static=True, default=16)
    max_num_considered_actions: int = eqx.field(static=True, default=16, kw_only=True)
    gumbel_scale: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)
    rescale_values: bool = eqx.field(static=True, default=True, kw_only=True)

    def __check_init__(self):
        check_positive_int("GumbelMuZeroSearch", "num_simulations", self.num_simulations)
        check_positive_int("GumbelMuZeroSearch", "max_num_considered_actions", self.max_num_considered_actions)
        check_non_negative("GumbelMuZeroSearch", "gumbel_scale", self.gumbel_scale)

    def __call__(
        self,
        root: Any,
        recurrent_fn: Callable[..., Any],
        invalid_actions: Bool[Array, "batch num_actions"],
        key: PRNGKeyArray,
    ) -> Any:
        mctx = import_mctx("GumbelMuZeroSearch")
        with default_numpy_rules():
            return mctx.gumbel_muzero_policy(
                params=None,
                rng_key=key,
                root=root,
                recurrent_fn=recurrent_fn,
                num_simulations=self.num_simulations,
                invalid_actions=invalid_actions,
                max_num_considered_actions=self.max_num_considered_actions,
                gumbel_scale=self.gumbel_scale,
                qtransform=functools.partial(
                    mctx.qtransform_completed_by_mix_value, rescale_values=self.rescale_values
                ),
            )


@final
class MuZeroSearch(AbstractSearchOperator):
    """MuZero's and AlphaZero's search (mctx's `muzero_policy`): PUCT with Dirichlet noise
    on the root's prior, the action drawn from the root's visit counts at a temperature,
    the normalised visit counts as the improved policy.

    Reference: Silver et al., "Mastering the game of Go without human knowledge", Nature
    2017; Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning with a
    Learned Model", Nature 2020 (the PUCT constants).

    **Arguments:**

    - `num_simulations`: simulations per search.
    - `dirichlet_fraction`: the share of Dirichlet noise in the root's prior, in [0, 1].
    - `dirichlet_alpha`: the noise's concentration (> 0).
    - `pb_c_init`, `pb_c_base`: PUCT's exploration constants `c_1` and `c_2`.
    - `temperature`: acting draws actions in proportion to `visits ** (1 / temperature)`.
    """

    num_simulations: int = eqx.field(static=True, default=16)
    dirichlet_fraction: Float[Array, ""] = eqx.field(default=0.25, converter=as_float_array, kw_only=True)
    dirichlet_alpha: Float[Array, ""] = eqx.field(default=0.3, converter=as_float_array, kw_only=True)
    pb_c_init: Float[Array, ""] = eqx.field(default=1.25, converter=as_float_array, kw_only=True)
    pb_c_base: Float[Array, ""] = eqx.field(default=19652.0, converter=as_float_array, kw_only=True)
    temperature: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array, kw_only=True)

    def __check_init__(self):
        check_positive_int("MuZeroSearch", "num_simulations", self.num_simulations)
        check_in_unit_interval("MuZeroSearch", "dirichlet_fraction", self.dirichlet_fraction)
        for name in ("dirichlet_alpha", "pb_c_init", "pb_c_base", "temperature"):
            check_positive("MuZeroSearch", name, getattr(self, name))

    def __call__(
        self,
        root: Any,
        recurrent_fn: Callable[..., Any],
        invalid_actions: Bool[Array, "batch num_actions"],
        key: PRNGKeyArray,
    ) -> Any:
        mctx = import_mctx("MuZeroSearch")
        with default_numpy_rules():
            return mctx.muzero_policy(
                params=None,
                rng_key=key,
                root=root,
                recurrent_fn=recurrent_fn,
                num_simulations=self.num_simulations,
                invalid_actions=invalid_actions,
                dirichlet_fraction=self.dirichlet_fraction,
                dirichlet_alpha=self.dirichlet_alpha,
                pb_c_init=self.pb_c_init,
                pb_c_base=self.pb_c_base,
                temperature=self.temperature,
            )


@final
class UCTSearch(AbstractSearchOperator):
    """Plain Monte-Carlo tree search: UCT's selection (UCB1 at every node), each child
    tried once before any is tried again, the prior read only for which actions are legal
    (those whose logit is not the lowest float, as masked logits are), and the most
    visited action of the root chosen. The improved policy is the root's visit counts,
    normalised.

    It is the classic search that AlphaZero is measured against, with values from random
    rollouts ([`podrace.search.RolloutSearchAgent`][]); with a network's values
    ([`podrace.search.AlphaZeroAgent`][]) it ignores the network's prior.

    Reference: Kocsis and Szepesvari, "Bandit based Monte-Carlo planning", ECML 2006;
    OpenSpiel's `MCTSBot` (the exploration constant 2 for returns in [-1, 1]).

    **Arguments:**

    - `num_simulations`: simulations per search.
    - `exploration`: UCB1's constant `c` in `Q + c * sqrt(log(N) / n)`.
    """

    num_simulations: int = eqx.field(static=True, default=16)
    exploration: Float[Array, ""] = eqx.field(default=2.0, converter=as_float_array, kw_only=True)

    def __check_init__(self):
        check_positive_int("UCTSearch", "num_simulations", self.num_simulations)
        check_non_negative("UCTSearch", "exploration", self.exploration)

    def __call__(
        self,
        root: Any,
        recurrent_fn: Callable[..., Any],
        invalid_actions: Bool[Array, "batch num_actions"],
        key: PRNGKeyArray,
    ) -> Any:
        mctx = import_mctx("UCTSearch")
        search_key, choice_key = jax.random.split(key)
        with default_numpy_rules():
            tree = mctx.search(
                params=None,
                rng_key=search_key,
                root=root,
                recurrent_fn=recurrent_fn,
                root_action_selection_fn=lambda key, tree, node: self._select(key, tree, node, root=True),
                interior_action_selection_fn=lambda key, tree, node, depth: self._select(key, tree, node, root=False),
                num_simulations=self.num_simulations,
                invalid_actions=invalid_actions,
            )
        visits = tree.summary().visit_counts
        # The most visited legal action; ties broken uniformly.
        noise = jax.random.uniform(choice_key, visits.shape, maxval=0.5)
        action = jnp.argmax(jnp.where(invalid_actions, -jnp.inf, visits + noise), axis=-1)
        weights = visits / jnp.maximum(jnp.sum(visits, axis=-1, keepdims=True), 1.0)
        return mctx.PolicyOutput(action=action, action_weights=weights, search_tree=tree)

    def _select(self, key: PRNGKeyArray, tree: Any, node: Array, *, root: bool) -> Array:
        """UCB1's choice at `node` of one (unbatched) tree: an untried legal action first
        (uniformly among them), else the highest `Q + c * sqrt(log(N) / n)`."""
        visits = tree.children_visits[node]
        logits = tree.children_prior_logits[node]
        illegal = logits <= jnp.finfo(logits.dtype).min
        if root:
            illegal = illegal | tree.root_invalid_actions
        illegal = jnp.where(jnp.all(illegal), False, illegal)
        explored = jnp.maximum(visits, 1).astype(jnp.float32)
        bonus = self.exploration * jnp.sqrt(jnp.log(tree.node_visits[node].astype(jnp.float32)) / explored)
        score = jnp.where(visits == 0, jnp.inf, tree.qvalues(node) + bonus)
        # Ties (the untried actions, first) broken uniformly.
        score = jnp.where(illegal, -jnp.inf, score)
        best = (score == jnp.max(score)) & ~illegal
        return jax.random.categorical(key, jnp.where(best, 0.0, -jnp.inf)).astype(jnp.int32)


def search_policy_step(found: Any) -> PolicyStep:
    """The policy step of the first root of a search: its action, the log-probability and
    entropy of the search's policy, and what the search found as
    [`podrace.SearchStatistics`][] in `extras`.

    **Arguments:**

    - `found`: mctx's `PolicyOutput` of a search from a batch of one root.

    **Returns:**

    The (unbatched) policy step.
    """
    tree = found.search_tree
    summary = tree.summary()
    action = found.action[0].astype(jnp.int32)
    policy = found.action_weights[0]
    statistics = SearchStatistics(
        policy=policy,
        value=summary.value[0],
        visit_counts=summary.visit_counts[0],
        discount=tree.children_discounts[0, tree.ROOT_INDEX, action],
    )
    log_policy = jnp.log(jnp.maximum(policy, jnp.finfo(policy.dtype).tiny))
    entropy = -jnp.sum(jnp.where(policy > 0, policy * log_policy, 0.0))
    return PolicyStep(action, log_policy[action], entropy, statistics)
