"""The same learner on a host environment: TD(lambda) Q-learning on Gymnasium's CartPole-v1.

A `GymnasiumCollector` steps 8 CartPole environments with the learner's epsilon-greedy
policy and returns the trajectories the on-device pipeline produces; `train_on_host`
collects the next rollout in a background thread while the learner updates on the last
one. The learning curve is saved, and at the end the greedy policy is evaluated on 20
episodes. Needs the gymnasium and plot extras: pip install 'podrace[gymnasium,plot]'.

    python examples/gymnasium_cartpole.py --num-updates 1500
"""

import argparse

import gymnasium
import jax
import matplotlib.pyplot as plt
import numpy as np
import optax

import podrace as pr
from podrace.executors.host import evaluate_on_host


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--num-updates", type=int, default=1500)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

envs = gymnasium.make_vec("CartPole-v1", num_envs=8)
torso_key, head_key, collect_key, learner_key, eval_key = jax.random.split(jax.random.key(args.seed), 5)
network = pr.networks.FeedForwardNetwork(
    torso=pr.networks.MLPTorso((4,), (64, 64), key=torso_key),
    head=pr.networks.QValueHead(64, 2, key=head_key),
)
learner = pr.Learner(
    network=network,
    policy=pr.policies.EpsilonGreedy(0.05),
    loss=pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9),
    optimizer=optax.adam(1e-3),
)

collector = pr.executors.host.GymnasiumCollector(envs, learner, rollout_length=32, key=collect_key, seed=args.seed)
result = pr.executors.host.train_on_host(learner, collector, num_updates=args.num_updates, key=learner_key)

# The learning curve: the mean return of the episodes that ended in each fifth of the run.
returns = np.asarray(result.metrics.episode_return_sum)
counts = np.asarray(result.metrics.episodes_completed)
window = max(args.num_updates // 5, 1)
starts = range(0, args.num_updates, window)
curve = [returns[start : start + window].sum() / max(counts[start : start + window].sum(), 1) for start in starts]
for start, mean_return in zip(starts, curve, strict=True):
    print(f"updates {start:5d}+: mean episode return {mean_return:.1f}")
figure, axes = plt.subplots(figsize=(6, 4))
axes.plot([min(start + window, args.num_updates) for start in starts], curve, marker="o")
axes.set(xlabel="updates", ylabel="mean episode return", title="TD(lambda) Q-learning on Gymnasium's CartPole-v1")
axes.grid(alpha=0.3)
figure.tight_layout()
figure.savefig("gymnasium_cartpole.png", dpi=120)
print("saved gymnasium_cartpole.png")

evaluation = evaluate_on_host(
    gymnasium.make_vec("CartPole-v1", num_envs=4),
    learner.network_with(result.state.params),
    pr.policies.Greedy(),
    num_episodes=20,
    key=eval_key,
    seed=args.seed + 1,
)
print(f"greedy evaluation over 20 episodes: mean return {float(evaluation.mean_return):.1f}")
collector.close()
