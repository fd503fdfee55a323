"""The policy loss of search agents (AlphaZero, MuZero, Gumbel MuZero): the network's
policy learns the search's improved policy."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from .._types import legal_actions


def search_policy_cross_entropy(
    logits_t: Float[Array, "*batch num_actions"],
    search_policy_t: Float[Array, "*batch num_actions"],
    *,
    action_mask: Bool[Array, "*batch num_actions"] | None = None,
    stop_target_gradients: bool = True,
) -> Float[Array, "*batch"]:
    """The cross-entropy `-sum_a pi_t(a) log softmax(logits_t)(a)` from the network's
    policy to the search's.

    `search_policy_t` is what the search at that state recommends: AlphaZero's and
    MuZero's normalised root visit counts, or Gumbel MuZero's improved policy
    `softmax(logits + sigma(completed Q))` (mctx's `action_weights`). Illegal actions
    (`action_mask` False) get no target mass (any the target puts there is dropped, the
    rest not renormalised) and drop out of the softmax, so that logits of
    `-inf` or the lowest float there (as [`podrace.exclude_illegal`][] gives) leave the
    loss and its gradient finite; where the mask allows no action, every action counts as
    legal (see [`podrace.legal_actions`][]). Without a mask, actions of zero target mass
    add nothing, whatever their logits.

    Reference: Silver et al., "A general reinforcement learning algorithm that masters
    chess, shogi, and Go through self-play", Science 2018 (the loss's `-pi^T log p`);
    Danihelka et al., "Policy improvement by planning with Gumbel", ICLR 2022 (the
    completed-Q improved policy as the policy's target).

    **Arguments:**

    - `logits_t`: the network's policy logits, over the last axis; any leading batch
      shape, or none.
    - `search_policy_t`: the search's policy, a distribution over the same actions.
    - `action_mask`: which actions are legal, or `None` for all.
    - `stop_target_gradients`: whether the search's policy is treated as a constant.

    **Returns:**

    The cross-entropy of each state, in nats.
    """
    if stop_target_gradients:
        search_policy_t = jax.lax.stop_gradient(search_policy_t)
    if action_mask is not None:
        legal = legal_actions(action_mask)
        logits_t = jnp.where(legal, logits_t, jnp.finfo(logits_t.dtype).min)
        search_policy_t = jnp.where(legal, search_policy_t, 0.0)
    log_policy = jax.nn.log_softmax(logits_t)
    # An action of probability 0 in both adds nothing (not `0 * -inf`), nor a gradient.
    log_policy = jnp.where(jnp.isneginf(log_policy) & (search_policy_t == 0), 0.0, log_policy)
    return -jnp.sum(search_policy_t * log_policy, axis=-1)
