"""Recurrent PPO (a GRU) on RepeatFirst, timed three ways in one process.

- `podrace_gru`: `podrace.Anakin` with a `RecurrentNetwork(MLPTorso, GRUCore, PolicyLogitHead)`
  learnt by `PPOLoss` in a `Learner` of several epochs and minibatches.
- `handwritten_gru`: the same algorithm written out in plain JAX (parameters in a dict,
  the GRU cell's equations, optax's Adam; no podrace or Equinox in the compiled code):
  the same auto-resetting RepeatFirst, per-environment keys split as podrace splits them,
  `[T + 1, B]` trajectories that keep the carry they started from, the same minibatch
  shuffle, GAE, advantage normalisation, clipped surrogate, value loss and entropy bonus.
  `podrace_gru / handwritten_gru` measures the framework's overhead alone (`--check`
  verifies that both produce the same parameters).
- `podrace_ff`: podrace's feed-forward PPO, the same torso and head without the GRU:
  `podrace_ff / podrace_gru` is what recurrence costs.

All three run at the same settings (environments, rollout length, updates per call, Adam
3e-3, discount 0.99, GAE 0.95, clip 0.2, 2 epochs of 2 minibatches, 32 units). Calls are
interleaved, each repeat in a rotated order, and the median call is reported. The last
line is `ratio_vs_handwritten=X recurrence_cost=Y`: X is podrace's recurrent frames per
second over the hand-written version's, Y podrace's feed-forward frames per second over
its recurrent ones.

    python benchmarks/recurrent.py [--batch 64] [--rollout 24] [--iterations 100]
        [--repeats 10] [--seed 0] [--check]
"""

import functools
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _compare import Method, Step, max_difference, parameter_differences, parse_args, print_results, time_interleaved
from jax import lax
from jax.sharding import Mesh

import podrace


NUM_SYMBOLS = 4
DELAY = 4
OBSERVATION_SIZE = NUM_SYMBOLS + 1
HIDDEN = 32
LEARNING_RATE = 3e-3
DISCOUNT = 0.99
LAMBDA = 0.95
CLIP_EPSILON = 0.2
VALUE_COEFFICIENT = 0.5
ENTROPY_COEFFICIENT = 0.01
NUM_EPOCHS = 2
NUM_MINIBATCHES = 2


# --------------------------------------------------------------------------------------
# podrace: recurrent and feed-forward
# --------------------------------------------------------------------------------------


def make_podrace(batch: int, rollout: int, key: jax.Array, *, recurrent: bool) -> podrace.Anakin:
    """GRU-PPO (or, without `recurrent`, the same torso and head with no core) on RepeatFirst."""
    torso_key, core_key, head_key = jax.random.split(key, 3)
    torso = podrace.networks.MLPTorso((OBSERVATION_SIZE,), (HIDDEN,), key=torso_key)
    head = podrace.networks.PolicyLogitHead(HIDDEN, NUM_SYMBOLS, with_value=True, key=head_key)
    if recurrent:
        core = podrace.networks.GRUCore(HIDDEN, HIDDEN, key=core_key)
        network: podrace.networks.AbstractNetwork = podrace.networks.RecurrentNetwork(torso, core, head)
    else:
        network = podrace.networks.FeedForwardNetwork(torso, head)
    loss = podrace.losses.PPOLoss(
        discount=DISCOUNT,
        lambda_=LAMBDA,
        clip_epsilon=CLIP_EPSILON,
        value_coefficient=VALUE_COEFFICIENT,
        entropy_coefficient=ENTROPY_COEFFICIENT,
    )
    learner = podrace.Learner(
        network,
        podrace.policies.Categorical(),
        loss,
        optax.adam(LEARNING_RATE),
        num_epochs=NUM_EPOCHS,
        num_minibatches=NUM_MINIBATCHES,
    )
    # One device, as the hand-written version runs (on a machine with several, both use the first).
    mesh = Mesh(np.asarray(jax.devices()[:1]), ("devices",))
    env = podrace.envs.RepeatFirst(NUM_SYMBOLS, DELAY)
    return podrace.Anakin(env, learner, num_envs=batch, rollout_length=rollout, mesh=mesh)


# --------------------------------------------------------------------------------------
# The same algorithm hand-written in plain JAX
# --------------------------------------------------------------------------------------


class Envs(NamedTuple):
    symbol: jax.Array
    elapsed: jax.Array
    step: Step
    carry: jax.Array  # the GRU's hidden state of each environment
    key: jax.Array


class Trajectory(NamedTuple):
    steps: Step  # [T + 1, B]
    action: jax.Array  # [T, B]
    log_mu: jax.Array  # [T, B]
    carry: jax.Array  # [B, H], the carry the rollout started from


def hw_observe(symbol: jax.Array, elapsed: jax.Array) -> jax.Array:
    shown = jax.nn.one_hot(symbol, NUM_SYMBOLS) * (elapsed == 0)
    query = (elapsed == DELAY + 1).astype(jnp.float32)
    return jnp.concatenate([shown, query[None]]).astype(jnp.float32)


def hw_reset(key: jax.Array) -> tuple[jax.Array, jax.Array, Step]:
    symbol = jax.random.randint(key, (), 0, NUM_SYMBOLS, dtype=jnp.int32)
    elapsed = jnp.int32(0)
    return (
        symbol,
        elapsed,
        Step(hw_observe(symbol, elapsed), jnp.float32(0), jnp.float32(1), jnp.bool_(True), jnp.bool_(False)),
    )


def hw_env_step(symbol, elapsed, last: Step, action, key) -> tuple[jax.Array, jax.Array, Step]:
    """One step of RepeatFirst that resets instead when the previous step ended an episode."""
    answered = elapsed == DELAY + 1
    reward = jnp.where(answered & (action == symbol), 1.0, 0.0)
    discount = jnp.where(answered, 0.0, 1.0)
    stepped = symbol, elapsed + 1, Step(hw_observe(symbol, elapsed + 1), reward, discount, jnp.bool_(False), answered)
    return jax.tree.map(lambda r, s: jnp.where(last.is_last, r, s), hw_reset(key), stepped)


@functools.partial(jax.jit, static_argnums=1)
def hw_init(key: jax.Array, num_envs: int) -> tuple[Envs, jax.Array]:
    """The environments and the learner's key, derived from `key` as `podrace.Anakin.init` does.

    `learner_key, envs_key = split(key)`; one key per environment from
    `split(envs_key, num_envs)`, each split into its next key and its reset key, under `vmap`.
    """

    def one(key):
        key, reset_key = jax.random.split(key)
        symbol, elapsed, step = hw_reset(reset_key)
        return Envs(symbol, elapsed, step, jnp.zeros(HIDDEN), key)

    learner_key, envs_key = jax.random.split(key)
    return jax.vmap(one)(jax.random.split(envs_key, num_envs)), learner_key


def hw_init_params(key: jax.Array) -> dict[str, jax.Array]:
    """Initialised as Equinox does: uniform in +-1/sqrt(fan_in) (the GRU: +-1/sqrt(hidden)).

    Weights are `[out, in]`, applied as `x @ w.T` (see `anakin_catch.py` for why).
    """
    shapes = {
        "torso_w": ((HIDDEN, OBSERVATION_SIZE), OBSERVATION_SIZE),
        "torso_b": ((HIDDEN,), OBSERVATION_SIZE),
        "gru_w_ih": ((3 * HIDDEN, HIDDEN), HIDDEN),
        "gru_w_hh": ((3 * HIDDEN, HIDDEN), HIDDEN),
        "gru_b": ((3 * HIDDEN,), HIDDEN),
        "gru_b_n": ((HIDDEN,), HIDDEN),
        "policy_w": ((NUM_SYMBOLS, HIDDEN), HIDDEN),
        "policy_b": ((NUM_SYMBOLS,), HIDDEN),
        "value_w": ((1, HIDDEN), HIDDEN),
        "value_b": ((), HIDDEN),
    }
    keys = jax.random.split(key, len(shapes))
    return {
        name: jax.random.uniform(k, shape, minval=-(fan_in**-0.5), maxval=fan_in**-0.5)
        for k, (name, (shape, fan_in)) in zip(keys, shapes.items(), strict=True)
    }


def hw_torso(params, observation: jax.Array) -> jax.Array:
    return jax.nn.relu(observation @ params["torso_w"].T + params["torso_b"])


def hw_gru(params, features: jax.Array, hidden: jax.Array) -> jax.Array:
    """`equinox.nn.GRUCell`'s equations, on any leading batch shape."""
    input_gates = jnp.split(features @ params["gru_w_ih"].T + params["gru_b"], 3, axis=-1)
    hidden_gates = jnp.split(hidden @ params["gru_w_hh"].T, 3, axis=-1)
    reset = jax.nn.sigmoid(input_gates[0] + hidden_gates[0])
    update = jax.nn.sigmoid(input_gates[1] + hidden_gates[1])
    candidate = jnp.tanh(input_gates[2] + reset * (hidden_gates[2] + params["gru_b_n"]))
    return candidate + update * (hidden - candidate)


def hw_head(params, hidden: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Normalised log-probabilities and the value."""
    logits = hidden @ params["policy_w"].T + params["policy_b"]
    value = (hidden @ params["value_w"].T)[..., 0] + params["value_b"]
    return jax.nn.log_softmax(logits), value


def hw_rollout(params, envs: Envs, length: int) -> tuple[Envs, Trajectory]:
    """`length` steps of every environment: a trajectory `[T + 1, B]` with its initial carry."""

    def step(envs: Envs, _):
        keys = jax.vmap(lambda key: jax.random.split(key, 3))(envs.key)  # next, act, env
        carry = jnp.where(envs.step.is_first[:, None], 0.0, envs.carry)
        carry = hw_gru(params, hw_torso(params, envs.step.observation), carry)
        log_probs, _ = hw_head(params, carry)
        action = jax.vmap(jax.random.categorical)(keys[:, 1], log_probs).astype(jnp.int32)
        log_mu = jnp.take_along_axis(log_probs, action[:, None], axis=-1)[:, 0]
        symbol, elapsed, next_step = jax.vmap(hw_env_step)(envs.symbol, envs.elapsed, envs.step, action, keys[:, 2])
        return Envs(symbol, elapsed, next_step, carry, keys[:, 0]), (envs.step, action, log_mu)

    last, (steps, actions, log_mu) = lax.scan(step, envs, length=length)
    steps = jax.tree.map(lambda s, final: jnp.concatenate([s, final[None]]), steps, last.step)
    return last, Trajectory(steps, actions, log_mu, envs.carry)


def hw_gae(rewards, discounts, lambdas, values) -> jax.Array:
    deltas = rewards + discounts * values[1:] - values[:-1]

    def backward(next_advantage, inputs):
        delta, discount, lam = inputs
        advantage = delta + discount * lam * next_advantage
        return advantage, advantage

    return lax.scan(backward, jnp.zeros_like(deltas[0]), (deltas, discounts, lambdas), reverse=True)[1]


def hw_unroll(params, trajectory: Trajectory) -> tuple[jax.Array, jax.Array]:
    """Log-probabilities and values of a batch `[T + 1, b]`: the torso and the head on all time
    steps at once, the GRU unrolled from the trajectory's carry, reset where a time step is first."""
    steps = trajectory.steps
    features = hw_torso(params, steps.observation)

    def unroll(hidden, inputs):
        x, first = inputs
        hidden = hw_gru(params, x, jnp.where(first[:, None], 0.0, hidden))
        return hidden, hidden

    _, hidden = lax.scan(unroll, trajectory.carry, (features, steps.is_first))
    return hw_head(params, hidden)


def hw_targets(params, trajectory: Trajectory) -> tuple[jax.Array, jax.Array]:
    """GAE advantages and returns `[T, B]` from the values of the parameters that collected the batch."""
    steps = trajectory.steps
    _, values = hw_unroll(params, trajectory)
    advantages = hw_gae(
        steps.reward[1:],
        DISCOUNT * steps.discount[1:],
        LAMBDA * (1.0 - steps.is_last[1:]),
        values,
    )
    return advantages, advantages + values[:-1]


def hw_loss(params, trajectory: Trajectory, advantages: jax.Array, returns: jax.Array) -> jax.Array:
    """PPO's loss of a minibatch `[T + 1, b]` with its share of the update's advantages and returns."""
    steps = trajectory.steps
    log_probs, values = hw_unroll(params, trajectory)
    values = values[:-1]
    mask = 1.0 - steps.is_first[1:]  # no loss on the transition into a reset
    count = jnp.maximum(jnp.sum(mask), 1.0)
    mean = jnp.sum(mask * advantages) / count
    std = jnp.sqrt(jnp.sum(mask * jnp.square(advantages - mean)) / count)
    advantages = (advantages - mean) / (std + 1e-8)

    log_probs = log_probs[:-1]
    log_pi = jnp.take_along_axis(log_probs, trajectory.action[..., None], axis=-1)[..., 0]
    ratios = jnp.exp(log_pi - trajectory.log_mu)
    clipped = jnp.clip(ratios, 1.0 - CLIP_EPSILON, 1.0 + CLIP_EPSILON)
    policy_loss = -jnp.mean(mask * jnp.minimum(ratios * advantages, clipped * advantages))
    value_loss = 0.5 * jnp.mean(mask * jnp.square(returns - values))
    entropy = jnp.mean(mask * -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1))
    return policy_loss + VALUE_COEFFICIENT * value_loss - ENTROPY_COEFFICIENT * entropy


def hw_minibatch_order(key: jax.Array, num_envs: int) -> jax.Array:
    """`[M, B / M]` environment indices: groups of `M` consecutive environments, each sending
    one to every minibatch, group `g` in the order that sorts row `g` of one draw of random
    bits (podrace's `shuffled_minibatches`)."""
    num_groups = num_envs // NUM_MINIBATCHES
    orders = jnp.argsort(jax.random.bits(key, (num_groups, NUM_MINIBATCHES)), axis=-1)
    return (NUM_MINIBATCHES * jnp.arange(num_groups)[None, :] + orders.T).astype(jnp.int32)


class HandwrittenState(NamedTuple):
    params: Any  # dict[str, jax.Array]
    opt_state: optax.OptState
    key: jax.Array  # the learner's (minibatch shuffling)
    envs: Envs


def make_handwritten_train(rollout: int, iterations: int) -> Callable:
    """`train(state) -> (state, (losses, rewards))`, jitted: `iterations` rollouts and PPO updates."""
    optimizer = optax.adam(LEARNING_RATE)

    def train(state: HandwrittenState):
        def one_update(state: HandwrittenState, _):
            envs, trajectory = hw_rollout(state.params, state.envs, rollout)
            num_envs = trajectory.carry.shape[0]
            advantages, returns = hw_targets(state.params, trajectory)  # once per update
            key, shuffle_key = jax.random.split(state.key)
            orders = jax.vmap(lambda key: hw_minibatch_order(key, num_envs))(jax.random.split(shuffle_key, NUM_EPOCHS))

            def gradient_step(carry, order):
                params, opt_state = carry
                minibatch = Trajectory(
                    jax.tree.map(lambda x: jnp.take(x, order, axis=1), trajectory.steps),
                    jnp.take(trajectory.action, order, axis=1),
                    jnp.take(trajectory.log_mu, order, axis=1),
                    jnp.take(trajectory.carry, order, axis=0),
                )
                loss, grads = jax.value_and_grad(hw_loss)(
                    params, minibatch, jnp.take(advantages, order, axis=1), jnp.take(returns, order, axis=1)
                )
                updates, opt_state = optimizer.update(grads, opt_state, params)
                return (optax.apply_updates(params, updates), opt_state), loss

            (params, opt_state), losses = lax.scan(
                gradient_step, (state.params, state.opt_state), orders.reshape(-1, orders.shape[-1])
            )
            # The rewards collected: RepeatFirst rewards only an episode's last step, so this is
            # podrace's `episode_return_sum` (the returns of the episodes that ended).
            return HandwrittenState(params, opt_state, key, envs), (
                jnp.mean(losses),
                jnp.sum(trajectory.steps.reward[1:]),
            )

        return lax.scan(one_update, state, length=iterations)

    return jax.jit(train)


def make_handwritten(batch: int, rollout: int, iterations: int, seed: int) -> tuple[Callable, HandwrittenState]:
    params_key, run_key = jax.random.split(jax.random.key(seed))
    params = hw_init_params(params_key)
    envs, learner_key = hw_init(run_key, batch)
    state = HandwrittenState(params, optax.adam(LEARNING_RATE).init(params), learner_key, envs)
    return make_handwritten_train(rollout, iterations), state


# --------------------------------------------------------------------------------------
# Faithfulness check: podrace and the hand-written version from the same start
# --------------------------------------------------------------------------------------


def params_as_dict(pipeline: podrace.Anakin, params) -> dict[str, jax.Array]:
    """podrace's recurrent network's parameters as the hand-written dict (same layouts)."""
    learner = pipeline.learner
    assert isinstance(learner, podrace.Learner)
    network: Any = learner.network_with(params)
    torso, cell, head = network.torso.layers[0], network.core.cell, network.head
    return {
        "torso_w": torso.weight,
        "torso_b": torso.bias,
        "gru_w_ih": cell.weight_ih,
        "gru_w_hh": cell.weight_hh,
        "gru_b": cell.bias,
        "gru_b_n": cell.bias_n,
        "policy_w": head.linear.weight,
        "policy_b": head.linear.bias,
        "value_w": head.value_head.linear.weight,
        "value_b": head.value_head.linear.bias,
    }


def check(batch: int, rollout: int, num_updates: int, seed: int) -> float:
    """Trains podrace and the hand-written version from the same parameters and keys.

    Returns the largest absolute parameter difference after `num_updates` updates.
    """
    # Full-precision matmuls, so that TF32 on GPUs does not blur the comparison.
    with jax.default_matmul_precision("highest"):
        network_key, run_key = jax.random.split(jax.random.key(seed))
        pipeline = make_podrace(batch, rollout, network_key, recurrent=True)
        state = pipeline.init(run_key)
        start = params_as_dict(pipeline, state.learner.params)
        envs, learner_key = hw_init(run_key, batch)
        reset: Any = state.envs.env_state.env_state
        for name, ours, theirs in (
            ("environment keys", jax.random.key_data(envs.key), jax.random.key_data(state.envs.key)),
            ("learner keys", jax.random.key_data(learner_key), jax.random.key_data(state.learner.key)),
            ("symbols", envs.symbol, reset.symbol),
            ("observations", envs.step.observation, state.envs.timestep.observation),
        ):
            assert np.array_equal(np.asarray(ours), np.asarray(theirs)), (
                f"initial {name} differ between podrace's Anakin.init and hw_init"
            )

        result = pipeline.train(state, num_updates=num_updates)
        train = make_handwritten_train(rollout, num_updates)
        hw_state, (losses, rewards) = train(
            HandwrittenState(start, optax.adam(LEARNING_RATE).init(start), learner_key, envs)
        )
        final = params_as_dict(pipeline, result.state.learner.params)

    moved, diff = parameter_differences(start, final, hw_state.params)
    loss_diff = max_difference(result.metrics.update.loss, losses)
    podrace_envs: Any = result.state.envs
    same_envs = all(
        np.array_equal(np.asarray(ours), np.asarray(theirs))
        for ours, theirs in (
            (hw_state.envs.symbol, podrace_envs.env_state.env_state.symbol),
            (hw_state.envs.elapsed, podrace_envs.env_state.env_state.elapsed_steps),
            (jax.random.key_data(hw_state.envs.key), jax.random.key_data(podrace_envs.key)),
            (jax.random.key_data(hw_state.key), jax.random.key_data(result.state.learner.key)),
        )
    )
    same_rewards = np.array_equal(np.asarray(rewards), np.asarray(result.metrics.episode_return_sum))
    carry_diff = max_difference(hw_state.envs.carry, podrace_envs.carry)
    print(
        f"check ({num_updates} updates, {batch} envs, rollout {rollout}): params moved by up to {moved:.3g}; "
        f"max |podrace - handwritten| params {diff:.3g}, losses {loss_diff:.3g}, carries {carry_diff:.3g}; "
        f"same env states and keys: {same_envs}; same rewards: {same_rewards}"
    )
    assert same_envs, "the environments or the keys diverged between the two versions"
    assert same_rewards, "the rewards differ: the two versions answered differently"
    # Rounding (summation order) leaves differences of 1e-6 to 1e-5 of what the updates moved
    # the parameters in 20 updates; an algorithmic difference leaves much more, even one as
    # slight as a wrong clipping bound, which acts only on the few ratios outside 1 +- 0.2.
    assert diff <= 1e-3 * moved, f"parameters differ by {diff:.3g} (they moved by {moved:.3g})"
    return diff


def main(argv: list[str] | None = None) -> int:
    args = parse_args(
        argv,
        "GRU-PPO on RepeatFirst: podrace against hand-written JAX.",
        batch=64,
        batch_help="environments (B), a multiple of 2",
        rollout=24,
    )

    frames = args.batch * args.rollout * args.iterations
    print(
        f"jax {jax.__version__} on {jax.default_backend()} ({jax.devices()[0].device_kind}); "
        f"B={args.batch} T={args.rollout} I={args.iterations}: {frames} frames per call, {args.repeats} repeats"
    )
    if args.check:
        check(args.batch, args.rollout, 20, args.seed)

    network_key, run_key = jax.random.split(jax.random.key(args.seed))
    gru = make_podrace(args.batch, args.rollout, network_key, recurrent=True)
    ff = make_podrace(args.batch, args.rollout, network_key, recurrent=False)
    hw_train, hw_state = make_handwritten(args.batch, args.rollout, args.iterations, args.seed)
    methods = [
        Method("podrace_gru", lambda s: gru.train(s, num_updates=args.iterations), lambda out: out.state),
        Method("handwritten_gru", hw_train, lambda out: out[0]),
        Method("podrace_ff", lambda s: ff.train(s, num_updates=args.iterations), lambda out: out.state),
    ]
    states: dict[str, Any] = {
        "podrace_gru": gru.init(run_key),
        "handwritten_gru": hw_state,
        "podrace_ff": ff.init(run_key),
    }

    first, seconds = time_interleaved(methods, states, args.repeats)
    median_fps = print_results(
        first, seconds, frames, [("podrace_gru", "handwritten_gru"), ("podrace_ff", "podrace_gru")]
    )
    ratio = median_fps["podrace_gru"] / median_fps["handwritten_gru"]
    cost = median_fps["podrace_ff"] / median_fps["podrace_gru"]
    print(f"ratio_vs_handwritten={ratio:.3f} recurrence_cost={cost:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
