"""PPO on Brax's inverted pendulum, with observations and rewards normalised.

Brax's `inverted_pendulum` (a cart on a rail, a pole hinged on it; 1 a step while the
pole stays up, up to 1000 steps) through `podrace.envs.brax_env`. The pipeline keeps
running statistics of the observations and of the discounted returns in its state
(`podrace.RunningNormalization`), as Brax's and CleanRL's continuous PPO normalise them;
the evaluation plays with the statistics reached. Brax draws its scenes with MuJoCo's
OpenGL renderer on the host, so the video is drawn here in JAX from the cart's position
and the pole's angle. Needs the `brax` extra.

    python examples/brax_inverted_pendulum.py --num-updates 100
"""

import argparse

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, UInt8

import podrace as pr
from podrace.progress import plot_learning_curve, train_with_progress
from podrace.video import record_episode, write_video


parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
parser.add_argument("--num-updates", type=int, default=100)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()


class DrawnPendulum(pr.envs.AbstractWrapper, pr.envs.AbstractRenderableEnv):
    """Draws the cart (its position on the rail) and the pole (its angle) of the wrapped
    inverted pendulum, whose observation starts with both."""

    env: pr.envs.AbstractEnv

    def reset(self, key):
        return self.env.reset(key)

    def step(self, state, action, key):
        return self.env.step(state, action, key)

    def render(self, state) -> UInt8[Array, "96 192 3"]:
        position, angle = state.env_state.obs[0], state.env_state.obs[1]  # inside brax_env's TimeLimit
        rows, columns = jnp.mgrid[0:96, 0:192]
        scale, ground = 60.0, 80.0  # pixels per metre; the rail's row
        cart_column = 96.0 + scale * position
        cart = (jnp.abs(columns - cart_column) < 12) & (jnp.abs(rows - ground) < 5)
        # The pole: 0.6 m from the cart's centre, pixels within 2 of the segment.
        tip = jnp.stack([ground - 0.6 * scale * jnp.cos(angle), cart_column + 0.6 * scale * jnp.sin(angle)])
        base = jnp.stack([ground, cart_column])
        pixels = jnp.stack([rows, columns], axis=-1).astype(jnp.float32)
        along = jnp.clip(jnp.sum((pixels - base) * (tip - base), axis=-1) / jnp.sum(jnp.square(tip - base)), 0, 1)
        nearest = base + along[..., None] * (tip - base)
        pole = jnp.sum(jnp.square(pixels - nearest), axis=-1) < 4.0
        rail = jnp.abs(rows - ground) < 1
        picture = jnp.full((96, 192, 3), 255, jnp.uint8)
        for mask, colour in ((rail, (150, 150, 150)), (cart, (40, 90, 200)), (pole, (230, 120, 30))):
            picture = jnp.where(mask[..., None], jnp.asarray(colour, jnp.uint8), picture)
        return picture


env = DrawnPendulum(pr.envs.brax_env("inverted_pendulum"))
torso_key, head_key, run_key, video_key = jax.random.split(jax.random.key(args.seed), 4)
observation_space, action_space = env.observation_space, env.action_space
assert isinstance(observation_space, pr.Box) and isinstance(action_space, pr.Box)
(observation_size,), (action_size,) = observation_space.shape, action_space.shape

# A shared 64-64 tanh torso, a Gaussian policy and a value; PPO with 4 epochs of 4 minibatches.
network = pr.networks.FeedForwardNetwork(
    torso=pr.networks.MLPTorso((observation_size,), (64, 64), activation=jnp.tanh, key=torso_key),
    head=pr.networks.GaussianHead(64, action_size, with_value=True, key=head_key),
)
learner = pr.Learner(
    network=network,
    policy=pr.policies.Gaussian(),
    loss=pr.losses.PPOLoss(discount=0.99, lambda_=0.95, value_coefficient=0.5, entropy_coefficient=0.01),
    optimizer=optax.chain(optax.clip_by_global_norm(0.5), optax.adam(1e-3)),
    num_epochs=4,
    num_minibatches=4,
)
normalization = pr.RunningNormalization(observations=True, rewards=True, discount=0.99)
pipeline = pr.Anakin(env, learner, num_envs=16, rollout_length=128, normalization=normalization)
state, log = train_with_progress(pipeline, pipeline.init(run_key), num_updates=args.num_updates, updates_per_call=25)

print(f"compile {log.compile_seconds:.2f} s, {log.frames_per_second:.3g} frames/s")
print(f"mean episode return of the last updates: {log.mean_episode_return[-1]:.1f} (at most 1000)")
print("saved", plot_learning_curve(log, "brax_inverted_pendulum.png", title="PPO on Brax's inverted pendulum"))

evaluation_env = pipeline.evaluation_env(state)  # observations normalised with the statistics reached
network = learner.network_at(state.learner)
frames = record_episode(evaluation_env, network, pr.policies.Mode(), key=video_key, max_steps=200)
write_video(frames, "brax_inverted_pendulum.gif", fps=30)
print(f"saved brax_inverted_pendulum.gif ({len(frames)} steps of the policy's mean action)")
