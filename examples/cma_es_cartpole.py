"""A CartPole policy trained by CMA-ES (evosax), with podrace's population evaluation as fitness.

Each generation, CMA-ES proposes a population of parameter vectors for a small MLP;
`evaluate_population` plays 16 CartPole-v1 episodes with each of them, side by side in
one compiled call, and the mean returns are the fitness. Training stops when the mean of
the search distribution reaches a mean return of 475 over 100 episodes; the returns of
each generation are saved as a figure. Needs the es and plot extras: pip install
'podrace[es,plot]'.

    python examples/cma_es_cartpole.py --num-updates 100
"""

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
from evosax.algorithms import CMA_ES

import podrace as pr


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--num-updates", type=int, default=100, help="generations of CMA-ES at most")
parser.add_argument("--population-size", type=int, default=32)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

env = pr.envs.cartpole_v1()
torso_key, head_key, key = jax.random.split(jax.random.key(args.seed), 3)
# A deterministic policy: the action of the highest output.
network = pr.networks.FeedForwardNetwork(
    torso=pr.networks.MLPTorso((4,), (16,), activation=jnp.tanh, key=torso_key),
    head=pr.networks.QValueHead(16, 2, key=head_key),
)
policy = pr.policies.Greedy()
params, structure = eqx.partition(network, eqx.is_inexact_array)

strategy = CMA_ES(population_size=args.population_size, solution=params)
strategy_params = strategy.default_params
key, init_key = jax.random.split(key)
strategy_state = strategy.init(init_key, params, strategy_params)


@eqx.filter_jit
def generation(strategy_state, key):
    """Asks for candidates, evaluates them in one call and tells CMA-ES their fitness."""
    ask_key, eval_key, tell_key = jax.random.split(key, 3)
    candidates, strategy_state = strategy.ask(ask_key, strategy_state, strategy_params)
    returns = pr.evaluate_population(
        env, eqx.combine(candidates, structure), policy, num_episodes=16, key=eval_key
    ).mean_return
    # evosax minimises its fitness.
    strategy_state, _ = strategy.tell(tell_key, candidates, -returns, strategy_state, strategy_params)
    return strategy_state, returns


best_returns, mean_returns = [], []
for number in range(1, args.num_updates + 1):
    key, generation_key, eval_key = jax.random.split(key, 3)
    strategy_state, returns = generation(strategy_state, generation_key)
    mean_network = eqx.combine(strategy.get_mean(strategy_state), structure)
    best_returns.append(float(returns.max()))
    mean_returns.append(float(pr.evaluate(env, mean_network, policy, num_episodes=100, key=eval_key).mean_return))
    print(f"generation {number:3d}: best candidate {best_returns[-1]:6.1f}, mean solution {mean_returns[-1]:6.1f}")
    if mean_returns[-1] >= 475:
        break
print(f"mean return of the final mean solution over 100 episodes: {mean_returns[-1]:.1f}")

generations = range(1, len(mean_returns) + 1)
figure, axes = plt.subplots(figsize=(6, 4))
axes.plot(generations, best_returns, marker="o", label="best candidate (16 episodes)")
axes.plot(generations, mean_returns, marker="o", label="mean solution (100 episodes)")
axes.axhline(475, color="grey", linestyle=":", label="solved")
axes.set(xlabel="generation", ylabel="mean return", title="CMA-ES on CartPole-v1")
axes.legend()
axes.grid(alpha=0.3)
figure.tight_layout()
figure.savefig("cma_es_cartpole.png", dpi=120)
print("saved cma_es_cartpole.png")
if mean_returns[-1] < 475:
    raise SystemExit(f"CMA-ES did not reach a mean return of 475 in {args.num_updates} generations.")
