"""Where the time to a first result goes: PPO, DQN, SAC, TD3 and PQN, podrace beside rejax.

Each algorithm at rejax's settings, as `ppo_cartpole.py` (PPO and DQN on CartPole-v1) and
`off_policy_sps.py` (SAC and TD3 on Pendulum-v1, PQN on CartPole-v1) time them to the
bar, but stopped after the first chunk: from a fresh process, the seconds until the
algorithm is built, until its state is initialised, and until the first chunk of
training with its evaluation has returned (the first result), all counted from before
anything is built (imports excluded, on both sides). Each process also reports, from
JAX's monitoring events, how many programs XLA compiled, the seconds spent tracing,
lowering and compiling them, and the XLA seconds of each program
(`_compare.compile_profile`). The libraries alternate algorithm by algorithm, round by
round.

With `--against PATH`, a third row, `against`, runs podrace imported from another
checkout (e.g. `git worktree add /tmp/before <commit>`), to compare two versions side by
side.

The last line is `first_result_ratio_ppo=X ...`: rejax's median seconds to the first
result over podrace's, per algorithm.

Usage:

    python benchmarks/startup.py --rejax-python /path/to/rejax-venv/bin/python [--rounds 3] [--against /tmp/before]
"""

import argparse
import os
import statistics
from typing import Any

import jax
import off_policy_sps
import ppo_cartpole
from _compare import run_json


ALGORITHMS = ("ppo", "dqn", "sac", "td3", "pqn")
COLUMNS = ("build s", "init s", "first result s", "programs", "trace s", "lower s", "XLA s")
TOP_PROGRAMS = 4


def commands(algorithm: str, rejax_python: str) -> dict[str, list[str]]:
    """Each library's process for `algorithm` (seed 0), stopped after the first chunk."""
    if algorithm in ("ppo", "dqn"):
        mode = "ppo" if algorithm == "ppo" else "dqn-time"
        return ppo_cartpole.commands(mode, 0, rejax_python, max_env_steps=ppo_cartpole.CHUNK_STEPS)
    chunk = off_policy_sps.CHUNK_STEPS[algorithm]
    return off_policy_sps.commands(algorithm, 0, chunk, rejax_python, time_to_level=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rejax-python", required=True, help="the python of the rejax benchmark environment")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--algorithms", nargs="+", choices=ALGORITHMS, default=list(ALGORITHMS))
    parser.add_argument("--against", help="another podrace checkout to time beside this one")
    args = parser.parse_args()

    print(f"jax {jax.__version__} on {jax.default_backend()}; {args.rounds} rounds; medians")
    libraries = ["podrace", "rejax", *(["against"] if args.against else [])]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        algorithm: {library: [] for library in libraries} for algorithm in args.algorithms
    }
    for _ in range(args.rounds):
        for algorithm in args.algorithms:
            library_commands = commands(algorithm, args.rejax_python)
            library_commands["against"] = library_commands["podrace"]
            for library in libraries:
                environment = {**os.environ, "PYTHONPATH": args.against} if library == "against" else None
                result = run_json(library_commands[library], environment)
                runs[algorithm][library].append(result["startup"])

    ratios = {}
    for algorithm, by_library in runs.items():
        print(f"\n{algorithm:<10}" + "".join(f"{column:>16}" for column in COLUMNS))
        for library, results in by_library.items():
            medians = {column: statistics.median(result[column] for result in results) for column in COLUMNS}
            print(f"{library:<10}" + "".join(f"{medians[column]:>16.3g}" for column in COLUMNS))
            by_program = results[0]["XLA s by program"]  # the first round's, largest first
            top = sorted(by_program.items(), key=lambda item: -item[1])[:TOP_PROGRAMS]
            print(f"{'':<10}XLA s of round 1's largest programs: " + ", ".join(f"{n} {s:.2f}" for n, s in top))
        first = {
            library: statistics.median(r["first result s"] for r in results) for library, results in by_library.items()
        }
        ratios[algorithm] = first["rejax"] / first["podrace"]
    print(" ".join(f"first_result_ratio_{algorithm}={ratio:.2f}" for algorithm, ratio in ratios.items()))


if __name__ == "__main__":
    main()
