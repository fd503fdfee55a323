"""A learning-rate x lambda sweep of the Catch agent, every setting trained in one program.

Each of the 4 x 4 settings is a member of a `Population`: the pipeline of one member is
built from its learning rate, lambda and seed, and all 16 train side by side, vectorised
with `vmap` (and split over the devices when there are several). The greedy policy of
each member is then evaluated on 100 episodes, and the final rewards are saved as a
heat map.

    python examples/population_sweep.py --num-updates 500
"""

import argparse

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax

import podrace as pr


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--num-updates", type=int, default=500)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

LEARNING_RATES = np.asarray([3e-5, 1e-4, 3e-4, 1e-3], np.float32)
LAMBDAS = np.asarray([0.0, 0.5, 0.9, 0.99], np.float32)


def make_pipeline(hyperparameters) -> pr.Anakin:
    """The Podracer paper's Catch agent with one member's learning rate, lambda and seed."""
    learning_rate, lambda_, key = hyperparameters
    env = pr.envs.Catch()
    torso_key, head_key = jax.random.split(key)
    network = pr.networks.FeedForwardNetwork(
        torso=pr.networks.MLPTorso(env.observation_space.shape, (256,), key=torso_key),
        head=pr.networks.QValueHead(256, env.action_space.num_values, key=head_key),
    )
    learner = pr.Learner(
        network=network,
        policy=pr.policies.Greedy(),
        loss=pr.losses.TDLambdaQLoss(discount=1.0, lambda_=lambda_),
        optimizer=optax.adam(learning_rate),
    )
    return pr.Anakin(env, learner, num_envs=32, rollout_length=16)


# One member per grid point: axis 0 of every hyperparameter array.
learning_rates, lambdas = (jnp.asarray(a.ravel()) for a in np.meshgrid(LEARNING_RATES, LAMBDAS, indexing="ij"))
init_key, run_key, eval_key = jax.random.split(jax.random.key(args.seed), 3)
seeds = jax.random.split(init_key, learning_rates.size)
population = pr.Population(make_pipeline, (learning_rates, lambdas, seeds))

result = population.train(population.init(run_key), num_updates=args.num_updates)
evaluation = pr.evaluate_population(
    pr.envs.Catch(), population.networks(result.state), pr.policies.Greedy(), num_episodes=100, key=eval_key
)
final_reward = np.asarray(evaluation.mean_return).reshape(LEARNING_RATES.size, LAMBDAS.size)

for i, learning_rate in enumerate(LEARNING_RATES):
    print(f"learning rate {learning_rate:.0e}: " + "  ".join(f"{r:+.2f}" for r in final_reward[i]))
figure, axes = plt.subplots(figsize=(5, 4))
image = axes.imshow(final_reward, vmin=-1, vmax=1, cmap="RdYlGn")
axes.set(
    xticks=range(LAMBDAS.size),
    xticklabels=[f"{x:g}" for x in LAMBDAS],
    yticks=range(LEARNING_RATES.size),
    yticklabels=[f"{x:.0e}" for x in LEARNING_RATES],
    xlabel="lambda",
    ylabel="learning rate",
    title=f"Catch: mean reward after {args.num_updates} updates",
)
for (i, j), reward in np.ndenumerate(final_reward):
    axes.text(j, i, f"{reward:.2f}", ha="center", va="center")
figure.colorbar(image)
figure.tight_layout()
figure.savefig("population_sweep.png")
print("saved population_sweep.png")
