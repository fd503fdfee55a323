"""EnvPool's environments (`envpool`): batches of C++ environments stepped from inside a
compiled program, through EnvPool's XLA interface."""

import contextlib
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap
from jax.experimental import io_callback
from jaxtyping import Array, Bool, Key, PRNGKeyArray, UInt8

from .._types import AbstractSpace, Box, Discrete, TimeStep
from .._validation import unknown_name
from ._base import AbstractPoolEnv
from ._packages import ByIdentity, import_package


def _import_envpool() -> Any:
    return import_package("envpool", extra="envpool", owner="EnvPoolEnv")


def envpool_ids() -> list[str]:
    """The names of EnvPool's registered environments (the `envpool:` ids of the command line)."""
    return sorted(_import_envpool().list_all_envs())


@contextlib.contextmanager
def quiet_envpool_spaces() -> Iterator[None]:
    """Silences Gymnasium's warning that EnvPool's float64 bounds of a float32 `Box` are
    cast to float32 (CartPole's), which EnvPool's spaces raise each time they are built
    (a pool builds them on its first reset or step)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*precision lowered by casting to float32", UserWarning)
        yield


@final
class EnvPoolState(eqx.Module):
    """What JAX holds of one environment of a pool (the environment itself lives in the pool).

    **Arguments:**

    - `handle`: EnvPool's handle of the pool, the same in every environment of the batch:
        each call of the pool takes the handle the previous call returned, which orders
        the calls inside a compiled program.
    - `is_last`: whether the environment's previous time step ended an episode, so that
        the pool resets it on this step.
    - `pool_tag`: which pool the state is of, the same in every environment of the batch:
        random bytes drawn when the pool is built. A step of a state whose tag is not its
        pool's (a state restored from a checkpoint, or made by another adapter) restarts
        every environment of the pool (see [`podrace.envs.EnvPoolEnv`][]).
    """

    handle: UInt8[Array, "*batch handle"]
    is_last: Bool[Array, "*batch"]
    pool_tag: UInt8[Array, "*batch tag"]


@final
class _Pool:
    """One EnvPool pool of `num_envs` environments and its XLA calls; `reset` and `step`
    take and return the whole batch, and refuse to be vmapped over."""

    def __init__(self, env: "EnvPoolEnv", num_envs: int):
        envpool = _import_envpool()
        with quiet_envpool_spaces():
            self.pool = envpool.make(
                env.task_id,
                env_type="gymnasium",
                num_envs=num_envs,
                batch_size=num_envs,
                seed=env.seed,
                **dict(env.options),
            )
        handle, _, _, self._xla_step = self.pool.xla()
        self.handle = np.asarray(handle)
        self.tag = np.frombuffer(os.urandom(8), np.uint8)
        self.num_envs = num_envs
        self.observation = env.observation_shape
        refusal = (
            f"EnvPoolEnv({env.task_id!r}) cannot be vmapped over: its batch of {num_envs} environments is one "
            "stateful pool outside JAX, already the whole batch (a population of pipelines cannot share it). "
            "Train one pipeline at a time, each with an EnvPoolEnv of its own."
        )
        self.reset = _refusing_vmap(self._reset, refusal)
        self.step = _refusing_vmap(self._step_batch, refusal)

    def _reset(self, handle: UInt8[Array, " handle"], keys: Array) -> tuple[UInt8[Array, " handle"], Array]:
        del keys  # the pool's randomness is its own; they are here so that a vmap over them is refused
        return self._host_reset(handle, in_step=False)

    def _host_reset(self, handle: UInt8[Array, " handle"], *, in_step: bool) -> tuple[UInt8[Array, " handle"], Array]:
        """The pool's Python `reset`, called on the host from inside the program: the
        observations of every environment, and `handle`, which orders the pool's calls.

        A step's (`in_step`) is a `pure_callback`, not an `io_callback`: JAX refuses IO
        effects in a while loop whose condition is batched, as evaluate's episodes are.
        Its outputs are used and it runs only in the branch that restarts the pool, so
        it is neither dropped nor repeated, and the handle orders it."""

        def reset(handle: Array) -> tuple[Array, np.ndarray]:
            with quiet_envpool_spaces():
                observation, _ = self.pool.reset()
            return handle, np.asarray(observation, self.observation.dtype)

        shapes = (
            jax.ShapeDtypeStruct(handle.shape, handle.dtype),
            jax.ShapeDtypeStruct((self.num_envs, *self.observation.shape), self.observation.dtype),
        )
        if in_step:
            return jax.pure_callback(reset, shapes, handle)
        return io_callback(reset, shapes, handle, ordered=True)

    def _step_batch(
        self, handle: UInt8[Array, " handle"], tag: UInt8[Array, " tag"], actions: Array
    ) -> tuple[UInt8[Array, " handle"], Any]:
        """One step of the pool (EnvPool's XLA step), or, for a state of another pool
        (`tag` is not this pool's), its restart: every environment reset (a Python call on
        the host), each time step flagged first."""

        def step(handle: Array) -> tuple[Array, Any]:
            with quiet_envpool_spaces():  # EnvPool builds its spaces while tracing its first step
                handle, (observation, reward, terminated, truncated, info) = self._xla_step(handle, actions)
            # Atari's game over: EnvPool counts a game that ends on the time limit's step as truncated.
            game_over = info["terminated"] if "terminated" in info else jnp.zeros_like(terminated)
            flags = tuple(flag.astype(bool) for flag in (terminated, truncated, game_over))
            return handle, (
                observation.astype(self.observation.dtype),
                reward.astype(jnp.float32),
                *flags,
                jnp.asarray(False),
            )

        def restart(handle: Array) -> tuple[Array, Any]:
            handle, observation = self._host_reset(handle, in_step=True)
            no = jnp.zeros(self.num_envs, bool)
            return handle, (observation, jnp.zeros(self.num_envs, jnp.float32), no, no, no, jnp.asarray(True))

        restarted = jnp.any(tag != jnp.asarray(self.tag))
        return jax.lax.cond(restarted, restart, step, handle)


def _refusing_vmap(fun: Callable[..., Any], message: str) -> Callable[..., Any]:
    """`fun`, which raises `ValueError(message)` when vmapped over."""
    wrapped = custom_vmap(fun)

    @wrapped.def_vmap
    def refuse(axis_size, in_batched, *args):
        raise ValueError(message)

    return wrapped


@final
class EnvPoolEnv(AbstractPoolEnv[EnvPoolState]):
    """An EnvPool environment, stepped as a pool from inside a compiled program.

    EnvPool (Weng et al., 2022) runs a batch of C++ environments (Atari, classic control,
    MuJoCo, Procgen, VizDoom, MiniGrid, ...) on threads of the host; its XLA interface
    calls the pool from inside a jitted program. This adapter is a
    [`podrace.envs.AbstractPoolEnv`][]: `reset` and `step` are those of one environment and
    run under one `jax.vmap` over the batch, as [`podrace.Anakin`][] runs them, the vmapped
    call being one call of the pool (its Python `reset` on the host, then its XLA step
    inside the program). The pool of `B` environments is built at the first vmap over `B`
    and kept by the adapter, so its size is always the pipeline's `num_envs`; called
    without `vmap`, `reset` and `step` run a pool of one environment. A pool is stateful
    and is the whole batch: it cannot be vmapped over again (a [`podrace.Population`][]),
    split over devices or shared with evaluation.

    **Episodes.** EnvPool resets an environment on the step after the one that ended its
    episode, ignoring that step's action (Gymnasium's "next-step" mode): that step is a
    first time step here (`is_first`, reward 0, discount 1), the convention of
    [`podrace.envs.AutoReset`][], which leaves the pool's steps as they are. An episode
    ends where EnvPool's `terminated` or `truncated` is set:

    - `truncated` (discount 1) when EnvPool's time limit `max_episode_steps` ends it
        (EnvPool sets `trunc` where the episode is done on the limit's step);
    - `terminated` (discount 0) otherwise: the pole falls, the game is over, or, with
        `episodic_life=True`, the agent loses a life (the game then goes on from the next
        step, which EnvPool's reset continues without restarting the game, as
        OpenAI Baselines' `EpisodicLifeEnv`). An Atari game over on the limit's step
        (EnvPool's `info["terminated"]`) is a termination. Other environments flag an
        episode that ends on the limit's step truncated, whatever ended it: EnvPool
        unsets `terminated` wherever `truncated` is set, and its `info` (`elapsed_step`)
        does not tell them apart either. A CartPole pole that falls on that very step is
        reported truncated, discount 1, its observation past the thresholds. The adapter
        does not re-apply an environment's rules to tell them apart; where it matters,
        the observation of classic control (its whole state) shows it.

    **Checkpoints.** The environments live in the pool, not in the JAX state, which
    holds the pool's handle, each environment's `is_last` and the pool's tag. A state
    restored from a checkpoint (in a new process, or into a new adapter) is not its pool's:
    its first step restarts every environment, each time step flagged first (reward 0,
    discount 1), as the step after an episode's end is, and training goes on from there.
    The episodes running at the save are cut, not ended: no time step of theirs is
    flagged terminated or truncated, and they are left out of the episode statistics
    (returns, lengths, counts). A learner learns nothing across the restart (no loss is
    taken on a transition into a first time step), so it bootstraps their last
    transition from the value of the last observation, as at a truncation. Resuming a
    pool is therefore not bit-exact, unlike resuming a JAX environment; and a new pool's
    randomness starts again from `seed`.

    **Compiled programs.** EnvPool's XLA step finds its pool by the pool's address,
    written into the program, and the programs that step a pool hold its restart, a call
    on the host. JAX's persistent compilation cache writes no program with such a call,
    so the programs that step a pool compile in every process; the cache keeps the
    others (networks, optimiser states), as the command line's does.

    **Options.** Keyword options go to `envpool.make` under EnvPool's own names. Atari's
    preprocessing, with EnvPool's defaults: `frame_skip=4` (the maximum of the last two
    frames is kept), `img_height=84`, `img_width=84`, `gray_scale=True`, `stack_num=4`,
    `noop_max=30` (random no-ops at a reset), `repeat_action_probability=0.0` (sticky
    actions), `reward_clip=False`, `episodic_life=False`, `use_fire_reset=True`,
    `max_episode_steps=27000`; CleanRL's and Baselines' settings add
    `episodic_life=True, reward_clip=True`. Classic control takes `max_episode_steps`.
    `num_threads` sets the pool's threads (by default one per environment).

    **Randomness.** The pool's, from `seed` and each environment's index: the keys that
    `reset` and `step` take are not used. A new adapter with the same seed repeats its
    episodes; a second `reset` of a pool goes on from its random state.

    **Spaces.** EnvPool's Gymnasium spaces: `Discrete` actions as `int32`, `Box`
    observations and actions of EnvPool's dtype (Atari's frames `uint8` of shape
    `(stack_num, img_height, img_width)`). Environments whose observations are
    dictionaries are refused.

    Reference: Weng et al., "EnvPool: A Highly Parallel Reinforcement Learning Environment
    Execution Engine", NeurIPS 2022 Datasets and Benchmarks, https://github.com/sail-sg/envpool.

    **Arguments:**

    - `task_id`: a name of EnvPool's registry, e.g. `"CartPole-v1"` or `"Pong-v5"`
        (`envpool.list_all_envs()`).
    - `seed`: the pool's seed (EnvPool seeds environment `i` from `seed + i`).
    - `options`: passed on to `envpool.make` (see **Options**).

    **Raises:**

    `ImportError` if EnvPool is not installed; `ValueError`, naming the nearest names, if
    `task_id` is not registered or an option is not one of its own, and for the options
    that the adapter sets itself (`num_envs`, `batch_size`, `env_type`) and dictionary
    observations.
    """

    task_id: str = eqx.field(static=True)
    seed: int = eqx.field(static=True)
    options: tuple[tuple[str, Any], ...] = eqx.field(static=True)
    observation_shape: jax.ShapeDtypeStruct = eqx.field(static=True)
    spec: ByIdentity[Any] = eqx.field(static=True)
    pools: ByIdentity[dict[int, _Pool]] = eqx.field(static=True)

    def __init__(self, task_id: str, *, seed: int = 0, **options: Any):
        envpool = _import_envpool()
        if task_id not in (ids := envpool_ids()):
            raise ValueError(unknown_name("EnvPool environment", task_id, ids))
        if fixed := sorted({"num_envs", "batch_size", "env_type"} & set(options)):
            raise ValueError(
                f"EnvPoolEnv sets {', '.join(fixed)} itself: the pool is the pipeline's batch (its num_envs), "
                "stepped whole, through EnvPool's Gymnasium interface. Leave them out."
            )
        known = sorted(set(envpool.make_spec(task_id).config._fields) - {"num_envs", "batch_size", "seed"})
        for name in options:
            if name not in known:
                raise ValueError(unknown_name(f"option of EnvPool's {task_id}", name, known))
        spec = envpool.make_spec(task_id, seed=seed, **options)
        with quiet_envpool_spaces():
            observation_space = spec.gymnasium_observation_space
        if not hasattr(observation_space, "shape") or observation_space.shape is None:
            raise ValueError(
                f"EnvPoolEnv takes environments whose observation is one array; {task_id}'s is "
                f"{type(observation_space).__name__}. Pick another environment (its Gymnasium id through "
                "gymnasium:ID on the host collector keeps such observations)."
            )
        self.task_id = task_id
        self.seed = seed
        self.options = tuple(sorted(options.items()))
        self.observation_shape = jax.ShapeDtypeStruct(
            tuple(observation_space.shape), jax.dtypes.canonicalize_dtype(observation_space.dtype)
        )
        self.spec = ByIdentity(spec)
        self.pools = ByIdentity({})

    def pool(self, num_envs: int) -> Any:
        """The EnvPool pool of `num_envs` environments that a vmap over `num_envs` steps (a
        `gymnasium` pool of `envpool.make`), built on first use."""
        return self._pool(num_envs).pool

    def _pool(self, num_envs: int) -> _Pool:
        with _LOCK:
            pools = self.pools.value
            if num_envs not in pools:
                pools[num_envs] = _Pool(self, num_envs)
            return pools[num_envs]

    @property
    def observation_space(self) -> AbstractSpace:
        with quiet_envpool_spaces():
            return _space(self.spec.value.gymnasium_observation_space)

    @property
    def action_space(self) -> AbstractSpace:
        with quiet_envpool_spaces():
            return _space(self.spec.value.gymnasium_action_space)

    def reset(self, key: PRNGKeyArray) -> tuple[EnvPoolState, TimeStep]:
        @custom_vmap
        def reset_one(key: PRNGKeyArray) -> tuple[EnvPoolState, TimeStep]:
            return _first(self._reset_batch(1, key[None]))

        @reset_one.def_vmap
        def reset_batch(axis_size: int, in_batched: Any, keys: Key[Array, " batch"]) -> Any:
            keys = keys if in_batched[0] else jnp.broadcast_to(keys, (axis_size,))
            outputs = self._reset_batch(axis_size, keys)
            return outputs, _batched(outputs)

        return reset_one(key)

    def step(self, state: EnvPoolState, action: Array, key: PRNGKeyArray) -> tuple[EnvPoolState, TimeStep]:
        del key  # the pool's randomness is its own

        @custom_vmap
        def step_one(state: EnvPoolState, action: Array) -> tuple[EnvPoolState, TimeStep]:
            states, actions = jax.tree.map(lambda x: x[None], (state, action))
            return _first(self._step_batch(1, states, actions))

        @step_one.def_vmap
        def step_batch(axis_size: int, in_batched: Any, states: EnvPoolState, actions: Array) -> Any:
            def broadcast(x: Array, batched: bool) -> Array:
                return x if batched else jnp.broadcast_to(x, (axis_size, *x.shape))

            states, actions = jax.tree.map(broadcast, (states, actions), tuple(in_batched))
            outputs = self._step_batch(axis_size, states, actions)
            return outputs, _batched(outputs)

        return step_one(state, action)

    def _reset_batch(self, num_envs: int, keys: Key[Array, " batch"]) -> tuple[EnvPoolState, TimeStep]:
        """Resets the pool of `num_envs` environments (a Python call on the host)."""
        pool = self._pool(num_envs)
        handle, observation = pool.reset(jnp.asarray(pool.handle), jax.random.key_data(keys))
        timestep = jax.vmap(TimeStep.first)(observation)
        return EnvPoolState(
            _broadcast(handle, num_envs), timestep.is_last, _broadcast(jnp.asarray(pool.tag), num_envs)
        ), timestep

    def _step_batch(self, num_envs: int, states: EnvPoolState, actions: Array) -> tuple[EnvPoolState, TimeStep]:
        """Steps the pool of `num_envs` environments (EnvPool's XLA step), or restarts it
        for states of another pool."""
        pool = self._pool(num_envs)
        handle, (observation, reward, terminated, truncated, game_over, restarted) = pool.step(
            states.handle[0], states.pool_tag[0], actions
        )
        # The step after an episode's last one is the pool's reset of that environment.
        is_first = states.is_last | restarted
        terminated = (terminated | game_over) & ~is_first
        truncated = truncated & ~terminated & ~is_first
        timestep = TimeStep(
            observation,
            jnp.where(is_first, 0.0, reward),
            jnp.where(terminated, 0.0, 1.0).astype(jnp.float32),
            is_first,
            terminated,
            truncated,
        )
        return EnvPoolState(
            _broadcast(handle, num_envs), timestep.is_last, _broadcast(jnp.asarray(pool.tag), num_envs)
        ), timestep


_LOCK = threading.Lock()  # pools are built while tracing, which may run on several threads


def _broadcast(handle: Array, num_envs: int) -> Array:
    return jnp.broadcast_to(handle, (num_envs, *handle.shape))


def _first(tree: Any) -> Any:
    return jax.tree.map(lambda x: x[0], tree)


def _batched(tree: Any) -> Any:
    return jax.tree.map(lambda _: True, tree)


def _space(space: Any) -> AbstractSpace:
    """podrace's space of a Gymnasium `Discrete` or `Box` of EnvPool."""
    if hasattr(space, "n"):
        return Discrete(int(space.n))
    dtype = jax.dtypes.canonicalize_dtype(space.dtype)  # float64 without x64
    return Box(np.asarray(space.low, dtype), np.asarray(space.high, dtype), tuple(space.shape), dtype)
