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
import json
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable

import gymnasium
import jax
import numpy as np
import optax

import podrace as pr
from podrace.envs.gymnasium import space_from_gymnasium
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
    import gymnax  # here: importing it starts JAX's backends, which part 2's processes configure first

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


def host_learner(observation_size: int, num_actions: int) -> pr.Learner:
    torso_key, head_key = jax.random.split(jax.random.key(0))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((observation_size,), (64, 64), key=torso_key),
        pr.networks.QValueHead(64, num_actions, key=head_key),
    )
    loss = pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9)
    return pr.Learner(network, pr.policies.EpsilonGreedy(0.05), loss, optax.adam(1e-3))


def host_envs(env_id: str, num_envs: int, rollout: int, repeats: int, mode: str | None) -> dict[str, float]:
    """Steps per second of the collector, a hand-written split loop and the bare loop
    (median of interleaved rounds)."""

    def make_envs(num_envs: int) -> gymnasium.vector.VectorEnv:
        return gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode)

    collector_envs = make_envs(num_envs)
    actions = space_from_gymnasium(collector_envs.single_action_space)
    assert isinstance(actions, pr.Discrete)
    learner = host_learner(int(np.prod(collector_envs.single_observation_space.shape or ())), actions.num_values)
    behaviour = learner.agent(learner.init(jax.random.key(0)))
    collector = GymnasiumCollector(collector_envs, learner, rollout_length=rollout, key=jax.random.key(0), seed=0)
    bare = make_envs(num_envs)
    bare.reset(seed=0)
    bare.action_space.seed(0)

    def bare_rollout():
        for _ in range(rollout):
            bare.step(bare.action_space.sample())

    def collect():
        jax.block_until_ready(collector.collect(behaviour)[0])

    methods = {"collector": collect, "bare": bare_rollout}
    if num_envs > 1:
        methods["split"] = split_loop(make_envs, num_envs, collector, behaviour, rollout)
    for method in methods.values():
        method()
    seconds: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeats):
        for name, method in methods.items():
            start = time.perf_counter()
            method()
            seconds[name].append(time.perf_counter() - start)
    return {name: num_envs * rollout / statistics.median(values) for name, values in seconds.items()}


def split_loop(make_envs, num_envs: int, collector: GymnasiumCollector, behaviour, rollout: int) -> Callable:
    """rlplay's double buffering, by hand: the batch in two vector envs, one half's
    actions dispatched (asynchronously) before the other half steps. It records nothing,
    so it bounds what a split collector could reach."""
    actor = collector._actor
    arrays = actor.arrays(behaviour)
    halves = [make_envs(num_envs // 2), make_envs(num_envs - num_envs // 2)]
    observations = [half.reset(seed=0)[0] for half in halves]
    is_first = [np.ones(half.num_envs, bool) for half in halves]
    carries = [actor.initial_carry(half.num_envs) for half in halves]
    keys = [jax.random.key_data(key) for key in jax.random.split(jax.random.key(0))]

    def act(h: int):
        return actor(arrays, observations[h], carries[h], is_first[h], keys[h])

    def run():
        pending = [act(0), None]
        for t in range(rollout):
            pending[1] = act(1)
            for h in (0, 1):
                action, _, carries[h], keys[h] = pending[h]
                observations[h], _, terminated, truncated, _ = halves[h].step(np.asarray(action))
                is_first[h] = terminated | truncated
                if h == 0 and t + 1 < rollout:
                    pending[0] = act(0)

    return run


DISPATCH_MODES = ("async", "inline")
HEADLINE_PREFIX = "host headline: "
HOST_SETTINGS = [("CartPole-v1", None), ("CartPole-v1", "sync"), ("Acrobot-v1", None)]


def host_part(args: argparse.Namespace) -> dict[str, float]:
    """Part 2 in this process; prints its rows and returns the headline ratios."""
    if args.host_part == "inline":
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    headline = {}
    for env_id, mode in HOST_SETTINGS:
        sizes = sorted({1, args.host_envs, 64}) if env_id == "CartPole-v1" else [args.host_envs]
        for num_envs in sizes:
            sps = host_envs(env_id, num_envs, args.rollout, args.repeats, mode)
            ratio = sps["collector"] / sps["bare"]
            split = f"{sps['split'] / sps['bare']:>6.3f}" if "split" in sps else f"{'':>6}"
            kind = type(gymnasium.make_vec(env_id, num_envs=1, vectorization_mode=mode)).__name__
            print(
                f"{env_id:<12} {kind:<18} {args.host_part:<7} {num_envs:>5} {sps['collector']:>10.4g} "
                f"{sps['bare']:>10.4g} {ratio:>6.3f} {split}",
                flush=True,
            )
            if num_envs == args.host_envs and mode is None:
                headline[env_id] = ratio
    return headline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Environment throughput: podrace vs gymnax, collector vs bare loop.")
    parser.add_argument("--steps", type=int, default=200_000, help="env steps per call (batch x length), part 1")
    parser.add_argument("--repeats", type=int, default=10, help="timed rounds")
    parser.add_argument("--host-envs", type=int, default=16, help="vector env size for the headline ratios, part 2")
    parser.add_argument("--rollout", type=int, default=64, help="steps per collector rollout, part 2")
    parser.add_argument("--host-part", choices=DISPATCH_MODES, help=argparse.SUPPRESS)  # part 2's subprocesses
    args = parser.parse_args(argv)
    if args.host_part is not None:
        print(HEADLINE_PREFIX + json.dumps(host_part(args)))
        return 0
    versions = {name: importlib.metadata.version(name) for name in ("jax", "gymnax", "gymnasium")}
    print(", ".join(f"{name} {version}" for name, version in versions.items()), f"on {jax.devices()[0]}")

    print("\n# JAX envs: random actions, auto-reset, one compiled program")
    ratios = jax_envs(args.steps, args.repeats)

    print("\n# Gymnasium on the host: collector (MLP policy), split loop (hand-written) and bare loop (random actions)")
    print(
        f"{'env':<12} {'vector env':<18} {'XLA CPU':<7} {'envs':>5} {'collector':>10} {'bare':>10} "
        f"{'ratio':>6} {'split':>6}"
    )
    headlines = {}
    for mode in DISPATCH_MODES:  # each in a fresh process: JAX reads the setting when it starts its CPU client
        command = [sys.executable, __file__, "--host-part", mode, *(argv if argv is not None else sys.argv[1:])]
        output = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
        rows = output.splitlines()
        print("\n".join(row for row in rows if not row.startswith(HEADLINE_PREFIX)), flush=True)
        headlines[mode] = json.loads(rows[-1].removeprefix(HEADLINE_PREFIX))

    geometric_mean = float(np.exp(np.mean(np.log(ratios))))
    print(
        f"ratio_vs_gymnax={geometric_mean:.3f} ratio_collector_overhead={headlines['async']['CartPole-v1']:.3f} "
        f"ratio_costly_env={headlines['async']['Acrobot-v1']:.3f} "
        f"ratio_collector_overhead_inline={headlines['inline']['CartPole-v1']:.3f} "
        f"ratio_costly_env_inline={headlines['inline']['Acrobot-v1']:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
