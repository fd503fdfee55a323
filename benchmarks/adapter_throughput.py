"""Steps per second through podrace's adapters of other packages' environments, against
each package's own step, side by side in one process.

For each package's environment and each batch size (1, 128, 4096), two compiled
programs take about `--steps` environment steps of a batch with uniformly random
actions: one calls the adapter's `step` (`vmap`ped, in a `lax.scan`), the other the
package's own step function on the same batch. Neither resets (Navix's own step resets
by itself in both), so both do the same work. The programs run in interleaved rounds and
each keeps its best round. The last line is `min_adapter_ratio=X`, the smallest over all
settings of the adapter's steps per second over the package's own.
"""

import argparse
import importlib.util
import statistics
import time
from collections.abc import Callable

import equinox as eqx
import jax

import podrace as pr


BATCH_SIZES = (1, 128, 4096)


def _own_step(adapter: pr.envs.AbstractEnv) -> Callable:
    """The package's own step of one environment: `(state, action, key) -> state`."""
    if isinstance(adapter, pr.envs.BraxEnv | pr.envs.PlaygroundEnv | pr.envs.NavixEnv):
        return lambda state, action, key: adapter.env.step(state, action)
    if isinstance(adapter, pr.envs.JumanjiEnv):
        return lambda state, action, key: adapter.env.step(state, adapter._jumanji_action(action))[0]
    if isinstance(adapter, pr.envs.XMiniGridEnv):
        return lambda state, action, key: adapter.env.step(adapter.params, state, action)
    if isinstance(adapter, pr.envs.CraftaxEnv):
        gymnax = adapter.gymnax
        return lambda state, action, key: gymnax.env.step_env(key, state, action, gymnax.env_params)[1]
    raise TypeError(type(adapter).__name__)


def _program(adapter: pr.envs.AbstractEnv, num_envs: int, num_steps: int, own: bool) -> tuple[Callable, object]:
    step_one = _own_step(adapter) if own else (lambda state, action, key: adapter.step(state, action, key)[0])

    @eqx.filter_jit
    def run(carry):
        def step(carry, _):
            state, key = carry
            key, action_key, step_key = jax.random.split(key, 3)
            actions = jax.vmap(adapter.action_space.sample)(jax.random.split(action_key, num_envs))
            with jax.numpy_rank_promotion("allow"):
                state = jax.vmap(step_one)(state, actions, jax.random.split(step_key, num_envs))
            return (state, key), None

        return jax.lax.scan(step, carry, length=num_steps)[0]

    state, _ = eqx.filter_jit(jax.vmap(adapter.reset))(jax.random.split(jax.random.key(0), num_envs))
    return run, (state, jax.random.key(1))


def _adapters() -> dict[str, Callable[[], pr.envs.AbstractEnv]]:
    """One environment of each installed package."""
    candidates = {
        "brax": ("brax", lambda: pr.envs.BraxEnv.make("inverted_pendulum")),
        "playground": ("mujoco_playground", lambda: pr.envs.PlaygroundEnv.make("CartpoleBalance")),
        "navix": ("navix", lambda: pr.envs.NavixEnv.make("Navix-Empty-8x8-v0")),
        "jumanji": ("jumanji", lambda: pr.envs.JumanjiEnv.make("Knapsack-v1")),
        "xminigrid": ("xminigrid", lambda: pr.envs.XMiniGridEnv.make("MiniGrid-Empty-8x8")),
        "craftax": ("craftax", lambda: pr.envs.CraftaxEnv("Craftax-Classic-Symbolic-v1")),
    }
    return {name: make for name, (module, make) in candidates.items() if importlib.util.find_spec(module)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000, help="environment steps per call (about)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds")
    parser.add_argument("--packages", default=None, help="comma-separated, default all installed")
    parser.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)))
    args = parser.parse_args()
    adapters = _adapters()
    if args.packages:
        adapters = {name: adapters[name] for name in args.packages.split(",")}
    print(f"jax {jax.__version__} on {jax.default_backend()}; about {args.steps} steps per call, {args.rounds} rounds")
    print("| package | batch | adapter steps/s | own steps/s | ratio |")
    print("| --- | --- | --- | --- | --- |")
    ratios = []
    for name, make in adapters.items():
        adapter = make()
        for num_envs in map(int, args.batch_sizes.split(",")):
            num_steps = max(1, args.steps // num_envs)
            programs = {own: _program(adapter, num_envs, num_steps, own) for own in (False, True)}
            for run, carry in programs.values():
                jax.block_until_ready(run(carry))  # compile
            best = {own: float("inf") for own in programs}
            for _ in range(args.rounds):
                for own, (run, carry) in programs.items():
                    start = time.perf_counter()
                    jax.block_until_ready(run(carry))
                    best[own] = min(best[own], time.perf_counter() - start)
            steps = num_envs * num_steps
            adapter_sps, own_sps = steps / best[False], steps / best[True]
            ratios.append(adapter_sps / own_sps)
            print(f"| {name} | {num_envs} | {adapter_sps:.3g} | {own_sps:.3g} | {ratios[-1]:.2f} |", flush=True)
    print(f"geometric_mean_ratio={statistics.geometric_mean(ratios):.3f} min_adapter_ratio={min(ratios):.3f}")


if __name__ == "__main__":
    main()
