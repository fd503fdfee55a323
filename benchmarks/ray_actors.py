"""Ray actors against the in-process host collector: environment steps per second on a cheap
env and a costly one, and the learner's updates per second while actors collect.

Part 1 times collection alone, at the same total number of environments `N`:

- `in-process`: one `GymnasiumCollector` over `SyncVectorEnv` of `N` environments in the
  driver, acting with JAX there;
- `ray x1`: a `RayRolloutPool` of one actor with `N` environments (the same work, moved
  into another process);
- `ray x2`: two actors with `N / 2` environments each;
- `async vec`: the in-process collector over Gymnasium's `AsyncVectorEnv` (one
  subprocess per environment, stepped in lockstep; the policy acts in the driver);
- `2 processes`: two spawned processes without Ray, each a `GymnasiumCollector` of
  `N / 2` environments, started together and waited for: what two processes gain on
  this machine at all, the ceiling of `ray x2`.

Each Ray block keeps one round queued ahead, as `train_with_ray` does, and includes the
parameters' trip through the object store every round. The envs are Gymnasium's
`CartPole-v1` (cheap: microseconds a step) and ALE's `Pong-v5` through ale-py with Ray's
Pong example's preprocessing (crop, downsample, binarise, frame difference; 6400 inputs)
and its policy (one hidden layer of 200), so a step costs the emulator's four frames and a
6400 x 200 matrix product. Blocks of the methods are interleaved, rotating their order, and
the median block is reported. The pools live side by side (Ray is started with enough
logical CPUs for all of them); only the one timed is busy.

Part 2 times the learner (A2C on a CartPole batch of `N` x 64 steps, on the driver's
default device): updates per second alone, and while the two Pong actors collect
without pause; then the end-to-end updates per second of `train_with_ray` (2 actors)
and of `train_on_host` (overlapped) on CartPole.

The last line is `ray_speedup_costly_env=X ray_overhead_cartpole=Y`: X is `ray x2` steps
per second over `in-process` on Pong, Y the same ratio on CartPole (below 1: Ray costs
more than it gains on a cheap env).

    pip install -e ".[bench]"
    python benchmarks/ray_actors.py
"""

import argparse
import importlib.metadata
import logging
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import gymnasium
import jax
import optax
import ray

import podrace as pr
from podrace.envs.atari import PONG_INPUTS, make_pong
from podrace.executors.host import GymnasiumCollector, jitted_update, train_on_host
from podrace.executors.ray_actors import RayRolloutPool, train_with_ray


NICENESS = "RAY_worker_niceness"  # Ray's own spelling


def make_cartpole() -> gymnasium.Env:
    return gymnasium.make("CartPole-v1")


def learner_for(inputs: int, hidden: int) -> pr.Learner:
    torso_key, head_key = jax.random.split(jax.random.key(0))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((inputs,), (hidden,), key=torso_key),
        pr.networks.PolicyLogitHead(hidden, 2, with_value=True, key=head_key),
    )
    return pr.Learner(network, pr.policies.Categorical(), pr.losses.A2CLoss(discount=0.99), optax.rmsprop(1e-3))


def in_process_block(collector: GymnasiumCollector, agent: pr.Agent, rounds: int) -> Callable[[], None]:
    def block():
        for _ in range(rounds):
            jax.block_until_ready(collector.collect(agent)[0])

    return block


def ray_block(pool: RayRolloutPool, agent: pr.Agent, rounds: int) -> Callable[[], None]:
    def block():
        pool.submit(agent, 0)
        for k in range(rounds):
            if k + 1 < rounds:
                pool.submit(agent, 0)  # one round queued ahead
            pool.gather()

    return block


def plain_worker(connection, make_env: Callable[[], Any], num_envs: int, rollout: int, inputs: int, hidden: int):
    """A process without Ray: a `GymnasiumCollector` that collects the rounds it is sent."""
    learner = learner_for(inputs, hidden)
    agent = learner.agent(learner.init(jax.random.key(0)))
    envs = gymnasium.vector.SyncVectorEnv([make_env] * num_envs)
    collector = GymnasiumCollector(envs, learner, rollout_length=rollout, key=jax.random.key(1), seed=0)
    while (rounds := connection.recv()) is not None:
        for _ in range(rounds):
            jax.block_until_ready(collector.collect(agent)[0])
        connection.send(rounds)
    collector.close()


class PlainProcesses:
    """Two spawned processes, each with half the environments and no Ray: what two
    processes gain on this machine, the ceiling of `ray x2`."""

    def __init__(self, make_env: Callable[[], Any], num_envs: int, rollout: int, inputs: int, hidden: int):
        context = multiprocessing.get_context("spawn")  # JAX's threads forbid fork
        self.connections, self.processes = [], []
        for _ in range(2):
            here, there = context.Pipe()
            process = context.Process(
                target=plain_worker, args=(there, make_env, num_envs // 2, rollout, inputs, hidden), daemon=True
            )
            process.start()
            self.connections.append(here)
            self.processes.append(process)

    def block(self, rounds: int) -> Callable[[], None]:
        def block():
            for connection in self.connections:
                connection.send(rounds)
            for connection in self.connections:
                connection.recv()

        return block

    def close(self) -> None:
        for connection in self.connections:
            connection.send(None)
        for process in self.processes:
            process.join()


def time_blocks(blocks: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median seconds per block, after one warm-up block each, in a rotating order."""
    for block in blocks.values():
        block()
    seconds: dict[str, list[float]] = {name: [] for name in blocks}
    names = list(blocks)
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            blocks[name]()
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}


def collection(
    label: str, make_env: Callable[[], Any], inputs: int, hidden: int, num_envs: int, rollout: int, args
) -> dict[str, float]:
    """Steps per second of each method on one env, the policy an MLP of `hidden` units."""
    learner = learner_for(inputs, hidden)
    agent = learner.agent(learner.init(jax.random.key(0)))
    collector = GymnasiumCollector(
        gymnasium.vector.SyncVectorEnv([make_env] * num_envs),
        learner,
        rollout_length=rollout,
        key=jax.random.key(1),
        seed=0,
    )
    pools = {
        f"ray x{num_actors}": RayRolloutPool(
            make_env,
            learner,
            num_actors=num_actors,
            num_envs=num_envs // num_actors,
            rollout_length=rollout,
            key=jax.random.key(1),
            actor_options=actor_options(args),
        )
        for num_actors in (1, 2)
    }
    async_collector = GymnasiumCollector(
        gymnasium.vector.AsyncVectorEnv([make_env] * num_envs, context="spawn"),  # JAX's threads forbid fork
        learner,
        rollout_length=rollout,
        key=jax.random.key(1),
        seed=0,
    )
    blocks = {"in-process": in_process_block(collector, agent, args.rounds)}
    blocks.update({name: ray_block(pool, agent, args.rounds) for name, pool in pools.items()})
    blocks["async vec"] = in_process_block(async_collector, agent, args.rounds)
    plain = PlainProcesses(make_env, num_envs, rollout, inputs, hidden)
    blocks["2 processes"] = plain.block(args.rounds)
    seconds = time_blocks(blocks, args.repeats)
    plain.close()
    for pool in pools.values():
        pool.close()
    collector.close()
    async_collector.close()
    sps = {name: num_envs * rollout * args.rounds / s for name, s in seconds.items()}
    for name, value in sps.items():
        print(f"{label:<10} {name:<11} {num_envs:>5} {value:>12.4g} {value / sps['in-process']:>8.3f}")
    return sps


def actor_options(args) -> dict[str, Any]:
    if not args.actor_xla_flags:
        return {}
    return {"runtime_env": {"env_vars": {"XLA_FLAGS": args.actor_xla_flags}}}


def updates_per_second(update: Callable[[], Any], seconds: float) -> float:
    update()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        jax.block_until_ready(update())
        count += 1
    return count / (time.perf_counter() - start)


def learner_throughput(num_envs: int, args) -> None:
    learner = learner_for(4, 64)
    state = learner.init(jax.random.key(0))
    collector = GymnasiumCollector(
        gymnasium.vector.SyncVectorEnv([make_cartpole] * num_envs),
        learner,
        rollout_length=64,
        key=jax.random.key(1),
        seed=0,
    )
    trajectory, _ = collector.collect(learner.agent(state))

    def update():
        return jitted_update(learner, state, trajectory)

    alone = updates_per_second(update, args.seconds)
    pong_learner = learner_for(PONG_INPUTS, 200)
    pong_agent = pong_learner.agent(pong_learner.init(jax.random.key(0)))
    with RayRolloutPool(
        make_pong,
        pong_learner,
        num_actors=2,
        num_envs=args.pong_envs[0] // 2,
        rollout_length=32,
        key=jax.random.key(1),
        actor_options=actor_options(args),
    ) as pool:
        pool.submit(pong_agent, 0)
        pool.gather()  # started and compiled
        for _ in range(2 + int(args.seconds * 4)):  # more rounds than the timing lasts
            pool.submit(pong_agent, 0)
        busy = updates_per_second(update, args.seconds)
        pool.discard_pending()
    print(f"A2C updates/s on the driver ({jax.devices()[0]}), batch {num_envs} x 64 CartPole steps:")
    print(f"  alone {alone:.4g}, while 2 Ray actors collect Pong {busy:.4g} (ratio {busy / alone:.3f})")

    num_updates = args.train_updates
    with RayRolloutPool(
        make_cartpole,
        learner,
        num_actors=2,
        num_envs=num_envs // 2,
        rollout_length=64,
        key=jax.random.key(1),
        actor_options=actor_options(args),
    ) as pool:
        train_with_ray(learner, pool, num_updates=2, key=jax.random.key(0))  # start and compile
        start = time.perf_counter()
        jax.block_until_ready(train_with_ray(learner, pool, num_updates=num_updates, key=jax.random.key(0)))
        ray_ups = num_updates / (time.perf_counter() - start)
    train_on_host(learner, collector, num_updates=2, key=jax.random.key(0))
    start = time.perf_counter()
    jax.block_until_ready(train_on_host(learner, collector, num_updates=num_updates, key=jax.random.key(0)))
    host_ups = num_updates / (time.perf_counter() - start)
    collector.close()
    print(f"end to end on CartPole ({num_envs} envs x 64 steps, {num_updates} updates):")
    print(f"  train_with_ray (2 actors) {ray_ups:.4g} updates/s, train_on_host (overlap) {host_ups:.4g} updates/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Ray actors vs the in-process host collector.")
    parser.add_argument("--cartpole-envs", type=int, default=8, help="total CartPole envs (even)")
    parser.add_argument(
        "--pong-envs", type=int, nargs="+", default=[8, 32], help="total Pong envs (even); the headline takes the last"
    )
    parser.add_argument("--rollout", type=int, default=64, help="steps per rollout")
    parser.add_argument("--rounds", type=int, default=4, help="rollouts per timed block")
    parser.add_argument("--repeats", type=int, default=5, help="timed blocks per method")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of each learner timing")
    parser.add_argument("--train-updates", type=int, default=100, help="updates of the end-to-end runs")
    parser.add_argument("--actor-xla-flags", default="", help="XLA_FLAGS of the actors' processes")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    # Ray runs its workers at niceness 15 unless told otherwise; the in-process collector
    # runs at 0, and on a shared machine niced actors would measure the other load.
    niceness = os.environ.setdefault(NICENESS, "0")
    # Before JAX starts its threads: Ray forks its processes.
    ray.init(num_cpus=max(cores, 3), include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    versions = {name: importlib.metadata.version(name) for name in ("jax", "ray", "gymnasium", "ale-py")}
    print(", ".join(f"{name} {version}" for name, version in versions.items()), f"on {jax.devices()[0]}, {cores} cores")
    print(f"Ray workers at niceness {niceness}")

    print("\n# Collection: env steps per second at the same total number of envs")
    print(f"{'env':<10} {'method':<11} {'envs':>5} {'steps/s':>12} {'ratio':>8}")
    cartpole = collection("CartPole", make_cartpole, 4, 64, args.cartpole_envs, args.rollout, args)
    pong = {
        num_envs: collection("Pong", make_pong, PONG_INPUTS, 200, num_envs, args.rollout, args)
        for num_envs in args.pong_envs
    }

    print("\n# The learner while actors run")
    learner_throughput(args.cartpole_envs, args)
    ray.shutdown()
    speedup = pong[args.pong_envs[-1]]["ray x2"] / pong[args.pong_envs[-1]]["in-process"]
    overhead = cartpole["ray x2"] / cartpole["in-process"]
    print(f"ray_speedup_costly_env={speedup:.3f} ray_overhead_cartpole={overhead:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
