"""PPO and DQN time to solve CartPole-v1, DQN throughput: podrace against rejax, same settings.

rejax 0.1.3 needs gymnax < 1.0, so it runs in its own virtual environment (see
`benchmarks/rejax_baseline.py` for the exact pip command) and is called here through
`--rejax-python`. Every measurement runs in a fresh process, podrace's as well as
rejax's, so that each one compiles from scratch; podrace and rejax alternate seed by
seed.

- PPO, time to solve: wall-clock seconds from before anything is built until the first
  evaluation whose mean return (64 episodes, the stochastic policy) reaches 475.
  Training runs in chunks of 5 000 environment steps, one compiled call each, with an
  evaluation after every chunk; compilation, chunks and evaluations are all timed.
  Hyperparameters are rejax's CartPole ones: 5 envs x 100 steps, 5 epochs of 5
  minibatches, Adam 7.5e-4, gradient norm clipped at 0.5, discount 0.99, GAE 0.95,
  clip 0.2, value 0.5, entropy 0.01, separate 64-64 tanh actor and critic (built in one
  compiled program, as `podrace train` builds its networks).
- DQN, steps per second: 10 envs, one step each per iteration, then 5 gradient steps
  on batches of 100 from a 50 000-transition buffer (learning from 5 000), double Q,
  Polyak target with step 0.02 once per iteration, Adam 1e-3 clipped at 10, epsilon
  1 -> 0.05 over 25 000 steps, a 64-64 swish Q-network. A warm-up call of 50 000 steps
  (compile included) is followed by a timed call of 50 000 more.

- DQN, time to solve: as PPO's, at DQN's settings, the greedy policy evaluated (rejax:
  its `make_act`), within 200 000 steps (epsilon's decay still over 25 000).

Last line: `ratio_time_to_solve=X ratio_dqn_sps=Y ratio_dqn_time_to_solve=Z` (rejax
seconds / podrace seconds, medians over seeds; podrace sps / rejax sps, medians).

Usage:

    python benchmarks/ppo_cartpole.py --rejax-python /path/to/rejax-venv/bin/python [--seeds 0 1 2]
"""

import argparse
import json
import pathlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from _compare import compile_profile, run_json

import podrace as pr


HERE = pathlib.Path(__file__).parent
THRESHOLD = 475.0
CHUNK_STEPS = 5_000
EVAL_EPISODES = 64
MAX_ENV_STEPS = 500_000
DQN_STEPS = 50_000
DQN_EXPLORATION_STEPS = DQN_STEPS // 2
DQN_MAX_STEPS = 200_000


def actor_critic(key: jax.Array) -> pr.networks.ActorCriticNetwork:
    """The separate 64-64 tanh actor and critic (also `startup.py`'s network)."""
    actor_key, head_key, critic_key, value_key = jax.random.split(key, 4)
    return pr.networks.ActorCriticNetwork(
        pr.networks.MLPTorso((4,), (64, 64), activation=jnp.tanh, key=actor_key),
        pr.networks.PolicyLogitHead(64, 2, key=head_key),
        pr.networks.MLPTorso((4,), (64, 64), activation=jnp.tanh, key=critic_key),
        pr.networks.ValueHead(64, key=value_key),
    )


def ppo_pipeline(seed: int) -> pr.Anakin:
    """PPO at rejax's CartPole settings."""
    env = pr.envs.cartpole_v1()
    # Built in one compiled program, as `podrace train` builds its networks.
    network = eqx.filter_jit(actor_critic)(jax.random.key(seed))
    loss = pr.losses.PPOLoss(
        discount=0.99, lambda_=0.95, clip_epsilon=0.2, value_coefficient=0.5, entropy_coefficient=0.01
    )
    optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(7.5e-4))
    learner = pr.Learner(network, pr.policies.Categorical(), loss, optimizer, num_epochs=5, num_minibatches=5)
    return pr.Anakin(env, learner, num_envs=5, rollout_length=100)


def ppo_time_to_solve(seed: int, max_env_steps: int = MAX_ENV_STEPS) -> dict[str, Any]:
    result = time_to_solve(lambda: ppo_pipeline(seed), pr.policies.Categorical(), jax.random.key(seed), max_env_steps)
    return {**result, "seed": seed}


def dqn_time_to_solve(seed: int, max_env_steps: int = DQN_MAX_STEPS) -> dict[str, Any]:
    build = lambda: dqn_pipeline(seed, DQN_EXPLORATION_STEPS)  # noqa: E731
    result = time_to_solve(build, pr.policies.Greedy(), jax.random.key(seed), max_env_steps)
    return {**result, "seed": seed}


def time_to_solve(
    build: Callable[[], pr.Anakin],
    policy: pr.policies.AbstractPolicy,
    key: jax.Array,
    max_env_steps: int,
    *,
    threshold: float = THRESHOLD,
    chunk_steps: int = CHUNK_STEPS,
    eval_episodes: int = EVAL_EPISODES,
) -> dict[str, Any]:
    """Builds a pipeline with `build` and trains it from `pipeline.init(key)` in chunks of
    `chunk_steps`, each with an evaluation of `policy` in the same compiled program,
    until a mean return of `threshold` or `max_env_steps` (also `off_policy_sps.py`'s
    measurement). The seconds count from before `build`; `startup` gives those to the
    pipeline built, to the state initialised and to the first chunk's result, with the
    process's compilations (`_compare.compile_profile`)."""
    start = time.perf_counter()
    profile = compile_profile()
    pipeline = build()
    built = time.perf_counter() - start
    updates_per_chunk = chunk_steps // pipeline.frames_per_update
    state = jax.block_until_ready(pipeline.init(key))
    initialised = time.perf_counter() - start
    history = []
    mean_return, steps = -float("inf"), 0
    while mean_return < threshold and steps < max_env_steps:
        steps += updates_per_chunk * pipeline.frames_per_update
        evaluation = pr.Evaluation(policy, num_episodes=eval_episodes, key=jax.random.key(steps))
        result = pipeline.train(state, num_updates=updates_per_chunk, evaluation=evaluation)
        assert result.evaluation is not None
        state, mean_return = result.state, float(result.evaluation.mean_return)
        history.append((steps, round(time.perf_counter() - start, 3), mean_return))
    startup = {"build s": built, "init s": initialised, "first result s": history[0][1]}
    return {
        "library": "podrace",
        "solved": mean_return >= threshold,
        "seconds": round(time.perf_counter() - start, 3),
        "env_steps": steps,
        "history": history,
        "startup": {**startup, **profile},
    }


def dqn_pipeline(seed: int, exploration_steps: int) -> pr.Anakin:
    """DQN at rejax's CartPole settings, epsilon decaying over `exploration_steps`."""
    env = pr.envs.cartpole_v1()
    torso_key, head_key = jax.random.split(jax.random.key(seed))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((4,), (64, 64), activation=jax.nn.swish, key=torso_key),
        pr.networks.QValueHead(64, 2, key=head_key),
    )
    learner = pr.learners.DQNLearner(
        network,
        pr.losses.QLearningLoss(discount=0.99, double=True),
        optax.chain(optax.clip_by_global_norm(10.0), optax.adam(1e-3)),
        epsilon=optax.linear_schedule(1.0, 0.05, exploration_steps),
        buffer_size=50_000,
        batch_size=100,
        min_replay_size=5_000,
        gradient_steps=5,
        target_update_period=5,
        tau=0.02,
    )
    return pr.Anakin(env, learner, num_envs=10, rollout_length=1)


def dqn_sps(seed: int) -> dict[str, Any]:
    pipeline = dqn_pipeline(seed, DQN_EXPLORATION_STEPS)
    num_updates = DQN_STEPS // pipeline.frames_per_update
    start = time.perf_counter()
    state = jax.block_until_ready(pipeline.train(pipeline.init(jax.random.key(seed)), num_updates=num_updates).state)
    warmup = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(pipeline.train(state, num_updates=num_updates))
    elapsed = time.perf_counter() - start
    return {
        "library": "podrace",
        "seed": seed,
        "sps": round(num_updates * pipeline.frames_per_update / elapsed, 1),
        "timed_seconds": round(elapsed, 3),
        "warmup_seconds_incl_compile": round(warmup, 3),
    }


WORKERS = {"ppo": ppo_time_to_solve, "dqn": dqn_sps, "dqn-time": dqn_time_to_solve}
MAX_STEPS = {"ppo": MAX_ENV_STEPS, "dqn-time": DQN_MAX_STEPS}
"""The workers that time a run to the bar, and the env steps they stop at unsolved."""


def commands(mode: str, seed: int, rejax_python: str, max_env_steps: int | None = None) -> dict[str, list[str]]:
    """The command of each library's measuring process for `mode` (a name of `WORKERS`) and
    `seed`; `max_env_steps` (default `MAX_STEPS[mode]`) stops a run to the bar there
    (`startup.py` stops it after the first chunk)."""
    podrace = [sys.executable, __file__, "--worker", mode, "--seed", str(seed)]
    rejax = [rejax_python, str(HERE / "rejax_baseline.py")]
    if mode == "dqn":
        return {"podrace": podrace, "rejax": [*rejax, "dqn-sps", "--seed", str(seed), "--agent", "QNetwork"]}
    steps = str(max_env_steps or MAX_STEPS[mode])
    podrace += ["--max-env-steps", steps]
    if mode == "ppo":
        return {
            "podrace": podrace,
            "rejax": [*rejax, "ppo-time-to-solve", "--seed", str(seed), "--max-env-steps", steps],
        }
    # rejax's DQN decays epsilon over a fraction of its run: the same steps as podrace's.
    exploration_fraction = DQN_EXPLORATION_STEPS / int(steps)
    rejax += ["dqn-sps", "--seed", str(seed), "--agent", "QNetwork", "--steps", steps]
    rejax += ["--exploration-fraction", str(exploration_fraction), "--time-to-level", str(THRESHOLD)]
    rejax += ["--chunk-steps", str(CHUNK_STEPS), "--eval-episodes", str(EVAL_EPISODES)]
    return {"podrace": podrace, "rejax": rejax}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rejax-python", help="the python of the rejax benchmark environment")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--max-env-steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        limit = {} if args.worker == "dqn" else {"max_env_steps": args.max_env_steps or MAX_STEPS[args.worker]}
        print(json.dumps(WORKERS[args.worker](args.seed, **limit)))
        return
    if not args.rejax_python:
        parser.error("--rejax-python is required")

    results: dict[str, dict[str, list[dict[str, Any]]]] = {mode: {"podrace": [], "rejax": []} for mode in WORKERS}
    print(f"jax {jax.__version__} on {jax.default_backend()}; seeds {args.seeds}")
    for seed in args.seeds:
        for mode in WORKERS:
            for library, command in commands(mode, seed, args.rejax_python).items():
                result = run_json(command)
                results[mode][library].append(result)
                if mode == "dqn":
                    print(f"dqn  {library:8s} seed {seed}: {result['sps']:10.0f} env steps/s")
                else:
                    print(
                        f"{mode:8s} {library:8s} seed {seed}: {result['seconds']:7.2f} s to solve "
                        f"({result['env_steps']} env steps, solved={result['solved']}, "
                        f"first result {result['startup']['first result s']:.2f} s)"
                    )

    def median(mode: str, library: str, key: str) -> float:
        return statistics.median(result[key] for result in results[mode][library])

    time_ratio = median("ppo", "rejax", "seconds") / median("ppo", "podrace", "seconds")
    sps_ratio = median("dqn", "podrace", "sps") / median("dqn", "rejax", "sps")
    dqn_time_ratio = median("dqn-time", "rejax", "seconds") / median("dqn-time", "podrace", "seconds")
    print(
        f"ratio_time_to_solve={time_ratio:.2f} ratio_dqn_sps={sps_ratio:.2f} "
        f"ratio_dqn_time_to_solve={dqn_time_ratio:.2f}"
    )


if __name__ == "__main__":
    main()
