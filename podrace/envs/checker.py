"""A conformance check for environments: `check_env` runs an environment through the rules
that every podrace environment keeps, and names the rule, the step and the fix when one
is broken."""

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Key, PRNGKeyArray, PyTree

from .._types import Discrete, MaskedObservation, TimeStep
from ..agent import AbstractAgent
from ._base import AbstractEnv
from .wrappers import AutoReset


RULES = (
    "timestep-types",
    "observation-and-action-spaces",
    "legal-actions",
    "stable-shapes-and-dtypes",
    "jit-equals-eager",
    "vmap-equals-loop",
    "deterministic-under-a-key",
    "auto-reset",
    "step-traces-once",
)
"""The names of `check_env`'s rules, in the order of its documentation."""

TIMESTEP_DTYPES = {"reward": jnp.float32, "discount": jnp.float32} | dict.fromkeys(
    ("is_first", "terminated", "truncated"), jnp.bool_
)
"""The dtype of each scalar field of a time step (`TimeStep.first` and `TimeStep.transition` cast to them)."""
# jit and eager, or vmap and a loop, may round float32 differently (fused operations).
_RTOL = _ATOL = 1e-5
# How many reset keys, and steps of a chain from a reset, are compared.
_NUM_SAMPLES = 3


@final
class EnvCheckError(AssertionError):
    """An environment breaks one of [`podrace.envs.check_env`][]'s rules.

    **Arguments:**

    - `rule`: the name of the broken rule (one of `RULES`).
    - `message`: the environment, the rule, what was expected, what was found and what
        to do.
    """

    def __init__(self, rule: str, message: str):
        super().__init__(message)
        self.rule = rule


@final
class EnvCheckReport(eqx.Module):
    """What [`podrace.envs.check_env`][] checked.

    **Arguments:**

    - `env_name`: the environment's type, with the types it wraps.
    - `num_steps`: the number of random steps taken.
    - `passed`: the rules that hold, in the order of `RULES`.
    - `skipped`: the rules that could not be checked, each with the reason.
    """

    env_name: str
    num_steps: int
    passed: tuple[str, ...]
    skipped: dict[str, str]

    def __str__(self) -> str:
        header = (
            f"check_env({self.env_name}) over {self.num_steps} random steps: "
            f"{len(self.passed)} rules passed, {len(self.skipped)} skipped"
        )
        passed = [f"  passed   {rule}" for rule in self.passed]
        skipped = [f"  skipped  {rule}: {reason}" for rule, reason in self.skipped.items()]
        return "\n".join([header, *passed, *skipped])


def check_env(
    env: AbstractEnv,
    *,
    agent: AbstractAgent | None = None,
    key: PRNGKeyArray | None = None,
    num_steps: int = 200,
    rtol: float = _RTOL,
    atol: float = _ATOL,
) -> EnvCheckReport:
    """Checks that an environment keeps the contract of [`podrace.envs.AbstractEnv`][].

    The rules, by the names that errors and the report use:

    - `timestep-types`: `reset` and `step` return `(state, TimeStep)` with a `float32`
        scalar reward and discount and `bool` scalar flags; a reset returns
        `TimeStep.first`; the discount is 0 when terminated and 1 otherwise; terminated
        and truncated are never both set; `is_first` is set only by a reset.
    - `observation-and-action-spaces`: `step` accepts an action sampled from
        `action_space`, the sampled actions lie in it, and the observations of a random
        run lie in `observation_space`. The run takes `num_steps` uniformly random
        actions in `AutoReset(env)`, so that it visits several episodes; an environment
        that resets by itself (an `AutoReset`, or one that sets `is_first` on the step
        after an episode's end) is run as it is. Where the observations carry a
        legal-action mask ([`podrace.MaskedObservation`][]), the actions are uniformly
        random legal ones; with `agent`, the agent chooses them.
    - `legal-actions`: for an environment whose observations carry a legal-action mask,
        the action space is [`podrace.Discrete`][], each mask has one `bool` per action and
        allows at least one on every step that does not end an episode, and, with
        `agent`, the agent never chooses an action that its observation's mask forbids.
        Holds trivially for an environment without masks.
    - `stable-shapes-and-dtypes`: the state and the time step keep their tree structure,
        shapes and dtypes from `reset` to `step` and from step to step, so that they
        can be a `lax.scan` carry (a weakly typed leaf after `reset` may take the dtype
        that `lax.scan` promotes it to).
    - `jit-equals-eager`: jitted `reset` and `step` equal calls without jit.
    - `vmap-equals-loop`: `reset` vmapped over keys, and `step` over states, actions
        and keys, equal a Python loop.
    - `deterministic-under-a-key`: the same arguments give identical results twice.
    - `auto-reset`: the step after an episode's end is a first step (`is_first`, reward
        0, discount 1), and in an `AutoReset` the time step that ends an episode has the
        observation that the wrapped environment's `step` returns from the same state,
        action and key. Skipped if no episode ends before the run's last step.
    - `step-traces-once`: a jitted `step`, called on a reset's state and the states of
        the next steps with different actions and keys, traces once.

    The cheap rules come first: types and shapes are checked on `jax.eval_shape`
    before anything is compiled. Determinism is checked before `jit-equals-eager`, so
    that host randomness is reported as such.

    **Arguments:**

    - `env`: the environment to check.
    - `agent`: what acts in the random run (a network and a policy, e.g.
        `podrace.Agent(network, podrace.policies.EpsilonGreedy(1.0))`), to check that it
        never chooses a masked action; by default uniformly random (legal) actions.
    - `key`: the randomness of the run and of the samples (default `jax.random.key(0)`).
    - `num_steps`: the number of random steps, enough to end an episode.
    - `rtol`, `atol`: how far the floating values of `jit-equals-eager` and
        `vmap-equals-loop` may differ, float32 rounding by default. Physics with contacts
        solved iteratively (Brax's) can amplify rounding beyond it.

    **Returns:**

    An [`podrace.envs.EnvCheckReport`][] of the rules that passed and those skipped.

    **Raises:**

    - `EnvCheckError`: naming the first broken rule, what was expected, what was found
        (where, and the offending value) and what to do.
    - `ValueError`: if `num_steps` is not positive.
    """
    if num_steps <= 0:
        raise ValueError(f"check_env needs num_steps > 0 to step the environment, got {num_steps}.")
    if not (rtol >= 0 and atol >= 0):
        raise ValueError(f"check_env needs rtol >= 0 and atol >= 0, got rtol={rtol}, atol={atol}.")
    types_key, run_key, sample_key = jax.random.split(_typed_key(key), 3)
    _check_types_and_stability(env, types_key)
    run_env, run = _random_run_visiting_episodes(env, run_key, num_steps, agent)
    _check_timestep_values(env, run)
    _check_spaces(env, run)
    _check_legal_actions(env, run, agent)
    _check_samples(env, sample_key, (rtol, atol))
    reason = _check_auto_reset(env, run_env, run)
    skipped = {} if reason is None else {"auto-reset": reason}
    passed = tuple(rule for rule in RULES if rule not in skipped)
    return EnvCheckReport(_env_name(env), num_steps, passed, skipped)


# --------------------------------------------------------------------------------------
# Messages and trees.
# --------------------------------------------------------------------------------------


def _typed_key(key: PRNGKeyArray | None) -> PRNGKeyArray:
    if key is None:
        return jax.random.key(0)
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    return jax.random.wrap_key_data(key)  # a raw uint32 key (jax.random.PRNGKey)


def _env_name(env: AbstractEnv) -> str:
    inner = getattr(env, "env", None)
    return f"{type(env).__name__}({_env_name(inner)})" if isinstance(inner, AbstractEnv) else type(env).__name__


def fail_check(
    env: AbstractEnv, rule: str, *, expected: str, found: str, fix: str, check: str = "check_env"
) -> NoReturn:
    """Raises the `EnvCheckError` of `env` breaking `check`'s `rule`: what was expected, what
    was found and how to fix it, one line each."""
    raise EnvCheckError(
        rule,
        f"{_env_name(env)} breaks the {check} rule '{rule}'.\n"
        f"  expected: {expected}\n  found:    {found}\n  fix:      {fix}",
    )


def _describe(leaf: Any) -> str:
    if not hasattr(leaf, "dtype"):
        return repr(leaf)
    return f"{leaf.dtype}{list(leaf.shape)}" + (" (weakly typed)" if getattr(leaf, "weak_type", False) else "")


def _show(value: Any) -> str:
    return np.array2string(np.asarray(value), threshold=12, precision=6, separator=", ")


def _show_with_type(value: Any) -> str:
    """The values with their dtype and shape, which a space's `contains` also checks."""
    return f"{_describe(value)} {_show(value)}"


def _show_space(space: Any) -> str:
    """A space with its fields; an array that repeats one value (a bound) as that value."""

    def field(value: Any) -> str:
        if not isinstance(value, jax.Array | np.ndarray):
            return str(value)
        value = np.asarray(value)
        return _show(value.flat[0] if value.size and np.all(value == value.flat[0]) else value)

    fields = ", ".join(f"{f.name}={field(getattr(space, f.name))}" for f in dataclasses.fields(space))
    return f"{type(space).__name__}({fields})"


def _leaves(tree: Any) -> tuple[list[tuple[str, Any]], Any]:
    """The leaves with their paths (`state.position`, `timestep.reward`), and the tree
    structure."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
    return [(jax.tree_util.keystr(path, simple=True, separator="."), leaf) for path, leaf in leaves], treedef


def _named(output: tuple[Any, TimeStep]) -> dict[str, Any]:
    return {"state": output[0], "timestep": output[1]}


def _first(mask: np.ndarray) -> int | None:
    """The first index where `mask` is set, or `None`."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None


def _at(t: Any, tree: Any) -> Any:
    return jax.tree.map(lambda leaf: leaf[t], tree)


def _as_numpy(leaf: Any) -> np.ndarray:
    if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    return np.asarray(leaf)


def _difference(
    actual: Any, expected: Any, *, exact: bool = False, tolerance: tuple[float, float] = (_RTOL, _ATOL)
) -> str | None:
    """Where two pytrees first differ (structure, shape, dtype or values), or `None`.
    Floating leaves may differ by `tolerance` (rtol, atol), float32 rounding by default,
    unless `exact`."""
    (actual_leaves, actual_def), (expected_leaves, expected_def) = _leaves(actual), _leaves(expected)
    if actual_def != expected_def:
        return f"the tree structures differ, {actual_def} and {expected_def}"
    for (path, a), (_, e) in zip(actual_leaves, expected_leaves, strict=True):
        a, e = _as_numpy(a), _as_numpy(e)
        if a.shape != e.shape or a.dtype != e.dtype:
            return f"{path} is {_describe(a)} and {_describe(e)}"
        inexact = np.issubdtype(a.dtype, np.inexact)
        if inexact and not exact:
            same = np.allclose(a, e, rtol=tolerance[0], atol=tolerance[1], equal_nan=True)
        else:
            same = np.array_equal(a, e, equal_nan=inexact)
        if not same:
            return f"{path} is {_show(a)} and {_show(e)}"
    return None


# --------------------------------------------------------------------------------------
# timestep-types and stable-shapes-and-dtypes on shapes only (jax.eval_shape).
# --------------------------------------------------------------------------------------


def _output_shapes(env: AbstractEnv, rule: str, what: str, given: str, fn: Callable[..., Any], *args: Any) -> Any:
    """The output shapes of `fn(*args)` (`jax.eval_shape`), checked to be `(state,
    TimeStep)` with the time step's dtypes; an exception is reported as a broken `rule`."""
    try:
        output = jax.eval_shape(fn, *args)
    except Exception as error:
        fail_check(
            env,
            rule,
            expected=f"{what} to run (traced, under jax.eval_shape) given {given}",
            found=f"{type(error).__name__}: {error}",
            fix="compute on the key, state and action with jnp and lax, without Python control flow, indexing "
            "or conversions (int, float, bool) of their values, and accept every element of action_space",
        )
    if not (isinstance(output, tuple) and len(output) == 2 and isinstance(output[1], TimeStep)):
        fail_check(
            env,
            "timestep-types",
            expected=f"{what} to return a pair (state, TimeStep)",
            found=f"{type(output).__name__} {output}",
            fix="return the new state and a TimeStep (TimeStep.first on reset, TimeStep.transition on step)",
        )
    for name, dtype in TIMESTEP_DTYPES.items():
        field = getattr(output[1], name)
        if getattr(field, "dtype", None) != dtype or getattr(field, "shape", None) != ():
            fail_check(
                env,
                "timestep-types",
                expected=f"the time step of {what} to have a {name} of dtype {jnp.dtype(dtype)} and shape ()",
                found=f"{name} {_describe(field)}",
                fix="build time steps with TimeStep.first / TimeStep.transition, which cast reward, discount "
                "and flags to their dtypes, and keep the environment unbatched (vmap it instead)",
            )
    return output


def _carry_mismatches(before: Any, after: Any) -> list[str]:
    """How `after` differs from `before` in a way that a `lax.scan` carry does not allow."""
    (before_leaves, before_def), (after_leaves, after_def) = _leaves(before), _leaves(after)
    if before_def != after_def:
        return [f"the tree structure changes from {before_def} to {after_def}"]
    mismatches = []
    for (path, old), (_, new) in zip(before_leaves, after_leaves, strict=True):
        # lax.scan promotes a weakly typed initial carry to the dtype of the body's output.
        promoted = old.weak_type and jnp.result_type(old, new.dtype) == new.dtype
        if old.shape != new.shape or (old.dtype != new.dtype and not promoted):
            mismatches.append(f"{path} changes from {_describe(old)} to {_describe(new)}")
    return mismatches


def _check_types_and_stability(env: AbstractEnv, key: PRNGKeyArray) -> None:
    """`timestep-types` on types, `observation-and-action-spaces` on accepting a sampled
    action, and `stable-shapes-and-dtypes`: a reset and two steps, on shapes only."""
    reset_key, action_key, step_key = jax.random.split(key, 3)
    outputs = [_output_shapes(env, "timestep-types", "reset", "a key", env.reset, reset_key)]
    action = env.action_space.sample(action_key)
    given = f"the action {_show(action)} sampled from action_space"
    for step in (1, 2):
        args = (outputs[-1][0], action, step_key)
        outputs.append(_output_shapes(env, "observation-and-action-spaces", f"step {step}", given, env.step, *args))
    for step, (before, after) in enumerate(itertools.pairwise(outputs), start=1):
        mismatches = _carry_mismatches(_named(before), _named(after))
        if mismatches:
            fail_check(
                env,
                "stable-shapes-and-dtypes",
                expected="the state and the time step to keep their tree structure, shapes and dtypes from "
                "reset to step and from step to step (a lax.scan carry)",
                found=f"from {'the reset' if step == 1 else 'step 1'} to step {step}, " + "; ".join(mismatches),
                fix="give every leaf the same shape and an explicit dtype in reset and step, e.g. "
                "jnp.asarray(0, jnp.int32) and state.t + jnp.int32(1), and no Python scalars",
            )


# --------------------------------------------------------------------------------------
# A random run: timestep-types and observation-and-action-spaces on values, auto-reset.
# --------------------------------------------------------------------------------------


@final
class _RandomRun(eqx.Module):
    """A run of uniformly random (legal) actions, or of an agent's: `timesteps[0]` comes
    from the reset and `timesteps[t]` from step `t`, which took `actions[t - 1]` and
    `keys[t - 1]` from `states[t - 1]`."""

    states: PyTree[Array]
    actions: PyTree[Array]
    keys: Key[Array, " num_steps"]
    timesteps: TimeStep
    action_in_space: Bool[Array, " num_steps"]
    observation_in_space: Bool[Array, " num_steps+1"]

    @property
    def ends(self) -> np.ndarray:
        """The steps that end an episode and are followed by another step."""
        return np.flatnonzero(np.asarray(self.timesteps.is_last)[:-1])


def _reset(env: AbstractEnv, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
    return env.reset(key)


def _step(env: AbstractEnv, state: Any, action: Array, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
    return env.step(state, action, key)


def _choose(
    env: AbstractEnv, agent: AbstractAgent | None, timestep: TimeStep, carry: PyTree[Array], key: PRNGKeyArray
) -> tuple[Array, PyTree[Array]]:
    """The action of a random run at `timestep`: the agent's, a uniformly random legal one
    where the observation carries a mask, or a uniformly random one; with the agent's carry."""
    if agent is not None:
        policy_step, carry = agent(timestep.observation, agent.reset_carry(carry, timestep.is_first), key)
        return policy_step.action, carry
    if isinstance(timestep.observation, MaskedObservation):
        return timestep.observation.random_legal_action(key), carry
    return env.action_space.sample(key), carry


def _random_run(env: AbstractEnv, key: PRNGKeyArray, num_steps: int, agent: AbstractAgent | None) -> _RandomRun:
    reset_key, key = jax.random.split(key)
    state, first = env.reset(reset_key)
    carry = () if agent is None else agent.initial_carry()

    def body(loop, key):
        state, timestep, carry = loop
        action_key, step_key = jax.random.split(key)
        action, carry = _choose(env, agent, timestep, carry, action_key)
        next_state, next_timestep = env.step(state, action, step_key)
        return (next_state, next_timestep, carry), (state, action, step_key, next_timestep)

    loop = (state, first, carry)
    _, (states, actions, keys, timesteps) = jax.lax.scan(body, loop, jax.random.split(key, num_steps))
    timesteps = jax.tree.map(lambda f, rest: jnp.concatenate([f[None], rest]), first, timesteps)
    action_in_space = jax.vmap(env.action_space.contains)(actions)
    observation_in_space = jax.vmap(env.observation_space.contains)(timesteps.observation)
    return _RandomRun(states, actions, keys, timesteps, action_in_space, observation_in_space)


_RANDOM_RUN = eqx.filter_jit(_random_run)
_JIT_RESET = eqx.filter_jit(_reset)
_JIT_STEP = eqx.filter_jit(_step)


def _random_run_visiting_episodes(
    env: AbstractEnv, key: PRNGKeyArray, num_steps: int, agent: AbstractAgent | None
) -> tuple[AbstractEnv, _RandomRun]:
    """A random run of `AutoReset(env)`, or of `env` if it resets by itself; with the
    environment run."""
    if isinstance(env, AutoReset):
        return env, _RANDOM_RUN(env, key, num_steps, agent)
    run_env = AutoReset(env)
    run = _RANDOM_RUN(run_env, key, num_steps, agent)
    if run.ends.size:
        # Up to the first end both runs agree: see what env alone does on the next step.
        t = run.ends[0]
        _, timestep = _JIT_STEP(env, *_at(t, (run.states.env_state, run.actions, run.keys)))
        if timestep.is_first:
            return env, _RANDOM_RUN(env, key, num_steps, agent)
    return run_env, run


def _check_timestep_values(env: AbstractEnv, run: _RandomRun) -> None:
    """`timestep-types` on the values of a random run."""
    first, reward, discount, terminated, truncated = (
        np.asarray(getattr(run.timesteps, name))
        for name in ("is_first", "reward", "discount", "terminated", "truncated")
    )
    if not (first[0] and reward[0] == 0 and discount[0] == 1 and not terminated[0] and not truncated[0]):
        fail_check(
            env,
            "timestep-types",
            expected="reset to return TimeStep.first(observation): is_first True, reward 0, discount 1, "
            "terminated and truncated False",
            found=f"is_first={first[0]}, reward={reward[0]}, discount={discount[0]}, "
            f"terminated={terminated[0]}, truncated={truncated[0]}",
            fix="return TimeStep.first(observation) from reset",
        )
    if (t := _first(terminated & truncated)) is not None:
        fail_check(
            env,
            "timestep-types",
            expected="terminated and truncated never both set",
            found=f"both set on step {t}",
            fix="report an episode that terminates on its time limit as terminated only "
            "(TimeStep.transition clears truncated when terminated)",
        )
    if (t := _first(discount != np.where(terminated, 0.0, 1.0))) is not None:
        fail_check(
            env,
            "timestep-types",
            expected="discount 0 when terminated and 1 otherwise",
            found=f"discount {discount[t]} with terminated={terminated[t]} on step {t}",
            fix="build time steps with TimeStep.transition(observation, reward, terminated, truncated), "
            "which sets the discount from terminated",
        )
    if (t := _first(first[1:] & ~(terminated | truncated)[:-1])) is not None:
        fail_check(
            env,
            "timestep-types",
            expected="is_first False on every step that does not follow an episode's end",
            found=f"is_first set on step {t + 1}, after a step that did not end the episode",
            fix="return TimeStep.transition(...) from step: only a reset starts an episode",
        )


def _check_spaces(env: AbstractEnv, run: _RandomRun) -> None:
    """`observation-and-action-spaces` on the values of a random run."""
    if (t := _first(~np.asarray(run.action_in_space))) is not None:
        fail_check(
            env,
            "observation-and-action-spaces",
            expected=f"the actions sampled from action_space to lie in it ({_show_space(env.action_space)})",
            found=f"the action {_show_with_type(_at(t, run.actions))} of step {t + 1}",
            fix="make action_space.sample and action_space.contains agree (shape, dtype and bounds)",
        )
    if (t := _first(~np.asarray(run.observation_in_space))) is not None:
        fail_check(
            env,
            "observation-and-action-spaces",
            expected=f"every observation to lie in observation_space ({_show_space(env.observation_space)})",
            found=f"the observation of {f'step {t}' if t else 'the reset'}: "
            f"{jax.tree.map(_show_with_type, _at(t, run.timesteps.observation))}",
            fix="declare an observation_space that covers every reachable observation (shape, dtype and "
            "bounds), or clip or rescale the observation into it",
        )


def _check_legal_actions(env: AbstractEnv, run: _RandomRun, agent: AbstractAgent | None) -> None:
    """`legal-actions` on the values of a random run."""
    observation = run.timesteps.observation
    if not isinstance(observation, MaskedObservation):
        return
    action_space = env.action_space
    if not isinstance(action_space, Discrete):
        fail_check(
            env,
            "legal-actions",
            expected="observations with a legal-action mask to come with a Discrete action space",
            found=f"the action space {_show_space(action_space)}",
            fix="mask the actions of a Discrete action space only, or leave the mask out of the observations",
        )
    mask = np.asarray(observation.action_mask)
    if mask.dtype != np.bool_ or mask.shape[1:] != (action_space.num_values,):
        fail_check(
            env,
            "legal-actions",
            expected=f"each action mask to be bool of shape ({action_space.num_values},), one flag per action",
            found=f"masks of {_describe(mask[0])}",
            fix="build MaskedObservation(observation, action_mask) with a bool flag for each action",
        )
    ongoing = ~np.asarray(run.timesteps.is_last)
    if (t := _first(ongoing & ~mask.any(axis=1))) is not None:
        fail_check(
            env,
            "legal-actions",
            expected="at least one legal action on every step that does not end an episode",
            found=f"no legal action on {f'step {t}' if t else 'the reset'}, which does not end the episode",
            fix="end the episode where no action is legal (or give a legal action, such as a pass)",
        )
    if agent is None:
        return
    actions = np.asarray(run.actions)
    chosen_legal = mask[np.arange(actions.shape[0]), actions] | ~mask[:-1].any(axis=1)
    if (t := _first(~chosen_legal)) is not None:
        fail_check(
            env,
            "legal-actions",
            expected="the agent to choose only actions that the observation's mask allows",
            found=f"action {actions[t]} at {f'step {t}' if t else 'the reset'}, whose mask is {_show(mask[t])}",
            fix="apply the mask to the network's output (podrace.networks.split_action_mask and "
            "apply_action_mask, as podrace's networks do) and act with a discrete policy of podrace.policies",
        )


def _check_auto_reset(env: AbstractEnv, run_env: AbstractEnv, run: _RandomRun) -> str | None:
    """`auto-reset`; returns why it is skipped, or `None` once checked."""
    num_steps = run.timesteps.reward.shape[0] - 1
    if run.ends.size == 0:
        return f"no episode ended before the last of {num_steps} random steps; raise num_steps"
    is_first, reward, discount = (
        np.asarray(x)[run.ends + 1] for x in (run.timesteps.is_first, run.timesteps.reward, run.timesteps.discount)
    )
    if (i := _first(~(is_first & (reward == 0) & (discount == 1)))) is not None:
        t = run.ends[i]
        fail_check(
            env,
            "auto-reset",
            expected=f"the step after the episode's end on step {t} to be a first step: is_first True, "
            "reward 0, discount 1",
            found=f"step {t + 1} has is_first={is_first[i]}, reward={reward[i]}, discount={discount[i]}",
            fix="on the step after an end, ignore the action and return a reset's time step "
            "(TimeStep.first), as podrace.envs.AutoReset does",
        )
    if isinstance(run_env, AutoReset):
        t = run.ends[0]
        _, timestep = _JIT_STEP(run_env.env, *_at(t - 1, (run.states.env_state, run.actions, run.keys)))
        difference = _difference(_at(t, run.timesteps.observation), timestep.observation)
        if difference is not None:
            fail_check(
                env,
                "auto-reset",
                expected=f"the episode's last time step (step {t}) to keep the observation of the wrapped "
                "environment's step from the same state, action and key",
                found=f"in AutoReset, then stepped alone: {difference}",
                fix="return the last time step of an episode as it is and reset on the next step only",
            )
    return None


# --------------------------------------------------------------------------------------
# Samples: deterministic-under-a-key, jit-equals-eager, vmap-equals-loop, traces.
# --------------------------------------------------------------------------------------


@eqx.filter_jit
def _vmapped(env: AbstractEnv, reset_keys: Any, states: Any, actions: Any, keys: Any) -> list[tuple[Any, TimeStep]]:
    """`reset` vmapped over keys and `step` over states, actions and keys, compiled once."""
    return [eqx.filter_vmap(env.reset)(reset_keys), eqx.filter_vmap(env.step)(states, actions, keys)]


def _stack(trees: Sequence[Any]) -> Any:
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


def _check_same(
    env: AbstractEnv,
    rule: str,
    labels: list[str],
    outputs: list,
    references: list,
    *,
    exact: bool = False,
    tolerance: tuple[float, float] = (_RTOL, _ATOL),
    **text: str,
) -> None:
    """Raises `rule` at the first pair of outputs and references that differ."""
    for label, output, reference in zip(labels, outputs, references, strict=True):
        difference = _difference(_named(output), _named(reference), exact=exact, tolerance=tolerance)
        if difference is not None:
            fail_check(env, rule, found=f"{label}: {difference}", **text)


def _check_samples(env: AbstractEnv, key: PRNGKeyArray, tolerance: tuple[float, float]) -> None:
    """`deterministic-under-a-key`, `jit-equals-eager`, `vmap-equals-loop` and
    `step-traces-once`, on a few resets and a chain of steps from a reset."""
    rtol, atol = tolerance
    counted_step = eqx.debug.assert_max_traces(_step, max_traces=None)
    jit_step = eqx.filter_jit(counted_step)
    reset_key, chain_key = jax.random.split(key)
    reset_keys = list(jax.random.split(reset_key, _NUM_SAMPLES))
    # The chain starts from a reset's own state (not a copy through lax.scan), so that a
    # state whose types differ after reset and after step shows up as a retrace.
    calls = []
    state, _ = _JIT_RESET(env, reset_keys[0])
    for k in jax.random.split(chain_key, _NUM_SAMPLES):
        action_key, step_key, next_reset_key = jax.random.split(k, 3)
        calls.append((state, env.action_space.sample(action_key), step_key))
        state, timestep = jit_step(env, *calls[-1])
        if timestep.is_last:
            state, _ = _JIT_RESET(env, next_reset_key)

    def outputs(reset, step):
        return [reset(env, k) for k in reset_keys] + [step(env, *call) for call in calls]

    labels = [f"reset with sample key {i}" for i in range(_NUM_SAMPLES)]
    labels += [f"step {i + 1} of a chain from a reset" for i in range(_NUM_SAMPLES)]
    jitted = outputs(_JIT_RESET, jit_step)
    _check_same(
        env,
        "deterministic-under-a-key",
        labels,
        outputs(_JIT_RESET, jit_step),
        jitted,
        exact=True,
        expected="the same arguments (state, action, key) to give identical results twice; shown: second, first",
        fix="draw all randomness from the key with jax.random, none on the host (NumPy, random, time), "
        "also not in callbacks",
    )
    _check_same(
        env,
        "jit-equals-eager",
        labels,
        jitted,
        outputs(_reset, _step),
        tolerance=tolerance,
        expected=f"jitted reset and step to equal calls without jit (rtol={rtol}, atol={atol}); shown: jit, eager",
        fix="keep reset and step pure functions of their arguments: read or write no Python globals, "
        "counters or mutable attributes, draw no host randomness, and branch on arrays with jnp.where "
        "or lax.cond",
    )
    _check_same(
        env,
        "vmap-equals-loop",
        [f"reset vmapped over {_NUM_SAMPLES} keys", f"step vmapped over {_NUM_SAMPLES} states, actions and keys"],
        _vmapped(env, _stack(reset_keys), *_stack(calls)),
        [_stack(jitted[:_NUM_SAMPLES]), _stack(jitted[_NUM_SAMPLES:])],
        tolerance=tolerance,
        expected=f"vmapped reset and step to equal a loop (rtol={rtol}, atol={atol}); shown: vmap, loop",
        fix="make reset and step functions of one example's arguments; a host callback under vmap must "
        "treat every batch element alike (jax.pure_callback with vmap_method='sequential')",
    )
    num_traces = eqx.debug.get_num_traces(counted_step)
    if num_traces != 1:
        signatures = [_leaves({"state": s, "action": a, "key": k})[0] for s, a, k in calls]
        changes = {
            f"{path} is {_describe(leaf)} then {_describe(later)}"
            for before, after in itertools.pairwise(signatures)
            for (path, leaf), (_, later) in zip(before, after, strict=False)
            if _describe(leaf) != _describe(later)
        }
        fail_check(
            env,
            "step-traces-once",
            expected=f"a jitted step to trace once for {_NUM_SAMPLES} calls whose arguments differ in value only",
            found=f"{num_traces} traces; arguments whose type changes: {'; '.join(sorted(changes)) or 'none'}",
            fix="give the state the same dtypes and weak types after reset as after step (build leaves with "
            "an explicit dtype, e.g. jnp.asarray(0, jnp.int32)) and keep Python numbers out of the state",
        )
