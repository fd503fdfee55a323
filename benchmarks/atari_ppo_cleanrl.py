"""Atari PPO's training throughput: podrace's recipe against CleanRL's own script, side by side.

podrace's side is the recipe `cleanrl-ppo-atari-pong-v5` (`podrace.recipes.CLEANRL_ATARI_PPO`: CleanRL's
`ppo_atari_envpool_xla_jax_scan.py` at its published settings, the Nature DQN network, 8 environments x 128 steps
an update, 4 epochs of 4 minibatches) on `EnvPoolEnv(ENV, episodic_life=True, reward_clip=True)` (one pool thread
per environment, as EnvPool's default that CleanRL's script keeps), trained by `podrace.Anakin`: one untimed update
(compilation included), then `--updates` updates, one compiled call each; `sps` is their environment steps over
their seconds. CleanRL's side is its script itself, unmodified, in a virtual environment of its own, measured by
`benchmarks/cleanrl_atari_baseline.py` (whose docstring gives the recipe): its first update untimed, the next
`--updates` timed from the lines the script prints after each update. Each side runs in a fresh process, podrace
first, then CleanRL, for each seed; the last line is podrace's median `sps` over CleanRL's.

    python benchmarks/atari_ppo_cleanrl.py --cleanrl-python /tmp/cleanrl-venv/bin/python \\
        --cleanrl-script /tmp/cleanrl-src/cleanrl/ppo_atari_envpool_xla_jax_scan.py [--updates 2] [--seeds 1]
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


CLEANRL_WRAPPER = "benchmarks/cleanrl_atari_baseline.py"


def podrace_sps(env_id: str, seed: int, updates: int) -> dict[str, Any]:
    """podrace's steps per second: one untimed update, then `updates` timed ones."""
    settings = pr.recipes.CLEANRL_ATARI_PPO
    env = pr.envs.EnvPoolEnv(env_id, seed=seed, episodic_life=True, reward_clip=True)
    pipeline = settings.pipeline(env, jax.random.key(seed))
    start = time.perf_counter()
    state = jax.block_until_ready(pipeline.train(pipeline.init(jax.random.key(seed)), num_updates=1).state)
    warmup = time.perf_counter() - start
    profile = compile_profile()
    update_seconds = []
    for _ in range(updates):
        start = time.perf_counter()
        state = jax.block_until_ready(pipeline.train(state, num_updates=1).state)
        update_seconds.append(time.perf_counter() - start)
    steps_per_update = settings.num_envs * settings.num_steps
    return {
        "library": "podrace",
        "env": env_id,
        "seed": seed,
        "sps": round(steps_per_update * updates / sum(update_seconds), 2),
        "update_seconds": [round(seconds, 2) for seconds in update_seconds],
        "warmup_seconds_incl_compile": round(warmup, 2),
        "timed_update_compilations": profile["programs"],
        "settings": {
            "num_envs": settings.num_envs,
            "num_steps": settings.num_steps,
            "update_epochs": settings.update_epochs,
            "num_minibatches": settings.num_minibatches,
        },
        "jax": jax.__version__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--cleanrl-python", help="the python of CleanRL's benchmark environment")
    parser.add_argument("--cleanrl-script", help="CleanRL's ppo_atari_envpool_xla_jax_scan.py")
    parser.add_argument("--env-id", default="Pong-v5")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--updates", type=int, default=2, help="timed updates (minutes each on a CPU)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(podrace_sps(args.env_id, args.seed, args.updates)))
        return
    if not (args.cleanrl_python and args.cleanrl_script):
        parser.error("--cleanrl-python and --cleanrl-script are required")

    def commands(seed: int) -> dict[str, list[str]]:
        common = ["--env-id", args.env_id, "--seed", str(seed), "--updates", str(args.updates)]
        cleanrl = ["--cleanrl-script", args.cleanrl_script, "--python", args.cleanrl_python]
        return {
            "podrace": [sys.executable, __file__, *common, "--worker"],
            "cleanrl": [args.cleanrl_python, CLEANRL_WRAPPER, *common, *cleanrl],
        }

    print(f"jax {jax.__version__} on {jax.default_backend()}; {args.env_id}, seeds {args.seeds}")
    results = run_alternating(args.seeds, commands, "sps")
    ratio = statistics.median(results["podrace"]) / statistics.median(results["cleanrl"])
    print(f"ratio_sps_vs_cleanrl={ratio:.2f}")


if __name__ == "__main__":
    main()
