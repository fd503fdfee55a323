"""The time of one PPO update, the time to a first result, and sequential against associative scans.

The workload is the one of the issue "Time to first result and the host path": PPO
with 4 epochs of 8 minibatches on CartPole-v1, 64 environments x 128 steps, a 64-64
tanh actor and critic. Every measurement runs in a fresh process (so that each one
imports, builds and compiles from scratch), and the variants alternate round by round:

- `sequential`: `PPOLoss()`, GAE as a sequential `lax.scan`;
- `associative`: `PPOLoss(associative_scan=True)`, GAE as `lax.associative_scan`;
- `warm cache`: `sequential` with `podrace.enable_compilation_cache` on a directory
  filled by one untimed run before the rounds (`sequential` itself runs without it: the
  cold figure);
- `against`: with `--against PATH`, `sequential` with podrace imported from another
  checkout (e.g. `git worktree add /tmp/before <commit>`), to compare two versions.

Each process reports the seconds from its start until the first `train` call has
returned (imports, building the network and the pipeline, `init`, compiling and running
`train`: the time to a first result), and the median time per update of `--repeats`
later calls of `--iterations` updates each. The compile time is the first call minus
that median.

Then, in this process, GAE alone over a `[T, B]` batch (`vmap` over environments) with
each scan, at several rollout lengths: the median of `--repeats` rounds of 200 calls.

Usage:

    python benchmarks/ppo_update.py [--rounds 3] [--against /tmp/before]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any


START = time.perf_counter()


def worker(args: argparse.Namespace) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import optax

    import podrace as pr

    if args.cache:
        pr.enable_compilation_cache(args.cache)
    env = pr.envs.cartpole_v1()
    keys = jax.random.split(jax.random.key(0), 4)
    network = pr.networks.ActorCriticNetwork(
        pr.networks.MLPTorso((4,), (64, 64), activation=jnp.tanh, key=keys[0]),
        pr.networks.PolicyLogitHead(64, 2, key=keys[1]),
        pr.networks.MLPTorso((4,), (64, 64), activation=jnp.tanh, key=keys[2]),
        pr.networks.ValueHead(64, key=keys[3]),
    )
    options = {"associative_scan": True} if args.associative else {}
    loss = pr.losses.PPOLoss(discount=0.99, lambda_=0.95, **options)
    optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(3e-4))
    learner = pr.Learner(
        network, pr.policies.Categorical(), loss, optimizer, num_epochs=args.epochs, num_minibatches=args.minibatches
    )
    pipeline = pr.Anakin(env, learner, num_envs=args.batch, rollout_length=args.rollout)
    state = pipeline.init(jax.random.key(1))
    call_start = time.perf_counter()
    state = jax.block_until_ready(pipeline.train(state, num_updates=args.iterations).state)
    first_result = time.perf_counter() - START
    first_call = time.perf_counter() - call_start
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        state = jax.block_until_ready(pipeline.train(state, num_updates=args.iterations).state)
        times.append(time.perf_counter() - start)
    call = statistics.median(times)
    return {"first_result_s": first_result, "compile_s": first_call - call, "update_ms": 1e3 * call / args.iterations}


def gae_scans(repeats: int) -> None:
    import jax
    import numpy as np

    import podrace as pr

    rng = np.random.default_rng(0)
    print("GAE alone, vmap over 64 environments, microseconds per call (median):")
    for num_steps in (16, 128, 1024):
        inputs = [rng.uniform(0, 1, (64, num_steps)) for _ in range(3)] + [rng.normal(size=(64, num_steps + 1))]
        inputs = [np.asarray(x, np.float32) for x in inputs]
        functions = {
            name: jax.jit(
                jax.vmap(
                    lambda r, d, lam, v, associative=associative: pr.losses.generalized_advantage_estimation(
                        r, d, lam, v, associative_scan=associative
                    )
                )
            )
            for name, associative in (("sequential", False), ("associative", True))
        }
        timings: dict[str, list[float]] = {name: [] for name in functions}
        for function in functions.values():
            jax.block_until_ready(function(*inputs))
        for _ in range(repeats):
            for name, function in functions.items():
                start = time.perf_counter()
                jax.block_until_ready([function(*inputs) for _ in range(200)])
                timings[name].append((time.perf_counter() - start) / 200 * 1e6)
        medians = {name: statistics.median(values) for name, values in timings.items()}
        print(f"  T={num_steps:5d}: " + "  ".join(f"{name} {value:8.1f}" for name, value in medians.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--batch", type=int, default=64, help="environments")
    parser.add_argument("--rollout", type=int, default=128, help="environment steps per update")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--minibatches", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=10, help="updates per compiled call")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls per process")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per variant")
    parser.add_argument("--against", help="another podrace checkout to time beside this one")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--associative", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return

    here = str(pathlib.Path(__file__).resolve().parent.parent)
    sizes = [f"--{name}={getattr(args, name)}" for name in ("batch", "rollout", "epochs", "minibatches")]
    sizes += [f"--iterations={args.iterations}", f"--repeats={args.repeats}"]
    command = [sys.executable, __file__, "--worker", *sizes]
    cache = tempfile.mkdtemp(prefix="podrace-ppo-update-cache-")
    variants = {
        "sequential": (here, []),
        "associative": (here, ["--associative"]),
        "warm cache": (here, [f"--cache={cache}"]),
    }
    if args.against:
        variants["against"] = (args.against, [])

    def run(variant: str) -> dict[str, Any]:
        path, extra = variants[variant]
        environment = {**os.environ, "PYTHONPATH": path}
        output = subprocess.run([*command, *extra], check=True, capture_output=True, text=True, env=environment)
        return json.loads(output.stdout.strip().splitlines()[-1])

    run("warm cache")  # fills the cache
    results: dict[str, list[dict[str, Any]]] = {variant: [] for variant in variants}
    for round_ in range(args.rounds):
        names = list(variants)
        for variant in names[round_ % len(names) :] + names[: round_ % len(names)]:
            result = run(variant)
            results[variant].append(result)
            print(
                f"round {round_} {variant:12s}: first result {result['first_result_s']:6.2f} s, "
                f"compile {result['compile_s']:5.2f} s, {result['update_ms']:7.2f} ms/update",
                flush=True,
            )
    print(f"medians over {args.rounds} rounds:")
    for variant, values in results.items():
        print(
            f"  {variant:12s}: first result {statistics.median(v['first_result_s'] for v in values):6.2f} s, "
            f"compile {statistics.median(v['compile_s'] for v in values):5.2f} s, "
            f"{statistics.median(v['update_ms'] for v in values):7.2f} ms/update"
        )
    gae_scans(args.repeats)


if __name__ == "__main__":
    main()
