"""PPO on Craftax-Classic with every reset computed against at most K resets per step.

Craftax generates a world at every reset. Under `vmap` each environment of the batch
computes its reset on every step, and a select keeps the step's result unless the
episode has just ended. `AutoReset(env, resets_per_step=K)` computes `K` resets per step
of the batch instead. This script trains the same PPO (`examples/craftax_classic.py`'s
settings: 32 environments, rollouts of 64 steps, a 256-256 tanh torso, 4 epochs of 4
minibatches) with each setting in one process, after a compiling call, and prints the
frames per second of each. Needs the `craftax` extra.

    python benchmarks/limited_resets.py --updates 5

The last line is `speedup_at_4=X`: frames per second with `resets_per_step=4` over
those with every reset.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import optax

import podrace as pr


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--updates", type=int, default=5, help="timed updates per setting (after one compiling call)")
parser.add_argument("--num-envs", type=int, default=32)
parser.add_argument("--rollout", type=int, default=64)
args = parser.parse_args()

env = pr.envs.CraftaxEnv("Craftax-Classic-Symbolic-v1")
observation_space, action_space = env.observation_space, env.action_space
assert isinstance(observation_space, pr.Box) and isinstance(action_space, pr.Discrete)
torso_key, head_key, run_key = jax.random.split(jax.random.key(0), 3)
learner = pr.Learner(
    network=pr.networks.FeedForwardNetwork(
        torso=pr.networks.MLPTorso(observation_space.shape, (256, 256), activation=jnp.tanh, key=torso_key),
        head=pr.networks.PolicyLogitHead(256, action_space.num_values, with_value=True, key=head_key),
    ),
    policy=pr.policies.Categorical(),
    loss=pr.losses.PPOLoss(discount=0.99, lambda_=0.8, value_coefficient=0.5, entropy_coefficient=0.01),
    optimizer=optax.chain(optax.clip_by_global_norm(1.0), optax.adam(3e-4)),
    num_epochs=4,
    num_minibatches=4,
)

frames_per_second = {}
for resets_per_step in (None, 4, 2, 1):
    pipeline = pr.Anakin(
        pr.envs.AutoReset(env, resets_per_step=resets_per_step),
        learner,
        num_envs=args.num_envs,
        rollout_length=args.rollout,
    )
    state = pipeline.train(pipeline.init(run_key), num_updates=args.updates).state  # compiles
    jax.block_until_ready(state)
    start = time.perf_counter()
    result = pipeline.train(state, num_updates=args.updates)
    jax.block_until_ready(result.state)
    seconds = time.perf_counter() - start
    frames_per_second[resets_per_step] = args.updates * pipeline.frames_per_update / seconds
    label = "every reset" if resets_per_step is None else f"resets_per_step={resets_per_step}"
    print(f"{label:>20}: {frames_per_second[resets_per_step]:8.0f} frames/s", flush=True)

print(f"speedup_at_4={frames_per_second[4] / frames_per_second[None]:.2f}")
