"""Gymnasium environments as podrace sees them: their spaces, and the vector environments
that the host executors ([`podrace.executors.host`][]) step.

Gymnasium runs on the host, so its environments are not [`podrace.envs.AbstractEnv`][]s;
this module converts what podrace reads of them. Requires the `gymnasium` extra:
`pip install 'podrace[gymnasium]'`.
"""

from typing import Any

import jax

from .._types import AbstractSpace, Box, Discrete


def import_gymnasium() -> Any:
    """The `gymnasium` module; an `ImportError` naming the pip command if it is missing."""
    try:
        import gymnasium
    except ImportError as error:
        raise ImportError("Host environments need Gymnasium: pip install 'podrace[gymnasium]'.") from error
    return gymnasium


def space_from_gymnasium(space: Any) -> AbstractSpace:
    """The podrace space of a Gymnasium `Discrete` (starting at 0) or `Box` space.

    **Arguments:**

    - `space`: a `gymnasium.spaces.Space`.

    **Returns:**

    The equivalent [`podrace.Discrete`][] or [`podrace.Box`][].

    **Raises:**

    `ValueError` for other spaces, or a `Discrete` space that does not start at 0.
    """
    spaces = import_gymnasium().spaces
    if isinstance(space, spaces.Discrete):
        if int(space.start) != 0:
            raise ValueError(f"podrace's Discrete actions start at 0, but the space is {space}.")
        return Discrete(int(space.n))
    if isinstance(space, spaces.Box):
        return Box(space.low, space.high, space.shape, space.dtype)
    raise ValueError(f"Gymnasium space {space} is not supported: podrace takes Discrete and Box spaces.")


def vector_env_spaces(envs: Any) -> tuple[AbstractSpace, jax.ShapeDtypeStruct, str]:
    """The action space, observation shape and name of a `gymnasium.vector.VectorEnv`.

    **Raises:**

    `ValueError`, saying what to do, if `envs` is not a vector environment, does not
    reset in the next-step mode (Gymnasium's default), or has other than `Box` observations.
    """
    gymnasium = import_gymnasium()
    if not isinstance(envs, gymnasium.vector.VectorEnv):
        raise ValueError(
            f"Expected a gymnasium.vector.VectorEnv, got {type(envs).__name__}; build one with "
            "gymnasium.make_vec(env_id, num_envs=...)."
        )
    mode = envs.metadata.get("autoreset_mode", gymnasium.vector.AutoresetMode.NEXT_STEP)
    if mode != gymnasium.vector.AutoresetMode.NEXT_STEP:
        raise ValueError(
            f"The vector env resets in mode {mode}; podrace needs AutoresetMode.NEXT_STEP (Gymnasium's default), "
            "e.g. gymnasium.make_vec(env_id, num_envs, vector_kwargs={'autoreset_mode': "
            "gymnasium.vector.AutoresetMode.NEXT_STEP})."
        )
    observation_space = space_from_gymnasium(envs.single_observation_space)
    if not isinstance(observation_space, Box):
        raise ValueError(f"podrace takes Box observations from Gymnasium, got {envs.single_observation_space}.")
    observation = jax.ShapeDtypeStruct(observation_space.shape, observation_space.dtype)
    # EnvPool's Gymnasium pools have a spec of their own, without an id.
    env_name = f"the Gymnasium env {getattr(envs.spec, 'id', None) or type(envs).__name__}"
    return space_from_gymnasium(envs.single_action_space), observation, env_name
