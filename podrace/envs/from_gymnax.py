"""An adapter that runs any gymnax environment as a podrace environment."""

import dataclasses
from collections.abc import Hashable
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jaxtyping import Array, PRNGKeyArray, PyTree

from .._types import AbstractSpace, Box, Discrete, TimeStep
from .._validation import unknown_name
from ._base import AbstractEnv
from ._packages import default_numpy_rules, import_package


def _import_gymnax() -> Any:
    return import_package("gymnax", extra="gymnax", owner="GymnaxEnv")


def gymnax_ids() -> list[str]:
    """The names of gymnax's registered environments."""
    return list(_import_gymnax().registered_envs)


# --------------------------------------------------------------------------------------
# Env params: numeric leaves become arrays, except those an environment needs as values.
# --------------------------------------------------------------------------------------


@final
class _StaticLeaf(eqx.Module):
    """A leaf of gymnax env params kept as a Python value, part of the tree structure.

    gymnax code that needs a leaf's value while tracing (a shape, Python control flow)
    fails when the leaf is an array; such a leaf is held here, hashed with the
    adapter's static structure. An array-valued leaf is held by its bytes (an array is
    not hashable) and given back as a read-only NumPy array.

    **Arguments:**

    - `value`: the leaf, or `(bytes, shape, dtype)` of an array leaf.
    - `is_array`: whether `value` describes an array.
    """

    value: Hashable = eqx.field(static=True)
    is_array: bool = eqx.field(static=True, default=False)

    @classmethod
    def wrap(cls, leaf: Any) -> "_StaticLeaf":
        if isinstance(leaf, np.ndarray | jax.Array):
            array = np.asarray(leaf)
            return cls((array.tobytes(), array.shape, array.dtype.str), is_array=True)
        return cls(leaf)

    def unwrap(self) -> Any:
        if self.is_array:
            data, shape, dtype = self.value  # pyright: ignore[reportGeneralTypeIssues]
            return np.frombuffer(data, dtype).reshape(shape)
        return self.value


def _is_static_leaf(x: Any) -> bool:
    return isinstance(x, _StaticLeaf)


def _unwrap_params(params: PyTree) -> PyTree:
    """The params as gymnax takes them: static leaves back to their values."""
    return jax.tree.map(lambda x: x.unwrap() if _is_static_leaf(x) else x, params, is_leaf=_is_static_leaf)


_PYTHON_NUMBERS = bool | int | float | complex


def _as_array(leaf: Any) -> Array | None:
    """A numeric leaf as a JAX array (arrays and tracers as they are); None otherwise."""
    if isinstance(leaf, jax.Array):
        return leaf
    if isinstance(leaf, _PYTHON_NUMBERS | np.generic | np.ndarray):
        if np.asarray(leaf).dtype.kind not in "biufc":
            return None
        try:
            return jnp.asarray(leaf)
        except (OverflowError, TypeError):  # e.g. a Python int beyond int32
            return None
    return None


def _as_arrays(tree: PyTree) -> PyTree:
    """Python numbers and NumPy arrays in `tree` as JAX arrays."""
    return jax.tree.map(
        lambda x: jnp.asarray(x) if isinstance(x, _PYTHON_NUMBERS | np.generic | np.ndarray) else x, tree
    )


# --------------------------------------------------------------------------------------
# Spaces.
# --------------------------------------------------------------------------------------


def _env_name(env: Any) -> str:
    name = getattr(env, "name", None)
    return name if isinstance(name, str) else type(env).__name__


def _shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, int | np.integer) else tuple(int(size) for size in shape)


def _bound(bound: Any, dtype: np.dtype) -> Array:
    """A gymnax space bound in `dtype`; float bounds of an integer space are clipped to
    its range first (gymnax writes unbounded as +-float32 max)."""
    bound = jnp.asarray(bound)
    if jnp.issubdtype(dtype, jnp.integer) and jnp.issubdtype(bound.dtype, jnp.floating):
        info = jnp.iinfo(dtype)
        largest = float(info.max)
        if float(np.float32(largest)) > largest:  # e.g. int32: float32(2**31 - 1) rounds up to 2**31
            largest = float(np.nextafter(np.float32(largest), np.float32(0)))
        bound = jnp.clip(bound, float(info.min), largest)
    return bound.astype(dtype)


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _memory_chain_bounds(low: Array, high: Array, params: PyTree) -> tuple[Array, Array]:
    # [1 - time / memory_length, query, 2 * context bit - 1]: the time entry reaches
    # -1 / memory_length on an episode's last step, the context bits are -1 or 1.
    return jnp.minimum(low, -1.0), high


def _umbrella_chain_bounds(low: Array, high: Array, params: PyTree) -> tuple[Array, Array]:
    # [need umbrella, has umbrella, 1 - time / chain_length, distractors]: on an
    # episode's last step XLA may round the time entry to just below 0 (-1.5e-8).
    return low.at[2].min(-float(np.finfo(np.float32).eps)), high


def _mnist_bandit_bounds(low: Array, high: Array, params: PyTree) -> tuple[Array, Array]:
    # gymnax reads MNIST's 0..255 pixels as int8 (-128..127) before dividing by 255.
    return jnp.minimum(low, -128 / 255), high


def _gaussian_bandit_bounds(low: Array, high: Array, params: PyTree) -> tuple[Array, Array]:
    # [last reward, one-hot last action, time]: the reward is Gaussian; the time is
    # normalised to [-1, 1] by default.
    return low.at[0].min(-_FLOAT32_MAX).at[3].min(-1.0), high.at[0].max(_FLOAT32_MAX)


def _meta_maze_bounds(low: Array, high: Array, params: PyTree) -> tuple[Array, Array]:
    # [receptive field, one-hot last action, last reward, time]: the reward is
    # params.reward at the goal plus params.punishment on a wall; the time is
    # normalised to [-1, 1] if params.normalize_time.
    rewards = jnp.stack([params.reward, params.punishment, params.reward + params.punishment])
    return low.at[-2].min(jnp.min(rewards)).at[-1].min(-1.0), high.at[-2].max(jnp.max(rewards))


OBSERVATION_BOUNDS_CORRECTIONS = {
    "gymnax.environments.bsuite.memory_chain.MemoryChain": _memory_chain_bounds,
    "gymnax.environments.bsuite.umbrella_chain.UmbrellaChain": _umbrella_chain_bounds,
    "gymnax.environments.bsuite.mnist.MNISTBandit": _mnist_bandit_bounds,
    "gymnax.environments.misc.gaussian_bandit.GaussianBandit": _gaussian_bandit_bounds,
    "gymnax.environments.misc.meta_maze.MetaMaze": _meta_maze_bounds,
}
"""The gymnax environment classes (by module and name) whose observations leave the
`Box` they declare (in gymnax 1.0), each with the function that widens the declared
`(low, high)`, given the env params, to cover them. It only widens, so that bounds
fixed in a later gymnax stay covered."""


def _class_path(env: Any) -> str:
    return f"{type(env).__module__}.{type(env).__qualname__}"


def _convert_space(space: Any, env: Any, role: str, observation: jax.ShapeDtypeStruct | None = None) -> AbstractSpace:
    """podrace's space for a gymnax `Discrete` or `Box`, or a copy of those classes (as
    Craftax's, which carry the same fields).

    For an observation space, `observation` is the observations' shape and dtype (see
    `_probe`): a Box takes its dtype from it, and a mismatched shape is an error.
    """
    kind = type(space).__name__
    if kind == "Discrete" and hasattr(space, "n"):
        if observation is not None and (observation.shape != () or not jnp.issubdtype(observation.dtype, jnp.integer)):
            raise ValueError(
                f"The gymnax environment {_env_name(env)} declares the observation space {space!r} but its "
                f"observations are {observation.dtype}{list(observation.shape)}, not scalar integers."
            )
        return Discrete(int(space.n))
    if kind == "Box" and all(hasattr(space, field) for field in ("low", "high", "shape", "dtype")):
        shape = _shape(space.shape)
        dtype = jnp.dtype(space.dtype)
        if observation is not None:
            if tuple(observation.shape) != shape:
                raise ValueError(
                    f"The gymnax environment {_env_name(env)} declares the observation space {space!r} but its "
                    f"observations have shape {tuple(observation.shape)}."
                )
            dtype = jnp.dtype(observation.dtype)
        return Box(_bound(space.low, dtype), _bound(space.high, dtype), shape, dtype)
    raise ValueError(
        f"GymnaxEnv converts gymnax Discrete and Box spaces only; the {role} space of the gymnax environment "
        f"{_env_name(env)} is {space!r} ({type(space).__module__}.{type(space).__qualname__}). Flatten it "
        "into a Box in a gymnax wrapper first."
    )


def _observation_space(env: Any, params: PyTree, observation: jax.ShapeDtypeStruct) -> AbstractSpace:
    with default_numpy_rules():
        space = _convert_space(env.observation_space(params), env, "observation", observation)
        widen = OBSERVATION_BOUNDS_CORRECTIONS.get(_class_path(env))
        if widen is None or not isinstance(space, Box):
            return space
        low, high = widen(space.low, space.high, params)
    return Box(low, high, space.shape, space.dtype)


def _action_space(env: Any, params: PyTree) -> AbstractSpace:
    with default_numpy_rules():
        space = env.action_space(params)
    return _convert_space(space, env, "action")


# --------------------------------------------------------------------------------------
# Transitions.
# --------------------------------------------------------------------------------------


def _reset(env: Any, params: PyTree, key: PRNGKeyArray) -> tuple[PyTree, TimeStep]:
    with default_numpy_rules():
        observation, state = env.reset_env(key, params)
    return state, TimeStep.first(_as_arrays(observation))


def _step(env: Any, params: PyTree, state: PyTree, action: Array, key: PRNGKeyArray) -> tuple[PyTree, TimeStep]:
    with default_numpy_rules():
        observation, next_state, reward, done, _ = env.step_env(key, state, action, params)
        truncated = env.is_truncated(next_state, params) if hasattr(env, "is_truncated") else None
    done = jnp.asarray(done, bool)
    if truncated is not None:
        # gymnax >= 1.0: `done` is the natural termination, the time limit is apart.
        terminated = done
        truncated = jnp.asarray(truncated, bool)
    elif hasattr(next_state, "time") and hasattr(params, "max_steps_in_episode"):
        # gymnax 0.0.x: `done` includes the time limit; a done on the limit's step is a truncation.
        truncated = done & (next_state.time >= params.max_steps_in_episode)
        terminated = done & ~truncated
    else:
        terminated, truncated = done, jnp.asarray(False)
    timestep = TimeStep.transition(_as_arrays(observation), reward, terminated, truncated)
    return next_state, timestep


Dtypes = tuple[Any, ...]
"""The dtypes of a state's leaves: NumPy dtypes, or JAX's key dtypes for a key that an
environment keeps in its state (Craftax's)."""


def _joined_dtypes(*trees: PyTree) -> Dtypes:
    """For each leaf of `trees` (one state or observation, from a reset and a step), the
    strong dtype that holds all of its values: JAX's promotion of the leaf's dtypes, in
    which a weakly typed leaf takes the dtype of a strong one (a Python `0` after a
    reset and an `int32` after a step are `int32`; a weakly typed `float32` alone is a
    strong `float32`)."""
    leaves = [jax.tree.leaves(tree) for tree in trees]
    with default_numpy_rules():
        return tuple(jnp.result_type(*leaf) for leaf in zip(*leaves, strict=True))


def _cast(tree: PyTree, dtypes: Dtypes) -> PyTree:
    """`tree` with each leaf an array of its dtype in `dtypes` (in leaf order)."""
    leaves, treedef = jax.tree.flatten(tree)
    return jax.tree.unflatten(treedef, [jnp.asarray(x, dtype) for x, dtype in zip(leaves, dtypes, strict=True)])


def _probe(env: Any, params: PyTree) -> tuple[jax.ShapeDtypeStruct, Dtypes]:
    """Traces a reset, both spaces and steps with `params` (arrays as abstract inputs,
    static leaves as values). Returns the observation's shape and a dtype that holds the
    observations of the reset and the steps, and the dtypes of the state's leaves: the
    least (strong) dtypes that hold the reset's state and in which a step returns a
    state that they hold, found by joining them with a step's (`_joined_dtypes`) until
    they no longer change. Raises what gymnax raises when some leaf cannot be traced."""
    dynamic, static = eqx.partition(params, eqx.is_array)
    found: list[Dtypes] = []  # the state's dtypes, static values found while tracing

    def run(dynamic: PyTree) -> Array:
        gymnax_params = _unwrap_params(eqx.combine(dynamic, static))
        reset_key, action_key, step_key = jax.random.split(jax.random.key(0), 3)
        state, first = _reset(env, gymnax_params, reset_key)
        observation = first.observation
        if not isinstance(observation, jax.Array):
            raise ValueError(
                f"GymnaxEnv needs array observations; the gymnax environment {_env_name(env)} returns "
                f"{type(observation).__name__} observations."
            )
        action = _action_space(env, gymnax_params).sample(action_key)
        observations = [observation]
        dtypes, previous = _joined_dtypes(state), None
        while dtypes != previous:  # the join only widens dtypes, so it stops
            state = _cast(state, dtypes)
            next_state, timestep = _step(env, gymnax_params, state, action, step_key)
            if jax.tree.structure(next_state) != jax.tree.structure(state):
                raise ValueError(
                    f"The gymnax environment {_env_name(env)} returns states of different tree structures "
                    f"from reset and step: {jax.tree.structure(state)} and {jax.tree.structure(next_state)}."
                )
            observations.append(timestep.observation)
            dtypes, previous = _joined_dtypes(state, next_state), dtypes
        found.append(dtypes)
        (dtype,) = _joined_dtypes(*observations)
        _observation_space(env, gymnax_params, jax.ShapeDtypeStruct(observation.shape, dtype))
        return jnp.zeros(observation.shape, dtype)

    observation = jax.eval_shape(run, dynamic)
    return observation, found[-1]


def _to_arrays_where_traceable(env: Any, params: PyTree) -> tuple[PyTree, tuple[jax.ShapeDtypeStruct, Dtypes]]:
    """`params` with each numeric leaf as an array, except leaves that gymnax cannot
    trace as arrays (kept as `_StaticLeaf`); and what `_probe` returns for them.

    First all numeric leaves are tried as arrays (one trace, enough for every env
    registered in gymnax 1.0). If that fails, the env must work with all leaves as
    values (else its own error is raised), and leaves are made arrays one at a time,
    each kept as an array if the trace still works: what remains static is exactly what
    the environment needs as a value, whatever the reason. Leaves that are tracers (the
    adapter built under `vmap` or `jit`) have no value and are always arrays.
    """
    leaves, treedef = jax.tree.flatten(params)
    arrays = [_as_array(leaf) for leaf in leaves]
    candidates = [i for i, array in enumerate(arrays) if array is not None]
    traced = {i for i in candidates if isinstance(leaves[i], Tracer)}

    def build(dynamic: set[int]) -> PyTree:
        return jax.tree.unflatten(
            treedef,
            [arrays[i] if i in dynamic else _StaticLeaf.wrap(leaf) for i, leaf in enumerate(leaves)],
        )

    def attempt(dynamic: set[int]) -> tuple[jax.ShapeDtypeStruct, Dtypes] | None:
        try:
            return _probe(env, build(dynamic))
        except Exception:  # any failure of a trace that works with values marks a static leaf
            return None

    dynamic = set(candidates)
    probed = attempt(dynamic)
    if probed is None:
        dynamic = set(traced)
        probed = _probe(env, build(dynamic))  # raises the environment's own error
        for i in candidates:
            if i in traced:
                continue
            found = attempt(dynamic | {i})
            if found is not None:
                dynamic.add(i)
                probed = found
    return build(dynamic), probed


# --------------------------------------------------------------------------------------
# The adapter.
# --------------------------------------------------------------------------------------


@final
class GymnaxEnv(AbstractEnv[Any]):
    """A gymnax environment as a podrace environment.

    The state is gymnax's own state, each leaf an array of one strong dtype from the
    reset on (see **Dtypes**). `reset` calls the
    environment's `reset_env` and returns `TimeStep.first`; `step` calls `step_env`,
    not gymnax's auto-resetting `step`, so the final observation of an episode stays
    in its last time step: wrap the adapter in [`podrace.envs.AutoReset`][] to start
    new episodes. `step_env`'s `info` dictionary is dropped. (DeepSea-bsuite's `step`
    carries its bsuite diagnostics `total_bad_episodes` and `denoised_return` across
    resets; `AutoReset` resets them with the rest of the state. Observations, rewards
    and episode ends are the same.)

    **Terminated or truncated.** With gymnax >= 1.0, `step_env` returns the natural
    termination and the time limit is `env.is_truncated(next_state, params)` (usually
    `next_state.time >= params.max_steps_in_episode`); a step that does both is
    terminated only (discount 0). gymnax 0.0.x's `step_env` returns one `done` that
    includes the time limit and its environments have no `is_truncated` method: that
    absence selects the old rules. A `done` step is truncated if
    `next_state.time >= params.max_steps_in_episode` (when the state has a `time` and
    the params a `max_steps_in_episode`; a natural end on the limit's step therefore
    counts as a truncation, as the old API cannot tell them apart) and terminated
    otherwise; without a time counter every `done` is a termination. A truncated step
    keeps discount 1.

    **Params.** Every numeric leaf of the env params (Python numbers, NumPy and JAX
    arrays) is a JAX array leaf of this module, so a batch of differently
    parameterised environments is one `eqx.filter_vmap`, for instance
    `eqx.filter_vmap(lambda g: GymnaxEnv(env, params.replace(gravity=g)))(gravities)`.
    A leaf that the environment needs as a value while tracing (a shape, Python control
    flow) cannot be an array: such leaves are found when the adapter is built, by
    tracing a reset, the spaces and a step with the leaves as arrays (one trace; if it
    fails, one leaf at a time), and are kept as static Python values, hashed with the
    adapter (changing one recompiles; they cannot be batched). No environment
    registered in gymnax 1.0 needs one. Non-numeric leaves are always static. The
    gymnax environment object itself is static and hashed by identity: build it once.

    **Dtypes.** gymnax states start with Python numbers and weakly typed arrays (e.g.
    MountainCar-v0's velocity) that a step turns into strongly typed ones, so a jitted
    step would trace again on the states after the first step, and a weak leaf could
    change dtype in a `lax.scan`. The adapter traces a reset and a step when it is
    built and casts every state leaf, after `reset` and after `step`, to the least
    strong dtype that holds it in both (JAX's type promotion: a Python `0` that a step
    makes `int32` is `int32`, a weakly typed `float32` a strong `float32`), and the
    observation alike; these are the static field `state_dtypes` and
    `observation_dtype`. The values are gymnax's.

    **Spaces.** gymnax `Discrete(n)` becomes [`podrace.Discrete`][] (scalar `int32`
    values) and `Box` becomes [`podrace.Box`][] with gymnax's bounds, shape and dtype;
    other gymnax spaces (`Dict`, `Tuple`) raise a `ValueError`. The observation `Box`
    takes the dtype of the observations that `reset_env` and `step_env` actually
    return, as some environments declare another one (Catch-bsuite declares `int32`
    and returns `float32` boards; FourRooms-misc the reverse); a declared shape other
    than the observations' raises a `ValueError`; integer bounds are clipped to the
    dtype's range. Continuous actions are arrays of the `Box`'s shape, e.g. `(1,)` for
    Pendulum-v1. The bounds are gymnax's, except for the environments in
    `OBSERVATION_BOUNDS_CORRECTIONS`, whose observations leave the bounds they declare
    (MemoryChain-bsuite, UmbrellaChain-bsuite, MNISTBandit-bsuite, GaussianBandit-misc
    and MetaMaze-misc in gymnax 1.0): their bounds are widened to cover them. For
    another environment whose observations leave its declared space
    ([`podrace.envs.check_env`][] reports it), override its `observation_space` method
    in a subclass.

    gymnax's code runs under JAX's default NumPy promotion rules whatever the caller's
    `jax_numpy_rank_promotion` / `jax_numpy_dtype_promotion` settings, as some
    environments (Swimmer-misc) broadcast arrays of different ranks.

    gymnax draws its environments with matplotlib on the host
    (`gymnax.visualize.Visualizer`), not in JAX, so the adapter does not render.

    Reference: Lange, "gymnax: A JAX-based Reinforcement Learning Environment
    Library", 2022, http://github.com/RobertTLange/gymnax.

    **Arguments:**

    - `env`: a gymnax environment (a `gymnax.environments.environment.Environment`,
        or an object with its `reset_env`, `step_env`, `observation_space` and
        `action_space` methods).
    - `params`: its env params, by default `env.default_params`.

    The adapter also records, as static fields, the `observation_shape`, the
    `observation_dtype` and the `state_dtypes` (in the order of the state's leaves).
    """

    env: Any = eqx.field(static=True)
    params: PyTree
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: np.dtype = eqx.field(static=True)
    state_dtypes: Dtypes = eqx.field(static=True)

    def __init__(self, env: Any, params: PyTree = None):
        if params is None:
            params = env.default_params
        self.env = env
        self.params, (observation, self.state_dtypes) = _to_arrays_where_traceable(env, params)
        self.observation_shape = tuple(observation.shape)
        self.observation_dtype = np.dtype(observation.dtype)

    @classmethod
    def make(cls, env_id: str, **make_kwargs: Any) -> "GymnaxEnv":
        """Builds a registered gymnax environment with its default params.

        **Arguments:**

        - `env_id`: a name in `gymnax.registered_envs`, e.g. `"CartPole-v1"`.
        - `make_kwargs`: passed on to `gymnax.make` (the environment's constructor).

        **Returns:**

        The adapter around `gymnax.make(env_id, **make_kwargs)`.

        **Raises:**

        `ImportError` if gymnax is not installed; `ValueError`, naming the nearest ids,
        if `env_id` is not registered.
        """
        gymnax = _import_gymnax()
        if env_id not in gymnax.registered_envs:
            raise ValueError(unknown_name("gymnax environment", env_id, gymnax_ids()))
        env, params = gymnax.make(env_id, **make_kwargs)
        return cls(env, params)

    @property
    def env_params(self) -> PyTree:
        """The params as gymnax takes them (static leaves as their values)."""
        return _unwrap_params(self.params)

    @property
    def observation_space(self) -> AbstractSpace:
        observation = jax.ShapeDtypeStruct(self.observation_shape, self.observation_dtype)
        return _observation_space(self.env, self.env_params, observation)

    @property
    def action_space(self) -> AbstractSpace:
        return _action_space(self.env, self.env_params)

    def reset(self, key: PRNGKeyArray) -> tuple[PyTree, TimeStep]:
        return self._normalised(*_reset(self.env, self.env_params, key))

    def step(self, state: PyTree, action: Array, key: PRNGKeyArray) -> tuple[PyTree, TimeStep]:
        return self._normalised(*_step(self.env, self.env_params, state, action, key))

    def _normalised(self, state: PyTree, timestep: TimeStep) -> tuple[PyTree, TimeStep]:
        """The state and the observation in the dtypes found when the adapter was built."""
        observation = jnp.asarray(timestep.observation, self.observation_dtype)
        return _cast(state, self.state_dtypes), dataclasses.replace(timestep, observation=observation)
