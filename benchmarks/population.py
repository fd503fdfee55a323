"""A sweep of the Catch agent: one podrace population program against one run per member.

The population is an 8 x 8 grid of learning rates and lambdas of the Podracer paper's
Catch agent (an MLP of 256 units, TD(lambda) Q-learning, greedy acting, Adam), each
member with a seed of its own, 16 environments and rollouts of 16 steps, and every
member trains for the same number of updates in every method.

- `sweep_speedup`: the way a script-per-run sweep works, 64 separate processes (as
  many at a time as the machine has cores), each importing podrace, building its
  member's pipeline, compiling and training it; against one fresh process that
  imports podrace, builds a `Population` of all 64 and trains it in one program.
  Both are wall-clock times of whole processes, imports and compilation included.
- `population_speedup`: in one process, one compiled single-member program (taking
  the member's hyperparameters as arguments) called for each of the 64 members in
  turn, against one call of the compiled population program (compilation excluded
  for both: each is called once before timing; the median of `--repeats` rounds,
  alternating).
- frames per second per member of the population program at sizes 1, 8 and 64.

Last line: `sweep_speedup=X population_speedup=Y`.

    python benchmarks/population.py [--num-updates 200] [--repeats 5] [--no-sweep]
"""

import argparse
import concurrent.futures
import os
import statistics
import subprocess
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import podrace as pr


GRID = 8
NUM_ENVS = 16
ROLLOUT_LENGTH = 16


def make_pipeline(hyperparameters) -> pr.Anakin:
    """One member: the Catch agent with its learning rate, lambda and seed."""
    learning_rate, lambda_, key = hyperparameters
    env = pr.envs.Catch()
    torso_key, head_key = jax.random.split(key)
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(env.observation_space.shape, (256,), key=torso_key),
        pr.networks.QValueHead(256, env.action_space.num_values, key=head_key),
    )
    learner = pr.Learner(
        network, pr.policies.Greedy(), pr.losses.TDLambdaQLoss(discount=1.0, lambda_=lambda_), optax.adam(learning_rate)
    )
    return pr.Anakin(env, learner, num_envs=NUM_ENVS, rollout_length=ROLLOUT_LENGTH)


def hyperparameters(size: int):
    """The first `size` members of the learning-rate x lambda grid, with their seeds."""
    grid = np.meshgrid(np.geomspace(1e-5, 1e-2, GRID), np.linspace(0.0, 1.0, GRID), indexing="ij")
    learning_rates, lambdas = (jnp.asarray(a.ravel()[:size], jnp.float32) for a in grid)
    return learning_rates, lambdas, jax.random.split(jax.random.key(0), GRID * GRID)[:size]


def member_keys(size: int) -> jax.Array:
    return jax.random.split(jax.random.key(1), size)


def train_one_member(index: int, num_updates: int) -> None:
    """What one process of a script-per-run sweep does."""
    member = jax.tree.map(lambda x: x[index], hyperparameters(GRID * GRID))
    pipeline = make_pipeline(member)
    result = pipeline.train(pipeline.init(member_keys(GRID * GRID)[index]), num_updates=num_updates)
    print(float(result.metrics.mean_episode_return))


def train_population(size: int, num_updates: int) -> None:
    """The whole sweep as one population program."""
    population = pr.Population(make_pipeline, hyperparameters(size))
    result = population.train(population.init(jax.random.key(1)), num_updates=num_updates)
    print(np.asarray(result.metrics.mean_episode_return).mean())


def timed_process(*arguments: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, __file__, *arguments], check=True, capture_output=True)
    return time.perf_counter() - start


def sweep_speedup(num_updates: int) -> float:
    size = GRID * GRID
    workers = os.cpu_count() or 1
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda i: timed_process("--member", str(i), "--num-updates", str(num_updates)), range(size)))
    separate = time.perf_counter() - start
    together = timed_process("--population", str(size), "--num-updates", str(num_updates))
    print(f"sweep: {size} processes, {workers} at a time: {separate:7.1f} s; one population process: {together:6.1f} s")
    return separate / together


def block(tree):
    return jax.block_until_ready(tree)


def population_speedup(num_updates: int, repeats: int) -> float:
    size = GRID * GRID
    population = pr.Population(make_pipeline, hyperparameters(size))
    population_state = population.init(jax.random.key(1))

    # One program for any member: its hyperparameters are arguments, not constants.
    @eqx.filter_jit
    def train_member(member_hyperparameters, state):
        return make_pipeline(member_hyperparameters).train(state, num_updates=num_updates)

    members = [jax.tree.map(lambda x, i=i: x[i], population.hyperparameters) for i in range(size)]
    states = [jax.tree.map(lambda x, i=i: x[i], population_state) for i in range(size)]

    def run_population():
        block(population.train(population_state, num_updates=num_updates))

    def run_members():
        for member, state in zip(members, states, strict=True):
            block(train_member(member, state))

    start = time.perf_counter()
    run_population()
    population_compile = time.perf_counter() - start
    start = time.perf_counter()
    run_members()
    members_first = time.perf_counter() - start
    timings: dict[str, list[float]] = {"population": [], "members": []}
    for round_ in range(repeats):
        order = [("population", run_population), ("members", run_members)]
        for name, run in order if round_ % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            run()
            timings[name].append(time.perf_counter() - start)
    population_seconds, members_seconds = (statistics.median(timings[name]) for name in ("population", "members"))
    print(
        f"population program: {population_seconds:6.2f} s per call (first call {population_compile:.1f} s); "
        f"{size} calls of one member's program: {members_seconds:6.2f} s (first round {members_first:.1f} s)"
    )
    return members_seconds / population_seconds


def frames_per_second_per_member(num_updates: int, repeats: int) -> None:
    for size in (1, 8, 64):
        population = pr.Population(make_pipeline, hyperparameters(size))
        state = population.init(jax.random.key(1))
        block(population.train(state, num_updates=num_updates))
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            block(population.train(state, num_updates=num_updates))
            seconds.append(time.perf_counter() - start)
        frames = num_updates * NUM_ENVS * ROLLOUT_LENGTH
        print(f"population of {size:2d}: {frames / statistics.median(seconds):10.4g} frames/s per member")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--num-updates", type=int, default=200, help="updates per member")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-sweep", action="store_true", help="skip the 64 separate processes")
    parser.add_argument("--member", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--population", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.member is not None:
        train_one_member(args.member, args.num_updates)
        return
    if args.population is not None:
        train_population(args.population, args.num_updates)
        return

    print(
        f"jax {jax.__version__} on {jax.default_backend()} ({jax.device_count()} device(s), {os.cpu_count()} cores); "
        f"{GRID * GRID} members, {args.num_updates} updates each of {NUM_ENVS} envs x {ROLLOUT_LENGTH} steps"
    )
    population_ratio = population_speedup(args.num_updates, args.repeats)
    frames_per_second_per_member(args.num_updates, args.repeats)
    sweep_ratio = sweep_speedup(args.num_updates) if not args.no_sweep else float("nan")
    print(f"sweep_speedup={sweep_ratio:.2f} population_speedup={population_ratio:.2f}")


if __name__ == "__main__":
    main()
