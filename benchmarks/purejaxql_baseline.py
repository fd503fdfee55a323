"""Peer baseline: purejaxql's own PQN on a MinAtar game, at its `pqn_minatar.yaml` settings.

purejaxql publishes its MinAtar settings but no MinAtar returns, so the
`purejaxql-pqn-*-minatar` recipes have no published number to meet. This script runs
purejaxql's `pqn_minatar.py` itself (from a checkout, never copied into podrace) with
those settings, on several seeds as one vmapped program, as its `single_run` does,
and prints one JSON line: each seed's greedy test return at the end of training
(`test/returned_episode_returns` of its last test, `EPS_TEST: 0` on 128 environments),
its training return, and the wall time. Set the same run of podrace beside it with
`podrace reproduce purejaxql-pqn-<game>-minatar --seeds N`::

    git clone https://github.com/mttga/purejaxql /tmp/purejaxql
    pip install flax gymnax pyyaml
    python benchmarks/purejaxql_baseline.py --purejaxql /tmp/purejaxql --env Breakout-MinAtar --seeds 5

purejaxql's script imports hydra, omegaconf and wandb at module level but uses none of
them in training with `WANDB_MODE: disabled`; where they are not installed, empty
stand-ins take their place. Known to work with purejaxql 47af6d7, gymnax 1.0.1 and flax
0.12.8.
"""

import argparse
import importlib.util
import json
import pathlib
import sys
import time
import types

import jax
import numpy as np
import yaml


def _stand_in(name: str, **attributes: object) -> None:
    """An empty module `name` in `sys.modules` unless the real one imports."""
    try:
        importlib.import_module(name)
    except ImportError:
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        sys.modules[name] = module


def _load_pqn_minatar(checkout: pathlib.Path) -> types.ModuleType:
    _stand_in("wandb")
    _stand_in("omegaconf", OmegaConf=None)
    _stand_in("hydra", main=lambda **_: lambda function: function)
    path = checkout / "purejaxql" / "pqn_minatar.py"
    if not path.is_file():
        raise SystemExit(f"no purejaxql/pqn_minatar.py under {checkout}: pass a purejaxql checkout with --purejaxql.")
    spec = importlib.util.spec_from_file_location("pqn_minatar", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--purejaxql", type=pathlib.Path, required=True, help="a purejaxql checkout")
    parser.add_argument("--env", default="Breakout-MinAtar", help="a gymnax MinAtar id")
    parser.add_argument("--seeds", type=int, default=5, help="seeds, vmapped as purejaxql's NUM_SEEDS")
    parser.add_argument("--seed", type=int, default=0, help="purejaxql's SEED")
    parser.add_argument("--total-timesteps", type=int, default=None, help="overrides TOTAL_TIMESTEPS (a smoke run)")
    args = parser.parse_args()

    module = _load_pqn_minatar(args.purejaxql)
    config = yaml.safe_load((args.purejaxql / "purejaxql" / "config" / "alg" / "pqn_minatar.yaml").read_text())
    config.update(ENV_NAME=args.env, NUM_SEEDS=args.seeds, SEED=args.seed, WANDB_MODE="disabled")
    if args.total_timesteps is not None:
        config["TOTAL_TIMESTEPS"] = args.total_timesteps
    for name in ("TOTAL_TIMESTEPS", "TOTAL_TIMESTEPS_DECAY"):
        config[name] = int(float(config[name]))

    start = time.perf_counter()
    keys = jax.random.split(jax.random.PRNGKey(args.seed), args.seeds)
    outputs = jax.block_until_ready(jax.jit(jax.vmap(module.make_train(config)))(keys))
    seconds = time.perf_counter() - start
    metrics = outputs["metrics"]
    test_returns = np.asarray(metrics["test/returned_episode_returns"][:, -1])
    train_returns = np.asarray(metrics["returned_episode_returns"][:, -1])
    print(
        json.dumps(
            {
                "library": "purejaxql",
                "env": args.env,
                "seeds": args.seeds,
                "env_steps": int(np.asarray(metrics["env_step"])[0, -1]),
                "test_returns": test_returns.tolist(),
                "test_mean": float(test_returns.mean()),
                "test_std": float(test_returns.std()),
                "train_returns": train_returns.tolist(),
                "wall_seconds": seconds,
                "device": jax.devices()[0].device_kind,
                "jax": jax.__version__,
                "config": config,
            }
        )
    )


if __name__ == "__main__":
    main()
