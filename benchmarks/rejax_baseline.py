"""Peer baseline: rejax 0.1.3 PPO, DQN, SAC, TD3 and PQN on gymnax environments.

Run with its own benchmark-only venv, never podrace's (rejax 0.1.3 expects the
five-value ``step`` of gymnax < 1.0)::

    python3 -m venv /work/rejax-venv
    /work/rejax-venv/bin/pip install "rejax==0.1.3" "gymnax<1.0"
    /work/rejax-venv/bin/python benchmarks/rejax_baseline.py ppo-time-to-solve --seed 0
    /work/rejax-venv/bin/python benchmarks/rejax_baseline.py dqn-sps --seed 0
    /work/rejax-venv/bin/python benchmarks/rejax_baseline.py sac-sps --seed 0

Known to work with jax/jaxlib 0.10.2, flax 0.12.8, optax 0.2.8, chex 0.1.92,
distrax 0.1.9, gymnax 0.0.9 (what that pip command resolved to).
Default hyperparameters are rejax's own (configs/gymnax/cartpole.yaml and
configs/gymnax/pendulum.yaml in the rejax repository; the wheel does not ship them).

ppo-time-to-solve
    The clock starts before anything is built or compiled. Training runs in chunks:
    one jitted call trains ``--chunk-steps`` env steps (rounded up to whole
    ``num_envs * num_steps`` rollouts) and then evaluates the current policy on
    ``--eval-episodes`` fresh episodes of ``--env`` (up to its time limit, rejax's
    ``evaluate``; ``stochastic`` samples the policy as rejax's own eval callback
    does, ``greedy`` takes the argmax). The host reads the mean return after each
    chunk; the clock stops at the first chunk whose mean return >= ``--threshold``.
    Compilation, chunk dispatch and evaluation are all inside the measured time.
dqn-sps
    Environment steps per second of rejax DQN training, evaluation disabled. A
    warm-up call trains ``--steps`` env steps from a fresh state (compile included,
    fills the replay buffer); the timed call trains ``--steps`` more steps from the
    warm-up's state with the same compiled function. ``--time-to-level`` as below.
sac-sps, td3-sps, pqn-sps
    The same measurement for SAC and TD3 on Pendulum-v1 and PQN on CartPole-v1, every
    hyperparameter under rejax's own name (``--normalize-observations`` for SAC and TD3
    as rejax's Pendulum configs; not for PQN, as its CartPole config). ``--max-grad-norm``
    is rejax's: each gradient element clipped to that value (``optax.clip``), not the
    global norm. With ``--time-to-level R``, the seconds to a mean evaluation return of
    ``R`` instead, from before the algorithm is built, training in compiled chunks of
    ``--chunk-steps`` each followed by an evaluation (``time_to_level``).

Each mode prints one JSON line with the result and every setting used.
"""

import argparse
import json
import time
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from _compare import compile_profile
from rejax import DQN, PPO, PQN, SAC, TD3
from rejax.evaluate import evaluate


# rejax casts to int64 with x64 disabled; harmless, but noisy.
warnings.filterwarnings("ignore", message="Explicitly requested dtype")


def no_eval(algo: Any, ts: Any, rng: jax.Array) -> tuple[()]:
    return ()


def make_eval_callback(episodes: int, greedy: bool):
    """A rejax eval callback returning the mean return over ``episodes`` episodes."""

    def eval_callback(algo: PPO, ts: Any, rng: jax.Array) -> jax.Array:
        if greedy:

            def act(obs: jax.Array, rng: jax.Array) -> jax.Array:
                logits = algo.actor.apply(
                    ts.actor_ts.params,
                    obs[None],
                    method=lambda m, x: m.action_logits(m.features(x)),
                )
                return jnp.argmax(logits[0])

        else:
            act = algo.make_act(ts)
        max_steps = algo.env_params.max_steps_in_episode
        _, returns = evaluate(act, rng, algo.env, algo.env_params, episodes, max_steps)
        return returns.mean()

    return eval_callback


def ppo_time_to_solve(args: argparse.Namespace) -> dict[str, Any]:
    hparams = {
        "num_envs": args.num_envs,
        "num_steps": args.num_steps,
        "num_epochs": args.num_epochs,
        "num_minibatches": args.num_minibatches,
        "learning_rate": args.learning_rate,
        "gamma": args.gamma,
        "gae_lambda": args.gae_lambda,
        "clip_eps": args.clip_eps,
        "vf_coef": args.vf_coef,
        "ent_coef": args.ent_coef,
        "max_grad_norm": args.max_grad_norm,
    }
    agent_kwargs = {"hidden_layer_sizes": args.hidden, "activation": args.activation}
    rollout = args.num_envs * args.num_steps
    chunk = -(-args.chunk_steps // rollout) * rollout

    start = time.perf_counter()
    profile = compile_profile()
    algo = PPO.create(
        env=args.env,
        agent_kwargs=dict(agent_kwargs),
        total_timesteps=chunk,
        eval_freq=chunk,
        skip_initial_evaluation=True,
        **hparams,
    )
    algo = algo.replace(eval_callback=make_eval_callback(args.eval_episodes, args.eval_policy == "greedy"))
    train_chunk = jax.jit(lambda ts: algo.train(train_state=ts))
    built = time.perf_counter() - start
    ts = jax.block_until_ready(jax.jit(algo.init_state)(jax.random.PRNGKey(args.seed)))
    initialised = time.perf_counter() - start

    history: list[tuple[int, float, float]] = []
    solved = False
    while not solved and int(ts.global_step) < args.max_env_steps:
        ts, mean_return = train_chunk(ts)
        mean_return = float(mean_return[-1])
        steps = int(ts.global_step)
        history.append((steps, round(time.perf_counter() - start, 3), mean_return))
        solved = mean_return >= args.threshold
    seconds = time.perf_counter() - start

    return {
        "mode": "ppo-time-to-solve",
        "library": "rejax",
        "env": args.env,
        "seed": args.seed,
        "solved": solved,
        "seconds": round(seconds, 3),
        "startup": startup(built, initialised, history, profile),
        "env_steps": history[-1][0],
        "final_mean_return": history[-1][2],
        "threshold": args.threshold,
        "chunk_env_steps": chunk,
        "eval_episodes": args.eval_episodes,
        "eval_policy": args.eval_policy,
        "max_env_steps": args.max_env_steps,
        "hyperparameters": {**hparams, **agent_kwargs},
        "history": history,
        "jax": jax.__version__,
        "backend": jax.default_backend(),
    }


def replay_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of `add_replay_arguments`, under rejax's names."""
    names = ("num_envs", "buffer_size", "fill_buffer", "batch_size", "num_epochs", "target_update_freq", "polyak")
    return {name: getattr(args, name) for name in (*names, "learning_rate", "max_grad_norm", "gamma")}


def without_evaluation(algorithm: Any, args: argparse.Namespace, settings: dict[str, Any], **kwargs: Any) -> Any:
    """`algorithm.create(...)` for `args.steps` environment steps, with evaluation off."""
    return algorithm.create(
        env=args.env,
        total_timesteps=args.steps,
        eval_freq=args.steps,
        skip_initial_evaluation=True,
        **settings,
        **kwargs,
    ).replace(eval_callback=no_eval)


def dqn_sps(args: argparse.Namespace) -> dict[str, Any]:
    settings = {
        **replay_settings(args),
        "eps_start": args.eps_start,
        "eps_end": args.eps_end,
        "exploration_fraction": args.exploration_fraction,
        "ddqn": args.ddqn,
        "agent": args.agent,
    }
    agent_kwargs = {"activation": args.activation}  # rejax fixes hidden to (64, 64)
    build = lambda: without_evaluation(DQN, args, settings, agent_kwargs=dict(agent_kwargs))  # noqa: E731
    return {
        **measure(build, args, steps_per_iteration=args.num_envs),
        "gradient_steps_per_env_step": args.num_epochs / args.num_envs,
        "settings": {**settings, **agent_kwargs, "hidden_layer_sizes": [64, 64]},
    }


def sac_sps(args: argparse.Namespace) -> dict[str, Any]:
    settings = {
        **replay_settings(args),
        "hidden_layer_sizes": args.hidden_layer_sizes,
        "normalize_observations": args.normalize_observations,
    }
    agent_kwargs = {"activation": args.activation}  # the actor's and the critics'
    build = lambda: without_evaluation(SAC, args, settings, agent_kwargs=dict(agent_kwargs))  # noqa: E731
    return {
        **measure(build, args, steps_per_iteration=args.num_envs),
        "gradient_steps_per_env_step": args.num_epochs / args.num_envs,
        "settings": {**settings, **agent_kwargs, "num_critics": 2, "log_std_range": [-10, 2]},
    }


def td3_sps(args: argparse.Namespace) -> dict[str, Any]:
    settings = {
        **replay_settings(args),
        "policy_delay": args.policy_delay,
        "exploration_noise": args.exploration_noise,
        "target_noise": args.target_noise,
        "target_noise_clip": args.target_noise_clip,
        "normalize_observations": args.normalize_observations,
    }
    network_kwargs = {"activation": args.activation}
    build = lambda: without_evaluation(  # noqa: E731
        TD3, args, settings, actor_kwargs=dict(network_kwargs), critic_kwargs=dict(network_kwargs)
    )
    return {
        # an iteration: `policy_delay` steps, each with a critic step, then an actor step
        **measure(build, args, steps_per_iteration=args.num_envs * args.policy_delay),
        "gradient_steps_per_env_step": args.num_epochs / args.num_envs,
        # rejax fixes both networks' hidden layers to (64, 64)
        "settings": {**settings, **network_kwargs, "num_critics": 2, "hidden_layer_sizes": [64, 64]},
    }


def pqn_sps(args: argparse.Namespace) -> dict[str, Any]:
    settings = {
        "num_envs": args.num_envs,
        "num_steps": args.num_steps,
        "num_epochs": args.num_epochs,
        "num_minibatches": args.num_minibatches,
        "learning_rate": args.learning_rate,
        "max_grad_norm": args.max_grad_norm,
        "gamma": args.gamma,
        "td_lambda": args.td_lambda,
        "eps_start": args.eps_start,
        "eps_end": args.eps_end,
        "exploration_fraction": args.exploration_fraction,
        "normalize_observations": args.normalize_observations,
    }
    build = lambda: without_evaluation(PQN, args, settings)  # noqa: E731
    return {
        **measure(build, args, steps_per_iteration=args.num_envs * args.num_steps),
        # rejax fixes the Q-network: each hidden layer normalised, then relu
        "settings": {**settings, "hidden_layer_sizes": [64, 64], "layer_norm": True, "activation": "relu"},
    }


def initial_state(algo: Any, seed: int) -> Any:
    """`algo`'s initial training state, strongly typed as training returns it: gymnax's
    Pendulum starts with a weakly typed `last_u`, for which a later call would compile a
    second program."""
    ts = jax.jit(algo.init_state)(jax.random.PRNGKey(seed))
    return jax.tree.map(lambda x: jnp.asarray(x, x.dtype), ts)


def measure(build: Callable[[], Any], args: argparse.Namespace, steps_per_iteration: int) -> dict[str, Any]:
    """Steps per second of the algorithm `build` makes or, with `--time-to-level`, its time
    to that level."""
    if args.time_to_level is None:
        return timed_training(build(), args)
    return time_to_level(build, args, steps_per_iteration)


def time_to_level(build: Callable[[], Any], args: argparse.Namespace, steps_per_iteration: int) -> dict[str, Any]:
    """Seconds from before the algorithm is built to the first evaluation whose mean
    return reaches `args.time_to_level`. Training runs in compiled chunks of
    `--chunk-steps` environment steps, each followed by `--eval-episodes` episodes of
    rejax's own acting function (`make_act`, rejax's `evaluate`); the run stops there or
    after `--steps`, the length its schedules are set for."""
    start = time.perf_counter()
    profile = compile_profile()
    algo = build()
    built = time.perf_counter() - start
    iterations = args.chunk_steps // steps_per_iteration

    @jax.jit
    def train_chunk(ts: Any, rng: jax.Array) -> tuple[Any, jax.Array]:
        ts = jax.lax.fori_loop(0, iterations, lambda _, ts: algo.train_iteration(ts), ts)
        max_steps = algo.env_params.max_steps_in_episode
        _, returns = evaluate(algo.make_act(ts), rng, algo.env, algo.env_params, args.eval_episodes, max_steps)
        return ts, returns.mean()

    ts = jax.block_until_ready(initial_state(algo, args.seed))
    initialised = time.perf_counter() - start
    history: list[tuple[int, float, float]] = []
    mean_return, steps = -float("inf"), 0
    while mean_return < args.time_to_level and steps < args.steps:
        ts, mean_return = train_chunk(ts, jax.random.PRNGKey(steps))
        mean_return, steps = float(mean_return), int(ts.global_step)
        history.append((steps, round(time.perf_counter() - start, 3), mean_return))
    return {
        "mode": args.mode,
        "library": "rejax",
        "env": args.env,
        "seed": args.seed,
        "solved": mean_return >= args.time_to_level,
        "seconds": round(time.perf_counter() - start, 3),
        "env_steps": steps,
        "level": args.time_to_level,
        "history": history,
        "startup": startup(built, initialised, history, profile),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
    }


def startup(
    built: float, initialised: float, history: list[tuple[int, float, float]], profile: dict[str, Any]
) -> dict[str, Any]:
    """The seconds to the algorithm built, to its state initialised and to the first chunk's
    result, with the process's compilations (`_compare.compile_profile`), as podrace's
    side reports them."""
    return {"build s": built, "init s": initialised, "first result s": history[0][1], **profile}


def timed_training(algo: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Env steps per second of ``algo.train``: a warm-up call from a fresh state (compile
    included), then a timed call from the warm-up's state with the same compiled function."""
    train = jax.jit(lambda ts: algo.train(train_state=ts)[0])
    ts = initial_state(algo, args.seed)

    t0 = time.perf_counter()
    ts = jax.block_until_ready(train(ts))
    warmup = time.perf_counter() - t0
    step0 = int(ts.global_step)
    profile = compile_profile()
    t0 = time.perf_counter()
    ts = jax.block_until_ready(train(ts))
    elapsed = time.perf_counter() - t0
    timed_call_compilations = profile["programs"]
    steps = int(ts.global_step) - step0

    return {
        "mode": args.mode,
        "library": "rejax",
        "env": args.env,
        "seed": args.seed,
        "sps": round(steps / elapsed, 1),
        "timed_env_steps": steps,
        "timed_seconds": round(elapsed, 3),
        "warmup_seconds_incl_compile": round(warmup, 3),
        "timed_call_compilations": timed_call_compilations,
        "jax": jax.__version__,
        "backend": jax.default_backend(),
    }


def add_replay_arguments(
    parser: argparse.ArgumentParser, env: str, *, steps: int, num_envs: int, buffer_size: int, fill_buffer: int
) -> None:
    """The arguments every replay mode takes (DQN, SAC, TD3); each sets the defaults of
    `--batch-size`, `--num-epochs`, `--polyak`, `--learning-rate` and `--max-grad-norm`."""
    parser.add_argument("--env", default=env, help="a gymnax environment id")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=steps, help="env steps per call")
    parser.add_argument("--num-envs", type=int, default=num_envs)
    parser.add_argument("--buffer-size", type=int, default=buffer_size)
    parser.add_argument("--fill-buffer", type=int, default=fill_buffer)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--num-epochs", type=int, help="gradient (critic) steps per iteration")
    parser.add_argument("--target-update-freq", type=int, default=1)
    parser.add_argument("--polyak", type=float)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--max-grad-norm", type=float)
    parser.add_argument("--gamma", type=float, default=0.99)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)

    ppo = sub.add_parser("ppo-time-to-solve")
    ppo.add_argument("--env", default="CartPole-v1", help="a gymnax environment id")
    ppo.add_argument("--seed", type=int, default=0)
    ppo.add_argument("--threshold", type=float, default=475.0)
    ppo.add_argument("--chunk-steps", type=int, default=5_000)
    ppo.add_argument("--eval-episodes", type=int, default=64)
    ppo.add_argument("--eval-policy", choices=["stochastic", "greedy"], default="stochastic")
    ppo.add_argument("--max-env-steps", type=int, default=500_000)
    ppo.add_argument("--num-envs", type=int, default=5)
    ppo.add_argument("--num-steps", type=int, default=100)
    ppo.add_argument("--num-epochs", type=int, default=5)
    ppo.add_argument("--num-minibatches", type=int, default=5)
    ppo.add_argument("--learning-rate", type=float, default=7.5e-4)
    ppo.add_argument("--gamma", type=float, default=0.99)
    ppo.add_argument("--gae-lambda", type=float, default=0.95)
    ppo.add_argument("--clip-eps", type=float, default=0.2)
    ppo.add_argument("--vf-coef", type=float, default=0.5)
    ppo.add_argument("--ent-coef", type=float, default=0.01)
    ppo.add_argument("--max-grad-norm", type=float, default=0.5)
    ppo.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    ppo.add_argument("--activation", default="tanh")

    dqn = sub.add_parser("dqn-sps")
    add_replay_arguments(dqn, "CartPole-v1", steps=50_000, num_envs=10, buffer_size=50_000, fill_buffer=5_000)
    dqn.set_defaults(batch_size=100, num_epochs=5, polyak=0.98, learning_rate=1e-3, max_grad_norm=10.0)
    dqn.add_argument("--eps-start", type=float, default=1.0)
    dqn.add_argument("--eps-end", type=float, default=0.05)
    dqn.add_argument("--exploration-fraction", type=float, default=0.5)
    dqn.add_argument("--ddqn", action=argparse.BooleanOptionalAction, default=True)
    dqn.add_argument("--agent", choices=["QNetwork", "DuelingQNetwork"], default="DuelingQNetwork")
    dqn.add_argument("--activation", default="swish")

    # rejax's Pendulum-v1 settings
    sac = sub.add_parser("sac-sps")
    add_replay_arguments(sac, "Pendulum-v1", steps=20_000, num_envs=1, buffer_size=10_000, fill_buffer=256)
    sac.set_defaults(batch_size=256, num_epochs=1, polyak=0.98, learning_rate=0.01, max_grad_norm=float("inf"))
    sac.add_argument("--hidden-layer-sizes", type=int, nargs="+", default=[64, 64])
    sac.add_argument("--activation", default="swish")
    sac.add_argument("--normalize-observations", action=argparse.BooleanOptionalAction, default=True)

    td3 = sub.add_parser("td3-sps")
    add_replay_arguments(td3, "Pendulum-v1", steps=20_000, num_envs=1, buffer_size=10_000, fill_buffer=1_000)
    td3.set_defaults(batch_size=100, num_epochs=1, polyak=0.95, learning_rate=1e-3, max_grad_norm=100.0)
    td3.add_argument("--policy-delay", type=int, default=2)
    td3.add_argument("--normalize-observations", action=argparse.BooleanOptionalAction, default=True)
    td3.add_argument("--exploration-noise", type=float, default=0.3)
    td3.add_argument("--target-noise", type=float, default=0.2)
    td3.add_argument("--target-noise-clip", type=float, default=0.5)
    td3.add_argument("--activation", default="swish", help="the actor's and the critics'")

    # rejax's CartPole-v1 settings
    pqn = sub.add_parser("pqn-sps")
    pqn.add_argument("--env", default="CartPole-v1", help="a gymnax environment id")
    pqn.add_argument("--seed", type=int, default=0)
    pqn.add_argument("--steps", type=int, default=204_800, help="env steps per call")
    pqn.add_argument("--num-envs", type=int, default=16)
    pqn.add_argument("--num-steps", type=int, default=128)
    pqn.add_argument("--num-epochs", type=int, default=5)
    pqn.add_argument("--num-minibatches", type=int, default=16)
    pqn.add_argument("--learning-rate", type=float, default=3e-4)
    pqn.add_argument("--max-grad-norm", type=float, default=10.0)
    pqn.add_argument("--gamma", type=float, default=0.99)
    pqn.add_argument("--td-lambda", type=float, default=0.9)
    pqn.add_argument("--normalize-observations", action=argparse.BooleanOptionalAction, default=False)
    pqn.add_argument("--eps-start", type=float, default=1.0)
    pqn.add_argument("--eps-end", type=float, default=0.05)
    pqn.add_argument("--exploration-fraction", type=float, default=0.5, help="of --steps")
    add_time_to_level_arguments(dqn, sac, td3, pqn)
    return parser.parse_args()


def add_time_to_level_arguments(*parsers: argparse.ArgumentParser) -> None:
    """`--time-to-level` and its chunks, for the DQN, SAC, TD3 and PQN modes."""
    for parser in parsers:
        parser.add_argument(
            "--time-to-level",
            type=float,
            help="measure the seconds to this mean evaluation return instead (within --steps)",
        )
        parser.add_argument("--chunk-steps", type=int, default=1_000, help="env steps between evaluations")
        parser.add_argument("--eval-episodes", type=int, default=16)


MODES = {
    "ppo-time-to-solve": ppo_time_to_solve,
    "dqn-sps": dqn_sps,
    "sac-sps": sac_sps,
    "td3-sps": td3_sps,
    "pqn-sps": pqn_sps,
}


def main() -> None:
    args = parse_args()
    print(json.dumps(MODES[args.mode](args)))


if __name__ == "__main__":
    main()
