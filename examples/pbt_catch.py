"""Population-based training of the Catch agent's learning rate, in one compiled program.

Eight members of the Podracer paper's Catch agent start at learning rates drawn
log-uniformly between 1e-5 and 1e-3; the lower ones barely learn. Every 10 updates the
two members with the lowest return copy the network, optimiser state and environments
of the two with the highest, and multiply their learning rate by 0.8 or 1.2 (Jaderberg
et al., 2017). The picture shows the learning
rate each member used and its return; the lineage printed at the end lists the copies.

    python examples/pbt_catch.py --num-updates 500
"""

import argparse

import jax
import matplotlib.pyplot as plt
import numpy as np
import optax

import podrace as pr
from podrace.executors.pbt import Perturb, Resample


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--num-updates", type=int, default=500)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

MEMBERS = 8


def make_pipeline(hyperparameters) -> pr.Anakin:
    """The Podracer paper's Catch agent with one member's learning rate and seed."""
    env = pr.envs.Catch()
    torso_key, head_key = jax.random.split(hyperparameters["key"])
    network = pr.networks.FeedForwardNetwork(
        torso=pr.networks.MLPTorso(env.observation_space.shape, (256,), key=torso_key),
        head=pr.networks.QValueHead(256, env.action_space.num_values, key=head_key),
    )
    learner = pr.Learner(
        network=network,
        policy=pr.policies.EpsilonGreedy(0.05),
        loss=pr.losses.TDLambdaQLoss(discount=1.0, lambda_=0.9),
        optimizer=optax.adam(hyperparameters["learning_rate"]),
    )
    return pr.Anakin(env, learner, num_envs=32, rollout_length=16)


seeds_key, rates_key, run_key = jax.random.split(jax.random.key(args.seed), 3)
hyperparameters = {
    "key": jax.random.split(seeds_key, MEMBERS),
    "learning_rate": Resample(1e-5, 1e-3, log=True).sample(rates_key, (MEMBERS,)),
}
population = pr.Population(make_pipeline, hyperparameters)
# The seeds are copied with the state; the learning rates are explored.
pbt = pr.PBT(population, {"key": None, "learning_rate": Perturb((0.8, 1.2))}, interval=10)
result = pbt.train(pbt.init(run_key), num_updates=args.num_updates)

rates = np.asarray(result.lineage.hyperparameters["learning_rate"])  # [members, updates]
window = 10
usable = args.num_updates // window * window
sums = np.asarray(result.metrics.episode_return_sum)[:, :usable].reshape(MEMBERS, -1, window).sum(-1)
counts = np.asarray(result.metrics.episodes_completed)[:, :usable].reshape(MEMBERS, -1, window).sum(-1)
returns = sums / np.maximum(counts, 1)
figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
for member in range(MEMBERS):
    top.plot(np.arange(1, args.num_updates + 1), rates[member], lw=1)
    bottom.plot(window * np.arange(1, returns.shape[1] + 1), returns[member], lw=1)
top.set(yscale="log", ylabel="learning rate", title=f"PBT of {MEMBERS} Catch agents: each member's schedule")
bottom.set(xlabel="update", ylabel=f"mean return (windows of {window} updates)")
for axes in (top, bottom):
    axes.grid(alpha=0.3)
figure.tight_layout()
figure.savefig("pbt_learning_rates.png", dpi=120)

events = result.lineage.events()
print(f"{len(events)} copies; the last ones:")
for event in events[-4:]:
    rate = event["hyperparameters"]["learning_rate"]
    copy = f"member {event['member']} copied member {event['parent']}"
    print(f"  update {event['update']}: {copy}, learning rate {rate:.2e}")
print("final learning rates:", ", ".join(f"{rate:.2e}" for rate in rates[:, -1]))
print("final returns:", ", ".join(f"{value:.2f}" for value in returns[:, -1]))
