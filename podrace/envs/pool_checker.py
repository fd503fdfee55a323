"""A conformance check for pools of environments outside JAX (EnvPool's): `check_pool_env`
steps a pool as a pipeline does, inside one compiled `lax.scan`, and names the rule, the
step and the fix when one is broken.

[`podrace.envs.check_env`][] does not fit a pool: it compares `jit` with eager calls,
`vmap` with a loop and two calls on the same state, which a stateful pool cannot repeat."""

from typing import Any, NoReturn

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray

from .._types import TimeStep
from ._base import AbstractPoolEnv
from .checker import TIMESTEP_DTYPES, fail_check


POOL_RULES = (
    "timestep-types",
    "stable-shapes-and-dtypes",
    "observation-and-action-spaces",
    "reset",
    "episode-boundaries",
)
"""The names of `check_pool_env`'s rules, in the order of its documentation."""


def check_pool_env(
    env: AbstractPoolEnv,
    *,
    num_envs: int,
    actions: Array | None = None,
    num_steps: int = 200,
    key: PRNGKeyArray | None = None,
) -> TimeStep:
    """Checks that a pool of environments keeps podrace's contract, stepping it as
    [`podrace.Anakin`][] does: `reset` and `step` under one `jax.vmap` over `num_envs`
    environments, the steps inside one jitted `lax.scan`.

    The rules, by the names that errors use:

    - `timestep-types`: the time steps of `reset` and `step` have a `float32` reward and
        discount and `bool` flags, one per environment.
    - `stable-shapes-and-dtypes`: the state and the time step keep their tree structure,
        shapes and dtypes from `reset` to `step`, so that they can be a `lax.scan` carry.
    - `observation-and-action-spaces`: the actions lie in `action_space` and every
        observation of the run lies in `observation_space`.
    - `reset`: `reset` returns first time steps (`is_first`, reward 0, discount 1, not
        terminated or truncated).
    - `episode-boundaries`: a step is first exactly when the previous one was an
        episode's last (the pool starts the next episode itself, as
        [`podrace.envs.AutoReset`][] does), with reward 0 and discount 1; the discount is 0
        exactly when terminated; no step is both terminated and truncated.

    The run is returned, so that a test can check what the script of `actions` must
    give (a termination here, a truncation there).

    **Arguments:**

    - `env`: the pool to check.
    - `num_envs`: the size of the batch (the pool's).
    - `actions`: the actions of each step, `[T, num_envs]` leading axes; by default
        `num_steps` steps of uniformly random actions.
    - `num_steps`: the number of random steps, when `actions` is not given.
    - `key`: the randomness of the random actions (default `jax.random.key(0)`).

    **Returns:**

    The time steps of the run, time-major `[T + 1, num_envs]`: the reset's, then each
    step's.

    **Raises:**

    - `EnvCheckError`: naming the first broken rule, what was expected, what was found
        (where) and what to do.
    - `ValueError`: if `num_envs` or `num_steps` is not positive, or `actions` has not
        `num_envs` actions per step.
    """
    if num_envs <= 0 or num_steps <= 0:
        raise ValueError(f"check_pool_env needs num_envs > 0 and num_steps > 0, got {num_envs} and {num_steps}.")
    key = jax.random.key(0) if key is None else key
    if actions is None:
        sample = jax.vmap(jax.vmap(env.action_space.sample))
        actions = sample(jax.random.split(key, (num_steps, num_envs)))
    actions = jnp.asarray(actions)
    if actions.ndim < 2 or actions.shape[1] != num_envs:
        raise ValueError(
            f"check_pool_env takes actions of shape [T, num_envs={num_envs}, ...], got {actions.shape}; "
            "give one action per environment and step."
        )
    keys = jax.random.split(key, num_envs)
    reset = jax.eval_shape(jax.vmap(env.reset), keys)
    step = jax.eval_shape(jax.vmap(env.step), reset[0], actions[0], keys)
    _check_types(env, reset[1], num_envs, "reset")
    _check_types(env, step[1], num_envs, "step")
    if _layout(reset) != _layout(step):
        _fail(
            env,
            "stable-shapes-and-dtypes",
            expected=f"reset's state and time step {_layout(reset)}",
            found=f"step's {_layout(step)}",
            fix="return arrays of the same shapes and dtypes from reset and step",
        )

    def run(actions: Array) -> TimeStep:
        states, first = jax.vmap(env.reset)(keys)

        def one_step(states: Any, actions: Array) -> tuple[Any, TimeStep]:
            return jax.vmap(env.step)(states, actions, keys)

        _, timesteps = jax.lax.scan(one_step, states, actions)
        return jax.tree.map(lambda first, steps: jnp.concatenate([first[None], steps]), first, timesteps)

    timesteps = jax.jit(run)(actions)
    _check_spaces(env, actions, timesteps)
    _check_reset(env, jax.tree.map(lambda x: np.asarray(x[0]), timesteps))
    _check_boundaries(env, jax.tree.map(np.asarray, timesteps))
    return timesteps


def _fail(env: AbstractPoolEnv, rule: str, *, expected: str, found: str, fix: str) -> NoReturn:
    fail_check(env, rule, expected=expected, found=found, fix=fix, check="check_pool_env")


def _layout(tree: Any) -> str:
    leaves, structure = jax.tree.flatten(tree)
    return f"{structure} of {[(leaf.shape, str(leaf.dtype)) for leaf in leaves]}"


def _check_types(env: AbstractPoolEnv, timestep: TimeStep, num_envs: int, call: str) -> None:
    for name, dtype in TIMESTEP_DTYPES.items():
        leaf = getattr(timestep, name)
        if leaf.shape != (num_envs,) or leaf.dtype != dtype:
            _fail(
                env,
                "timestep-types",
                expected=f"{call}'s {name} of shape ({num_envs},) and dtype {jnp.dtype(dtype)}",
                found=f"shape {leaf.shape} and dtype {leaf.dtype}",
                fix="build time steps with TimeStep.first and TimeStep.transition",
            )


def _check_spaces(env: AbstractPoolEnv, actions: Array, timesteps: TimeStep) -> None:
    def contains(space: Any, values: Array) -> np.ndarray:
        return np.asarray(jax.vmap(jax.vmap(space.contains))(values))

    for what, space, values in (
        ("actions", env.action_space, actions),
        ("observations", env.observation_space, timesteps.observation),
    ):
        inside = contains(space, values)
        if not inside.all():
            t, i = np.argwhere(~inside)[0]
            _fail(
                env,
                "observation-and-action-spaces",
                expected=f"{what} in {type(space).__name__} {space}",
                found=f"{np.asarray(values[t, i])!r} at step {t}, environment {i}",
                fix=f"give actions from the action space, and make the {what} space hold what the pool returns",
            )


def _check_reset(env: AbstractPoolEnv, first: TimeStep) -> None:
    fine = first.is_first & (first.reward == 0) & (first.discount == 1) & ~first.terminated & ~first.truncated
    if not fine.all():
        (i,) = np.flatnonzero(~fine)[:1]
        _fail(
            env,
            "reset",
            expected="first time steps from reset (is_first, reward 0, discount 1, not terminated or truncated)",
            found=f"{_describe(jax.tree.map(lambda x: x[None], first), 0, i)} in environment {i}",
            fix="return TimeStep.first(observation) from reset",
        )


def _check_boundaries(env: AbstractPoolEnv, timesteps: TimeStep) -> None:
    is_last = timesteps.terminated | timesteps.truncated
    checks = (
        (
            timesteps.is_first[1:] == is_last[:-1],
            "a first step exactly after an episode's last step",
            "set is_first on the step after an episode ends (the pool's reset), and only there",
        ),
        (
            ~timesteps.is_first | ((timesteps.reward == 0) & (timesteps.discount == 1) & ~is_last),
            "reward 0, discount 1 and no end on a first step",
            "return TimeStep.first's values on the pool's reset steps",
        ),
        (
            (timesteps.discount == 0) == timesteps.terminated,
            "discount 0 exactly when terminated",
            "set the discount with TimeStep.transition",
        ),
        (
            ~(timesteps.terminated & timesteps.truncated),
            "never both terminated and truncated",
            "report an episode that ends in its absorbing state on its time limit's step as terminated only",
        ),
    )
    for fine, expected, fix in checks:
        if not fine.all():
            t, i = np.argwhere(~fine)[0]
            t += len(timesteps.is_first) - len(fine)  # the first check starts from the second time step
            found = f"{_describe(timesteps, t, i)} at step {t}, environment {i}"
            _fail(env, "episode-boundaries", expected=expected, found=found, fix=fix)


def _describe(timesteps: TimeStep, t: int, i: int) -> str:
    """The values of time step `t` of environment `i` of a run."""
    fields = ("is_first", "reward", "discount", "terminated", "truncated")
    return ", ".join(f"{name}={getattr(timesteps, name)[t, i]}" for name in fields)
