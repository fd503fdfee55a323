"""Construction-time conversions and checks that give a clear message instead of a deep XLA trace."""

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PyTree

from ._types import AbstractSpace, Box, Discrete, GaussianParams


def as_float_array(value: ArrayLike) -> Float[Array, "..."]:
    """`value` as a float32 array: a hyperparameter that `vmap` can batch."""
    return jnp.asarray(value, jnp.float32)


def _concrete(value: ArrayLike) -> np.ndarray | None:
    """The value as NumPy, or `None` while it is traced (inside jit or vmap)."""
    try:
        return np.asarray(value)
    except jax.errors.TracerArrayConversionError:
        return None


def check_in_unit_interval(owner: str, name: str, value: ArrayLike) -> None:
    """Raises `ValueError` unless every element of `value` lies in [0, 1]."""
    array = _concrete(value)
    if array is not None and not np.all((array >= 0) & (array <= 1)):
        raise ValueError(f"{owner}: {name} must lie in [0, 1], got {array}.")


def check_positive(owner: str, name: str, value: ArrayLike) -> None:
    """Raises `ValueError` unless every element of `value` is > 0."""
    array = _concrete(value)
    if array is not None and not np.all(array > 0):
        raise ValueError(f"{owner}: {name} must be positive, got {array}.")


def check_non_negative(owner: str, name: str, value: ArrayLike) -> None:
    """Raises `ValueError` unless every element of `value` is >= 0."""
    array = _concrete(value)
    if array is not None and not np.all(array >= 0):
        raise ValueError(f"{owner}: {name} must be non-negative, got {array}.")


def check_positive_int(owner: str, name: str, value: object) -> None:
    """Raises `ValueError` unless `value` is an `int` > 0 (a size or a count)."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}.")


def check_agent_fits(
    network, policy, action_space: AbstractSpace, observation: PyTree[jax.ShapeDtypeStruct], *, env_name: str
) -> None:
    """Raises `ValueError`, naming both parts and the fix, when a network and policy cannot act in an env.

    **Arguments:**

    - `network`: a [`podrace.networks.AbstractNetwork`][].
    - `policy`: a [`podrace.policies.AbstractPolicy`][] over its outputs.
    - `action_space`: the environment's action space.
    - `observation`: the shape and dtype of one observation.
    - `env_name`: how to name the environment in messages.
    """
    policy.check_action_space(action_space)
    continuous = issubclass(network.output_type, GaussianParams)
    if isinstance(action_space, Discrete):
        if continuous:
            raise ValueError(
                f"The network's head emits {network.output_type.__name__} (continuous actions) but {env_name} "
                f"has {action_space.num_values} discrete actions; build the network with a PolicyLogitHead "
                f"or a QValueHead with num_actions={action_space.num_values}."
            )
        if network.num_actions != action_space.num_values:
            raise ValueError(
                f"The network's head has {network.num_actions} outputs but {env_name} has "
                f"{action_space.num_values} actions; build the head with num_actions={action_space.num_values}."
            )
    if isinstance(action_space, Box) and continuous:
        if len(action_space.shape) != 1:
            raise ValueError(
                f"The network's head emits flat action vectors but {env_name}'s actions have shape "
                f"{action_space.shape}; flatten the action space to one dimension."
            )
        if network.num_actions != action_space.shape[0]:
            raise ValueError(
                f"The network's head has action size {network.num_actions} but {env_name}'s actions have shape "
                f"{action_space.shape}; build the head with action_size={action_space.shape[0]}."
            )
    try:
        jax.eval_shape(network, observation, network.initial_carry())
    except Exception as error:
        raise ValueError(
            f"The network cannot take {env_name}'s observations (shape "
            f"{jax.tree.map(lambda x: x.shape, observation)}): {error}. Build its torso for that shape."
        ) from error
