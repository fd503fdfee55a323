"""Critics of continuous actions: action values Q(s, a) of an observation and an action vector."""

import abc
import functools
import math
from collections.abc import Callable, Sequence
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._types import AbstractSpace, Box
from .._validation import check_positive_int
from ._layers import apply_linear, dense_layers, init_layers
from .initializations import AbstractInitialization, FanInUniform


class AbstractCritic(eqx.Module):
    """Maps one observation and one real action vector to `num_critics` action values.

    What off-policy actor-critic learners (DDPG, TD3, SAC) learn beside their actor:
    `num_critics` estimates of `Q(s, a)` in one module, so that twin critics are one
    part with one set of parameters (a learner takes their minimum, or their mean).
    To add one, subclass this with `action_size` and `num_critics` and implement
    `__call__`.

    **Attributes:**

    - `action_size`: the dimension of the action vector it takes.
    - `num_critics`: how many estimates it emits.
    """

    action_size: eqx.AbstractVar[int]
    num_critics: eqx.AbstractVar[int]

    @abc.abstractmethod
    def __call__(
        self, observation: PyTree[Array], action: Float[Array, " action_size"]
    ) -> Float[Array, " num_critics"]:
        """The action values of one (unbatched) observation and action.

        **Arguments:**

        - `observation`: one observation.
        - `action`: one action vector.

        **Returns:**

        One estimate of `Q(observation, action)` per critic.
        """

    def check_fits(
        self, action_space: AbstractSpace, observation: PyTree[jax.ShapeDtypeStruct], *, env_name: str
    ) -> None:
        """Raises `ValueError`, naming the fix, if the critic cannot score an environment's actions.

        **Arguments:**

        - `action_space`: the environment's action space (a one-dimensional `Box`).
        - `observation`: the shape and dtype of one observation.
        - `env_name`: how to name the environment in messages.
        """
        if not isinstance(action_space, Box) or len(action_space.shape) != 1:
            raise ValueError(
                f"{type(self).__name__} scores real action vectors, but {env_name}'s action space is "
                f"{action_space!r}; use it with a Box action space of one dimension (for discrete actions, "
                "learn QValues with a QValueHead)."
            )
        if action_space.shape[0] != self.action_size:
            raise ValueError(
                f"{type(self).__name__} takes actions of size {self.action_size} but {env_name}'s actions have "
                f"shape {action_space.shape}; build it with action_size={action_space.shape[0]}."
            )
        action = jax.ShapeDtypeStruct(action_space.shape, jnp.float32)
        try:
            values = jax.eval_shape(self, observation, action)
        except Exception as error:
            raise ValueError(
                f"{type(self).__name__} cannot take {env_name}'s observations (shape "
                f"{jax.tree.map(lambda x: x.shape, observation)}): {error}. Build it for that shape."
            ) from error
        if values.shape != (self.num_critics,):
            raise ValueError(
                f"{type(self).__name__} emits values of shape {values.shape}, not one per critic ({self.num_critics},)."
            )


@final
class MLPCritic(AbstractCritic):
    """`num_critics` independent MLPs on the flattened observation joined with the action.

    Each critic's layers are drawn with a key of its own and stacked along a leading
    axis, so one `vmap` evaluates them all. Two critics (the default) are TD3's and
    SAC's twin critics; one is DDPG's.

    Reference: Fujimoto et al., "Addressing Function Approximation Error in
    Actor-Critic Methods", ICML 2018 (twin critics).

    **Arguments:**

    - `observation_shape`: the shape of one observation.
    - `action_size`: the dimension of the action vector.
    - `hidden_sizes`: the width of each hidden layer.
    - `num_critics`: how many critics.
    - `activation`: applied after every hidden layer.
    - `initialization`: how every layer's weights and bias are drawn (an
        [`podrace.networks.AbstractInitialization`][]).
    - `key`: initialisation randomness.
    """

    layers: tuple[eqx.nn.Linear, ...]
    activation: Callable[[Array], Array] = eqx.field(static=True)
    action_size: int = eqx.field(static=True)
    num_critics: int = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: Sequence[int],
        action_size: int,
        hidden_sizes: Sequence[int],
        *,
        num_critics: int = 2,
        activation: Callable[[Array], Array] = jax.nn.relu,
        initialization: AbstractInitialization = FanInUniform(),
        key: PRNGKeyArray,
    ):
        check_positive_int("MLPCritic", "action_size", action_size)
        check_positive_int("MLPCritic", "num_critics", num_critics)
        if not hidden_sizes or any(size <= 0 for size in hidden_sizes):
            raise ValueError(f"MLPCritic needs at least one positive hidden size, got {tuple(hidden_sizes)}.")
        in_size = math.prod(observation_shape) + action_size
        constructors = (
            *dense_layers(in_size, hidden_sizes),
            functools.partial(eqx.nn.Linear, hidden_sizes[-1], "scalar"),
        )
        # One program draws every critic's layers, already stacked.
        self.layers = jax.vmap(lambda key: init_layers(key, *constructors, initialization=initialization))(
            jax.random.split(key, num_critics)
        )
        self.activation = activation
        self.action_size = action_size
        self.num_critics = num_critics

    def __call__(
        self, observation: PyTree[Array], action: Float[Array, " action_size"]
    ) -> Float[Array, " num_critics"]:
        features = jnp.concatenate([jnp.ravel(observation), action])

        def one_critic(layers: tuple[eqx.nn.Linear, ...]) -> Float[Array, ""]:
            x = features
            for layer in layers[:-1]:
                x = self.activation(apply_linear(layer, x))
            return apply_linear(layers[-1], x)

        return jax.vmap(one_critic)(self.layers)
