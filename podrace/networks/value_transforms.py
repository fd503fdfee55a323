"""Value transforms and categorical (two-hot) value representations, as MuZero learns
values and rewards of any scale. Elementwise: any leading batch shape, or none."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float


def signed_hyperbolic(x: Float[Array, "*batch"], *, epsilon: ArrayLike = 1e-3) -> Float[Array, "*batch"]:
    """The value transform `h(x) = sign(x) (sqrt(|x| + 1) - 1) + epsilon x`.

    It shrinks large values roughly to their square root while staying invertible
    (its inverse is [`podrace.losses.signed_parabolic`][]) and Lipschitz for
    `epsilon > 0`. It is computed as `x / (sqrt(|x| + 1) + 1) + epsilon x`, the same
    function without the rounding of `sqrt(|x| + 1) - 1` near 0, and with the derivative
    `1/2 + epsilon` at 0.

    Reference: Pohlen et al., "Observe and Look Further: Achieving Consistent Performance
    on Atari", 2018, Proposition A.2; Schrittwieser et al., "Mastering Atari, Go, Chess
    and Shogi by Planning with a Learned Model", Nature 2020, Appendix F.

    **Arguments:**

    - `x`: values, of any shape.
    - `epsilon`: the linear term's weight, at least 0 (MuZero's `1e-3`).

    **Returns:**

    `h(x)`, elementwise.
    """
    return x / (jnp.sqrt(jnp.abs(x) + 1.0) + 1.0) + epsilon * x


def signed_parabolic(x: Float[Array, "*batch"], *, epsilon: ArrayLike = 1e-3) -> Float[Array, "*batch"]:
    """The inverse of [`podrace.losses.signed_hyperbolic`][] with the same `epsilon`.

    In closed form, `h^{-1}(x) = sign(x) (((sqrt(1 + 4 epsilon (|x| + 1 + epsilon)) - 1) /
    (2 epsilon))^2 - 1)`. It is computed as `x 2 (u + 2) / d` with
    `d = 1 + 2 epsilon + sqrt((1 + 2 epsilon)^2 + 4 epsilon |x|)` and `u = 2 |x| / d`
    (`u = sqrt(|h^{-1}(x)| + 1) - 1` solves `epsilon u^2 + (1 + 2 epsilon) u = |x|`),
    which cancels no nearly equal terms, holds for `epsilon = 0` (giving
    `sign(x) ((|x| + 1)^2 - 1)`) and has the derivative `2 / (1 + 2 epsilon)` at 0.

    Reference: Pohlen et al., "Observe and Look Further: Achieving Consistent Performance
    on Atari", 2018, Proposition A.2; Schrittwieser et al., "Mastering Atari, Go, Chess
    and Shogi by Planning with a Learned Model", Nature 2020, Appendix F.

    **Arguments:**

    - `x`: transformed values, of any shape.
    - `epsilon`: the linear term's weight of the transform inverted, at least 0.

    **Returns:**

    `h^{-1}(x)`, elementwise.
    """
    a = 1.0 + 2.0 * epsilon
    d = a + jnp.sqrt(a * a + 4.0 * epsilon * jnp.abs(x))
    u = 2.0 * jnp.abs(x) / d
    return 2.0 * x * (u + 2.0) / d


def two_hot(x: Float[Array, "*batch"], support: Float[Array, " num_atoms"]) -> Float[Array, "*batch num_atoms"]:
    """Scalars as categorical distributions on an evenly spaced support (their "two-hot").

    Each scalar is clipped into `[support[0], support[-1]]` and its probability split
    between its two neighbouring atoms in proportion to its distance from each, so that
    the distribution's mean is the clipped scalar (see
    [`podrace.losses.categorical_expectation`][]). It is
    [`podrace.losses.categorical_projection`][] of a point mass.

    Reference: Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning
    with a Learned Model", Nature 2020, Appendix F; Bellemare et al., "A Distributional
    Perspective on Reinforcement Learning", ICML 2017, Algorithm 1.

    **Arguments:**

    - `x`: scalars, of any shape.
    - `support`: at least two evenly spaced, increasing atoms (e.g.
      `jnp.linspace(-300.0, 300.0, 601)`, MuZero's for Atari after
      [`podrace.losses.signed_hyperbolic`][]).

    **Returns:**

    One distribution over `support` per scalar, on a new last axis.
    """
    num_atoms = support.shape[0]
    if num_atoms < 2:
        raise ValueError(f"two_hot needs a support of at least 2 atoms, got {num_atoms}.")
    spacing = support[1] - support[0]
    # Each scalar's position on the support, in atoms from the first.
    position = (jnp.clip(x, support[0], support[-1]) - support[0]) / spacing
    lower = jnp.clip(jnp.floor(position), 0, num_atoms - 2)
    upper_share = (position - lower)[..., None]
    lower_hot = jax.nn.one_hot(lower.astype(jnp.int32), num_atoms, dtype=x.dtype)
    upper_hot = jax.nn.one_hot(lower.astype(jnp.int32) + 1, num_atoms, dtype=x.dtype)
    return (1.0 - upper_share) * lower_hot + upper_share * upper_hot


def categorical_expectation(
    logits: Float[Array, "*batch num_atoms"], support: Float[Array, " num_atoms"]
) -> Float[Array, "*batch"]:
    """The mean of the categorical distributions with these logits on `support`.

    `sum_i softmax(logits)_i support_i`: the scalar a categorical value or reward head
    predicts. Where the head learns transformed targets (as
    [`podrace.losses.categorical_value_loss`][]'s), the prediction is
    `signed_parabolic(categorical_expectation(logits, support))`. On the distribution
    [`podrace.losses.two_hot`][] gives (as logits, `log(two_hot(x, support))`) it is `x`,
    clipped into the support.

    Reference: Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning
    with a Learned Model", Nature 2020, Appendix F.

    **Arguments:**

    - `logits`: the unnormalised log-probabilities of the atoms, on the last axis (`-inf`
      for an atom of probability 0).
    - `support`: the atoms.

    **Returns:**

    The mean of each distribution.
    """
    probs = jax.nn.softmax(logits)
    return jnp.sum(probs * jnp.broadcast_to(support, probs.shape), axis=-1)
