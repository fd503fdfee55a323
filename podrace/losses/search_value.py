"""The value and reward losses of search agents (AlphaZero, MuZero).

Their targets are returns podrace already computes: MuZero's n-step value target `z_t` is
[`podrace.losses.n_step_bootstrapped_returns`][] of the rewards and the search's root
values, and TD(lambda) targets are [`podrace.losses.lambda_returns`][]."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ..networks.value_transforms import signed_hyperbolic, two_hot


def scalar_value_loss(
    v_t: Float[Array, "*batch"], target_t: Float[Array, "*batch"], *, stop_target_gradients: bool = True
) -> Float[Array, "*batch"]:
    """The squared error `(target_t - v_t)^2` of a value (or reward) prediction.

    As in AlphaZero's and MuZero's losses, without a factor 1/2: it is twice
    `rlax.l2_loss`. MuZero uses it for board games, whose values lie in [-1, 1].

    Reference: Silver et al., "A general reinforcement learning algorithm that masters
    chess, shogi, and Go through self-play", Science 2018 (the loss's `(z - v)^2`);
    Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning with a Learned
    Model", Nature 2020, eq. 1.

    **Arguments:**

    - `v_t`: the predictions; any shape.
    - `target_t`: their targets (e.g. the game's outcome `z`, or an n-step return).
    - `stop_target_gradients`: whether the targets are treated as constants.

    **Returns:**

    The squared error of each prediction.
    """
    if stop_target_gradients:
        target_t = jax.lax.stop_gradient(target_t)
    return jnp.square(target_t - v_t)


def categorical_value_loss(
    logits_t: Float[Array, "*batch num_atoms"],
    target_t: Float[Array, "*batch"],
    support: Float[Array, " num_atoms"],
    *,
    epsilon: ArrayLike = 1e-3,
    stop_target_gradients: bool = True,
) -> Float[Array, "*batch"]:
    """The cross-entropy from a categorical value (or reward) prediction to its scalar
    target, transformed and two-hot encoded.

    The target is `two_hot(signed_hyperbolic(target_t, epsilon=epsilon), support)` (see
    [`podrace.losses.two_hot`][] and [`podrace.losses.signed_hyperbolic`][]), so `support`
    spans transformed values; the loss is `-sum_i target_i log softmax(logits_t)_i`. The
    scalar the head predicts is `signed_parabolic(categorical_expectation(logits_t,
    support), epsilon=epsilon)`. MuZero uses it for Atari's values and rewards, on the
    support `-300..300` of 601 atoms.

    Reference: Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning
    with a Learned Model", Nature 2020, Appendix F; Pohlen et al., "Observe and Look
    Further: Achieving Consistent Performance on Atari", 2018.

    **Arguments:**

    - `logits_t`: the predicted logits of the atoms, on the last axis; any leading batch
      shape, or none.
    - `target_t`: the scalar targets (untransformed), one per prediction.
    - `support`: at least two evenly spaced, increasing atoms, in transformed units.
    - `epsilon`: the transform's linear term, as in `signed_hyperbolic`.
    - `stop_target_gradients`: whether the targets are treated as constants.

    **Returns:**

    The cross-entropy of each prediction, in nats.
    """
    probs = two_hot(signed_hyperbolic(target_t, epsilon=epsilon), support)
    if stop_target_gradients:
        probs = jax.lax.stop_gradient(probs)
    log_probs = jax.nn.log_softmax(logits_t)
    # An atom of probability 0 in both adds nothing (not `0 * -inf`), nor a gradient.
    log_probs = jnp.where(jnp.isneginf(log_probs) & (probs == 0), 0.0, log_probs)
    return -jnp.sum(probs * log_probs, axis=-1)
