"""The same learner on a host environment: TD(lambda) Q-learning on Gymnasium's CartPole-v1.

A `GymnasiumCollector` steps 8 CartPole environments with the learner's epsilon-greedy
policy and returns the trajectories the on-device pipeline produces; `train_on_host`
collects the next rollout in a background thread while the learner updates on the last
one. At the end the greedy policy is evaluated on 20 episodes. Needs the gymnasium
extra: pip install 'podrace[gymnasium]'.

    python examples/gymnasium_cartpole.py --num-updates 1500
"""

import argparse

import gymnasium
import jax
import numpy as np
import optax

import podrace as pr


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

returns = np.asarray(result.metrics.episode_return_sum)
counts = np.asarray(result.metrics.episodes_completed)
for start in range(0, args.num_updates, max(args.num_updates // 5, 1)):
    window = slice(start, start + max(args.num_updates // 5, 1))
    print(f"updates {start:5d}+: mean episode return {returns[window].sum() / max(counts[window].sum(), 1):.1f}")

evaluation = pr.evaluate(
    gymnasium.make_vec("CartPole-v1", num_envs=4),
    learner.network_with(result.state.params),
    pr.policies.Greedy(),
    num_episodes=20,
    key=eval_key,
    seed=args.seed + 1,
)
print(f"greedy evaluation over 20 episodes: mean return {float(evaluation.mean_return):.1f}")
collector.close()
