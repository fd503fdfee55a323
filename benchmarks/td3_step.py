"""Where TD3's time goes: podrace's learn step against a hand-written one, at `off_policy_sps.py`'s settings.

`off_policy_sps.py` puts podrace's TD3 at 1.69 times rejax's steps per second, below the
target of 2. As `sac_step.py` does for SAC, this script asks whether podrace's
composition costs anything: it times, on a replay buffer filled by 2,000 steps of
training,

- `podrace_iteration`: one whole training iteration of podrace's pipeline (act with
  exploration noise, step Pendulum, store, one learn step), from `Anakin.train`;
- `podrace_learn_step`: `TD3Learner.learn_step` alone (replay sample, twin critics with
  target policy smoothing, and every second step the actor and the Polyak step of both
  targets);
- `handwritten_learn_step`: the same step written directly in JAX (batch-first 64-64 swish
  MLPs, the twin critics as one `vmap` over stacked parameters, optax's element-wise
  clipping and Adam, a batch gathered from arrays by index, the delayed part in a
  `lax.cond`);

each as `--steps` steps inside one compiled `lax.scan`, in interleaved rounds, and reads
XLA's count of floating-point operations of the two parts of a hand-written step. Same
shapes as `off_policy_sps.py`'s TD3: batch 100, 64-64 swish networks, Adam at 1e-3.

Last line: `ratio_learn_step=X handwritten_learn_step_us=Y`: podrace's learn-step time over
the hand-written one, and the hand-written learn step's time per step in microseconds.

    python benchmarks/td3_step.py [--steps 2000] [--rounds 3]
"""

import argparse

import jax
import jax.numpy as jnp
import optax
from off_policy_sps import SETTINGS, rejax_optimizer, td3_pipeline
from sac_step import _critics, _flops, _mlp, _mlp_init, time_learn_steps

from podrace.learners import TD3Learner


TD3 = SETTINGS["td3"]
BATCH, OBSERVATION_SIZE, ACTION_SIZE, MAX_TORQUE = TD3["batch_size"], 3, 1, 2.0
HIDDEN = (64, 64)


def _act(actor, observation):
    return MAX_TORQUE * jnp.tanh(_mlp(actor, observation))


def _critic_step(carry, key):
    """The part of a step taken every time: twin critics towards the smoothed target's value."""
    actor, critics, target_actor, target_critics, actor_opt, critic_opt, step, replay = carry
    index_key, noise_key = jax.random.split(key)
    index = jax.random.randint(index_key, (BATCH,), 0, replay[0].shape[0])
    observation, action, reward, discount, next_observation = (x[index] for x in replay)
    noise = jnp.clip(TD3["target_noise"] * jax.random.normal(noise_key, action.shape), -0.5, 0.5)
    next_action = jnp.clip(_act(target_actor, next_observation) + noise, -MAX_TORQUE, MAX_TORQUE)
    next_value = jnp.min(_critics(target_critics, next_observation, next_action), axis=0)
    bootstrap = jax.lax.stop_gradient(reward + TD3["gamma"] * discount * next_value)

    def critic_loss(params):
        return jnp.mean(jnp.sum(jnp.square(_critics(params, observation, action) - bootstrap), axis=0))

    loss, grad = jax.value_and_grad(critic_loss)(critics)
    updates, critic_opt = rejax_optimizer(TD3).update(grad, critic_opt, critics)
    critics = optax.apply_updates(critics, updates)
    return (actor, critics, target_actor, target_critics, actor_opt, critic_opt, step, replay), (loss, observation)


def _actor_and_targets(actor, critics, target_actor, target_critics, actor_opt, observation):
    """The delayed part: the actor up the first critic, then the Polyak step of both targets."""

    def actor_loss(params):
        first_critic = jax.tree.map(lambda x: x[0], critics)
        return -jnp.mean(_mlp(first_critic, jnp.concatenate([observation, _act(params, observation)], axis=-1)))

    grad = jax.grad(actor_loss)(actor)
    updates, actor_opt = rejax_optimizer(TD3).update(grad, actor_opt, actor)
    actor = optax.apply_updates(actor, updates)
    tau = 1 - TD3["polyak"]
    target_actor = optax.incremental_update(actor, target_actor, tau)
    target_critics = optax.incremental_update(critics, target_critics, tau)
    return actor, target_actor, target_critics, actor_opt


def _handwritten_learn_step(carry, key):
    """One TD3 learn step: the critics every time, the actor and targets every second time."""
    carry, (loss, observation) = _critic_step(carry, key)
    actor, critics, target_actor, target_critics, actor_opt, critic_opt, step, replay = carry
    actor, target_actor, target_critics, actor_opt = jax.lax.cond(
        step % TD3["policy_delay"] == 0,
        lambda: _actor_and_targets(actor, critics, target_actor, target_critics, actor_opt, observation),
        lambda: (actor, target_actor, target_critics, actor_opt),
    )
    return (actor, critics, target_actor, target_critics, actor_opt, critic_opt, step + 1, replay), loss


def _handwritten_state(key: jax.Array):
    optimizer = rejax_optimizer(TD3)
    actor = _mlp_init(key, (OBSERVATION_SIZE, *HIDDEN, ACTION_SIZE))
    critics = jax.tree.map(
        lambda *leaves: jnp.stack(leaves),
        *(_mlp_init(k, (OBSERVATION_SIZE + ACTION_SIZE, *HIDDEN, 1)) for k in jax.random.split(key, 2)),
    )
    size = TD3["buffer_size"]
    replay = (
        jax.random.normal(key, (size, OBSERVATION_SIZE)),
        jax.random.uniform(key, (size, ACTION_SIZE), minval=-MAX_TORQUE, maxval=MAX_TORQUE),
        -jax.random.uniform(key, (size,)),
        jnp.ones(size),
        jax.random.normal(jax.random.fold_in(key, 1), (size, OBSERVATION_SIZE)),
    )
    step = jnp.asarray(0)
    return (actor, critics, actor, critics, optimizer.init(actor), optimizer.init(critics), step, replay)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2_000, help="steps per timed call")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    args = parser.parse_args()

    pipeline = td3_pipeline(jax.random.key(0), TD3)
    assert isinstance(pipeline.learner, TD3Learner)
    handwritten = _handwritten_state(jax.random.key(2))
    median, _, _ = time_learn_steps(pipeline, _handwritten_learn_step, handwritten, args.steps, args.rounds)
    critic_flops = _flops(lambda c, k: _critic_step(c, k)[1][0], handwritten, jax.random.key(5))
    actor_flops = _flops(
        lambda c, o: _actor_and_targets(c[0], c[1], c[2], c[3], c[4], o), handwritten, handwritten[-1][0][:BATCH]
    )
    print(
        f"XLA floating-point operations of a hand-written step: critics {critic_flops / 1e6:.1f}M every step, "
        f"actor and targets {actor_flops / 1e6:.1f}M every {TD3['policy_delay']} steps"
    )
    ratio = median["podrace_learn_step"] / median["handwritten_learn_step"]
    print(f"ratio_learn_step={ratio:.3f} handwritten_learn_step_us={1e6 * median['handwritten_learn_step']:.0f}")


if __name__ == "__main__":
    main()
