"""Pure, unbatched policy-gradient functions. `vmap` them over a batch."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float


def policy_gradient_loss(
    log_pi_t: Float[Array, " T"],
    advantages: Float[Array, " T"],
    weights: Float[Array, " T"] | None = None,
) -> Float[Array, ""]:
    """The REINFORCE / actor-critic policy-gradient loss along a trajectory.

    `-mean(weights * advantages * log_pi_t)`. The advantages and weights are constants
    (no gradient flows into them), so the gradient is the policy gradient estimate
    `-mean(weights * advantages * grad log_pi_t)`.

    Reference: Williams, "Simple Statistical Gradient-Following Algorithms for
    Connectionist Reinforcement Learning", Machine Learning 8, 1992.

    **Arguments:**

    - `log_pi_t`: log-probabilities of the actions taken, under the policy being learnt.
    - `advantages`: advantage estimates of those actions, e.g. from
      [`podrace.losses.generalized_advantage_estimation`][].
    - `weights`: per-step weights, e.g. a mask of valid steps or
      [`podrace.losses.clamped_importance_weights`][]; `None` weighs every step by 1.

    **Returns:**

    The scalar loss to minimise.
    """
    objective = jax.lax.stop_gradient(advantages) * log_pi_t
    if weights is not None:
        objective = jax.lax.stop_gradient(weights) * objective
    return -jnp.mean(objective)


def clamped_importance_weights(
    log_pi_t: Float[Array, " T"],
    log_mu_t: Float[Array, " T"],
    clip: ArrayLike = 1.0,
) -> Float[Array, " T"]:
    """Truncated importance weights `min(clip, pi / mu)` of off-policy actions.

    They correct for acting with a behaviour policy `mu` while learning `pi`, with the
    variance bounded by `clip`. No gradient flows through them.

    Reference: Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance
    Weighted Actor-Learner Architectures", ICML 2018 (the truncated weights `rho`).

    **Arguments:**

    - `log_pi_t`: log-probabilities of the actions taken, under the target policy.
    - `log_mu_t`: log-probabilities of the same actions under the behaviour policy.
    - `clip`: the largest weight, at least 0.

    **Returns:**

    One weight per step.
    """
    ratios = jnp.exp(log_pi_t - log_mu_t)
    return jax.lax.stop_gradient(jnp.minimum(jnp.asarray(clip, ratios.dtype), ratios))


def ppo_clipped_surrogate(
    log_pi_t: Float[Array, " T"],
    log_mu_t: Float[Array, " T"],
    advantages: Float[Array, " T"],
    epsilon: ArrayLike,
    weights: Float[Array, " T"] | None = None,
) -> Float[Array, ""]:
    """The PPO clipped surrogate policy loss along a trajectory.

    `-mean(min(r_t * A_t, clip(r_t, 1 - epsilon, 1 + epsilon) * A_t))`, with the
    probability ratios `r_t = exp(log_pi_t - log_mu_t)`. The gradient flows only through
    `log_pi_t`; the behaviour log-probabilities, advantages and weights are constants.

    Reference: Schulman, Wolski, Dhariwal, Radford & Klimov, "Proximal Policy
    Optimization Algorithms", arXiv:1707.06347, 2017.

    **Arguments:**

    - `log_pi_t`: log-probabilities of the actions taken, under the policy being learnt.
    - `log_mu_t`: log-probabilities of the same actions under the policy that acted.
    - `advantages`: advantage estimates of those actions, e.g. from
      [`podrace.losses.generalized_advantage_estimation`][].
    - `epsilon`: the clipping radius of the ratios, e.g. 0.2.
    - `weights`: per-step weights, e.g. a mask of valid steps; `None` weighs every step
      by 1.

    **Returns:**

    The scalar loss to minimise.
    """
    advantages = jax.lax.stop_gradient(advantages)
    ratios = jnp.exp(log_pi_t - jax.lax.stop_gradient(log_mu_t))
    epsilon = jnp.asarray(epsilon, ratios.dtype)
    clipped_ratios = jnp.clip(ratios, 1 - epsilon, 1 + epsilon)
    objective = jnp.minimum(ratios * advantages, clipped_ratios * advantages)
    if weights is not None:
        objective = jax.lax.stop_gradient(weights) * objective
    return -jnp.mean(objective)
