"""Environment steps per second with EnvPool's environments: EnvPool's own rate with
random actions, the limit of a run bound by its environment, against podrace stepping
the same kind of pool inside its compiled programs, side by side in one process.

The programs, each over a pool of `--num-envs` environments on `--num-threads` threads:

- `envpool`: EnvPool's Gymnasium pool (`envpool.make(..., env_type="gymnasium")`)
  stepped from Python with uniformly random actions drawn by NumPy, each call stepping
  the whole batch: the pool with no agent.
- `adapter`: [`podrace.envs.EnvPoolEnv`][] with automatic resets, stepped by a compiled
  `lax.scan` with uniformly random actions drawn inside it: what stepping the pool
  through EnvPool's XLA interface costs.
- `anakin-ppo`: [`podrace.Anakin`][] training PPO (`OnPolicyConfig`'s defaults, an MLP
  torso of `--hidden`) on the pool: acting, the rollout and the updates in one
  compiled call of `--updates` updates.
- `sebulba-ppo`: [`podrace.Sebulba`][] training the same PPO: two actor threads, each
  stepping half of the environments in an EnvPool pool of its own (through
  `envpool.make_gymnasium`, half of `--num-threads` threads each) and acting on the one device,
  the learner updating on it (at most one update behind the actors).
- `anakin-cleanrl` (Atari only): the same with the recipe `cleanrl-ppo-atari-pong-v5`'s
  PPO and network (CleanRL's `ppo_atari_envpool_xla_jax_scan.py`: the Nature DQN
  convolutions, 4 epochs of 4 minibatches) at the same batch.

The programs run in interleaved rounds after a first, untimed call each (the compiling
one), and each keeps its best round. The last line gives each program's steps per
second over `envpool`'s (`ratio_adapter=X ratio_anakin_ppo=Y ...`). An Atari step is
`frame_skip` (4) emulator frames.
"""

import argparse
import dataclasses
import os
import time
from collections.abc import Callable

import jax
import numpy as np
from env_throughput import podrace_program

import podrace as pr
from podrace.envs.gymnasium import space_from_gymnasium
from podrace.executors.host import GymnasiumCollector


def envpool_program(task_id: str, num_envs: int, num_threads: int, num_steps: int) -> Callable[[], int]:
    """EnvPool's own pool, stepped from Python with random actions; returns the steps taken."""
    import envpool

    pool = envpool.make(task_id, env_type="gymnasium", num_envs=num_envs, num_threads=num_threads, seed=0)
    num_actions = pool.action_space.n
    generator = np.random.default_rng(0)
    pool.reset()

    def run() -> int:
        for _ in range(num_steps):
            pool.step(generator.integers(num_actions, size=num_envs, dtype=np.int32))
        return num_steps * num_envs

    return run


def adapter_program(task_id: str, num_envs: int, num_threads: int, num_steps: int) -> Callable[[], int]:
    """podrace's adapter of the same pool, stepped by a compiled scan with random actions
    (`env_throughput.py`'s program)."""
    steps, start = podrace_program(pr.envs.EnvPoolEnv(task_id, seed=0, num_threads=num_threads), num_envs, num_steps)
    carry = [start]

    def run() -> int:
        carry[0], total = steps(carry[0])
        jax.block_until_ready(total)
        return num_steps * num_envs

    return run


def training_program(pipeline: pr.executors.pipeline.AbstractPipeline, num_updates: int) -> Callable[[], int]:
    """A call of `num_updates` updates of `pipeline` (the loss alone computed), going on from the last call's state."""
    state = [pipeline.init(jax.random.key(1))]

    def run() -> int:
        result = pipeline.train(state[0], num_updates=num_updates, metrics=())
        jax.block_until_ready(result.state)
        state[0] = result.state
        return num_updates * pipeline.frames_per_update

    return run


def anakin_program(
    task_id: str, num_envs: int, num_threads: int, rollout_length: int, num_updates: int, hidden: tuple[int, ...]
) -> Callable[[], int]:
    """podrace's Anakin PPO on the same pool: `num_updates` updates a call."""
    config = pr.configs.OnPolicyConfig(algorithm="ppo", num_envs=num_envs, rollout_length=rollout_length, hidden=hidden)
    pipeline = config.pipeline(pr.envs.EnvPoolEnv(task_id, seed=0, num_threads=num_threads), jax.random.key(0))
    return training_program(pipeline, num_updates)


def sebulba_program(
    task_id: str, num_envs: int, num_threads: int, rollout_length: int, num_updates: int, hidden: tuple[int, ...]
) -> Callable[[], int]:
    """podrace's Sebulba PPO: two actor threads of half the environments each."""
    import envpool

    config = pr.configs.OnPolicyConfig(
        algorithm="ppo", num_envs=num_envs // 2, rollout_length=rollout_length, hidden=hidden
    )
    pools = [
        envpool.make_gymnasium(
            task_id, num_envs=num_envs // 2, num_threads=max(num_threads // 2, 1), seed=slot * num_envs
        )
        for slot in range(2)
    ]
    action_space = space_from_gymnasium(pools[0].single_action_space)
    learner = config.learner(action_space, tuple(pools[0].single_observation_space.shape or ()), jax.random.key(0))
    collectors = [
        GymnasiumCollector(pool, learner, rollout_length=rollout_length, key=jax.random.key(slot))
        for slot, pool in enumerate(pools)
    ]
    pipeline = pr.Sebulba(learner, collectors)
    return training_program(pipeline, num_updates)


def cleanrl_program(task_id: str, num_envs: int, num_threads: int, rollout_length: int, num_updates: int):
    """The recipe's CleanRL Atari PPO on the same pool: `num_updates` updates a call."""
    settings = dataclasses.replace(pr.recipes.CLEANRL_ATARI_PPO, num_envs=num_envs, num_steps=rollout_length)
    env = pr.envs.EnvPoolEnv(task_id, seed=0, num_threads=num_threads, episodic_life=True, reward_clip=True)
    pipeline = settings.pipeline(env, jax.random.key(0))
    return training_program(pipeline, num_updates)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="EnvPool steps per second: its own, and through podrace.")
    parser.add_argument("--env", default="Pong-v5", help="an EnvPool id (CartPole-v1, Pong-v5, ...)")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-threads", type=int, default=os.cpu_count() or 1, help="the pool's threads")
    parser.add_argument("--rollout", type=int, default=32, help="PPO's environment steps per update")
    parser.add_argument("--updates", type=int, default=4, help="PPO's updates per compiled call")
    parser.add_argument("--hidden", default="64,64", help="PPO's MLP torso")
    parser.add_argument("--rounds", type=int, default=5, help="timed calls per program, interleaved")
    parser.add_argument("--no-cleanrl", action="store_true", help="leave out anakin-cleanrl (minutes to compile)")
    args = parser.parse_args(argv)
    hidden = tuple(int(size) for size in args.hidden.split(","))
    num_steps = args.rollout * args.updates  # the same steps a call for every program
    programs = {
        "envpool": envpool_program(args.env, args.num_envs, args.num_threads, num_steps),
        "adapter": adapter_program(args.env, args.num_envs, args.num_threads, num_steps),
        "anakin-ppo": anakin_program(args.env, args.num_envs, args.num_threads, args.rollout, args.updates, hidden),
        "sebulba-ppo": sebulba_program(args.env, args.num_envs, args.num_threads, args.rollout, args.updates, hidden),
    }
    if not args.no_cleanrl and len(pr.envs.EnvPoolEnv(args.env).observation_shape.shape) == 3:  # Atari
        programs["anakin-cleanrl"] = cleanrl_program(
            args.env, args.num_envs, args.num_threads, args.rollout, args.updates
        )
    print(f"{args.env}: {args.num_envs} environments, {args.num_threads} threads, {num_steps} steps a call")
    for name, run in programs.items():
        start = time.perf_counter()
        run()
        print(f"{name}: first call {time.perf_counter() - start:.2f} s")
    best = dict.fromkeys(programs, 0.0)
    for _ in range(args.rounds):
        for name, run in programs.items():
            start = time.perf_counter()
            steps = run()
            best[name] = max(best[name], steps / (time.perf_counter() - start))
    for name, rate in best.items():
        print(f"{name}: {rate:,.0f} steps/s")
    print(
        " ".join(
            f"ratio_{name.replace('-', '_')}={best[name] / best['envpool']:.3f}" for name in best if name != "envpool"
        )
    )


if __name__ == "__main__":
    main()
