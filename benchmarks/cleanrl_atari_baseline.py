"""Peer baseline: CleanRL's ``ppo_atari_envpool_xla_jax_scan.py`` (JAX PPO on EnvPool's XLA interface), unmodified.

The counterpart of podrace's recipe ``cleanrl-ppo-atari-pong-v5`` (``podrace.recipes.CleanRLAtariPPO``): the same
PPO and Nature-DQN network at the same batch (8 envs x 128 steps an update, 4 epochs x 4 minibatches, Pong-v5).

CleanRL is not installed as a package: export the script from CleanRL's repository at commit
fe8d8a03c41a7ef5b523e2e354bd01c363e786bb (2026-04-20; the script itself last changed in 35896b1, 2023-11-27,
git blob cf8d8f88da8e2edded4664ddaadf9085b6511da6) and run it with its own benchmark-only venv, never podrace's::

    git clone https://github.com/vwxyzjn/cleanrl /tmp/cleanrl
    git -C /tmp/cleanrl checkout fe8d8a03c41a7ef5b523e2e354bd01c363e786bb
    mkdir -p /tmp/cleanrl-src
    git -C /tmp/cleanrl archive HEAD cleanrl/ppo_atari_envpool_xla_jax_scan.py | tar -x -C /tmp/cleanrl-src
    python3.11 -m venv /tmp/cleanrl-venv
    /tmp/cleanrl-venv/bin/pip install "jax==0.4.13" "jaxlib==0.4.13" "flax==0.6.8" "optax==0.1.4" "chex==0.1.7" \\
        "numpy==1.24.4" "scipy==1.10.1" "envpool==0.8.4" "gym==0.23.1" "gymnasium==0.29.1" "tyro==0.5.10" \\
        "rich==11.2.0" "tensorboard==2.11.2" "protobuf==3.20.3" "torch==2.4.1"
    /tmp/cleanrl-venv/bin/python benchmarks/cleanrl_atari_baseline.py --updates 10 \\
        --cleanrl-script /tmp/cleanrl-src/cleanrl/ppo_atari_envpool_xla_jax_scan.py

Known to work on Python 3.11 (CPU) with exactly those versions (pip also resolved ml_dtypes 0.5.4, optree 0.20.0,
orbax 0.1.9, tensorstore 0.1.86). They are CleanRL's own pins (``requirements/requirements-jax.txt`` and
``requirements-envpool.txt``: gym 0.23.1, gymnasium 0.29.1, flax 0.6.8, optax 0.1.4, numpy 1.24.4, tyro 0.5.10,
torch 2.4.1, tensorboard 2.11.2, scipy < 1.13) except where they cannot work on Python 3.11 or with each other:

- jax/jaxlib 0.4.13 instead of 0.4.8/0.4.7: pip finds no jaxlib older than 0.4.13 for Python 3.11.
- envpool 0.8.4 instead of 0.6.6 (no Python 3.11 wheel). Its XLA interface is an old-style custom call with an XLA
  translation rule, which jax 0.4.x still lowers. envpool 1.0.1 (the last with a ``gym`` API) registers typed XLA FFI
  handlers of API version 0.3, which jaxlib 0.5.3 (FFI API 0.1) rejects; envpool >= 1.1 has no ``gym`` API at all
  (``env_type="gym"`` gives gymnasium spaces and reset semantics, so the script's ``isinstance(...,
  gym.spaces.Discrete)`` assertion and its ``next_obs = envs.reset()`` fail).
- Newer JAX cannot run the script unpatched: it calls ``jax.tree_map`` (removed in jax 0.6.0), and flax >= 0.7.5's
  ``TrainState.create`` fails on its ``AgentParams`` (``argument of type 'AgentParams' is not iterable``).
- chex 0.1.7 instead of 0.1.5 (0.1.5 uses ``jax.interpreters.xla.DeviceArray``, gone in jax 0.4.13; newer chex
  needs numpy >= 1.25).
- torch and tensorboard are only there for the script's ``torch.utils.tensorboard.SummaryWriter``.

What is measured: environment steps (frames seen by the agent, ``num_envs`` per step) per second of CleanRL's training
loop after compilation. This script runs CleanRL's file unmodified, as a subprocess with its own tyro flags
(``--env-id --num-envs --num-steps --seed --total-timesteps``, tracking, videos and saving off as by default), in a
temporary working directory (its TensorBoard ``runs/`` go there and are deleted) with ``PYTHONUNBUFFERED=1`` and
``JAX_LOG_COMPILES=1``. ``--total-timesteps`` is ``(warmup_updates + updates) * num_envs * num_steps``; every other
hyperparameter is CleanRL's default (read from the script's ``Args`` and reported). CleanRL's loop prints
``SPS: ...`` once per update, after the host has read the update's losses and learning rate (``.item()``), so every
device computation of the update has finished when the line is printed. This script timestamps each such line as it
arrives (``time.perf_counter``); an update's duration is the gap between its line and the previous one. The first
``--warmup-updates`` updates compile (CleanRL's rollout is an eager ``lax.scan`` and its GAE and PPO update are jitted
functions; they compile on first use, and the smoke test logged all its XLA compilations in update 1), and the next
``--updates`` updates are timed: ``sps`` is their environment steps over the seconds from the end of the last warm-up
update to the end of the last timed one. A timed update thus includes everything in CleanRL's loop: the rollout
through EnvPool's XLA step (EnvPool's default thread count), GAE, 4 epochs x 4 minibatches of Adam, and the host reads
and TensorBoard writes of its logging. The compilations that
JAX logged during each update (``Finished XLA compilation of ... in ... sec``) are counted and their seconds summed
(``compilations_per_update``, ``compile_seconds_per_update``); the timed updates should have none.
``cleanrl_reported_sps`` is the script's own last ``SPS`` figure, total steps over the time since its start,
compilation included.

On a CPU almost all of an update is CleanRL's jitted ``update_ppo`` (16 gradient steps of the Nature DQN network):
about 68 s an update on an idle 2-core machine (``benchmarks/README.md``), so ``--updates 10`` takes over 10 minutes.

Prints one JSON line with the result and every setting used; the script's own output goes to stderr.
"""

import argparse
import ast
import contextlib
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


CLEANRL_COMMIT = "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb"
SCRIPT_BLOB = "cf8d8f88da8e2edded4664ddaadf9085b6511da6"  # the script's git blob at that commit
DEFAULT_SCRIPT = "/tmp/cleanrl-src/cleanrl/ppo_atari_envpool_xla_jax_scan.py"
PACKAGES = ("jax", "jaxlib", "flax", "optax", "chex", "envpool", "gym", "gymnasium", "numpy", "tyro", "torch")
COMPILED = re.compile(r"Finished XLA compilation of (\S+) in ([0-9.eE+-]+) sec")


def git_blob(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def cleanrl_defaults(path: Path) -> dict[str, Any]:
    """The literal defaults of the script's tyro ``Args`` dataclass, read from its source."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Args":
            defaults = {}
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                    with contextlib.suppress(ValueError):  # exp_name, computed from __file__, is left out
                        defaults[item.target.id] = ast.literal_eval(item.value)
            return defaults
    raise SystemExit(f"{path}: no Args dataclass")


def versions(python: str) -> dict[str, str | None]:
    code = (
        "import importlib.metadata as m, json\n"
        "def v(p):\n"
        "    try:\n"
        "        return m.version(p)\n"
        "    except m.PackageNotFoundError:\n"
        "        return None\n"
        f"print(json.dumps({{p: v(p) for p in {list(PACKAGES)!r}}}))"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def run(args: argparse.Namespace) -> dict[str, Any]:
    script = Path(args.cleanrl_script).resolve()
    if not script.is_file():
        raise SystemExit(f"no CleanRL script at {script}: export it as this file's docstring says")
    defaults = cleanrl_defaults(script)
    num_updates = args.warmup_updates + args.updates
    batch = args.num_envs * args.num_steps
    total_timesteps = num_updates * batch
    command = [
        args.python,
        str(script),
        "--env-id",
        args.env_id,
        "--num-envs",
        str(args.num_envs),
        "--num-steps",
        str(args.num_steps),
        "--seed",
        str(args.seed),
        "--total-timesteps",
        str(total_timesteps),
    ]
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        JAX_LOG_COMPILES="1",
        # tensorboard's protobuf and the old jax/flax names print thousands of deprecation warnings
        PYTHONWARNINGS="ignore::DeprecationWarning",
    )

    ends: list[float] = []  # perf_counter when each update's "SPS:" line arrived
    compilations = [0]  # per update, the last entry the update in progress
    compile_seconds = [0.0]
    last_sps = None
    tail: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cleanrl-run-") as cwd:
        start = time.perf_counter()
        with subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        ) as process:
            assert process.stdout is not None
            for line in process.stdout:
                now = time.perf_counter()
                sys.stderr.write(line)
                tail = [*tail, line][-40:]
                if line.startswith("SPS:"):
                    ends.append(now)
                    last_sps = int(line.split()[1])
                    compilations.append(0)
                    compile_seconds.append(0.0)
                elif match := COMPILED.search(line):
                    compilations[-1] += 1
                    compile_seconds[-1] += float(match.group(2))
            returncode = process.wait()
    if returncode != 0 or len(ends) != num_updates:
        raise SystemExit(
            f"CleanRL's script exited {returncode} after {len(ends)} of {num_updates} updates:\n" + "".join(tail)
        )

    update_seconds = [ends[0] - start] + [b - a for a, b in itertools.pairwise(ends)]
    timed = update_seconds[args.warmup_updates :]
    elapsed = ends[-1] - ends[args.warmup_updates - 1] if args.warmup_updates else ends[-1] - start
    steps = args.updates * batch
    settings = {
        **{k: v for k, v in defaults.items() if k not in ("batch_size", "minibatch_size", "num_iterations")},
        "env_id": args.env_id,
        "num_envs": args.num_envs,
        "num_steps": args.num_steps,
        "seed": args.seed,
        "total_timesteps": total_timesteps,
        "batch_size": batch,
        "minibatch_size": batch // defaults["num_minibatches"],
        "num_iterations": num_updates,
        "warmup_updates": args.warmup_updates,
        "timed_updates": args.updates,
        "envpool": "envpool.make(env_type='gym', episodic_life=True, reward_clip=True), default num_threads",
    }
    script_blob = git_blob(script)
    return {
        "library": "cleanrl",
        "script": script.name,
        "cleanrl_commit": CLEANRL_COMMIT,
        "script_git_blob": script_blob,
        "script_unmodified": script_blob == SCRIPT_BLOB,
        "env": args.env_id,
        "seed": args.seed,
        "sps": round(steps / elapsed, 1),
        "median_update_sps": round(batch / sorted(timed)[len(timed) // 2], 1),
        "timed_env_steps": steps,
        "timed_seconds": round(elapsed, 3),
        "update_seconds": [round(s, 3) for s in update_seconds],
        "first_update_seconds_from_process_start": round(update_seconds[0], 3),
        "warmup_seconds_from_process_start": round(ends[args.warmup_updates - 1] - start, 3)
        if args.warmup_updates
        else 0.0,
        "compilations_per_update": compilations[:num_updates],
        "compile_seconds_per_update": [round(s, 3) for s in compile_seconds[:num_updates]],
        "timed_update_compilations": sum(compilations[args.warmup_updates : num_updates]),
        "cleanrl_reported_sps": last_sps,
        "command": command,
        "settings": settings,
        "versions": versions(args.python),
        "python": args.python,
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--env-id", default="Pong-v5", help="an EnvPool Atari id")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=128, help="environment steps per environment per update")
    parser.add_argument("--updates", type=int, default=10, help="timed updates")
    parser.add_argument("--warmup-updates", type=int, default=1, help="untimed first updates (compilation)")
    parser.add_argument("--seed", type=int, default=1, help="CleanRL's --seed (its default is 1)")
    parser.add_argument(
        "--cleanrl-script", default=DEFAULT_SCRIPT, help="the exported ppo_atari_envpool_xla_jax_scan.py"
    )
    parser.add_argument("--python", default=sys.executable, help="the interpreter of CleanRL's venv")
    args = parser.parse_args()
    if args.updates < 1 or args.warmup_updates < 0:
        parser.error("--updates must be at least 1 and --warmup-updates at least 0")
    return args


if __name__ == "__main__":
    print(json.dumps(run(parse_args())))
