"""AlphaZero's training throughput: podrace against Stoix's AlphaZero, same settings.

Environment steps per second of AlphaZero training on CartPole-v1, search with the
environment as its model at every step, evaluation off. Stoix runs in its own virtual
environment (`benchmarks/stoix_alphazero.py` gives the recipe) and is called through
`--stoix-python`; every measurement runs in a fresh process, and podrace and Stoix
alternate seed by seed. Each side makes a warm-up call of `--updates-per-call` updates
(compile included) and then `--timed-calls` timed calls of as many, each from the last
one's state; `sps` is the timed calls' environment steps over their seconds.

The settings both sides share, under Stoix's names: `--num-envs` 64 environments x
`--rollout` 16 steps per update, mctx's Gumbel MuZero search (`--search gumbel`) of
`--simulations` 16 simulations per step whose recurrent function steps a copy of the
environment, MLPs of `--hidden` 64, 64 units, and `--epochs` 8 gradient steps per update
on 512 transitions each (Stoix: sequences of 16 steps, 32 a batch, drawn from its
buffer; podrace: 4 epochs of 2 minibatches of the rollout's 1,024 transitions). Each side
otherwise keeps its own defaults. They differ where the libraries do: Stoix's agent has
an actor and a critic network (two MLPs evaluated at every node of the search), podrace's
one torso with a policy and a value head (`AlphaZeroConfig`); Stoix learns from a
replay buffer, podrace from the rollout; Stoix's CartPole is gymnax's through its
`stoa` wrappers, podrace's is `gymnax:CartPole-v1` through `podrace.envs.GymnaxEnv`.

    python benchmarks/alphazero_stoix.py --stoix-python /tmp/stoix-venv/bin/python [--seeds 0 1 2]
"""

import argparse
import json
import statistics
import sys
import time
from typing import Any

import jax
from _compare import compile_profile, run_alternating

import podrace as pr


STOIX_SCRIPT = "benchmarks/stoix_alphazero.py"
SAMPLE_SEQUENCE_LENGTH = 16
BATCH_SIZE = 32  # Stoix's sequences per gradient step: 32 x 16 = 512 transitions


def podrace_sps(args: argparse.Namespace) -> dict[str, Any]:
    """podrace's steps per second: a warm-up call, then the timed calls."""
    transitions = args.num_envs * args.rollout
    num_minibatches = transitions // (BATCH_SIZE * SAMPLE_SEQUENCE_LENGTH)
    config = pr.configs.AlphaZeroConfig(
        algorithm="alphazero",
        hidden=tuple(args.hidden),
        activation="relu",
        num_envs=args.num_envs,
        rollout_length=args.rollout,
        search=args.search,
        num_simulations=args.simulations,
        num_epochs=args.epochs // num_minibatches,
        num_minibatches=num_minibatches,
    )
    network_key, run_key = jax.random.split(jax.random.key(args.seed))
    pipeline = config.pipeline(pr.envs.GymnaxEnv.make("CartPole-v1"), network_key)
    start = time.perf_counter()
    state = jax.block_until_ready(pipeline.train(pipeline.init(run_key), num_updates=args.updates_per_call).state)
    warmup = time.perf_counter() - start
    profile = compile_profile()
    call_seconds = []
    for _ in range(args.timed_calls):
        start = time.perf_counter()
        state = jax.block_until_ready(pipeline.train(state, num_updates=args.updates_per_call).state)
        call_seconds.append(time.perf_counter() - start)
    steps_per_call = args.updates_per_call * transitions
    return {
        "library": "podrace",
        "seed": args.seed,
        "sps": round(steps_per_call * args.timed_calls / sum(call_seconds), 1),
        "median_call_sps": round(steps_per_call / statistics.median(call_seconds), 1),
        "call_seconds": [round(seconds, 4) for seconds in call_seconds],
        "warmup_seconds_incl_compile": round(warmup, 3),
        "timed_call_compilations": profile["programs"],
        "settings": {
            "num_envs": config.num_envs,
            "rollout_length": config.rollout_length,
            "num_simulations": config.num_simulations,
            "search": config.search,
            "hidden": list(config.hidden),
            "activation": config.activation,
            "num_epochs": config.num_epochs,
            "num_minibatches": config.num_minibatches,
        },
    }


def shared_settings(args: argparse.Namespace) -> list[str]:
    """The settings both sides take, as flags of the same names."""
    return [
        *("--num-envs", str(args.num_envs), "--rollout", str(args.rollout)),
        *("--simulations", str(args.simulations), "--search", args.search, "--hidden", *map(str, args.hidden)),
        *("--epochs", str(args.epochs), "--updates-per-call", str(args.updates_per_call)),
        *("--timed-calls", str(args.timed_calls)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--stoix-python", help="the python of the Stoix benchmark environment")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--rollout", type=int, default=16)
    parser.add_argument("--simulations", type=int, default=16)
    parser.add_argument("--search", choices=["gumbel", "muzero"], default="gumbel")
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--epochs", type=int, default=8, help="gradient steps per update")
    parser.add_argument("--updates-per-call", type=int, default=10)
    parser.add_argument("--timed-calls", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(podrace_sps(args)))
        return
    if not args.stoix_python:
        parser.error("--stoix-python is required")
    transitions = args.num_envs * args.rollout
    batch = BATCH_SIZE * SAMPLE_SEQUENCE_LENGTH
    if transitions % batch or args.epochs % (transitions // batch):
        parser.error(f"--num-envs x --rollout must be a multiple of {batch} that divides --epochs x {batch}")

    settings = shared_settings(args)
    stoix_batch = ["--batch-size", str(BATCH_SIZE), "--sample-sequence-length", str(SAMPLE_SEQUENCE_LENGTH)]

    def commands(seed: int) -> dict[str, list[str]]:
        return {
            "podrace": [sys.executable, __file__, *settings, "--worker", "--seed", str(seed)],
            "stoix": [args.stoix_python, STOIX_SCRIPT, *settings, *stoix_batch, "--seed", str(seed)],
        }

    print(f"jax {jax.__version__} on {jax.default_backend()}; seeds {args.seeds}")
    results = run_alternating(args.seeds, commands, "sps")
    ratio = statistics.median(results["podrace"]) / statistics.median(results["stoix"])
    print(f"ratio_sps_vs_stoix={ratio:.2f}")


if __name__ == "__main__":
    main()
