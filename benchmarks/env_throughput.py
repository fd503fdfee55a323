"""Environment throughput: podrace's built-in envs against gymnax, and the Gymnasium
collector against a bare `gymnasium.vector` loop.

Part 1 times, at batch sizes 1, 128 and 4096, a compiled program that takes `--steps`
steps of a batch of auto-resetting environments with uniformly random actions: podrace's
`AutoReset(CartPole())` / `AutoReset(Catch())` against gymnax's `CartPole-v1` /
`Catch-bsuite` (whose `step` resets by itself). Both sample their actions the same way,
inside the program. Part 2 times host stepping of Gymnasium's `CartPole-v1` vector env:
podrace's `GymnasiumCollector` acting with an MLP epsilon-greedy policy (one jitted call
per step) against a bare loop of `envs.step(envs.action_space.sample())`.

The last line is `ratio_vs_gymnax=X ratio_collector_overhead=Y`, where X is the geometric
mean over the six settings of podrace's steps per second over gymnax's, and Y is the
collector's steps per second over the bare loop's with the default vector env at
`--host-envs` environments.
"""

import argparse
import importlib.metadata
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import gymnasium
import gymnax
import jax
import numpy as np
import optax

import podrace as pr
from podrace.executors.host import GymnasiumCollector


BATCH_SIZES = (1, 128, 4096)


def podrace_program(env: pr.envs.AbstractEnv, num_envs: int, num_steps: int) -> tuple[Callable, object]:
    env = pr.envs.AutoReset(env)

    @jax.jit
    def run(carry):
        def step(carry, _):
            state, key = carry
            key, action_key, step_key = jax.random.split(key, 3)
            actions = jax.vmap(env.action_space.sample)(jax.random.split(action_key, num_envs))
            state, timestep = jax.vmap(env.step)(state, actions, jax.random.split(step_key, num_envs))
            return (state, key), timestep.reward.sum()

        carry, rewards = jax.lax.scan(step, carry, length=num_steps)
        return carry, rewards.sum()

    state, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), num_envs))
    return run, (state, jax.random.key(1))


def gymnax_program(env_id: str, num_envs: int, num_steps: int) -> tuple[Callable, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env, params = gymnax.make(env_id)
    action_space = env.action_space(params)

    @jax.jit
    def run(carry):
        def step(carry, _):
            state, key = carry
            key, action_key, step_key = jax.random.split(key, 3)
            actions = jax.vmap(action_space.sample)(jax.random.split(action_key, num_envs))
            _, state, reward, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, num_envs), state, actions, params
            )
            return (state, key), reward.sum()

        carry, rewards = jax.lax.scan(step, carry, length=num_steps)
        return carry, rewards.sum()

    _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.key(0), num_envs), params)
    return run, (state, jax.random.key(1))


def time_interleaved(programs: dict[str, tuple[Callable, object]], repeats: int) -> dict[str, float]:
    """Median seconds per call of each program, calls interleaved round by round."""
    carries = {}
    for name, (run, carry) in programs.items():  # compile and warm up
        carries[name] = jax.block_until_ready(run(run(carry)[0])[0])
    seconds: dict[str, list[float]] = {name: [] for name in programs}
    for _ in range(repeats):
        for name, (run, _) in programs.items():
            start = time.perf_counter()
            carries[name] = jax.block_until_ready(run(carries[name])[0])
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}


def jax_envs(num_steps: int, repeats: int) -> list[float]:
    ratios = []
    print(f"{'env':<10} {'batch':>6} {'podrace steps/s':>16} {'gymnax steps/s':>15} {'ratio':>6}")
    for name, env, gymnax_id in (
        ("CartPole", pr.envs.CartPole(), "CartPole-v1"),
        ("Catch", pr.envs.Catch(), "Catch-bsuite"),
    ):
        for num_envs in BATCH_SIZES:
            steps = max(num_steps // num_envs, 10) if num_envs > 1 else num_steps
            programs = {
                "podrace": podrace_program(env, num_envs, steps),
                "gymnax": gymnax_program(gymnax_id, num_envs, steps),
            }
            seconds = time_interleaved(programs, repeats)
            sps = {method: num_envs * steps / s for method, s in seconds.items()}
            ratios.append(sps["podrace"] / sps["gymnax"])
            print(f"{name:<10} {num_envs:>6} {sps['podrace']:>16.4g} {sps['gymnax']:>15.4g} {ratios[-1]:>6.3f}")
    return ratios


def host_learner() -> pr.Learner:
    torso_key, head_key = jax.random.split(jax.random.key(0))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((4,), (64, 64), key=torso_key), pr.networks.QValueHead(64, 2, key=head_key)
    )
    loss = pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9)
    return pr.Learner(network, pr.policies.EpsilonGreedy(0.05), loss, optax.adam(1e-3))


def host_envs(num_envs: int, rollout: int, repeats: int, mode: str | None) -> float:
    """Steps per second of the collector over the bare loop (median of interleaved rounds)."""
    learner = host_learner()
    behaviour = learner.agent(learner.init(jax.random.key(0)))
    collector_envs = gymnasium.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode=mode)
    collector = GymnasiumCollector(collector_envs, learner, rollout_length=rollout, key=jax.random.key(0), seed=0)
    bare = gymnasium.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode=mode)
    bare.reset(seed=0)
    bare.action_space.seed(0)

    def bare_rollout():
        for _ in range(rollout):
            bare.step(bare.action_space.sample())

    def collect():
        jax.block_until_ready(collector.collect(behaviour)[0])

    methods = {"collector": collect, "bare": bare_rollout}
    for method in methods.values():
        method()
    seconds: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeats):
        for name, method in methods.items():
            start = time.perf_counter()
            method()
            seconds[name].append(time.perf_counter() - start)
    sps = {name: num_envs * rollout / statistics.median(values) for name, values in seconds.items()}
    ratio = sps["collector"] / sps["bare"]
    label = type(collector_envs).__name__
    print(f"{label:<20} {num_envs:>5} {sps['collector']:>16.4g} {sps['bare']:>16.4g} {ratio:>6.3f}")
    return ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Environment throughput: podrace vs gymnax, collector vs bare loop.")
    parser.add_argument("--steps", type=int, default=200_000, help="env steps per call (batch x length), part 1")
    parser.add_argument("--repeats", type=int, default=10, help="timed rounds")
    parser.add_argument("--host-envs", type=int, default=16, help="vector env size for the headline ratio, part 2")
    parser.add_argument("--rollout", type=int, default=64, help="steps per collector rollout, part 2")
    args = parser.parse_args(argv)
    versions = {name: importlib.metadata.version(name) for name in ("jax", "gymnax", "gymnasium")}
    print(", ".join(f"{name} {version}" for name, version in versions.items()), f"on {jax.devices()[0]}")

    print("\n# JAX envs: random actions, auto-reset, one compiled program")
    ratios = jax_envs(args.steps, args.repeats)

    print("\n# Gymnasium CartPole-v1 on the host: collector (MLP policy) vs bare loop (random actions)")
    print(f"{'vector env':<20} {'envs':>5} {'collector steps/s':>16} {'bare steps/s':>16} {'ratio':>6}")
    headline = None
    for mode in (None, "sync"):
        for num_envs in sorted({1, args.host_envs, 64}):
            ratio = host_envs(num_envs, args.rollout, args.repeats, mode)
            if mode is None and num_envs == args.host_envs:
                headline = ratio

    geometric_mean = float(np.exp(np.mean(np.log(ratios))))
    print(f"ratio_vs_gymnax={geometric_mean:.3f} ratio_collector_overhead={headline:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
