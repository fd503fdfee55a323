"""What the benchmarks share: for `anakin_catch.py` and `recurrent.py`, their command line,
the hand-written time step, the faithfulness check's measures and interleaved timing of
compiled methods; for the comparisons with rejax (`ppo_cartpole.py`, `off_policy_sps.py`,
`startup.py` and, in rejax's own environment, `rejax_baseline.py`), measurements in fresh
processes and a profile of their compilations. It needs JAX and NumPy only."""

import argparse
import json
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def parse_args(
    argv: list[str] | None,
    description: str,
    *,
    batch: int,
    batch_help: str,
    rollout: int,
    extra: Callable[[argparse.ArgumentParser], Any] | None = None,
) -> argparse.Namespace:
    """The shared command line; `extra` adds a benchmark's own options."""
    parser = argparse.ArgumentParser(description=description)
    if extra is not None:
        extra(parser)
    parser.add_argument("--batch", type=int, default=batch, help=batch_help)
    parser.add_argument("--rollout", type=int, default=rollout, help="environment steps per update (T)")
    parser.add_argument("--iterations", type=int, default=100, help="updates per compiled call (I)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per method, interleaved")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="first check podrace against the hand-written version")
    return parser.parse_args(argv)


class Step(NamedTuple):
    """A time step of a hand-written environment."""

    observation: jax.Array
    reward: jax.Array
    discount: jax.Array
    is_first: jax.Array
    is_last: jax.Array


def max_difference(a, b) -> float:
    """The largest absolute difference, compared as NumPy arrays (on several devices the
    two may sit on different meshes)."""
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def parameter_differences(start: dict, podrace_final: dict, handwritten_final: dict) -> tuple[float, float]:
    """How far podrace's parameters moved from `start`, and how far they ended from the
    hand-written version's (dicts of arrays with the same keys)."""
    moved = max(max_difference(podrace_final[k], start[k]) for k in start)
    diff = max(max_difference(podrace_final[k], handwritten_final[k]) for k in start)
    return moved, diff


class Method(NamedTuple):
    name: str
    call: Callable[[Any], Any]  # state -> output, one compiled call of `iterations` updates
    next_state: Callable[[Any], Any]  # output -> state for the next call


def warm_up_compiler() -> None:
    """Compiles and runs a small program, so that the first method timed does not pay alone for
    what the first compilation of a process costs (backend and compiler start-up)."""

    def loss(w, x):
        y, _ = lax.scan(lambda c, xi: (jax.nn.relu(c @ w + xi), None), x[0], x)
        return jnp.sum(y)

    w, x = jnp.ones((8, 8)), jnp.ones((4, 2, 8))
    jax.block_until_ready(jax.jit(jax.grad(loss))(w, x))


def timed(method: Method, state) -> tuple[float, Any]:
    start = time.perf_counter()
    output = jax.block_until_ready(method.call(state))
    return time.perf_counter() - start, method.next_state(output)


def time_interleaved(
    methods: Sequence[Method], states: dict[str, Any], repeats: int
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Seconds of each method's first call and of its `repeats` timed calls.

    After `warm_up_compiler`, each method makes a first call (trace, compile and one run) and
    an untimed one; then come `repeats` rounds of one call each, in a rotated order. Every call
    takes the state the method's previous call left (`states` holds the initial ones).
    """
    states = dict(states)
    warm_up_compiler()
    first: dict[str, float] = {}
    for method in methods:  # first call: trace, compile and one run
        first[method.name], states[method.name] = timed(method, states[method.name])
    for method in methods:  # one untimed warm-up call each
        _, states[method.name] = timed(method, states[method.name])
    seconds: dict[str, list[float]] = {method.name: [] for method in methods}
    for repeat in range(repeats):
        shift = repeat % len(methods)  # ABC, BCA, CAB, ...
        for method in [*methods[shift:], *methods[:shift]]:
            elapsed, states[method.name] = timed(method, states[method.name])
            seconds[method.name].append(elapsed)
    return first, seconds


def print_results(
    first: dict[str, float], seconds: dict[str, list[float]], frames: int, pairs: Sequence[tuple[str, str]]
) -> dict[str, float]:
    """Prints the table of median calls and, for each `(a, b)` of `pairs`, the spread of a's FPS
    over b's in the same round. Returns each method's median FPS."""
    fps = {name: [frames / s for s in values] for name, values in seconds.items()}
    median_fps = {name: statistics.median(values) for name, values in fps.items()}
    width = max(len(name) for name in seconds) + 1
    print(f"\n{'method':<{width}} {'compile s':>9} {'call s':>8} {'FPS (median)':>13} {'FPS min':>10} {'FPS max':>10}")
    for name, values in seconds.items():
        call = statistics.median(values)
        print(
            f"{name:<{width}} {first[name] - call:>9.2f} {call:>8.4f} {median_fps[name]:>13.4g} "
            f"{min(fps[name]):>10.4g} {max(fps[name]):>10.4g}"
        )
    for numerator, denominator in pairs:  # ratios of calls made in the same repeat
        paired = [n / d for n, d in zip(fps[numerator], fps[denominator], strict=True)]
        print(
            f"{numerator} / {denominator} per repeat: median {statistics.median(paired):.3f}, "
            f"min {min(paired):.3f}, max {max(paired):.3f}"
        )
    return median_fps


def run_json(command: list[str], environment: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs a measurement in a fresh process (with `environment`'s variables, if given) and
    reads the JSON line it prints last."""
    output = subprocess.run(command, check=True, capture_output=True, text=True, env=environment).stdout
    return json.loads(output.strip().splitlines()[-1])


def run_alternating(
    seeds: Sequence[int], commands: Callable[[int], dict[str, list[str]]], measured: str
) -> dict[str, list[float]]:
    """For each seed, runs each library's measurement (`commands(seed)`, by library) in a
    fresh process, one after the other, printing each JSON line; returns each library's
    `measured` values, seed by seed."""
    results: dict[str, list[float]] = {}
    for seed in seeds:
        for library, command in commands(seed).items():
            result = run_json(command)
            results.setdefault(library, []).append(result[measured])
            print(json.dumps(result))
    return results


PHASE_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower s",
    "/jax/core/compile/backend_compile_duration": "XLA s",
}


def compile_profile() -> dict[str, Any]:
    """A record of this process's compilations from now on, filled as they happen: how many
    programs XLA compiled (`programs`), the seconds spent tracing, lowering and compiling
    them (`trace s`, `lower s`, `XLA s`), and each program's XLA seconds by name
    (`XLA s by program`), from JAX's monitoring events."""
    profile: dict[str, Any] = {"programs": 0, **dict.fromkeys(PHASE_EVENTS.values(), 0.0), "XLA s by program": {}}

    def listen(event: str, duration_secs: float, **metadata: str | int) -> None:
        if event not in PHASE_EVENTS:
            return
        profile[PHASE_EVENTS[event]] += duration_secs
        if PHASE_EVENTS[event] == "XLA s":
            profile["programs"] += 1
            by_program, name = profile["XLA s by program"], str(metadata.get("fun_name", "?"))
            by_program[name] = by_program.get(name, 0.0) + duration_secs

    jax.monitoring.register_event_duration_secs_listener(listen)
    return profile
