"""Where SAC's time goes: podrace's learn step against a hand-written one, at `off_policy_sps.py`'s settings.

`off_policy_sps.py` puts podrace's SAC at 1.16 times rejax's steps per second, below the
target of 2. This script asks whether podrace's composition costs anything: it times,
on a replay buffer filled by 2,000 steps of training,

- `podrace_iteration`: one whole training iteration of podrace's pipeline (act, step
  Pendulum, store, one gradient step), from `Anakin.train`;
- `podrace_learn_step`: `SACLearner.learn_step` alone (replay sample, critics, actor,
  temperature, Polyak step);
- `handwritten_learn_step`: the same gradient step written directly in JAX (batch-first
  64-64 swish MLPs, twin critics as one `vmap` over stacked parameters, optax's Adam,
  a batch gathered from arrays by index);

each as `--steps` steps inside one compiled `lax.scan`, in interleaved rounds, and reads
XLA's count of floating-point operations for one learn step of each. Same shapes as
`off_policy_sps.py`'s SAC: batch 256, 64-64 swish networks, Adam at 0.01.

Last line: `ratio_learn_step=X achieved_gflops=Y`: podrace's learn-step time over the
hand-written one, and podrace's learn step's operations per second.

    python benchmarks/sac_step.py [--steps 2000] [--rounds 3]
"""

import argparse
import math
import statistics
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from off_policy_sps import SETTINGS, sac_pipeline

from podrace.learners import SACLearner


SAC = SETTINGS["sac"]
BATCH, OBSERVATION_SIZE, ACTION_SIZE = SAC["batch_size"], 3, 1
HIDDEN = tuple(SAC["hidden_layer_sizes"])


def _mlp_init(key: jax.Array, sizes: tuple[int, ...]) -> list[tuple[jax.Array, jax.Array]]:
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        (jax.random.uniform(k, (i, o), minval=-1.0, maxval=1.0) / math.sqrt(i), jnp.zeros(o))
        for k, i, o in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def _mlp(params: list[tuple[jax.Array, jax.Array]], x: jax.Array) -> jax.Array:
    for weight, bias in params[:-1]:
        x = jax.nn.swish(x @ weight + bias)
    weight, bias = params[-1]
    return x @ weight + bias


def _sample(actor, observation, key):
    """A tanh-squashed Gaussian action in [-2, 2] and its log-probability (log std in [-10, 2])."""
    out = _mlp(actor, observation)
    mean, log_std = out[:, :ACTION_SIZE], -10.0 + 6.0 * (jnp.tanh(out[:, ACTION_SIZE:]) + 1.0)
    noise = jax.random.normal(key, mean.shape)
    pre_tanh = mean + jnp.exp(log_std) * noise
    log_prob = jnp.sum(-0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi), axis=-1)
    log_prob -= jnp.sum(2.0 * (math.log(2.0) - pre_tanh - jax.nn.softplus(-2.0 * pre_tanh)) + math.log(2.0), axis=-1)
    return 2.0 * jnp.tanh(pre_tanh), log_prob


def _critics(critics, observation, action):
    """Both critics' values, `[2, batch]`, one `vmap` over their stacked parameters."""
    features = jnp.concatenate([observation, action], axis=-1)
    return jax.vmap(lambda params: _mlp(params, features)[:, 0])(critics)


def _handwritten_learn_step(carry, key):
    """One SAC gradient step: critics, then actor on the new critics, temperature, Polyak step."""
    actor, critics, target, log_alpha, actor_opt, critic_opt, alpha_opt, replay = carry
    optimizer = optax.adam(SAC["learning_rate"])
    index_key, next_key, actor_key = jax.random.split(key, 3)
    index = jax.random.randint(index_key, (BATCH,), 0, replay[0].shape[0])
    observation, action, reward, discount, next_observation = (x[index] for x in replay)
    alpha = jnp.exp(log_alpha)
    next_action, next_log_prob = _sample(actor, next_observation, next_key)
    soft_value = jnp.min(_critics(target, next_observation, next_action), axis=0) - alpha * next_log_prob
    bootstrap = jax.lax.stop_gradient(reward + SAC["gamma"] * discount * soft_value)

    def critic_loss(params):
        return jnp.mean(jnp.sum(jnp.square(_critics(params, observation, action) - bootstrap), axis=0))

    critic_value, critic_grad = jax.value_and_grad(critic_loss)(critics)
    updates, critic_opt = optimizer.update(critic_grad, critic_opt, critics)
    critics = optax.apply_updates(critics, updates)

    def actor_loss(params):
        actions, log_prob = _sample(params, observation, actor_key)
        return jnp.mean(alpha * log_prob - jnp.min(_critics(critics, observation, actions), axis=0)), -jnp.mean(
            log_prob
        )

    (actor_value, entropy), actor_grad = jax.value_and_grad(actor_loss, has_aux=True)(actor)
    updates, actor_opt = optimizer.update(actor_grad, actor_opt, actor)
    actor = optax.apply_updates(actor, updates)
    alpha_grad = jax.grad(lambda value: value * (jax.lax.stop_gradient(entropy) + ACTION_SIZE))(log_alpha)
    updates, alpha_opt = optimizer.update(alpha_grad, alpha_opt, log_alpha)
    log_alpha = optax.apply_updates(log_alpha, updates)
    target = optax.incremental_update(critics, target, 1 - SAC["polyak"])
    return (actor, critics, target, log_alpha, actor_opt, critic_opt, alpha_opt, replay), critic_value + actor_value


def _handwritten_state(key: jax.Array):
    optimizer = optax.adam(SAC["learning_rate"])
    actor = _mlp_init(key, (OBSERVATION_SIZE, *HIDDEN, 2 * ACTION_SIZE))
    critics = jax.tree.map(
        lambda *leaves: jnp.stack(leaves),
        *(_mlp_init(k, (OBSERVATION_SIZE + ACTION_SIZE, *HIDDEN, 1)) for k in jax.random.split(key, 2)),
    )
    log_alpha = jnp.asarray(0.0)
    size = SAC["buffer_size"]
    replay = (
        jax.random.normal(key, (size, OBSERVATION_SIZE)),
        jax.random.uniform(key, (size, ACTION_SIZE), minval=-2.0, maxval=2.0),
        -jax.random.uniform(key, (size,)),
        jnp.ones(size),
        jax.random.normal(jax.random.fold_in(key, 1), (size, OBSERVATION_SIZE)),
    )
    opt_states = (optimizer.init(actor), optimizer.init(critics), optimizer.init(log_alpha))
    return (actor, critics, critics, log_alpha, *opt_states, replay)


def _flops(function, *args) -> float:
    cost = jax.jit(function).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    if not cost or "flops" not in cost:
        raise SystemExit("XLA gives no operation count on this backend.")
    return float(cost["flops"])


def time_learn_steps(pipeline, handwritten_step, handwritten_state, steps: int, rounds: int):
    """Fills the replay of `pipeline` by 2,000 training steps, then times its whole
    iteration, its learner's `learn_step` alone and `handwritten_step` from
    `handwritten_state`, each as `steps` steps of one compiled `lax.scan`, in `rounds`
    interleaved rounds. Returns the median seconds per step of each, printed with each
    round's, and the learner's filled state split into arrays and the rest."""
    learner = pipeline.learner
    state = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=2_000).state  # fills the replay
    arrays, static = eqx.partition(state.learner, eqx.is_array)

    def podrace_learn_steps(arrays, key):
        def body(learner_state, step_key):
            learner_state, metrics = learner.learn_step(learner_state, step_key, None)
            return learner_state, metrics.loss

        return jax.lax.scan(body, eqx.combine(arrays, static), jax.random.split(key, steps))[1]

    methods = {
        "podrace_iteration": lambda key: pipeline.train(state, num_updates=steps).metrics.update.loss,
        "podrace_learn_step": jax.jit(lambda key: podrace_learn_steps(arrays, key)),
        "handwritten_learn_step": jax.jit(
            lambda key: jax.lax.scan(handwritten_step, handwritten_state, jax.random.split(key, steps))[1]
        ),
    }
    for method in methods.values():
        jax.block_until_ready(method(jax.random.key(3)))  # compile and warm up
    times: dict[str, list[float]] = {name: [] for name in methods}
    for round_index in range(rounds):
        names = list(methods)
        for name in names[round_index % len(names) :] + names[: round_index % len(names)]:
            start = time.perf_counter()
            jax.block_until_ready(methods[name](jax.random.key(4 + round_index)))
            times[name].append((time.perf_counter() - start) / steps)
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, seconds in median.items():
        print(f"{name}: {1e6 * seconds:.0f} us per step (rounds: {', '.join(f'{1e6 * t:.0f}' for t in times[name])})")
    return median, arrays, static


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2_000, help="steps per timed call")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    args = parser.parse_args()

    pipeline = sac_pipeline(jax.random.key(0), SAC)
    learner = pipeline.learner
    assert isinstance(learner, SACLearner)
    handwritten = _handwritten_state(jax.random.key(2))
    median, arrays, static = time_learn_steps(pipeline, _handwritten_learn_step, handwritten, args.steps, args.rounds)
    podrace_flops = _flops(
        lambda a, k: learner.learn_step(eqx.combine(a, static), k, None)[1].loss, arrays, jax.random.key(5)
    )
    handwritten_flops = _flops(lambda c, k: _handwritten_learn_step(c, k)[1], handwritten, jax.random.key(5))
    print(
        f"XLA floating-point operations per learn step: podrace {podrace_flops / 1e6:.1f}M, "
        f"hand-written {handwritten_flops / 1e6:.1f}M"
    )
    ratio = median["podrace_learn_step"] / median["handwritten_learn_step"]
    print(f"ratio_learn_step={ratio:.3f} achieved_gflops={podrace_flops / median['podrace_learn_step'] / 1e9:.1f}")


if __name__ == "__main__":
    main()
