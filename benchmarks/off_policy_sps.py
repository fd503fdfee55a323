"""SAC, TD3 and PQN throughput and time to a return: podrace against rejax, same settings.

Environment steps per second of training, evaluation off. As in `ppo_cartpole.py`,
rejax 0.1.3 runs in its own virtual environment (`benchmarks/rejax_baseline.py` gives
the pip command) and is called through `--rejax-python`; every measurement runs in a
fresh process, and podrace and rejax alternate seed by seed. A warm-up call trains
`--sac-steps`, `--td3-steps` or `--pqn-steps` environment steps (20 000, 20 000 and
524 288, rejax's PQN run length, by default) from a fresh state, compile included; the
timed call trains as many more from the warm-up's state with the same compiled
function. Each measurement's JSON line has `timed_call_compilations`, which is 0 when
the timed call compiled nothing.

The settings are rejax's own (configs/gymnax/pendulum.yaml and cartpole.yaml in the
rejax repository), under rejax's names in `SETTINGS`, passed to rejax's side flag by
flag and translated here into podrace's arguments:

- SAC on Pendulum-v1: 1 env, one step per iteration and `num_epochs` = 1 gradient step
  (actor, twin critics, temperature) on a batch of 256 from a 10 000-transition buffer,
  learning from 256 transitions; Adam 0.01, `polyak` 0.98 (tau 0.02) once per
  iteration, discount 0.99, 64-64 swish actor and critics, target entropy -1, initial
  temperature 1, log standard deviation in [-10, 2].
- TD3 on Pendulum-v1: 1 env, one step per iteration and one critic step on a batch of
  100 from a 10 000-transition buffer; every `policy_delay` = 2 critic steps an actor
  step and a target step with `polyak` 0.95 (tau 0.05); uniformly random actions for
  the first 1 000 steps, learning from then on; Adam 1e-3, discount 0.99, exploration
  noise 0.3, target noise 0.2 clipped at 0.5 (absolute torques: podrace's are relative
  to half the action range, 2, so 0.15, 0.1 and 0.25 here), 64-64 swish networks.
- PQN on CartPole-v1: 16 envs x 128 steps, 5 epochs of 16 minibatches of single
  transitions, Adam 3e-4, discount 0.99, lambda 0.9, epsilon 1 -> 0.05 over half the
  warm-up call's steps, a 64-64 relu Q-network with every hidden layer normalised.

Every optimiser is rejax's: `max_grad_norm` clips each gradient element (`optax.clip`:
inf for SAC, 100 for TD3, 10 for PQN) before Adam, on both sides.

Observations are normalised by running statistics for SAC and TD3 (rejax's Pendulum
configs; `pr.RunningNormalization` on podrace's side), not for PQN (rejax's CartPole
config). The two differ in when: podrace normalises each observation as it is collected
and stores it normalised, rejax stores raw observations and normalises each sampled
batch with the statistics of the moment; podrace also clips them to [-10, 10].

What is not aligned otherwise: podrace runs its own
`pendulum_v1` and `cartpole_v1` (Gymnasium's dynamics, as gymnax's are), rejax
gymnax's. rejax samples replay batches without replacement, podrace (flashbax) with
replacement. rejax's SAC clips the log standard deviation into [-10, 2], podrace's
head maps it there through tanh; rejax learns the temperature through alpha, podrace
through log alpha; rejax updates the actor before the critics, podrace after. rejax's
TD3 takes its actor step on the last critic step's batch, podrace on the current one.
Initialisations are each library's default. None of these changes the number of
network evaluations or gradient steps.

Last line: `ratio_sac_sps=X ratio_td3_sps=Y ratio_pqn_sps=Z` (podrace's median steps
per second over rejax's, over seeds).

With `--time-to-level`, each measurement is instead the seconds from before anything is
built to the first evaluation whose mean return reaches the learning tests' bar (-200 on
Pendulum-v1, 475 on CartPole-v1), within `--X-steps` (also the length PQN's epsilon
schedule is set for, as rejax's `total_timesteps`). Training runs in compiled chunks of
1,000 steps (SAC, TD3) or 16,384 (PQN), each followed by 16 evaluation episodes with each
library's own evaluation policy; compilation and evaluations are inside the time. Last
line: `ratio_sac_time_to_level=X ...`, rejax's median seconds over podrace's.

Usage:

    python benchmarks/off_policy_sps.py --rejax-python /path/to/rejax-venv/bin/python [--seeds 0 1 2] [--time-to-level]
"""

import argparse
import json
import pathlib
import statistics
import sys
import time
from typing import Any

import jax
import optax
from _compare import compile_profile, run_json
from ppo_cartpole import time_to_solve

import podrace as pr


HERE = pathlib.Path(__file__).parent
ALGORITHMS = ("sac", "td3", "pqn")
DEFAULT_STEPS = {"sac": 20_000, "td3": 20_000, "pqn": 524_288}
PENDULUM_OBSERVATION_SHAPE, CARTPOLE_OBSERVATION_SHAPE = (3,), (4,)
SETTINGS: dict[str, dict[str, Any]] = {
    "sac": {
        "num_envs": 1,
        "buffer_size": 10_000,
        "fill_buffer": 256,
        "batch_size": 256,
        "num_epochs": 1,
        "target_update_freq": 1,
        "polyak": 0.98,
        "learning_rate": 0.01,
        "max_grad_norm": float("inf"),
        "gamma": 0.99,
        "hidden_layer_sizes": [64, 64],
        "activation": "swish",
        "normalize_observations": True,
    },
    "td3": {
        "num_envs": 1,
        "buffer_size": 10_000,
        "fill_buffer": 1_000,
        "batch_size": 100,
        "num_epochs": 1,
        "policy_delay": 2,
        "target_update_freq": 1,
        "polyak": 0.95,
        "learning_rate": 1e-3,
        "max_grad_norm": 100.0,
        "gamma": 0.99,
        "exploration_noise": 0.3,
        "target_noise": 0.2,
        "target_noise_clip": 0.5,
        "activation": "swish",
        "normalize_observations": True,
    },
    "pqn": {
        "num_envs": 16,
        "num_steps": 128,
        "num_epochs": 5,
        "num_minibatches": 16,
        "learning_rate": 3e-4,
        "max_grad_norm": 10.0,
        "gamma": 0.99,
        "td_lambda": 0.9,
        "eps_start": 1.0,
        "eps_end": 0.05,
        "exploration_fraction": 0.5,
        "normalize_observations": False,
    },
}
"""Each algorithm's settings under rejax's names (rejax fixes TD3's and PQN's hidden layers to 64-64)."""
ACTIVATIONS = {"swish": jax.nn.swish}
# --time-to-level: the learning tests' bars (Pendulum-v1 -200, CartPole-v1 475), each
# library's own evaluation policy (podrace: the action of greatest probability, the
# deterministic action, the greedy one; rejax: its `make_act`), and how often to evaluate.
LEVELS = {"sac": -200.0, "td3": -200.0, "pqn": 475.0}
EVALUATION_POLICIES = {"sac": pr.policies.Mode, "td3": pr.policies.Deterministic, "pqn": pr.policies.Greedy}
CHUNK_STEPS = {"sac": 1_000, "td3": 1_000, "pqn": 16_384}
EVAL_EPISODES = 16


def steps_per_iteration(algorithm: str) -> int:
    """Env steps per rejax training iteration (podrace's `frames_per_update` or a multiple)."""
    settings = SETTINGS[algorithm]
    if algorithm == "td3":
        return settings["num_envs"] * settings["policy_delay"]
    return settings["num_envs"] * settings.get("num_steps", 1)


def rejax_optimizer(settings: dict[str, Any]) -> optax.GradientTransformation:
    """rejax's optimiser: each gradient element clipped to `max_grad_norm`, then Adam."""
    return optax.chain(optax.clip(settings["max_grad_norm"]), optax.adam(settings["learning_rate"]))


def pendulum_bounds(env: pr.envs.AbstractEnv) -> tuple[list[float], list[float]]:
    """The torque bounds of Pendulum's actions."""
    assert isinstance(env.action_space, pr.Box)
    return env.action_space.low.tolist(), env.action_space.high.tolist()


def observation_normalization(settings: dict[str, Any]) -> pr.RunningNormalization | None:
    """Running normalisation of observations where rejax's config asks for it."""
    return pr.RunningNormalization(observations=True, rewards=False) if settings["normalize_observations"] else None


def sac_pipeline(key: jax.Array, settings: dict[str, Any]) -> pr.Anakin:
    env = pr.envs.pendulum_v1()
    low, high = pendulum_bounds(env)
    torso_key, head_key, critic_key = jax.random.split(key, 3)
    hidden, activation = settings["hidden_layer_sizes"], ACTIVATIONS[settings["activation"]]
    actor = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(PENDULUM_OBSERVATION_SHAPE, hidden, activation=activation, key=torso_key),
        pr.networks.TanhGaussianHead(
            hidden[-1], 1, low=low, high=high, min_log_std=-10.0, max_log_std=2.0, key=head_key
        ),
    )
    critic = pr.networks.MLPCritic(PENDULUM_OBSERVATION_SHAPE, 1, hidden, activation=activation, key=critic_key)
    optimizer = rejax_optimizer(settings)
    learner = pr.learners.SACLearner(
        actor,
        critic,
        optimizer,
        optimizer,
        optimizer,
        buffer_size=settings["buffer_size"],
        batch_size=settings["batch_size"],
        discount=settings["gamma"],
        tau=1 - settings["polyak"],
        min_replay_size=settings["fill_buffer"],
        gradient_steps=settings["num_epochs"],
    )
    return pr.Anakin(
        env, learner, num_envs=settings["num_envs"], rollout_length=1, normalization=observation_normalization(settings)
    )


def td3_pipeline(key: jax.Array, settings: dict[str, Any]) -> pr.Anakin:
    env = pr.envs.pendulum_v1()
    low, high = pendulum_bounds(env)
    half_range = (high[0] - low[0]) / 2  # rejax's noises are absolute, podrace's relative to this
    torso_key, head_key, critic_key = jax.random.split(key, 3)
    activation = ACTIVATIONS[settings["activation"]]
    actor = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(PENDULUM_OBSERVATION_SHAPE, (64, 64), activation=activation, key=torso_key),
        pr.networks.DeterministicHead(64, 1, low=low, high=high, key=head_key),
    )
    critic = pr.networks.MLPCritic(PENDULUM_OBSERVATION_SHAPE, 1, (64, 64), activation=activation, key=critic_key)
    random_actions = optax.piecewise_constant_schedule(1.0, {settings["fill_buffer"]: 0.0})
    optimizer = rejax_optimizer(settings)
    learner = pr.learners.TD3Learner(
        actor,
        critic,
        optimizer,
        optimizer,
        exploration=pr.policies.GaussianNoise(settings["exploration_noise"] / half_range, random_actions),
        buffer_size=settings["buffer_size"],
        batch_size=settings["batch_size"],
        discount=settings["gamma"],
        tau=1 - settings["polyak"],
        target_noise=settings["target_noise"] / half_range,
        target_noise_clip=settings["target_noise_clip"] / half_range,
        policy_delay=settings["policy_delay"],
        min_replay_size=settings["fill_buffer"],
        gradient_steps=settings["num_epochs"],
    )
    return pr.Anakin(
        env, learner, num_envs=settings["num_envs"], rollout_length=1, normalization=observation_normalization(settings)
    )


def pqn_pipeline(key: jax.Array, settings: dict[str, Any], steps: int) -> pr.Anakin:
    torso_key, head_key = jax.random.split(key)
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(
            CARTPOLE_OBSERVATION_SHAPE, (64, 64), activation=jax.nn.relu, layer_norm=True, key=torso_key
        ),
        pr.networks.QValueHead(64, 2, key=head_key),
    )
    decay_steps = int(settings["exploration_fraction"] * steps)
    learner = pr.Learner(
        network,
        pr.policies.EpsilonGreedy(optax.linear_schedule(settings["eps_start"], settings["eps_end"], decay_steps)),
        pr.losses.PQNLoss(discount=settings["gamma"], lambda_=settings["td_lambda"]),
        rejax_optimizer(settings),
        num_epochs=settings["num_epochs"],
        num_minibatches=settings["num_minibatches"],
        minibatches_of="transitions",
    )
    return pr.Anakin(
        pr.envs.cartpole_v1(), learner, num_envs=settings["num_envs"], rollout_length=settings["num_steps"]
    )


def build_pipeline(algorithm: str, key: jax.Array, steps: int) -> pr.Anakin:
    """`algorithm`'s pipeline at `SETTINGS`, its schedules set for a run of `steps`."""
    settings = SETTINGS[algorithm]
    if algorithm == "sac":
        return sac_pipeline(key, settings)
    if algorithm == "td3":
        return td3_pipeline(key, settings)
    return pqn_pipeline(key, settings, steps)


def podrace_sps(algorithm: str, seed: int, steps: int) -> dict[str, Any]:
    """podrace's steps per second: a warm-up call of `steps` env steps, then a timed one."""
    network_key, run_key = jax.random.split(jax.random.key(seed))
    pipeline = build_pipeline(algorithm, network_key, steps)
    num_updates = steps // pipeline.frames_per_update
    start = time.perf_counter()
    state = jax.block_until_ready(pipeline.train(pipeline.init(run_key), num_updates=num_updates).state)
    warmup = time.perf_counter() - start
    profile = compile_profile()
    start = time.perf_counter()
    jax.block_until_ready(pipeline.train(state, num_updates=num_updates))
    elapsed = time.perf_counter() - start
    timed_call_compilations = profile["programs"]
    timed_steps = num_updates * pipeline.frames_per_update
    return {
        "library": "podrace",
        "algorithm": algorithm,
        "seed": seed,
        "sps": round(timed_steps / elapsed, 1),
        "timed_env_steps": timed_steps,
        "timed_seconds": round(elapsed, 3),
        "warmup_seconds_incl_compile": round(warmup, 3),
        "timed_call_compilations": timed_call_compilations,
    }


def podrace_time_to_level(algorithm: str, seed: int, steps: int) -> dict[str, Any]:
    """Seconds from before the pipeline is built to the first evaluation at `LEVELS`'s
    return or more: compiled chunks of `CHUNK_STEPS` env steps, each with an evaluation
    of `EVAL_EPISODES` episodes in the same program, within `steps`."""
    network_key, run_key = jax.random.split(jax.random.key(seed))
    result = time_to_solve(
        lambda: build_pipeline(algorithm, network_key, steps),
        EVALUATION_POLICIES[algorithm](),
        run_key,
        steps,
        threshold=LEVELS[algorithm],
        chunk_steps=CHUNK_STEPS[algorithm],
        eval_episodes=EVAL_EPISODES,
    )
    return {**result, "algorithm": algorithm, "seed": seed, "level": LEVELS[algorithm]}


def rejax_flags(settings: dict[str, Any]) -> list[str]:
    """`settings` as `rejax_baseline.py`'s command-line flags."""
    flags = []
    for name, value in settings.items():
        flag = name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(f"--{flag}" if value else f"--no-{flag}")
            continue
        values = value if isinstance(value, list) else [value]
        flags += [f"--{flag}", *map(str, values)]
    return flags


def commands(algorithm: str, seed: int, steps: int, rejax_python: str, *, time_to_level: bool) -> dict[str, list[str]]:
    """The command of each library's measuring process for `algorithm` and `seed`, `steps`
    env steps per call or, with `time_to_level`, at most (`startup.py` stops a run to the
    bar after the first chunk)."""
    podrace = [sys.executable, __file__, *(["--time-to-level"] if time_to_level else []), "--worker", algorithm]
    podrace += ["--seed", str(seed), f"--{algorithm}-steps", str(steps)]
    rejax_settings = rejax_flags({"seed": seed, "steps": steps, **SETTINGS[algorithm]})
    if time_to_level:
        rejax_settings += rejax_flags(
            {"time_to_level": LEVELS[algorithm], "chunk_steps": CHUNK_STEPS[algorithm], "eval_episodes": EVAL_EPISODES}
        )
    rejax = [rejax_python, str(HERE / "rejax_baseline.py"), f"{algorithm}-sps", *rejax_settings]
    return {"podrace": podrace, "rejax": rejax}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rejax-python", help="the python of the rejax benchmark environment")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    for algorithm in ALGORITHMS:
        parser.add_argument(
            f"--{algorithm}-steps",
            type=int,
            default=DEFAULT_STEPS[algorithm],
            help=f"env steps per call (default {DEFAULT_STEPS[algorithm]})",
        )
    parser.add_argument(
        "--time-to-level",
        action="store_true",
        help="measure each library's seconds to the learning tests' bars instead, within the steps above",
    )
    parser.add_argument("--worker", choices=ALGORITHMS, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    steps = {algorithm: getattr(args, f"{algorithm}_steps") for algorithm in ALGORITHMS}
    for algorithm, count in steps.items():
        if count <= 0 or count % steps_per_iteration(algorithm):
            parser.error(f"--{algorithm}-steps must be a positive multiple of {steps_per_iteration(algorithm)}")
    if args.worker:
        measure = podrace_time_to_level if args.time_to_level else podrace_sps
        print(json.dumps(measure(args.worker, args.seed, steps[args.worker])))
        return
    if not args.rejax_python:
        parser.error("--rejax-python is required")

    measured = "seconds" if args.time_to_level else "sps"
    results: dict[str, dict[str, list[float]]] = {algorithm: {"podrace": [], "rejax": []} for algorithm in ALGORITHMS}
    print(f"jax {jax.__version__} on {jax.default_backend()}; seeds {args.seeds}; env steps per call {steps}")
    for seed in args.seeds:
        for algorithm in ALGORITHMS:
            runs = commands(algorithm, seed, steps[algorithm], args.rejax_python, time_to_level=args.time_to_level)
            for library, command in runs.items():
                result = run_json(command)
                results[algorithm][library].append(result[measured])
                print(json.dumps(result))

    # podrace's speed over rejax's: steps per second, or the inverse of the seconds.
    medians = {
        algorithm: {library: statistics.median(values) for library, values in by_library.items()}
        for algorithm, by_library in results.items()
    }
    if args.time_to_level:
        ratios = {algorithm: median["rejax"] / median["podrace"] for algorithm, median in medians.items()}
        print(" ".join(f"ratio_{algorithm}_time_to_level={ratio:.2f}" for algorithm, ratio in ratios.items()))
    else:
        ratios = {algorithm: median["podrace"] / median["rejax"] for algorithm, median in medians.items()}
        print(" ".join(f"ratio_{algorithm}_sps={ratio:.2f}" for algorithm, ratio in ratios.items()))


if __name__ == "__main__":
    main()
