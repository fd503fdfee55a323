"""The Podracer paper's Anakin experiment: TD(lambda) Q-learning on Catch.

Builds every part from podrace's public components, trains in one compiled program
per 100 updates, saves the learning curve and a GIF of one episode played by the
greedy agent (the plot and video extras). Swap the loss, the policy or the optimiser by
changing one argument below.

    python examples/anakin_catch.py --num-updates 3000
"""

import argparse

import jax
import optax

import podrace as pr
from podrace.progress import plot_learning_curve, train_with_progress
from podrace.video import record_episode, write_video


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--num-updates", type=int, default=3000)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

env = pr.envs.Catch()
torso_key, head_key, run_key, video_key = jax.random.split(jax.random.key(args.seed), 4)

# A 256-unit MLP with one Q-value per action, acting greedily (as in the paper's demo).
network = pr.networks.FeedForwardNetwork(
    torso=pr.networks.MLPTorso(env.observation_space.shape, (256,), key=torso_key),
    head=pr.networks.QValueHead(256, env.action_space.num_values, key=head_key),
)
learner = pr.Learner(
    network=network,
    policy=pr.policies.Greedy(),
    loss=pr.losses.TDLambdaQLoss(discount=1.0, lambda_=0.99),
    optimizer=optax.adam(1e-4),
)

# 128 environments per device, rollouts of 16 steps, the batch split over all devices.
pipeline = pr.Anakin(env, learner, num_envs=128, rollout_length=16)
state, log = train_with_progress(pipeline, pipeline.init(run_key), num_updates=args.num_updates, updates_per_call=100)

print(f"compile {log.compile_seconds:.2f} s, {log.frames_per_second:.3g} frames/s")
print(f"mean episode return at the end: {log.mean_episode_return[-1]:.3f}")
print("saved", plot_learning_curve(log, "anakin_catch.png", title="TD(lambda) Q-learning on Catch"))

frames = record_episode(env, learner.network_at(state.learner), pr.policies.Greedy(), key=video_key)
write_video(frames, "anakin_catch.gif", fps=4)
print("saved anakin_catch.gif")
