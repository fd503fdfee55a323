"""Pure, unbatched value-learning functions. `vmap` them over a batch."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float


def lambda_returns(
    r_t: Float[Array, " T"],
    discount_t: Float[Array, " T"],
    v_t: Float[Array, " T"],
    lambda_: ArrayLike = 1.0,
) -> Float[Array, " T"]:
    """Lambda-returns along a trajectory, bootstrapped from the last value.

    `G_t = r_t + discount_t * ((1 - lambda_t) * v_t + lambda_t * G_{t+1})`, with
    `G_{T+1} = v_T`. A `discount_t` of 0 (termination) stops bootstrapping; a `lambda_t`
    of 0 (e.g. at a truncation) bootstraps from `v_t` alone.

    Reference: Sutton & Barto, "Reinforcement Learning: An Introduction", 2nd ed., 12.1.

    **Arguments:**

    - `r_t`: rewards at times `1..T`.
    - `discount_t`: discounts at times `1..T` (the agent's discount times the env's).
    - `v_t`: value estimates at times `1..T`.
    - `lambda_`: a scalar or one mixing coefficient per step, in [0, 1].

    **Returns:**

    The lambda-return targets for times `0..T-1`.
    """
    lambda_ = jnp.broadcast_to(jnp.asarray(lambda_, v_t.dtype), v_t.shape)

    def backward(next_return, inputs):
        reward, discount, value, lam = inputs
        g = reward + discount * ((1 - lam) * value + lam * next_return)
        return g, g

    _, returns = jax.lax.scan(backward, v_t[-1], (r_t, discount_t, v_t, lambda_), reverse=True)
    return returns


def td_lambda(
    v_tm1: Float[Array, " T"],
    r_t: Float[Array, " T"],
    discount_t: Float[Array, " T"],
    v_t: Float[Array, " T"],
    lambda_: ArrayLike,
    *,
    stop_target_gradients: bool = True,
) -> Float[Array, " T"]:
    """TD(lambda) errors: lambda-returns minus the predictions.

    Reference: Sutton, "Learning to predict by the methods of temporal differences",
    Machine Learning 3, 1988; Sutton & Barto, 2nd ed., 12.1.

    **Arguments:**

    - `v_tm1`: predictions at times `0..T-1`.
    - `r_t`, `discount_t`, `v_t`, `lambda_`: as in [`podrace.losses.lambda_returns`][].
    - `stop_target_gradients`: whether the targets are treated as constants.

    **Returns:**

    The errors `G_t - v_tm1`, one per time step.
    """
    targets = lambda_returns(r_t, discount_t, v_t, lambda_)
    if stop_target_gradients:
        targets = jax.lax.stop_gradient(targets)
    return targets - v_tm1
