"""The Podracer paper's Anakin workload on Catch, timed three ways in one process.

- `podrace`: `podrace.Anakin` with a greedy TD(lambda) Q-learner.
- `colab`: the Anakin colab's own formulation (dm-haiku + rlax): every environment
  carries its own copy of the parameters and optimiser state, the update is
  `vmap`ped with a named batch axis, gradients are `pmean`ed over it, and a
  `lax.fori_loop` repeats it.
- `handwritten`: podrace's algorithm written out in plain JAX (a dict MLP, optax's
  Adam, no podrace or haiku), with shared parameters. It computes what podrace
  computes, so `podrace / handwritten` measures the framework's overhead alone
  (`--check` verifies that both produce the same parameters).

The hand-written version and the colab report no metric but the loss, so podrace is
asked for the loss alone (`metrics=()`); `--podrace-metrics episodes` times podrace with
its default metrics instead, `--podrace-metrics loss_terms,grad_norm,episodes` with all.

All three run at the same settings (environments per device, rollout length,
updates per call, Adam 1e-4, lambda 0.99, discount 1, one hidden layer of 256). Calls
are interleaved, each repeat in a rotated order, and the median call is reported. The
last line is `ratio_vs_colab=X ratio_vs_handwritten=Y` with X and Y podrace's frames
per second over the others'.

With `--compile-rounds N` it instead times each method's first call in fresh processes:
N rounds of one process per method, the order rotated each round, each process warming
its compiler up and then timing the method's first call (trace, lower, XLA and one run)
and its second. The compile seconds are the first call's time minus the second's; the
last line is `compile_ratio_vs_handwritten=R`, the median over the rounds of podrace's
compile seconds over the hand-written version's in the same round. In one process the
method compiled first pays for more of the compiler's start-up than a small warm-up
program does, which fresh processes keep out of the comparison.

    python benchmarks/anakin_catch.py [--batch 128] [--rollout 16] [--iterations 100]
        [--repeats 10] [--check] [--compile-rounds N]
"""

import argparse
import functools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax
from _compare import (
    Method,
    Step,
    compile_profile,
    max_difference,
    parameter_differences,
    parse_args,
    print_results,
    run_json,
    time_interleaved,
    warm_up_compiler,
)
from jax import lax
from jax.sharding import Mesh, PartitionSpec

import podrace


LEARNING_RATE = 1e-4
DISCOUNT = 1.0
LAMBDA = 0.99
HIDDEN = 256
NUM_ACTIONS = 3
ROWS, COLUMNS = 10, 5
OBSERVATION_SIZE = ROWS * COLUMNS


# --------------------------------------------------------------------------------------
# (a) podrace
# --------------------------------------------------------------------------------------


def make_podrace(batch: int, rollout: int, key: jax.Array) -> podrace.Anakin:
    env = podrace.envs.Catch(rows=ROWS, columns=COLUMNS)
    torso_key, head_key = jax.random.split(key)
    network = podrace.networks.FeedForwardNetwork(
        podrace.networks.MLPTorso(env.observation_space.shape, (HIDDEN,), key=torso_key),
        podrace.networks.QValueHead(HIDDEN, NUM_ACTIONS, key=head_key),
    )
    learner = podrace.Learner(
        network,
        podrace.policies.Greedy(),
        podrace.losses.TDLambdaQLoss(discount=DISCOUNT, lambda_=LAMBDA),
        optax.adam(LEARNING_RATE),
    )
    return podrace.Anakin(env, learner, num_envs=batch, rollout_length=rollout)


# --------------------------------------------------------------------------------------
# (b) the colab: haiku + rlax, parameters and optimiser state copied per environment
# --------------------------------------------------------------------------------------


class ColabCatch:
    """The colab's Catch: the state is `[ball_row, ball_column, paddle_row, paddle_column]`."""

    def __init__(self, rows: int = ROWS, columns: int = COLUMNS):
        self.rows = rows
        self.columns = columns
        self.num_actions = NUM_ACTIONS

    def initial_state(self, rng):
        ball_column = jax.random.randint(rng, (), 0, self.columns)
        return lax.stop_gradient(jnp.array((0, ball_column, self.rows - 1, self.columns // 2), dtype=jnp.int32))

    def step(self, rng, state, action):
        paddle_column = jnp.clip(state[3] + action - 1, 0, self.columns - 1)
        moved = jnp.array([state[0] + 1, state[1], state[2], paddle_column])
        return lax.stop_gradient(lax.select(self.is_terminal(state), self.initial_state(rng), moved))

    def observation(self, state):
        return self.render(state), self.reward(state), self.discount(state), self.is_terminal(state)

    def render(self, state):
        def cell(y, x):
            ball = (y == state[0]) & (x == state[1])
            paddle = (y == state[2]) & (x == state[3])
            return lax.select(ball | paddle, 1.0, 0.0)

        ys = jnp.repeat(jnp.arange(self.rows), self.columns)
        xs = jnp.tile(jnp.arange(self.columns), self.rows)
        return jax.vmap(cell)(ys, xs).reshape((self.rows, self.columns, 1))

    def reward(self, state):
        return lax.select(self.is_terminal(state), lax.select(state[1] == state[3], 1.0, -1.0), 0.0)

    def discount(self, state):
        return lax.select(self.is_terminal(state), 0.0, 1.0)

    def is_terminal(self, state):
        return state[0] == self.rows - 1


class ColabStep(NamedTuple):
    q_values: jax.Array
    action: jax.Array
    discount: jax.Array
    reward: jax.Array


def colab_network() -> hk.Transformed:
    def forward(observation):
        return hk.Sequential([hk.Flatten(), hk.Linear(HIDDEN), jax.nn.relu, hk.Linear(NUM_ACTIONS)])(observation)

    return hk.without_apply_rng(hk.transform(forward))


def colab_learner(env: ColabCatch, apply, opt_update, rollout: int, iterations: int, device_axis: str | None):
    """The colab's learner: one trajectory and one gradient per environment, vmapped."""

    def loss_fn(params, rng, env_state):
        def step_fn(env_state, rng):
            observation, reward, discount, _ = env.observation(env_state)
            q_values = apply(params, observation[None])[0]
            action = jnp.argmax(q_values)
            return env.step(rng, env_state, action), ColabStep(q_values, action, discount, reward)

        env_state, trajectory = lax.scan(step_fn, env_state, jax.random.split(rng, rollout))
        errors = rlax.td_lambda(
            v_tm1=rlax.batched_index(trajectory.q_values[:-1], trajectory.action[:-1]),
            r_t=trajectory.reward[1:],
            discount_t=DISCOUNT * trajectory.discount[1:],
            v_t=jnp.max(trajectory.q_values[1:], axis=-1),
            lambda_=LAMBDA,
        )
        return jnp.mean(errors**2), env_state

    def update_fn(params, opt_state, rng, env_state):
        rng, loss_rng = jax.random.split(rng)
        grads, env_state = jax.grad(loss_fn, has_aux=True)(params, loss_rng, env_state)
        grads = lax.pmean(grads, axis_name="batch")
        if device_axis is not None:
            grads = lax.pmean(grads, axis_name=device_axis)
        updates, opt_state = opt_update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, rng, env_state

    def learner_fn(params, opt_state, rngs, env_states):
        batched_update = jax.vmap(update_fn, axis_name="batch")
        state = (params, opt_state, rngs, env_states)
        return lax.fori_loop(0, iterations, lambda _, carry: batched_update(*carry), state)

    return learner_fn


def make_colab(batch: int, rollout: int, iterations: int, seed: int) -> tuple[Callable, tuple]:
    """The compiled colab learner and its initial state, laid out as the colab does."""
    env = ColabCatch()
    network = colab_network()
    optimizer = optax.adam(LEARNING_RATE)
    rng, env_rng, params_rng = jax.random.split(jax.random.PRNGKey(seed), 3)
    params = network.init(params_rng, env.render(env.initial_state(env_rng))[None])
    opt_state = optimizer.init(params)

    num_devices = jax.device_count()
    if num_devices == 1:
        # One device: plain `jit` of the vmapped learner (no pmap, no device axis).
        learn = jax.jit(colab_learner(env, network.apply, optimizer.update, rollout, iterations, None))
        lead: tuple[int, ...] = (batch,)
    else:
        # Several devices: the colab's `pmap` over them (still works in jax 0.10.2: tried on 2 host devices).
        learn = jax.pmap(colab_learner(env, network.apply, optimizer.update, rollout, iterations, "devices"), "devices")
        lead = (num_devices, batch)
    # jax.tree_map is gone from recent JAX; jax.tree.map replaces it.
    params, opt_state = jax.tree.map(lambda x: jnp.broadcast_to(x, lead + x.shape), (params, opt_state))
    env_rng, step_rng = jax.random.split(rng)
    env_states = jax.vmap(env.initial_state)(jax.random.split(env_rng, math.prod(lead))).reshape(*lead, -1)
    rngs = jax.random.split(step_rng, math.prod(lead)).reshape(*lead, -1)
    return learn, (params, opt_state, rngs, env_states)


# --------------------------------------------------------------------------------------
# (c) podrace's algorithm hand-written in plain JAX, parameters shared by all envs
# --------------------------------------------------------------------------------------


class CatchState(NamedTuple):
    ball_row: jax.Array
    ball_column: jax.Array
    paddle_column: jax.Array


class Envs(NamedTuple):
    state: CatchState
    step: Step
    key: jax.Array


def hw_render(state: CatchState) -> jax.Array:
    rows = jnp.arange(ROWS)[:, None]
    columns = jnp.arange(COLUMNS)[None, :]
    ball = (rows == state.ball_row) & (columns == state.ball_column)
    paddle = (rows == ROWS - 1) & (columns == state.paddle_column)
    return (ball | paddle).astype(jnp.float32)[..., None]


def hw_reset(key: jax.Array) -> tuple[CatchState, Step]:
    column = jax.random.randint(key, (), 0, COLUMNS, dtype=jnp.int32)
    state = CatchState(jnp.int32(0), column, jnp.int32(COLUMNS // 2))
    return state, Step(hw_render(state), jnp.float32(0), jnp.float32(1), jnp.bool_(True), jnp.bool_(False))


def hw_env_step(state: CatchState, last: Step, action: jax.Array, key: jax.Array) -> tuple[CatchState, Step]:
    """One step of Catch that resets instead when the previous step ended an episode."""
    paddle = jnp.clip(state.paddle_column + action - 1, 0, COLUMNS - 1).astype(jnp.int32)
    moved = CatchState(state.ball_row + 1, state.ball_column, paddle)
    terminated = moved.ball_row == ROWS - 1
    reward = jnp.where(terminated, jnp.where(moved.ball_column == paddle, 1.0, -1.0), 0.0)
    stepped = moved, Step(hw_render(moved), reward, jnp.where(terminated, 0.0, 1.0), jnp.bool_(False), terminated)
    return jax.tree.map(lambda r, s: jnp.where(last.is_last, r, s), hw_reset(key), stepped)


@functools.partial(jax.jit, static_argnums=1)
def hw_init_envs(key: jax.Array, num_envs: int) -> Envs:
    """`num_envs` reset environments, their keys derived from `key` as `podrace.Anakin.init` does.

    The recipe (podrace's `Anakin._initial_state`): `learner_key, envs_key = split(key)`; one
    key per environment from `split(envs_key, num_envs)`; each split into its next key and
    its reset key, under `vmap`. Compiled, like podrace's, so that both sides draw under the
    same transformations.
    """

    def one(key):
        key, reset_key = jax.random.split(key)
        state, step = hw_reset(reset_key)
        return Envs(state, step, key)

    _, envs_key = jax.random.split(key)  # the first half is the learner's key
    return jax.vmap(one)(jax.random.split(envs_key, num_envs))


def hw_init_params(key: jax.Array) -> dict[str, jax.Array]:
    """Uniform in +-1/sqrt(fan_in), as Equinox (and Torch) initialise linear layers.

    Weights are stored `[out, in]` and applied as `x @ w.T`. On XLA:CPU this measured about
    25% faster per training call than `[in, out]` weights applied as `x @ w`, whose
    weight-gradient matmul contracts a transposed operand; the faster layout is used so that
    the hand-written reference is a good one.
    """
    keys = jax.random.split(key, 4)
    shapes = {"w1": (HIDDEN, OBSERVATION_SIZE), "b1": (HIDDEN,), "w2": (NUM_ACTIONS, HIDDEN), "b2": (NUM_ACTIONS,)}
    fan_in = {"w1": OBSERVATION_SIZE, "b1": OBSERVATION_SIZE, "w2": HIDDEN, "b2": HIDDEN}
    return {
        name: jax.random.uniform(k, shape, minval=-(fan_in[name] ** -0.5), maxval=fan_in[name] ** -0.5)
        for k, (name, shape) in zip(keys, shapes.items(), strict=True)
    }


def hw_q_values(params: dict[str, jax.Array], observation: jax.Array) -> jax.Array:
    """The MLP on observations `[..., rows, columns, 1]`."""
    x = observation.reshape(*observation.shape[:-3], OBSERVATION_SIZE)
    return jax.nn.relu(x @ params["w1"].T + params["b1"]) @ params["w2"].T + params["b2"]


def hw_rollout(params, envs: Envs, length: int) -> tuple[Envs, Step, jax.Array]:
    """`length` steps of every environment; time steps `[T + 1, B]` and actions `[T, B]`."""

    def act_and_step(state, last, key):
        action = jnp.argmax(hw_q_values(params, last.observation)).astype(jnp.int32)
        return action, *hw_env_step(state, last, action, key)

    def step(envs: Envs, _):
        keys = jax.vmap(lambda key: jax.random.split(key, 3))(envs.key)  # next, act (unused: greedy), env
        action, state, next_step = jax.vmap(act_and_step)(envs.state, envs.step, keys[:, 2])
        return Envs(state, next_step, keys[:, 0]), (envs.step, action)

    envs_after, (steps, actions) = lax.scan(step, envs, length=length)
    steps = jax.tree.map(lambda s, last: jnp.concatenate([s, last[None]]), steps, envs_after.step)
    return envs_after, steps, actions


def hw_lambda_returns(r_t, discount_t, v_t, lambda_t):
    def backward(next_return, inputs):
        reward, discount, value, lam = inputs
        g = reward + discount * ((1 - lam) * value + lam * next_return)
        return g, g

    return lax.scan(backward, v_t[-1], (r_t, discount_t, v_t, lambda_t), reverse=True)[1]


def hw_loss(params, steps: Step, actions: jax.Array) -> jax.Array:
    q = hw_q_values(params, steps.observation)  # [T + 1, B, A], one batched forward pass
    q_tm1 = jnp.take_along_axis(q[:-1], actions[..., None], axis=-1)[..., 0]
    targets = hw_lambda_returns(
        steps.reward[1:],
        DISCOUNT * steps.discount[1:],
        jnp.max(q[1:], axis=-1),
        LAMBDA * (1.0 - steps.is_last[1:]),
    )
    errors = lax.stop_gradient(targets) - q_tm1
    mask = 1.0 - steps.is_first[1:]  # no loss on the transition into a reset
    return jnp.mean(mask * jnp.square(errors))


def make_handwritten_train(rollout: int, iterations: int) -> Callable:
    """`train(params, opt_state, envs) -> (params, opt_state, envs, losses)`, jitted."""
    optimizer = optax.adam(LEARNING_RATE)
    num_devices = jax.device_count()
    axis = "devices" if num_devices > 1 else None

    def train(params, opt_state, envs):
        def one_update(carry, _):
            params, opt_state, envs = carry
            envs, steps, actions = hw_rollout(params, envs, rollout)
            # Across devices, differentiate per-device copies and average explicitly.
            local = params if axis is None else lax.pcast(params, axis, to="varying")
            loss, grads = jax.value_and_grad(hw_loss)(local, steps, actions)
            if axis is not None:
                loss, grads = lax.pmean((loss, grads), axis)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state, envs), loss

        (params, opt_state, envs), losses = lax.scan(one_update, (params, opt_state, envs), length=iterations)
        return params, opt_state, envs, losses

    if axis is not None:
        mesh = Mesh(np.asarray(jax.devices()), (axis,))
        replicated, split = PartitionSpec(), PartitionSpec(axis)
        train = jax.shard_map(
            train,
            mesh=mesh,
            in_specs=(replicated, replicated, split),
            out_specs=(replicated, replicated, split, replicated),
        )
    return jax.jit(train)


def make_handwritten(batch: int, rollout: int, iterations: int, seed: int) -> tuple[Callable, tuple]:
    params_key, envs_key = jax.random.split(jax.random.key(seed))
    params = hw_init_params(params_key)
    envs = hw_init_envs(envs_key, jax.device_count() * batch)
    return make_handwritten_train(rollout, iterations), (params, optax.adam(LEARNING_RATE).init(params), envs)


# --------------------------------------------------------------------------------------
# Faithfulness check: podrace and the hand-written version from the same start
# --------------------------------------------------------------------------------------


def params_as_dict(pipeline: podrace.Anakin, params) -> dict[str, jax.Array]:
    """podrace's network parameters as the hand-written dict (same `[out, in]` layout)."""
    learner = pipeline.learner
    assert isinstance(learner, podrace.Learner)
    network = learner.network_with(params)
    hidden, head = network.torso.layers[0], network.head.linear  # pyright: ignore[reportAttributeAccessIssue]
    return {"w1": hidden.weight, "b1": hidden.bias, "w2": head.weight, "b2": head.bias}


def check(batch: int, rollout: int, num_updates: int, seed: int) -> float:
    """Trains podrace and the hand-written version from the same parameters and keys.

    Returns the largest absolute parameter difference after `num_updates` updates.
    """
    # Full-precision matmuls, so that TF32 on GPUs does not blur the comparison.
    with jax.default_matmul_precision("highest"):
        network_key, run_key = jax.random.split(jax.random.key(seed))
        pipeline = make_podrace(batch, rollout, network_key)
        state = pipeline.init(run_key)
        start = params_as_dict(pipeline, state.learner.params)
        envs = hw_init_envs(run_key, pipeline.num_devices * batch)
        # Same key in, same environments out: podrace's init is reproduced exactly. The keys
        # are compared first: if they differ, the two no longer derive them by the same
        # recipe (see `hw_init_envs`); if only the draws differ, `Catch.reset` has changed.
        reset = state.envs.env_state.env_state  # pyright: ignore[reportAttributeAccessIssue]
        for name, ours, theirs in (
            ("environment keys", jax.random.key_data(envs.key), jax.random.key_data(state.envs.key)),
            ("ball columns", envs.state.ball_column, reset.ball_column),
            ("observations", envs.step.observation, state.envs.timestep.observation),
        ):
            assert np.array_equal(np.asarray(ours), np.asarray(theirs)), (
                f"initial {name} differ between podrace's Anakin.init and hw_init_envs"
            )

        result = pipeline.train(state, num_updates=num_updates)
        train = make_handwritten_train(rollout, num_updates)
        params, _, envs, losses = train(start, optax.adam(LEARNING_RATE).init(start), envs)
        final = params_as_dict(pipeline, result.state.learner.params)

    moved, diff = parameter_differences(start, final, params)
    loss_diff = max_difference(result.metrics.update.loss, losses)
    podrace_envs = result.state.envs
    same_envs = np.array_equal(
        np.asarray(envs.state.ball_row),
        np.asarray(podrace_envs.env_state.env_state.ball_row),  # pyright: ignore[reportAttributeAccessIssue]
    ) and np.array_equal(np.asarray(jax.random.key_data(envs.key)), np.asarray(jax.random.key_data(podrace_envs.key)))
    print(
        f"check ({num_updates} updates, {batch} envs, rollout {rollout}): params moved by up to {moved:.3g}; "
        f"max |podrace - handwritten| params {diff:.3g}, losses {loss_diff:.3g}; "
        f"same env states and keys: {same_envs}"
    )
    assert same_envs, "the environments diverged: the two versions acted differently"
    # An algorithmic difference shows as a difference of the order of the updates themselves;
    # rounding (summation order, GPU atomics) stays orders of magnitude below 1% of them.
    assert diff <= 1e-2 * moved, f"parameters differ by {diff:.3g} (they moved by {moved:.3g})"
    return diff


def build(
    method: str, batch: int, rollout: int, iterations: int, seed: int, metrics: tuple[str, ...] = ()
) -> tuple[Method, Any]:
    """One method's compiled call and initial state, as `main` times them (podrace
    reporting `metrics` beyond the loss)."""
    if method == "podrace":
        network_key, run_key = jax.random.split(jax.random.key(seed))
        pipeline = make_podrace(batch, rollout, network_key)
        call = lambda s: pipeline.train(s, num_updates=iterations, metrics=metrics)  # noqa: E731
        return Method("podrace", call, lambda out: out.state), pipeline.init(run_key)
    if method == "colab":
        learn, state = make_colab(batch, rollout, iterations, seed)
        return Method("colab", lambda s: learn(*s), lambda out: out), state
    train, state = make_handwritten(batch, rollout, iterations, seed)
    return Method("handwritten", lambda s: train(*s), lambda out: out[:3]), state


METHODS = ("podrace", "colab", "handwritten")


def first_call(method: str, args: argparse.Namespace) -> dict[str, Any]:
    """In this (fresh) process: the seconds of `method`'s first and second calls, and its
    compilations by phase, after warming the compiler up."""
    call, state = build(method, args.batch, args.rollout, args.iterations, args.seed, args.podrace_metrics)
    jax.block_until_ready(state)
    warm_up_compiler()
    profile = compile_profile()
    start, start_cpu = time.perf_counter(), time.process_time()
    output = jax.block_until_ready(call.call(state))
    first, first_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    start, start_cpu = time.perf_counter(), time.process_time()
    jax.block_until_ready(call.call(call.next_state(output)))
    second, second_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    del profile["XLA s by program"]
    compile_seconds = {"compile s": first - second, "compile CPU s": first_cpu - second_cpu}
    return {"method": method, "first s": first, "second s": second, **compile_seconds, **profile}


def compile_rounds(args: argparse.Namespace) -> float:
    """`--compile-rounds`: every method's first call in fresh processes, `args.compile_rounds`
    rounds in rotated orders. Returns the median of podrace's compile seconds over the
    hand-written version's in the same round."""
    options = ["--batch", str(args.batch), "--rollout", str(args.rollout), "--iterations", str(args.iterations)]
    options += ["--podrace-metrics", ",".join(args.podrace_metrics)]
    records: dict[str, list[dict[str, Any]]] = {method: [] for method in METHODS}
    for round_ in range(args.compile_rounds):
        shift = round_ % len(METHODS)
        for method in [*METHODS[shift:], *METHODS[:shift]]:
            command = [sys.executable, __file__, *options, "--seed", str(args.seed), "--first-call", method]
            records[method].append(run_json(command))
            print(json.dumps(records[method][-1]), flush=True)
    print(f"\n{'method':<12} {'compile s (median)':>18} {'trace s':>8} {'lower s':>8} {'XLA s':>7}")
    for method, runs in records.items():
        medians = [statistics.median(run[key] for run in runs) for key in ("compile s", "trace s", "lower s", "XLA s")]
        print(f"{method:<12} {medians[0]:>18.2f} {medians[1]:>8.2f} {medians[2]:>8.2f} {medians[3]:>7.2f}")
    ratios = [
        ours["compile s"] / theirs["compile s"]
        for ours, theirs in zip(records["podrace"], records["handwritten"], strict=True)
    ]
    print(f"podrace / handwritten compile s per round: {' '.join(f'{r:.3f}' for r in ratios)}")
    cpu_ratios = [
        ours["compile CPU s"] / theirs["compile CPU s"]
        for ours, theirs in zip(records["podrace"], records["handwritten"], strict=True)
    ]
    print(f"podrace / handwritten compile CPU s per round: {' '.join(f'{r:.3f}' for r in cpu_ratios)}")
    print(f"compile_cpu_ratio_vs_handwritten={statistics.median(cpu_ratios):.3f}")
    return statistics.median(ratios)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(
        argv,
        "Anakin on Catch: podrace, the colab and hand-written JAX.",
        batch=128,
        batch_help="environments per device (B)",
        rollout=16,
        extra=lambda parser: (
            parser.add_argument(
                "--compile-rounds",
                type=int,
                default=0,
                help="time every method's first call in fresh processes, this many rounds, instead",
            ),
            parser.add_argument(
                "--podrace-metrics",
                type=lambda names: tuple(name for name in names.split(",") if name),
                default=(),
                help="the metrics podrace reports beyond the loss, comma-separated (default: none, as the others)",
            ),
            parser.add_argument("--first-call", choices=METHODS, help=argparse.SUPPRESS),
        ),
    )
    if args.first_call is not None:
        print(json.dumps(first_call(args.first_call, args)))
        return 0
    if args.compile_rounds:
        print(f"compile_ratio_vs_handwritten={compile_rounds(args):.3f}")
        return 0

    num_devices = jax.device_count()
    frames = num_devices * args.batch * args.rollout * args.iterations
    print(
        f"jax {jax.__version__} on {num_devices} {jax.default_backend()} device(s) ({jax.devices()[0].device_kind}); "
        f"B={args.batch} T={args.rollout} I={args.iterations}: {frames} frames per call, {args.repeats} repeats"
    )
    if args.check:
        check(args.batch, args.rollout, 10, args.seed)

    built = [
        build(method, args.batch, args.rollout, args.iterations, args.seed, args.podrace_metrics) for method in METHODS
    ]
    methods = [method for method, _ in built]
    states: dict[str, Any] = {method.name: state for method, state in built}

    first, seconds = time_interleaved(methods, states, args.repeats)
    median_fps = print_results(first, seconds, frames, [("podrace", "colab"), ("podrace", "handwritten")])
    ratio_colab = median_fps["podrace"] / median_fps["colab"]
    ratio_handwritten = median_fps["podrace"] / median_fps["handwritten"]
    print(f"ratio_vs_colab={ratio_colab:.3f} ratio_vs_handwritten={ratio_handwritten:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
