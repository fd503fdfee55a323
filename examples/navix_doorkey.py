"""PPO on Navix's DoorKey-5x5: pick up the key, open the door, reach the goal.

A grid world of Navix (MiniGrid in JAX) through `podrace.envs.NavixEnv`: symbolic
observations (object, colour and state of each cell), seven discrete actions, a return
of 1 on reaching the goal within 100 steps and 0 otherwise. Navix draws its grid in
JAX, so the video of the trained policy is recorded in the same kind of compiled loop
as training. Needs the `navix` extra.

    python examples/navix_doorkey.py --num-updates 500
"""

import argparse

import jax
import jax.numpy as jnp
import optax

import podrace as pr
from podrace.progress import plot_learning_curve, train_with_progress
from podrace.video import record_episode, write_video


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--num-updates", type=int, default=500)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

env = pr.envs.NavixEnv.make("Navix-DoorKey-5x5-v0")
torso_key, head_key, run_key, video_key = jax.random.split(jax.random.key(args.seed), 4)
observation_space, action_space = env.observation_space, env.action_space
assert isinstance(observation_space, pr.Box) and isinstance(action_space, pr.Discrete)

# A shared 64-64 tanh torso over the flattened grid, logits and a value; PPO with 4
# epochs of 4 minibatches and a learning rate decayed linearly to 0.
network = pr.networks.FeedForwardNetwork(
    torso=pr.networks.MLPTorso(observation_space.shape, (64, 64), activation=jnp.tanh, key=torso_key),
    head=pr.networks.PolicyLogitHead(64, action_space.num_values, with_value=True, key=head_key),
)
num_epochs, num_minibatches = 4, 4
learning_rate = optax.linear_schedule(3e-4, 0.0, args.num_updates * num_epochs * num_minibatches)
learner = pr.Learner(
    network=network,
    policy=pr.policies.Categorical(),
    loss=pr.losses.PPOLoss(discount=0.99, lambda_=0.95, value_coefficient=0.5, entropy_coefficient=0.01),
    optimizer=optax.chain(optax.clip_by_global_norm(0.5), optax.adam(learning_rate)),
    num_epochs=num_epochs,
    num_minibatches=num_minibatches,
)
pipeline = pr.Anakin(env, learner, num_envs=16, rollout_length=128)
state, log = train_with_progress(pipeline, pipeline.init(run_key), num_updates=args.num_updates, updates_per_call=50)

print(f"compile {log.compile_seconds:.2f} s, {log.frames_per_second:.3g} frames/s")
print(f"mean episode return of the last updates: {log.mean_episode_return[-1]:.3f} (a random policy: about 0.03)")
print("saved", plot_learning_curve(log, "navix_doorkey.png", title="PPO on Navix DoorKey-5x5"))

# PPO's own sampling policy: a greedy one can walk into a wall for ever.
frames = record_episode(env, learner.network_at(state.learner), pr.policies.Categorical(), key=video_key, max_steps=100)
write_video(frames, "navix_doorkey.gif", fps=4)
print(f"saved navix_doorkey.gif ({len(frames) - 1} steps)")
