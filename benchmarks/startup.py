"""Where the time to a first result goes: PPO on CartPole-v1, from a fresh process.

The setting of `ppo_cartpole.py` (rejax's CartPole hyperparameters: a 64-64 tanh actor
and critic, 5 envs x 100 steps, 5 epochs of 5 minibatches): build the network, `init`,
then one training call of 10 updates followed by an evaluation of 64 episodes. Two
variants, each run in fresh processes, alternating round by round:

- `eager`: the network built eagerly, the evaluation a program of its own (`pr.evaluate`).
- `one program`: the network built in one compiled program (`eqx.filter_jit`), the
  evaluation inside the training call (`pr.Evaluation`).

With `--against PATH`, a third variant, `against`, runs `one program` with podrace imported
from another checkout (e.g. `git worktree add /tmp/before <commit>`), to compare two
versions side by side.

Each process reports the seconds of each phase and, from JAX's monitoring events, how
many programs it compiled and the seconds spent tracing, lowering and compiling them
(XLA). The last line is `first_result_eager=X first_result_one_program=Y`: the median
seconds from the process's start to the evaluation's result.

Usage:

    python benchmarks/startup.py [--rounds 5] [--against /tmp/before]
"""

import time


START = time.perf_counter()

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pathlib  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import optax  # noqa: E402
from ppo_cartpole import actor_critic  # noqa: E402

import podrace as pr  # noqa: E402


VARIANTS = ("eager", "one program")
PHASES = ("import", "build network", "init", "train + evaluate")
EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower s",
    "/jax/core/compile/backend_compile_duration": "XLA compile s",
}


def first_result(variant: str) -> dict[str, float]:
    """One process's phases; `variant` is one of `VARIANTS`."""
    seconds: dict[str, float] = collections.defaultdict(float)
    seconds["import"] = time.perf_counter() - START

    def listen(event: str, duration_secs: float, **_: str | int) -> None:
        if event in EVENTS:
            seconds[EVENTS[event]] += duration_secs
        if event == "/jax/core/compile/backend_compile_duration":
            seconds["programs"] += 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    mark = time.perf_counter()
    build = actor_critic if variant == "eager" else eqx.filter_jit(actor_critic)
    network = jax.block_until_ready(build(jax.random.key(0)))
    seconds["build network"] = time.perf_counter() - mark

    loss = pr.losses.PPOLoss(
        discount=0.99, lambda_=0.95, clip_epsilon=0.2, value_coefficient=0.5, entropy_coefficient=0.01
    )
    optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(7.5e-4))
    learner = pr.Learner(network, pr.policies.Categorical(), loss, optimizer, num_epochs=5, num_minibatches=5)
    env = pr.envs.cartpole_v1()
    pipeline = pr.Anakin(env, learner, num_envs=5, rollout_length=100)
    mark = time.perf_counter()
    state = jax.block_until_ready(pipeline.init(jax.random.key(0)))
    seconds["init"] = time.perf_counter() - mark

    mark = time.perf_counter()
    policy, key = pr.policies.Categorical(), jax.random.key(1)
    if variant == "eager":
        state = pipeline.train(state, num_updates=10).state
        network = learner.network_at(state.learner)
        evaluation = pr.evaluate(env, network, policy, num_episodes=64, key=key)
    else:
        evaluation = pr.Evaluation(policy, num_episodes=64, key=key)
        evaluation = pipeline.train(state, num_updates=10, evaluation=evaluation).evaluation
        assert evaluation is not None
    seconds["mean return"] = float(evaluation.mean_return)
    seconds["train + evaluate"] = time.perf_counter() - mark
    seconds["first result"] = time.perf_counter() - START
    return dict(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", help="another podrace checkout to time beside this one")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # one measuring process
    args = parser.parse_args()
    if args.variant is not None:
        print(json.dumps(first_result(args.variant)))
        return

    print(f"jax {jax.__version__}, equinox {eqx.__version__} on {jax.default_backend()}; {args.rounds} rounds")
    here = str(pathlib.Path(__file__).resolve().parent.parent)
    # name: (the checkout podrace is imported from, the variant that process runs)
    variants = {variant: (here, variant) for variant in VARIANTS}
    if args.against:
        variants["against"] = (args.against, "one program")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, (checkout, variant) in variants.items():
            command = [sys.executable, __file__, "--variant", variant]
            environment = {**os.environ, "PYTHONPATH": checkout}
            output = subprocess.run(command, check=True, capture_output=True, text=True, env=environment).stdout
            runs[name].append(json.loads(output.strip().splitlines()[-1]))
    columns = [*PHASES, "first result", "programs", *EVENTS.values()]
    print(f"{'median':<12}" + "".join(f"{column:>18}" for column in columns))
    medians = {}
    for variant, results in runs.items():
        medians[variant] = {
            column: statistics.median(result.get(column, 0.0) for result in results) for column in columns
        }
        print(f"{variant:<12}" + "".join(f"{medians[variant][column]:>18.3g}" for column in columns))
    returns = {variant: [result["mean return"] for result in results] for variant, results in runs.items()}
    print(f"mean returns (eager and one program must agree): {returns}")
    print(
        f"first_result_eager={medians['eager']['first result']:.2f} "
        f"first_result_one_program={medians['one program']['first result']:.2f}"
    )


if __name__ == "__main__":
    main()
