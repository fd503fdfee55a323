"""PPO on Craftax-Classic, symbolic: a first look at an open-ended world.

Craftax-Classic (Crafter in JAX) through `podrace.envs.CraftaxEnv`: a 64x64 world
generated at every reset, 17 actions, a reward of 1 for each of 22 achievements
unlocked (collecting wood, placing a table, making a pickaxe, ...) and 0.1 per unit of
health gained or lost. Its symbolic observation is a vector of 1,345 values in [0, 1].
Published agents train for 1 billion steps; this example trains for a few hundred
thousand and compares the return with a random policy's. Craftax draws the agent's view
in JAX, so the video is recorded in a compiled loop. Needs the `craftax` extra.

    python examples/craftax_classic.py --num-updates 200
"""

import argparse

import jax
import jax.numpy as jnp
import optax

import podrace as pr
from podrace.progress import plot_learning_curve, train_with_progress
from podrace.video import record_episode, write_video


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--num-updates", type=int, default=200)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

env = pr.envs.CraftaxEnv("Craftax-Classic-Symbolic-v1")
torso_key, head_key, run_key, random_key, video_key = jax.random.split(jax.random.key(args.seed), 5)
observation_space, action_space = env.observation_space, env.action_space
assert isinstance(observation_space, pr.Box) and isinstance(action_space, pr.Discrete)

# A shared 256-256 tanh torso, logits and a value; PPO with 4 epochs of 4 minibatches.
network = pr.networks.FeedForwardNetwork(
    torso=pr.networks.MLPTorso(observation_space.shape, (256, 256), activation=jnp.tanh, key=torso_key),
    head=pr.networks.PolicyLogitHead(256, action_space.num_values, with_value=True, key=head_key),
)
learner = pr.Learner(
    network=network,
    policy=pr.policies.Categorical(),
    loss=pr.losses.PPOLoss(discount=0.99, lambda_=0.8, value_coefficient=0.5, entropy_coefficient=0.01),
    optimizer=optax.chain(optax.clip_by_global_norm(1.0), optax.adam(3e-4)),
    num_epochs=4,
    num_minibatches=4,
)
# A world generation costs 13 steps: at most 4 a step, copied if more episodes end at once.
pipeline = pr.Anakin(pr.envs.AutoReset(env, resets_per_step=4), learner, num_envs=32, rollout_length=64)
state, log = train_with_progress(pipeline, pipeline.init(run_key), num_updates=args.num_updates, updates_per_call=10)

random = pr.random_policy_episodes(env, num_episodes=16, key=random_key)
print(f"compile {log.compile_seconds:.2f} s, {log.frames_per_second:.3g} frames/s")
print(f"mean episode return of the last updates: {log.mean_episode_return[-1]:.2f}")
print(f"a random policy's mean return: {float(random.returns.mean()):.2f} over 16 episodes")
print("saved", plot_learning_curve(log, "craftax_classic.png", title="PPO on Craftax-Classic (symbolic)"))

frames = record_episode(env, learner.network_at(state.learner), pr.policies.Categorical(), key=video_key, max_steps=150)
write_video(frames[::2], "craftax_classic.gif", fps=8)
print(f"saved craftax_classic.gif (every other frame of {len(frames) - 1} steps)")
