"""Peer baseline: Stoix's AlphaZero (``stoix/systems/search/ff_az.py``) on a gymnax environment.

Stoix (github.com/EdanToledo/Stoix) is not on PyPI; its metadata pins git branches and
many environment suites that are not needed here. Run with its own benchmark-only venv,
never podrace's, from an export of its source (commit 8fff19c94a478c1e1ff75fbf10396d488aa25d70,
2026-03-18), with the versions of its ``uv.lock`` where PyPI has them::

    git clone https://github.com/EdanToledo/Stoix /tmp/stoix
    git -C /tmp/stoix checkout 8fff19c94a478c1e1ff75fbf10396d488aa25d70
    python3 -m venv /tmp/stoix-venv
    /tmp/stoix-venv/bin/pip install "jax==0.5.3" "jaxlib==0.5.3" "flax==0.10.5" "chex==0.1.89" \\
        "distrax==0.1.5" "mctx==0.0.5" "gymnax==0.0.9" "hydra-core==1.3.2" "omegaconf==2.3.0" \\
        "flashbax==0.1.3" "rlax==0.1.6" "tensorflow-probability==0.25.0" "stoa-env[gymnax]==0.1.2" \\
        "colorama==0.4.6" "numpy==1.26.4" "protobuf==3.20.3" "orbax-checkpoint==0.11.10" \\
        "pandas==2.2.3" "rich==14.0.0" "tensorboard-logger==0.1.0" "neptune==1.13.0" \\
        "wandb==0.19.8" "gymnasium==1.1.1" optax
    /tmp/stoix-venv/bin/pip install -e /tmp/stoix --no-deps
    /tmp/stoix-venv/bin/python benchmarks/stoix_alphazero.py --num-envs 64 --simulations 16 --hidden 64 64

Known to work on Python 3.11 with optax 0.2.8 (the lock's optax is a git ``main``; PyPI's
newest was taken) and ml_dtypes 0.5.4, everything else as pinned above. wandb, neptune,
tensorboard-logger, pandas, rich and orbax are only imported by Stoix's logger and
checkpointer, which this script does not use; envpool, brax, jumanji and the other suites
in Stoix's requirements are not needed for gymnax environments.

What is measured: environment steps per second of Stoix's AlphaZero training on CPU/GPU,
after compilation. The configuration is Stoix's own ``default_ff_az.yaml`` (composed with
Hydra from the installed ``stoix/configs``) with the settings below overridden; every
other hyperparameter is Stoix's default. ``ff_az.learner_setup`` builds the networks,
optimisers, flashbax buffer and environments and runs Stoix's buffer warm-up
(``system.warmup_steps`` steps of search and acting). Its ``learn`` function (``pmap`` of a
``lax.scan`` of ``--updates-per-call`` updates) is what Stoix's own ``run_experiment``
times between evaluations; each update acts ``--rollout`` steps in each of ``--num-envs``
environments, every step one mctx search of ``--simulations`` simulations whose recurrent
function steps a copy of the environment (Stoix's AlphaZero searches with the true model),
then trains ``--epochs`` gradient steps on sequences sampled from the buffer. One warm-up
call compiles and runs ``learn``; ``--timed-calls`` further calls, each continuing from the
last one's state, are then timed with ``block_until_ready``. ``sps`` is the environment steps
of the timed calls over their seconds (search simulations are not counted as steps).
Stoix's evaluator and logger are not run.

Prints one JSON line with the result and every setting used.
"""

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import jax
import stoix
from _compare import compile_profile
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf


# Stoix prints its banners (and a notice that envpool is missing) on stdout; keep stdout for the JSON line.
with contextlib.redirect_stdout(sys.stderr):
    from stoix.systems.search import ff_az
    from stoix.utils import make_env
    from stoix.utils.total_timestep_checker import check_total_timesteps


def compose_config(args: argparse.Namespace) -> Any:
    """Stoix's ``default_ff_az`` config with this run's settings as Hydra overrides."""
    configs = Path(stoix.__path__[0]) / "configs"
    hidden = "[" + ",".join(str(h) for h in args.hidden) + "]"
    overrides = [
        f"hydra.searchpath=[file://{configs}]",
        f"env={args.env}",
        f"arch.seed={args.seed}",
        f"arch.total_num_envs={args.num_envs}",
        "arch.total_timesteps=null",
        f"arch.num_updates={args.updates_per_call * (args.timed_calls + 1)}",
        "arch.num_evaluation=1",
        f"system.rollout_length={args.rollout}",
        f"system.num_simulations={args.simulations}",
        f"system.search_method={args.search}",
        f"system.epochs={args.epochs}",
        f"system.warmup_steps={args.warmup_steps}",
        f"system.total_batch_size={args.batch_size}",
        f"system.sample_sequence_length={args.sample_sequence_length}",
        f"system.total_buffer_size={args.buffer_size}",
        f"network.actor_network.pre_torso.layer_sizes={hidden}",
        f"network.critic_network.pre_torso.layer_sizes={hidden}",
    ]
    with initialize_config_dir(config_dir=str(configs / "default" / "anakin"), version_base="1.2"):
        config = compose(config_name="default_ff_az", overrides=overrides)
    OmegaConf.set_struct(config, False)
    return config


def run(args: argparse.Namespace) -> dict[str, Any]:
    config = compose_config(args)
    n_devices = len(jax.devices())
    config.num_devices = n_devices

    start = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        config = check_total_timesteps(config)
        config.arch.num_updates_per_eval = args.updates_per_call
        env, eval_env = make_env.make(config=config)
        # the keys of Stoix's run_experiment (the second is its evaluator's)
        key, _, actor_key, critic_key = jax.random.split(jax.random.PRNGKey(config.arch.seed), num=4)
        learn, _, _, learner_state = ff_az.learner_setup(env, (key, actor_key, critic_key), config, eval_env)
        learner_state = jax.block_until_ready(learner_state)
    setup = time.perf_counter() - start

    steps_per_call = (
        n_devices * args.updates_per_call * config.system.rollout_length * config.arch.update_batch_size
    ) * config.arch.num_envs

    t0 = time.perf_counter()
    output = jax.block_until_ready(learn(learner_state))
    warmup = time.perf_counter() - t0
    learner_state = output.learner_state

    profile = compile_profile()
    call_seconds = []
    for _ in range(args.timed_calls):
        t0 = time.perf_counter()
        output = jax.block_until_ready(learn(learner_state))
        call_seconds.append(time.perf_counter() - t0)
        learner_state = output.learner_state
    elapsed = sum(call_seconds)
    steps = steps_per_call * args.timed_calls

    return {
        "library": "stoix",
        "system": "ff_az",
        "env": f"{config.env.env_name}/{config.env.scenario.name}",
        "seed": args.seed,
        "sps": round(steps / elapsed, 1),
        "median_call_sps": round(steps_per_call / statistics.median(call_seconds), 1),
        "timed_env_steps": steps,
        "timed_seconds": round(elapsed, 3),
        "call_seconds": [round(s, 4) for s in call_seconds],
        "warmup_seconds_incl_compile": round(warmup, 3),
        "setup_seconds_incl_buffer_warmup": round(setup, 3),
        "timed_call_compilations": profile["programs"],
        "settings": {
            "num_envs": config.arch.num_envs * n_devices * config.arch.update_batch_size,
            "rollout_length": config.system.rollout_length,
            "updates_per_call": args.updates_per_call,
            "env_steps_per_call": steps_per_call,
            "num_simulations": config.system.num_simulations,
            "search_method": config.system.search_method,
            "max_depth": config.system.max_depth,
            "hidden_layer_sizes": list(config.network.actor_network.pre_torso.layer_sizes),
            "critic_hidden_layer_sizes": list(config.network.critic_network.pre_torso.layer_sizes),
            "activation": config.network.actor_network.pre_torso.activation,
            "epochs": config.system.epochs,
            "total_batch_size": config.system.total_batch_size,
            "sample_sequence_length": config.system.sample_sequence_length,
            "total_buffer_size": config.system.total_buffer_size,
            "warmup_steps": config.system.warmup_steps,
            "actor_lr": config.system.actor_lr,
            "critic_lr": config.system.critic_lr,
            "gamma": config.system.gamma,
            "gae_lambda": config.system.gae_lambda,
            "max_grad_norm": config.system.max_grad_norm,
            "update_batch_size": config.arch.update_batch_size,
            "devices": n_devices,
        },
        "jax": jax.__version__,
        "backend": jax.default_backend(),
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--env", default="gymnax/cartpole", help="a Stoix env config (stoix/configs/env/...)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--num-envs", type=int, default=1024, help="environments in all (Stoix's total_num_envs)")
    parser.add_argument("--rollout", type=int, default=16, help="environment steps per environment per update")
    parser.add_argument("--simulations", type=int, default=25, help="search simulations per environment step")
    parser.add_argument("--search", choices=["muzero", "gumbel"], default="muzero", help="mctx policy")
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256], help="actor's and critic's MLP layers")
    parser.add_argument("--epochs", type=int, default=8, help="gradient steps per update")
    parser.add_argument("--batch-size", type=int, default=32, help="sampled sequences per gradient step")
    parser.add_argument("--sample-sequence-length", type=int, default=16)
    parser.add_argument("--buffer-size", type=int, default=50_000, help="Stoix's total_buffer_size")
    parser.add_argument("--warmup-steps", type=int, default=16, help="buffer warm-up steps in setup")
    parser.add_argument("--updates-per-call", type=int, default=10, help="updates per compiled learn call")
    parser.add_argument("--timed-calls", type=int, default=3)
    return parser.parse_args()


if __name__ == "__main__":
    print(json.dumps(run(parse_args())))
