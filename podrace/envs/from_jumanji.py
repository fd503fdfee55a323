"""Jumanji's environments (combinatorial problems, puzzles, games) as podrace environments."""

import math
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._types import AbstractSpace, Box, Discrete, MaskedObservation, MaskedObservationSpace, TimeStep
from .._validation import unknown_name
from ._base import AbstractEnv
from ._packages import ByIdentity, default_numpy_rules, import_package, strongly_typed


def _import_jumanji() -> Any:
    return import_package("jumanji", extra="jumanji", owner="JumanjiEnv")


def jumanji_ids() -> list[str]:
    """The names of Jumanji's registered environments."""
    return sorted(_import_jumanji().registered_environments())


def _flat(observation: PyTree[Array]) -> Float[Array, " size"]:
    return jnp.concatenate([jnp.ravel(leaf).astype(jnp.float32) for leaf in jax.tree.leaves(observation)])


@final
class JumanjiEnv(AbstractEnv[Any]):
    """A Jumanji environment as a podrace environment, its observations flattened.

    The state is Jumanji's own state. `reset` and `step` are Jumanji's; the automatic
    reset is podrace's [`podrace.envs.AutoReset`][] (Jumanji's `AutoResetWrapper` is not
    used).

    **Terminated or truncated.** Jumanji ends an episode with a `LAST` time step whose
    discount says which it is: 0 when the episode terminated (the problem solved, or
    an illegal action), 1 when it reached the environment's time limit, which Jumanji
    builds into each environment (`time_limit` or the problem's size). The adapter
    keeps them apart: `terminated` and discount 0, or `truncated` and discount 1.

    **Observations.** Jumanji observes a structure of arrays (a `NamedTuple` of the
    board, the action mask, counters, ...). The adapter flattens it into one `float32`
    vector: every leaf, in the order of `jax.tree.leaves` (the structure's fields),
    raveled and concatenated; `observation_layout` records each leaf's path, shape and
    dtype, and [`podrace.envs.JumanjiEnv.unflatten`][] gives the structure back. The
    space is unbounded.

    **Actions.** A `DiscreteArray` action is a [`podrace.Discrete`][]; a
    `MultiDiscreteArray` (several choices per step, such as BinPack's item and space)
    is one [`podrace.Discrete`][] over every combination, unravelled in row-major
    order (`jnp.unravel_index`) before Jumanji's step; a floating `BoundedArray` is a
    [`podrace.Box`][]. Other action specs raise a `ValueError`, as do rewards that are
    not scalars (the multi-agent environments' per-agent rewards).

    **Legal actions.** With `legal_action_mask`, the observation is a
    [`podrace.MaskedObservation`][] of the flat vector and Jumanji's `action_mask`
    field, raveled in row-major order (the order of the joint actions of a
    `MultiDiscreteArray`), so that podrace's networks and policies choose the actions
    that Jumanji allows only; the observation space is a
    [`podrace.MaskedObservationSpace`][]. The flat vector keeps the mask among its
    leaves, as without the option.

    **Params.** Jumanji's environments keep their settings in Python objects (their
    generators), not arrays: environments differ by construction, not by `vmap`.

    Jumanji draws on the host with matplotlib, not in JAX, so the adapter does not
    render.

    Reference: Bonnet et al., "Jumanji: a Diverse Suite of Scalable Reinforcement
    Learning Environments in JAX", 2024, https://github.com/instadeepai/jumanji.

    **Arguments:**

    - `env`: a Jumanji environment (`jumanji.make(name)`), held static and hashed by
        identity: build it once.
    - `legal_action_mask`: whether the observations carry Jumanji's `action_mask` as a
        legal-action mask; for an environment with discrete actions whose observation has
        an `action_mask` field with one flag per action.
    """

    held: ByIdentity = eqx.field(static=True)
    observation_layout: tuple[tuple[str, tuple[int, ...], np.dtype], ...] = eqx.field(static=True)
    observation_tree: Any = eqx.field(static=True)
    action_values: tuple[int, ...] = eqx.field(static=True)
    legal_action_mask: bool = eqx.field(static=True)

    def __init__(self, env: Any, *, legal_action_mask: bool = False):
        name = type(env).__name__
        with default_numpy_rules():
            _, timestep = jax.eval_shape(env.reset, jax.random.key(0))
        if timestep.reward.shape != ():
            raise ValueError(
                f"JumanjiEnv: {name} gives a reward of shape {timestep.reward.shape} (one per agent); podrace's "
                "environments give one scalar reward."
            )
        paths, self.observation_tree = jax.tree.flatten_with_path(timestep.observation)
        self.observation_layout = tuple(
            (jax.tree_util.keystr(path), tuple(leaf.shape), np.dtype(leaf.dtype)) for path, leaf in paths
        )
        self.action_values = _action_values(env.action_spec, name)
        self.held = ByIdentity(env)
        self.legal_action_mask = legal_action_mask
        if legal_action_mask:
            mask = getattr(timestep.observation, "action_mask", None)
            num_actions = math.prod(self.action_values) if self.action_values else None
            if mask is None or mask.dtype != jnp.bool_ or math.prod(mask.shape) != num_actions:
                found = "no action_mask" if mask is None else f"an action_mask of {mask.dtype}{list(mask.shape)}"
                raise ValueError(
                    f"JumanjiEnv: {name}'s observations have {found}, not one bool per discrete action "
                    f"({num_actions or 'it has continuous actions'}); build it with legal_action_mask=False."
                )

    @classmethod
    def make(cls, env_id: str, *, legal_action_mask: bool = False, **kwargs: Any) -> "JumanjiEnv":
        """The Jumanji environment `env_id`.

        **Arguments:**

        - `env_id`: a name in `jumanji.registered_environments()`, e.g. `"Game2048-v1"`.
        - `legal_action_mask`: whether the observations carry Jumanji's `action_mask` as a
            legal-action mask (see the class).
        - `kwargs`: passed on to `jumanji.make` (the environment's constructor).

        **Raises:**

        `ImportError` if Jumanji is not installed; `ValueError`, naming the nearest ids, if
        `env_id` is not registered or its rewards or actions have no podrace counterpart.
        """
        jumanji = _import_jumanji()
        if env_id not in jumanji.registered_environments():
            raise ValueError(unknown_name("jumanji environment", env_id, jumanji_ids()))
        return cls(jumanji.make(env_id, **kwargs), legal_action_mask=legal_action_mask)

    @property
    def env(self) -> Any:
        """The Jumanji environment."""
        return self.held.value

    @property
    def observation_space(self) -> AbstractSpace:
        size = sum(math.prod(shape) for _, shape, _ in self.observation_layout)
        flat = Box(-jnp.inf, jnp.inf, (size,))
        return MaskedObservationSpace(flat, Discrete(math.prod(self.action_values))) if self.legal_action_mask else flat

    @property
    def action_space(self) -> AbstractSpace:
        if self.action_values:
            return Discrete(math.prod(self.action_values))
        spec = self.env.action_spec
        return Box(np.asarray(spec.minimum), np.asarray(spec.maximum), tuple(spec.shape), np.dtype(spec.dtype))

    def unflatten(self, observation: Float[Array, " size"]) -> PyTree[Array]:
        """Jumanji's structured observation from the adapter's flat one (each leaf in its dtype)."""
        sizes = [math.prod(shape) for _, shape, _ in self.observation_layout]
        parts = jnp.split(observation, np.cumsum(sizes)[:-1])
        leaves = [
            part.reshape(shape).astype(dtype)
            for part, (_, shape, dtype) in zip(parts, self.observation_layout, strict=True)
        ]
        return jax.tree.unflatten(self.observation_tree, leaves)

    def reset(self, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        with default_numpy_rules():
            state, timestep = strongly_typed(self.env.reset(key))
        return state, TimeStep.first(self._observation(timestep.observation))

    def step(self, state: Any, action: Array, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        del key  # Jumanji draws its randomness from the key in its state
        with default_numpy_rules():
            state, timestep = strongly_typed(self.env.step(state, self._jumanji_action(action)))
        last = timestep.step_type == _import_jumanji().types.StepType.LAST
        terminated = last & (timestep.discount == 0)
        truncated = last & (timestep.discount != 0)
        return state, TimeStep.transition(
            self._observation(timestep.observation), timestep.reward, terminated, truncated
        )

    def _observation(self, observation: PyTree[Array]) -> Float[Array, " size"] | MaskedObservation:
        flat = _flat(observation)
        return MaskedObservation(flat, jnp.ravel(observation.action_mask)) if self.legal_action_mask else flat

    def _jumanji_action(self, action: Array) -> Array:
        if not self.action_values:
            return action
        dtype = self.env.action_spec.dtype
        if len(self.action_values) == 1 and self.env.action_spec.shape == ():
            return action.astype(dtype)
        return jnp.stack(jnp.unravel_index(action, self.action_values)).astype(dtype)


def _action_values(spec: Any, name: str) -> tuple[int, ...]:
    """The number of values of each discrete choice of an action spec; `()` for a
    floating `BoundedArray` (a box)."""
    specs = _import_jumanji().specs
    if isinstance(spec, specs.MultiDiscreteArray):
        values = tuple(int(n) for n in np.ravel(spec.num_values))
        if math.prod(values) > np.iinfo(np.int32).max:
            raise ValueError(
                f"JumanjiEnv: {name}'s actions combine {' x '.join(map(str, values))} choices, too many for one "
                "int32 Discrete action."
            )
        return values
    if isinstance(spec, specs.DiscreteArray):
        return (int(spec.num_values),)
    if isinstance(spec, specs.BoundedArray) and np.issubdtype(np.dtype(spec.dtype), np.floating):
        return ()
    raise ValueError(
        f"JumanjiEnv: {name}'s action spec {type(spec).__name__} of dtype {np.dtype(spec.dtype)} has no podrace "
        "space (Discrete for DiscreteArray and MultiDiscreteArray, Box for a floating BoundedArray)."
    )
