"""Pong from pixels with Ray gradient workers: REINFORCE on frame differences, RMSProp on the driver.

The setup of Ray's Pong example, built from podrace parts.
`podrace.envs.atari.make_pong` turns each 210 x 160 RGB frame into 6400 inputs (crop to
the court, keep every second row and column of one colour channel, erase the two
background colours, set what is left to 1) and gives the difference from the previous
frame, with two actions, up and down. The network is one hidden layer of 200 ReLU units
and a logit per action. Each Ray actor plays its environments for `--rollout-length` steps
with the current parameters and returns the gradient of a REINFORCE loss on them:
returns discounted by 0.99 that restart at every point scored (Pong's rallies are
independent), normalised to zero mean and unit deviation over the rollout. The driver
sums the actors' gradients and applies RMSProp (decay 0.99), as the example does.

Unlike the original, rollouts have a fixed length rather than being whole games, so that
an update costs the same from the first to the last; a transition counts once its point
is decided inside the rollout. Pong takes thousands of games before the returns climb
from -21: the gallery's 50 updates show the pipeline running, not learning. Needs the
ray and atari extras: pip install 'podrace[ray,atari,plot]'.

    python examples/ray_pong.py --num-updates 3000 --num-actors 8
    python examples/ray_pong.py --address auto ...   # on a running Ray cluster
"""

import argparse
import logging

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import ray
from jaxtyping import Array, Float

import podrace as pr
from podrace.envs.atari import PONG_INPUTS, make_pong
from podrace.executors.ray_actors import RayGradientPool, train_with_ray_gradients
from podrace.progress import TrainingLog, plot_learning_curve


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--num-updates", type=int, default=3000)
parser.add_argument("--num-actors", type=int, default=2, help="Ray actors (gradient workers)")
parser.add_argument("--envs-per-actor", type=int, default=1)
parser.add_argument("--rollout-length", type=int, default=200, help="steps per actor and update")
parser.add_argument("--learning-rate", type=float, default=1e-3)
parser.add_argument("--address", default=None, help="a Ray cluster's address; a local one by default")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

# Before JAX starts its threads: a local cluster starts Ray's processes by fork and exec.
if args.address is None:
    ray.init(num_cpus=args.num_actors, include_dashboard=False, logging_level=logging.ERROR)
else:
    ray.init(address=args.address, logging_level=logging.ERROR)

DISCOUNT = 0.99


class PointReinforceLoss(pr.losses.AbstractTrajectoryLoss):
    """REINFORCE with discounted returns that restart at every point, normalised per rollout.

    It has no fields: a class defined in the script being run reaches the Ray actors by
    value, and an Equinox module's fields do not survive that trip (a loss meant for reuse
    belongs in an importable module, where it could hold its discount as a field).
    """

    input_type = pr.AbstractPolicyOutput

    def check_output(self, output: pr.AbstractNetworkOutput) -> None:
        del output  # any policy head: the loss reads its distribution alone

    def trajectory_loss(
        self, agent: pr.Agent, trajectory: pr.Trajectory, target_network: pr.networks.AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], pr.LossTerms]:
        pr.losses.refuse_target_network(self, target_network)
        timestep = trajectory.timestep
        # Each point is an episode of its own: it ends at a non-zero reward (or the game's end).
        point_ends = timestep.terminated | (timestep.reward != 0)
        points = eqx.tree_at(lambda t: t.timestep.terminated, trajectory, point_ends)
        rewards = timestep.reward[1:]
        returns = pr.losses.lambda_returns(
            r_t=rewards,
            discount_t=DISCOUNT * (1.0 - points.timestep.is_last[1:]),
            v_t=jnp.zeros_like(rewards),
        )
        decided = pr.losses.completed_episode_mask(points)  # the point ends inside the rollout
        count = jnp.maximum(jnp.sum(decided), 1.0)
        mean = jnp.sum(decided * returns) / count
        deviation = jnp.sqrt(jnp.sum(decided * jnp.square(returns - mean)) / count)
        advantages = (returns - mean) / (deviation + 1e-8)
        log_pi, entropy = agent.log_prob_and_entropy(agent.outputs(trajectory), trajectory.policy_step.action)
        policy_loss = pr.losses.policy_gradient_loss(log_pi, advantages, decided)
        return policy_loss, {"policy_loss": policy_loss, "entropy": jnp.mean(entropy)}


torso_key, head_key, pool_key, learner_key = jax.random.split(jax.random.key(args.seed), 4)
network = pr.networks.FeedForwardNetwork(
    torso=pr.networks.MLPTorso((PONG_INPUTS,), (200,), key=torso_key),
    head=pr.networks.PolicyLogitHead(200, 2, key=head_key),
)
learner = pr.Learner(
    network=network,
    policy=pr.policies.Categorical(),
    loss=PointReinforceLoss(),
    optimizer=optax.rmsprop(args.learning_rate, decay=0.99),
)

report_every = max(args.num_updates // 10, 1)


def report(k: int, gradients: list) -> None:
    if k % report_every == 0:
        games = [float(r) for g in gradients for r in g.episodes.returns]
        print(f"update {k:5d}: loss {np.mean([g.loss for g in gradients]):+.4f}, games ended {games}", flush=True)


with RayGradientPool(
    make_pong,
    learner,
    num_actors=args.num_actors,
    num_envs=args.envs_per_actor,
    rollout_length=args.rollout_length,
    key=pool_key,
    seed=args.seed,
) as pool:
    result = train_with_ray_gradients(
        learner, pool, num_updates=args.num_updates, key=learner_key, reduce="sum", on_gradients=report
    )
ray.shutdown()

# The learning curve: the mean return of the games that ended in each tenth of the run.
returns = np.asarray(result.metrics.episode_return_sum)
counts = np.asarray(result.metrics.episodes_completed)
steps_per_update = args.num_actors * args.envs_per_actor * args.rollout_length
windows = [slice(start, start + report_every) for start in range(0, args.num_updates, report_every)]
curve = [returns[w].sum() / counts[w].sum() if counts[w].sum() else np.nan for w in windows]
log = TrainingLog(
    frames=steps_per_update * np.asarray([min(w.stop, args.num_updates) for w in windows]),
    mean_episode_return=np.asarray(curve),
    compile_seconds=0.0,
    frames_per_second=0.0,
)
print(f"{int(counts.sum())} games, mean return of the last window: {curve[-1]:.2f}")
print("saved", plot_learning_curve(log, "ray_pong.png", title="REINFORCE on Pong, Ray gradient workers"))
