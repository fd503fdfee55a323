"""Pure, unbatched value-learning functions. `vmap` them over a batch."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int


def varying_like(init: Array, *sequences: Array) -> Array:
    """`init`, varying over every device axis that one of `sequences` varies over.

    The start of a `lax.scan` carry must have the type of the carry the body returns;
    inside `shard_map` that type includes the device axes its inputs vary over, which a
    constant start lacks. Adding a zero derived from each sequence marks it so (and
    changes nothing outside `shard_map`).
    """
    for sequence in sequences:
        init = init + jnp.zeros_like(sequence[-1], dtype=init.dtype)
    return init


def lambda_returns(
    r_t: Float[Array, " T"],
    discount_t: Float[Array, " T"],
    v_t: Float[Array, " T"],
    lambda_: ArrayLike = 1.0,
    *,
    associative_scan: bool = False,
) -> Float[Array, " T"]:
    """Lambda-returns along a trajectory, bootstrapped from the last value.

    `G_t = r_t + discount_t * ((1 - lambda_t) * v_t + lambda_t * G_{t+1})`, with
    `G_{T+1} = v_T`. A `discount_t` of 0 (termination) stops bootstrapping; a `lambda_t`
    of 0 (e.g. at a truncation) bootstraps from `v_t` alone. This is
    [`podrace.losses.discounted_returns`][] of the rewards `r_t + discount_t * (1 -
    lambda_t) * v_t` with the discounts `discount_t * lambda_t`.

    Reference: Sutton & Barto, "Reinforcement Learning: An Introduction", 2nd ed., 12.1.

    **Arguments:**

    - `r_t`: rewards at times `1..T`.
    - `discount_t`: discounts at times `1..T` (the agent's discount times the env's).
    - `v_t`: value estimates at times `1..T`.
    - `lambda_`: a scalar or one mixing coefficient per step, in [0, 1].
    - `associative_scan`: as in [`podrace.losses.discounted_returns`][].

    **Returns:**

    The lambda-return targets for times `0..T-1`.
    """
    lambda_ = jnp.broadcast_to(jnp.asarray(lambda_, v_t.dtype), v_t.shape)
    return discounted_returns(
        r_t + discount_t * (1 - lambda_) * v_t, discount_t * lambda_, v_t, associative_scan=associative_scan
    )


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


def discounted_returns(
    r_t: Float[Array, " T"],
    discount_t: Float[Array, " T"],
    v_t: Float[Array, " T"] | Float[ArrayLike, ""],
    *,
    associative_scan: bool = False,
) -> Float[Array, " T"]:
    """Discounted returns along a trajectory, bootstrapped from the last value.

    `G_t = r_t + discount_t * G_{t+1}`, with `G_{T+1} = v_T`. A `discount_t` of 0
    (termination) restarts the sum there. This is [`podrace.losses.lambda_returns`][]
    with `lambda_ = 1`, so only `v_t[-1]` is used; a truncation inside the trajectory
    needs a lambda of 0 at that step, which `lambda_returns` accepts. Every backward
    recurrence of podrace's losses (lambda-returns, GAE, V-trace) is this one.

    The recurrence runs as a sequential `lax.scan` of `T` steps, or, with
    `associative_scan`, as `lax.associative_scan` over the affine maps
    `G -> r_t + discount_t * G`, whose composition is associative: `O(log T)` steps
    of more work each, which a GPU can run in parallel. The two agree up to float
    rounding. On a CPU the sequential scan is the faster (see `benchmarks/README.md`).

    Reference: Sutton & Barto, "Reinforcement Learning: An Introduction", 2nd ed., 3.3;
    Blelloch, "Prefix Sums and Their Applications", 1990 (first-order recurrences as
    scans).

    **Arguments:**

    - `r_t`: rewards at times `1..T`.
    - `discount_t`: discounts at times `1..T` (the agent's discount times the env's).
    - `v_t`: value estimates at times `1..T`, of which only the last is bootstrapped
      from; or a scalar, the value at time `T` (pass 0 for Monte Carlo returns).
    - `associative_scan`: whether to run the recurrence as an associative scan
      (log-depth) rather than a sequential one.

    **Returns:**

    The discounted returns for times `0..T-1`.
    """
    v_t = jnp.asarray(v_t, r_t.dtype)
    bootstrap = v_t.reshape(-1)[-1]
    if associative_scan:

        def compose(later, earlier):
            # Applying `later`'s map, then `earlier`'s: `G -> b + a * (b' + a' * G)`.
            return earlier[0] * later[0], earlier[1] + earlier[0] * later[1]

        scale, offset = jax.lax.associative_scan(compose, (discount_t, r_t), reverse=True)
        return offset + scale * bootstrap

    def backward(next_return, inputs):
        reward, discount = inputs
        g = reward + discount * next_return
        return g, g

    _, returns = jax.lax.scan(backward, varying_like(bootstrap, r_t, discount_t), (r_t, discount_t), reverse=True)
    return returns


def n_step_bootstrapped_returns(
    r_t: Float[Array, " T"],
    discount_t: Float[Array, " T"],
    v_t: Float[Array, " T"],
    n: int,
    lambda_: ArrayLike = 1.0,
) -> Float[Array, " T"]:
    """Lambda-returns truncated after `n` steps, bootstrapped from the value `n` steps on.

    The target for the state at time `s` takes the rewards at times `s+1..s+n` and
    bootstraps from the value at time `s+n` (at time `T` where fewer than `n` steps
    remain), mixing in the values in between as [`podrace.losses.lambda_returns`][] does:
    it is the lambda-return of the trajectory cut `n` steps after `s`. With `lambda_ = 1`
    (the default) it is the n-step return `r_{s+1} + discount_{s+1} * (r_{s+2} + ... +
    discount_{s+n} * v_{s+n})`. A `discount_t` of 0 (termination) stops bootstrapping; at
    a truncation pass a discount of 1 and a `lambda_t` of 0, so that the target
    bootstraps from `v_t` there.

    Reference: Sutton & Barto, "Reinforcement Learning: An Introduction", 2nd ed., 7.1
    (n-step returns) and 12.3 (truncated lambda-returns).

    **Arguments:**

    - `r_t`: rewards at times `1..T`.
    - `discount_t`: discounts at times `1..T` (the agent's discount times the env's).
    - `v_t`: value estimates at times `1..T`.
    - `n`: the number of steps before bootstrapping, at least 1 (static).
    - `lambda_`: a scalar or one mixing coefficient per step, in [0, 1].

    **Returns:**

    The n-step targets for times `0..T-1`.
    """
    if n < 1:
        raise ValueError(f"n_step_bootstrapped_returns needs n >= 1 steps, got n={n}.")
    lambda_ = jnp.broadcast_to(jnp.asarray(lambda_, v_t.dtype), v_t.shape)

    def one_more_step(later):
        return r_t + discount_t * ((1 - lambda_) * v_t + lambda_ * later)

    # `later[t]` is the (k - 1)-step target of the state at time t + 1. It starts as that
    # state's value; the state at time T keeps its value as target.
    later = v_t
    for _ in range(n - 1):
        later = jnp.concatenate([one_more_step(later)[1:], v_t[-1:]])
    return one_more_step(later)


def generalized_advantage_estimation(
    r_t: Float[Array, " T"],
    discount_t: Float[Array, " T"],
    lambda_: ArrayLike,
    values: Float[Array, " T+1"],
    *,
    stop_target_gradients: bool = True,
    associative_scan: bool = False,
) -> Float[Array, " T"]:
    """Generalized advantage estimates along a trajectory.

    `A_t = delta_t + discount_t * lambda_t * A_{t+1}`, with the TD errors
    `delta_t = r_t + discount_t * values_{t+1} - values_t` and `A_T = 0`. These are the
    [`podrace.losses.td_lambda`][] errors of `values`. A `discount_t` of 0 (termination)
    stops the sum and the bootstrap; at a truncation pass a discount of 1 and a `lambda_t`
    of 0, so that the advantage there is the one-step TD error. The recurrence is
    [`podrace.losses.discounted_returns`][] of the TD errors with the discounts
    `discount_t * lambda_t`, bootstrapped from 0.

    Reference: Schulman, Moritz, Levine, Jordan & Abbeel, "High-Dimensional Continuous
    Control Using Generalized Advantage Estimation", ICLR 2016.

    **Arguments:**

    - `r_t`: rewards at times `1..T`.
    - `discount_t`: discounts at times `1..T` (the agent's discount times the env's).
    - `lambda_`: a scalar or one mixing coefficient per step, in [0, 1].
    - `values`: value estimates at times `0..T`.
    - `stop_target_gradients`: whether the targets `A_t + values_t` are treated as
      constants, so that gradients flow only into `-values_t` (as in `td_lambda`).
    - `associative_scan`: as in [`podrace.losses.discounted_returns`][].

    **Returns:**

    The advantages for times `0..T-1`.
    """
    lambda_ = jnp.broadcast_to(jnp.asarray(lambda_, values.dtype), r_t.shape)
    deltas = r_t + discount_t * values[1:] - values[:-1]
    zero = jnp.zeros((), values.dtype)
    advantages = discounted_returns(deltas, discount_t * lambda_, zero, associative_scan=associative_scan)
    if stop_target_gradients:
        # Plus zero in value, minus one in gradient: only the prediction is learnt.
        predictions = values[:-1]
        advantages = jax.lax.stop_gradient(advantages) - (predictions - jax.lax.stop_gradient(predictions))
    return advantages


def greedy_value(q_t: Float[Array, "*T A"], q_t_selector: Float[Array, "*T A"] | None = None) -> Float[Array, "*T"]:
    """The value of the greedy action: `max_a q_t[a]`, or `q_t` at `argmax_a q_t_selector[a]`.

    With a selector this is double Q-learning's bootstrap value: one set of values picks
    the action, the other evaluates it.

    Reference: van Hasselt, Guez & Silver, "Deep Reinforcement Learning with Double
    Q-learning", AAAI 2016.

    **Arguments:**

    - `q_t`: action values (e.g. a target network's).
    - `q_t_selector`: action values that select the action (e.g. the online
        network's); `None` for `max_a q_t[a]`.

    **Returns:**

    One value per leading index.
    """
    if q_t_selector is None:
        return jnp.max(q_t, axis=-1)
    greedy = jnp.argmax(q_t_selector, axis=-1)
    return jnp.take_along_axis(q_t, greedy[..., None], axis=-1)[..., 0]


def q_learning(
    q_tm1: Float[Array, " A"],
    a_tm1: Int[ArrayLike, ""],
    r_t: Float[ArrayLike, ""],
    discount_t: Float[ArrayLike, ""],
    q_t: Float[Array, " A"],
    *,
    stop_target_gradients: bool = True,
) -> Float[Array, ""]:
    """The Q-learning TD error of one transition.

    `r_t + discount_t * max_a q_t[a] - q_tm1[a_tm1]`. A `discount_t` of 0 (termination)
    drops the bootstrap; at a truncation pass the discount as usual and `q_t` of the last
    observation of the episode.

    Reference: Watkins & Dayan, "Q-learning", Machine Learning 8, 1992.

    **Arguments:**

    - `q_tm1`: action values at time `t-1`.
    - `a_tm1`: the action taken at time `t-1`.
    - `r_t`: the reward at time `t`.
    - `discount_t`: the discount at time `t`.
    - `q_t`: action values at time `t` (e.g. from a target network).
    - `stop_target_gradients`: whether the target is treated as a constant.

    **Returns:**

    The scalar TD error.
    """
    target = jnp.asarray(r_t) + jnp.asarray(discount_t) * greedy_value(q_t)
    if stop_target_gradients:
        target = jax.lax.stop_gradient(target)
    return target - q_tm1[a_tm1]


def double_q_learning(
    q_tm1: Float[Array, " A"],
    a_tm1: Int[ArrayLike, ""],
    r_t: Float[ArrayLike, ""],
    discount_t: Float[ArrayLike, ""],
    q_t_value: Float[Array, " A"],
    q_t_selector: Float[Array, " A"],
    *,
    stop_target_gradients: bool = True,
) -> Float[Array, ""]:
    """The double Q-learning TD error of one transition.

    `r_t + discount_t * q_t_value[argmax_a q_t_selector[a]] - q_tm1[a_tm1]`: one set of
    values picks the action, the other evaluates it, which removes the maximisation bias
    of [`podrace.losses.q_learning`][]. A `discount_t` of 0 (termination) drops the
    bootstrap.

    Reference: van Hasselt, "Double Q-learning", NeurIPS 2010; van Hasselt, Guez &
    Silver, "Deep Reinforcement Learning with Double Q-learning", AAAI 2016.

    **Arguments:**

    - `q_tm1`: action values at time `t-1`.
    - `a_tm1`: the action taken at time `t-1`.
    - `r_t`: the reward at time `t`.
    - `discount_t`: the discount at time `t`.
    - `q_t_value`: action values at time `t` that evaluate the action (e.g. a target
      network's).
    - `q_t_selector`: action values at time `t` that select the action (e.g. the online
      network's).
    - `stop_target_gradients`: whether the target is treated as a constant.

    **Returns:**

    The scalar TD error.
    """
    target = jnp.asarray(r_t) + jnp.asarray(discount_t) * greedy_value(q_t_value, q_t_selector)
    if stop_target_gradients:
        target = jax.lax.stop_gradient(target)
    return target - q_tm1[a_tm1]


def n_step_q_learning(
    q_tm1: Float[Array, "T A"],
    a_tm1: Int[Array, " T"],
    r_t: Float[Array, " T"],
    discount_t: Float[Array, " T"],
    q_t: Float[Array, "T A"],
    n: int,
    lambda_: ArrayLike = 1.0,
    *,
    q_t_selector: Float[Array, "T A"] | None = None,
    stop_target_gradients: bool = True,
) -> Float[Array, " T"]:
    """N-step Q-learning TD errors along a trajectory.

    The targets are [`podrace.losses.n_step_bootstrapped_returns`][] on the greedy values
    `max_a q_t[a]` (with `q_t_selector`, double Q-learning's, see
    [`podrace.losses.greedy_value`][]). A `discount_t` of 0 (termination) stops bootstrapping; at a
    truncation pass a discount of 1 and a `lambda_t` of 0, so that the target
    bootstraps from `q_t` there.

    Reference: Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning",
    ICML 2016; Hessel et al., "Rainbow: Combining Improvements in Deep Reinforcement
    Learning", AAAI 2018.

    **Arguments:**

    - `q_tm1`: action values at times `0..T-1`.
    - `a_tm1`: the actions taken at times `0..T-1`.
    - `r_t`: rewards at times `1..T`.
    - `discount_t`: discounts at times `1..T` (the agent's discount times the env's).
    - `q_t`: action values at times `1..T` to bootstrap from (e.g. a target network's).
    - `n`: the number of steps before bootstrapping, at least 1 (static).
    - `lambda_`: a scalar or one mixing coefficient per step, in [0, 1].
    - `q_t_selector`: action values at times `1..T` that select the greedy action
        (double Q-learning), or `None`.
    - `stop_target_gradients`: whether the targets are treated as constants.

    **Returns:**

    The errors `G_t - q_tm1[a_tm1]`, one per time step.
    """
    targets = n_step_bootstrapped_returns(r_t, discount_t, greedy_value(q_t, q_t_selector), n, lambda_)
    if stop_target_gradients:
        targets = jax.lax.stop_gradient(targets)
    return targets - _chosen(q_tm1, a_tm1)


def q_lambda(
    q_tm1: Float[Array, "T A"],
    a_tm1: Int[Array, " T"],
    r_t: Float[Array, " T"],
    discount_t: Float[Array, " T"],
    q_t: Float[Array, "T A"],
    lambda_: ArrayLike,
    *,
    stop_target_gradients: bool = True,
) -> Float[Array, " T"]:
    """Peng's Q(lambda) TD errors along a trajectory.

    The targets are [`podrace.losses.lambda_returns`][] on the greedy values
    `max_a q_t[a]`. Cutting `lambda_t` to 0 where the action at time `t` is not greedy
    gives Watkins's Q(lambda). A `discount_t` of 0 (termination) stops bootstrapping; at
    a truncation pass a discount of 1 and a `lambda_t` of 0, so that the target
    bootstraps from `q_t` there.

    Reference: Peng & Williams, "Incremental Multi-Step Q-Learning", Machine Learning 22,
    1996; Sutton & Barto, 2nd ed., 12.10.

    **Arguments:**

    - `q_tm1`: action values at times `0..T-1`.
    - `a_tm1`: the actions taken at times `0..T-1`.
    - `r_t`: rewards at times `1..T`.
    - `discount_t`: discounts at times `1..T` (the agent's discount times the env's).
    - `q_t`: action values at times `1..T` to bootstrap from.
    - `lambda_`: a scalar or one mixing coefficient per step, in [0, 1].
    - `stop_target_gradients`: whether the targets are treated as constants.

    **Returns:**

    The errors `G_t - q_tm1[a_tm1]`, one per time step.
    """
    targets = lambda_returns(r_t, discount_t, greedy_value(q_t), lambda_)
    if stop_target_gradients:
        targets = jax.lax.stop_gradient(targets)
    return targets - _chosen(q_tm1, a_tm1)


def _chosen(q: Float[Array, "T A"], actions: Int[Array, " T"]) -> Float[Array, " T"]:
    return jnp.take_along_axis(q, actions[:, None], axis=-1)[:, 0]
