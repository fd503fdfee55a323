"""Wall time to the same return: podrace's PPO against Brax's own PPO trainer, on Brax's
inverted pendulum, side by side in one process.

Each trains with its own settings until a stochastic evaluation (the policy as it acts
in training) reaches `--threshold`, timed from the start of training, compilation and
evaluations included:

- **Brax**: `brax.training.agents.ppo.train` with the settings that Brax's training
  notebook gives for `inverted_pendulum` (2048 environments, unrolls of 5 steps, 32
  minibatches of 1024, 4 passes, discount 0.97, reward scaling 10, observations
  normalised; `num_evals=20` evaluations of 128 episodes over 2M steps);
- **podrace**: the command line's PPO for `brax:inverted_pendulum` with
  `--normalize-observations --normalize-rewards` (16 environments, rollouts of 128
  steps, 4 epochs of 4 minibatches), evaluated on 32 episodes after every call of
  `--updates-per-call` updates.

Each run prints its evaluations; the last line is `podrace_seconds=X brax_seconds=Y
ratio=Y/X` (above 1: podrace reached the threshold sooner), `inf` for a run that did not
reach it within its budget. Needs the `brax` extra.

    python benchmarks/brax_ppo.py --threshold 900
"""

import argparse
import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import podrace as pr
from podrace import configs


class _Reached(Exception):
    """Stops Brax's trainer at the evaluation that reached the threshold."""

    def __init__(self, seconds: float):
        super().__init__(seconds)
        self.seconds = seconds


def _device_put_replicated(tree: Any, devices: Sequence[Any]) -> Any:
    """`jax.device_put_replicated`, which Brax 0.14's trainer calls and JAX 0.10 removed,
    as JAX's pmap migration guide replaces it: a leading axis over `devices`, split over them."""
    sharding = NamedSharding(Mesh(np.asarray(devices), ("devices",)), PartitionSpec("devices"))
    return jax.tree.map(lambda x: jax.device_put(jnp.broadcast_to(x, (len(devices), *jnp.shape(x))), sharding), tree)


def brax_seconds(threshold: float, seed: int) -> float:
    """Seconds until Brax's PPO first evaluates at `threshold` or more."""
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    if not hasattr(jax, "device_put_replicated"):
        jax.device_put_replicated = _device_put_replicated  # pyright: ignore[reportAttributeAccessIssue]

    start = time.perf_counter()

    def progress(num_steps: int, metrics: Mapping[str, Any]) -> None:
        seconds, value = time.perf_counter() - start, float(metrics["eval/episode_reward"])
        print(f"brax: {num_steps} steps, return {value:.1f} at {seconds:.1f} s", flush=True)
        if value >= threshold:
            raise _Reached(seconds)  # the trainer has no other way to stop early

    try:
        ppo.train(
            environment=envs.get_environment("inverted_pendulum"),
            num_timesteps=2_000_000,
            num_evals=20,
            reward_scaling=10,
            episode_length=1000,
            normalize_observations=True,
            action_repeat=1,
            unroll_length=5,
            num_minibatches=32,
            num_updates_per_batch=4,
            discounting=0.97,
            learning_rate=3e-4,
            entropy_cost=1e-2,
            num_envs=2048,
            batch_size=1024,
            seed=seed,
            progress_fn=progress,
        )
    except _Reached as reached:
        return reached.seconds
    return float("inf")


def podrace_seconds(threshold: float, seed: int, num_updates: int, updates_per_call: int) -> float:
    """Seconds until podrace's PPO first evaluates at `threshold` or more."""
    config = dataclasses.replace(
        configs.default_config("brax:inverted_pendulum", "ppo"), normalize_observations=True, normalize_rewards=True
    )
    start = time.perf_counter()
    pipeline, key = configs.Run("brax:inverted_pendulum", config, seed=seed).make()
    assert isinstance(pipeline, pr.Anakin)
    assert isinstance(config, configs.OnPolicyConfig)
    policy = config.training_policy(pipeline.env.action_space)
    state = pipeline.init(key)
    for call in range(num_updates // updates_per_call):
        state = pipeline.train(state, num_updates=updates_per_call).state
        network = pipeline.learner.network_at(state.learner)
        episodes = pr.evaluate(
            pipeline.evaluation_env(state), network, policy, num_episodes=32, key=jax.random.key(call)
        )
        seconds, value = time.perf_counter() - start, float(np.asarray(episodes.returns).mean())
        steps = (call + 1) * updates_per_call * pipeline.frames_per_update
        print(f"podrace: {steps} steps, return {value:.1f} at {seconds:.1f} s", flush=True)
        if value >= threshold:
            return seconds
    return float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--threshold", type=float, default=900.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-updates", type=int, default=400, help="podrace's budget of updates")
    parser.add_argument("--updates-per-call", type=int, default=10)
    args = parser.parse_args()
    print(f"{jax.device_count()} x {jax.devices()[0].device_kind}, jax {jax.__version__}")
    ours = podrace_seconds(args.threshold, args.seed, args.num_updates, args.updates_per_call)
    theirs = brax_seconds(args.threshold, args.seed)
    print(f"podrace_seconds={ours:.1f} brax_seconds={theirs:.1f} ratio={theirs / ours:.2f}")


if __name__ == "__main__":
    main()
