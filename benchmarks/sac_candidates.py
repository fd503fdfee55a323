"""SAC on Pendulum-v1 at rejax's settings: env steps to -200, each difference from rejax's SAC changed alone.

At rejax 0.1.3's Pendulum settings (`off_policy_sps.py`'s `SETTINGS["sac"]`), rejax's
SAC reached the learning tests' bar in fewer environment steps than podrace's. This
script trains podrace's SAC at those settings (`off_policy_sps.sac_pipeline`) with
one of rejax's choices at a time put in its place, from the same seeds:

- `baseline`: `off_policy_sps.sac_pipeline` unchanged.
- `temperature_loss`: the temperature's loss multiplies the entropy's distance to its
  target by alpha, as rejax's does, instead of by log alpha
  (`TemperatureLoss(multiplier="temperature")`).
- `log_std_clip`: the actor's log standard deviation clipped into [-10, 2], as
  rejax's is, instead of mapped there through tanh
  (`TanhGaussianHead(log_std_bounding="clip")`).
- `actor_first`: the actor steps before the critics, as in rejax, the critics'
  targets drawn from the actor just updated (`SACLearner(update_order="actor_first")`).
- `normalized_as_collected`: observations normalised as they are collected and stored
  so (`RunningNormalization(replayed_observations="normalized")`, podrace's default
  before it stored raw observations), instead of stored raw and each sampled batch
  normalised with the statistics of the moment, as rejax does (and the baseline).
- `unnormalized`: observations not normalised at all.
- `lecun_normal`: every layer of the actor and the critics drawn by flax's default,
  rejax's (`LecunNormal()`: truncated normal weights of variance 1 / fan-in, zero
  biases), instead of `FanInUniform()`.
- `squashed_target_entropy`: the target entropy -1 + log 2 instead of -1. podrace's
  log-probabilities are those of the torque in [-2, 2], rejax's those of the squashed
  action in [-1, 1], log 2 lower; the same target of -1 asks podrace's policy for log
  2 less entropy than rejax's. -1 + log 2 is rejax's target in podrace's units.
- `truncation_as_termination`: the 200-step time limit ends episodes with discount 0
  (`envs.TruncationAsTermination`), as rejax's targets treat gymnax's `done`,
  instead of bootstrapping through it.

Each run counts the env steps to the first evaluation whose mean return reaches
`off_policy_sps.LEVELS["sac"]` (-200): training runs in compiled chunks of
`CHUNK_STEPS["sac"]` (1,000) steps, each followed by `EVAL_EPISODES` (16) episodes of
the mode of the policy, within `--steps` (20,000) steps (`ppo_cartpole.time_to_solve`,
as `off_policy_sps.py --time-to-level` measures podrace). Seeds derive the network and
run keys as `off_policy_sps.podrace_time_to_level` does, so `baseline`'s steps are
that script's. With `--rejax-python`, rejax's steps for the same seeds come from
`off_policy_sps.py`'s time-to-level command for rejax, in fresh processes (rejax
evaluates with its own `make_act`, which samples the policy). podrace's runs share
one process: steps, not seconds, are measured.

One JSON line per run, then a table of steps per candidate and seed (`>STEPS` where
the bar was not reached within `--steps`, counted as more in the medians) and a last
line `median_env_steps baseline=X temperature_loss=Y ... [rejax=Z]`.

Usage:

    python benchmarks/sac_candidates.py [--seeds 0 1 2 3 4] [--candidates baseline actor_first ...]
        [--steps 20000] [--rejax-python /path/to/rejax-venv/bin/python]
"""

import argparse
import json
import math
import statistics
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
from _compare import run_json
from off_policy_sps import (
    ACTIVATIONS,
    CHUNK_STEPS,
    DEFAULT_STEPS,
    EVAL_EPISODES,
    EVALUATION_POLICIES,
    LEVELS,
    PENDULUM_OBSERVATION_SHAPE,
    SETTINGS,
    commands,
    sac_pipeline,
)
from ppo_cartpole import time_to_solve

import podrace as pr


SAC = SETTINGS["sac"]


def sac_parts(pipeline: pr.Anakin) -> tuple[pr.learners.SACLearner, pr.networks.TanhGaussianHead]:
    """The SAC learner of `pipeline` and its actor's head."""
    learner = pipeline.learner
    assert isinstance(learner, pr.learners.SACLearner) and isinstance(learner.actor, pr.networks.FeedForwardNetwork)
    head = learner.actor.head
    assert isinstance(head, pr.networks.TanhGaussianHead)
    return learner, head


def temperature_loss(pipeline: pr.Anakin, key: jax.Array) -> pr.Anakin:
    learner, _ = sac_parts(pipeline)
    loss = pr.losses.TemperatureLoss(target_entropy=learner.target_entropy, multiplier="temperature")
    return eqx.tree_at(lambda p: p.learner.temperature_loss, pipeline, loss)


def log_std_clip(pipeline: pr.Anakin, key: jax.Array) -> pr.Anakin:
    _, head = sac_parts(pipeline)
    clipped = pr.networks.TanhGaussianHead(
        head.in_size,
        head.action_size,
        low=head.low,
        high=head.high,
        min_log_std=head.min_log_std,
        max_log_std=head.max_log_std,
        log_std_bounding="clip",
        key=key,
    )
    # The baseline's layers, so that only the bounding differs.
    clipped = eqx.tree_at(lambda h: (h.mean_linear, h.log_std_linear), clipped, (head.mean_linear, head.log_std_linear))
    return eqx.tree_at(lambda p: p.learner.actor.head, pipeline, clipped)


def actor_first(pipeline: pr.Anakin, key: jax.Array) -> pr.Anakin:
    learner, _ = sac_parts(pipeline)
    reordered = pr.learners.SACLearner(
        learner.actor,
        learner.critic,
        learner.actor_optimizer,
        learner.critic_optimizer,
        learner.temperature_optimizer,
        critic_loss=learner.critic_loss,
        actor_loss=learner.actor_loss,
        temperature_loss=learner.temperature_loss,
        exploration=learner.exploration,
        buffer_size=learner.replay.buffer_size,
        batch_size=learner.batch_size,
        tau=learner.tau,
        initial_temperature=learner.initial_temperature,
        min_replay_size=learner.min_replay_size,
        gradient_steps=learner.gradient_steps,
        update_order="actor_first",
    )
    return eqx.tree_at(lambda p: p.learner, pipeline, reordered)


def normalized_as_collected(pipeline: pr.Anakin, key: jax.Array) -> pr.Anakin:
    normalization = pr.RunningNormalization(observations=True, rewards=False, replayed_observations="normalized")
    return eqx.tree_at(lambda p: p.normalization, pipeline, normalization)


def unnormalized(pipeline: pr.Anakin, key: jax.Array) -> pr.Anakin:
    return pr.Anakin(pipeline.env, pipeline.learner, num_envs=pipeline.num_envs, rollout_length=pipeline.rollout_length)


def lecun_normal(pipeline: pr.Anakin, key: jax.Array) -> pr.Anakin:
    _, head = sac_parts(pipeline)
    torso_key, head_key, critic_key = jax.random.split(key, 3)
    hidden, activation = SAC["hidden_layer_sizes"], ACTIVATIONS[SAC["activation"]]
    initialization = pr.networks.LecunNormal()
    actor = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(
            PENDULUM_OBSERVATION_SHAPE, hidden, activation=activation, initialization=initialization, key=torso_key
        ),
        pr.networks.TanhGaussianHead(
            hidden[-1],
            head.action_size,
            low=head.low,
            high=head.high,
            min_log_std=head.min_log_std,
            max_log_std=head.max_log_std,
            initialization=initialization,
            key=head_key,
        ),
    )
    critic = pr.networks.MLPCritic(
        PENDULUM_OBSERVATION_SHAPE,
        head.action_size,
        hidden,
        activation=activation,
        initialization=initialization,
        key=critic_key,
    )
    return eqx.tree_at(lambda p: (p.learner.actor, p.learner.critic), pipeline, (actor, critic))


def squashed_target_entropy(pipeline: pr.Anakin, key: jax.Array) -> pr.Anakin:
    learner, head = sac_parts(pipeline)
    # rejax's target, of actions in [-1, 1], in the units of podrace's actions: + log(half range) per dimension.
    log_half_ranges = sum(math.log((high - low) / 2) for low, high in zip(head.low, head.high, strict=True))
    loss = pr.losses.TemperatureLoss(target_entropy=learner.target_entropy + log_half_ranges)
    return eqx.tree_at(lambda p: p.learner.temperature_loss, pipeline, loss)


def truncation_as_termination(pipeline: pr.Anakin, key: jax.Array) -> pr.Anakin:
    # `pipeline.env` is the auto-resetting Pendulum; the time limit's truncation is reported below the reset.
    return pr.Anakin(
        pr.envs.TruncationAsTermination(pipeline.env.env),
        pipeline.learner,
        num_envs=pipeline.num_envs,
        rollout_length=pipeline.rollout_length,
        normalization=pipeline.normalization,
    )


CANDIDATES: dict[str, Callable[[pr.Anakin, jax.Array], pr.Anakin]] = {
    "baseline": lambda pipeline, key: pipeline,
    "temperature_loss": temperature_loss,
    "log_std_clip": log_std_clip,
    "actor_first": actor_first,
    "normalized_as_collected": normalized_as_collected,
    "unnormalized": unnormalized,
    "lecun_normal": lecun_normal,
    "squashed_target_entropy": squashed_target_entropy,
    "truncation_as_termination": truncation_as_termination,
}
"""Each candidate: the baseline pipeline with that one choice of rejax's, from a key of its own."""


def podrace_steps_to_level(candidate: str, seed: int, steps: int) -> dict[str, Any]:
    """podrace's env steps to `LEVELS["sac"]` with `candidate` changed, within `steps`."""
    network_key, run_key = jax.random.split(jax.random.key(seed))
    result = time_to_solve(
        lambda: CANDIDATES[candidate](sac_pipeline(network_key, SAC), jax.random.fold_in(network_key, 1)),
        EVALUATION_POLICIES["sac"](),
        run_key,
        steps,
        threshold=LEVELS["sac"],
        chunk_steps=CHUNK_STEPS["sac"],
        eval_episodes=EVAL_EPISODES,
    )
    return {
        "candidate": candidate,
        "seed": seed,
        "solved": result["solved"],
        "env_steps": result["env_steps"],
        "history": [(step, mean_return) for step, _, mean_return in result["history"]],
    }


def rejax_steps_to_level(rejax_python: str, seed: int, steps: int) -> dict[str, Any]:
    """rejax's env steps to `LEVELS["sac"]` within `steps`, in a fresh process."""
    result = run_json(commands("sac", seed, steps, rejax_python, time_to_level=True)["rejax"])
    history = [(entry[0], entry[-1]) for entry in result["history"]]
    return {
        "candidate": "rejax",
        "seed": seed,
        "solved": result["solved"],
        "env_steps": result["env_steps"],
        "history": history,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--candidates", nargs="+", choices=list(CANDIDATES), default=list(CANDIDATES))
    parser.add_argument(
        "--steps", type=int, default=DEFAULT_STEPS["sac"], help="env steps per run at most (default 20,000)"
    )
    parser.add_argument("--rejax-python", help="the python of the rejax benchmark environment, to add rejax's row")
    args = parser.parse_args()
    if args.steps <= 0 or args.steps % CHUNK_STEPS["sac"]:
        parser.error(f"--steps must be a positive multiple of {CHUNK_STEPS['sac']}")

    print(f"jax {jax.__version__} on {jax.default_backend()}; seeds {args.seeds}; at most {args.steps} env steps")
    rows: dict[str, list[float]] = {}
    for candidate in args.candidates:
        rows[candidate] = []
        for seed in args.seeds:
            result = podrace_steps_to_level(candidate, seed, args.steps)
            rows[candidate].append(result["env_steps"] if result["solved"] else math.inf)
            print(json.dumps(result), flush=True)
    if args.rejax_python:
        rows["rejax"] = []
        for seed in args.seeds:
            result = rejax_steps_to_level(args.rejax_python, seed, args.steps)
            rows["rejax"].append(result["env_steps"] if result["solved"] else math.inf)
            print(json.dumps(result), flush=True)

    def cell(steps: float) -> str:
        return f">{args.steps}" if math.isinf(steps) else f"{steps:.0f}"

    width = max(map(len, rows))
    print(f"{'env steps to -200':<{width}}  " + "  ".join(f"seed {seed:>2}" for seed in args.seeds) + "   median")
    for name, steps in rows.items():
        cells = "  ".join(f"{cell(value):>7}" for value in steps)
        print(f"{name:<{width}}  {cells}  {cell(statistics.median(steps)):>7}")
    medians = {name: statistics.median(steps) for name, steps in rows.items()}
    print("median_env_steps " + " ".join(f"{name}={cell(median)}" for name, median in medians.items()))


if __name__ == "__main__":
    main()
