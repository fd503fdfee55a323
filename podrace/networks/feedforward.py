from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray, PyTree

from .._types import AbstractNetworkOutput, PolicyLogits, QValues
from ._base import AbstractNetwork


OutputT = TypeVar("OutputT", bound=AbstractNetworkOutput)


def _linear(layer: eqx.nn.Linear, x: Float[Array, " in_features"]) -> Array:
    """Applies `layer` as `x @ weight.T + bias`.

    Same result as `layer(x)`, but under `vmap` over a batch this form lowers to one
    row-major matmul, which XLA's CPU backend runs markedly faster than the batched
    matrix-vector product of `weight @ x`.
    """
    y = x @ layer.weight.T
    if layer.bias is not None:
        y = y + layer.bias
    return y[0] if layer.out_features == "scalar" else y


@final
class MLPTorso(eqx.Module):
    """Flattens an observation and applies fully connected layers with an activation.

    **Arguments:**

    - `observation_shape`: the shape of one observation.
    - `hidden_sizes`: the width of each hidden layer.
    - `activation`: applied after every layer.
    - `key`: initialisation randomness.
    """

    layers: tuple[eqx.nn.Linear, ...]
    activation: Callable[[Array], Array] = eqx.field(static=True)
    output_size: int = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: Sequence[int],
        hidden_sizes: Sequence[int],
        *,
        activation: Callable[[Array], Array] = jax.nn.relu,
        key: PRNGKeyArray,
    ):
        if not hidden_sizes or any(size <= 0 for size in hidden_sizes):
            raise ValueError(f"MLPTorso needs at least one positive hidden size, got {tuple(hidden_sizes)}.")
        sizes = [int(jnp.prod(jnp.asarray(observation_shape))), *hidden_sizes]
        keys = jax.random.split(key, len(hidden_sizes))
        self.layers = tuple(eqx.nn.Linear(i, o, key=k) for i, o, k in zip(sizes[:-1], sizes[1:], keys, strict=True))
        self.activation = activation
        self.output_size = sizes[-1]

    def __call__(self, observation: Array) -> Float[Array, " output_size"]:
        x = jnp.ravel(observation)
        for layer in self.layers:
            x = self.activation(_linear(layer, x))
        return x


@final
class QValueHead(eqx.Module):
    """A linear layer from features to one action value per action.

    **Arguments:**

    - `in_size`: the feature size.
    - `num_actions`: the number of discrete actions.
    - `key`: initialisation randomness.
    """

    linear: eqx.nn.Linear
    num_actions: int = eqx.field(static=True)
    output_type = QValues

    def __init__(self, in_size: int, num_actions: int, *, key: PRNGKeyArray):
        self.linear = eqx.nn.Linear(in_size, num_actions, key=key)
        self.num_actions = num_actions

    def __call__(self, features: Float[Array, " in_size"]) -> QValues:
        return QValues(_linear(self.linear, features))


@final
class ValueHead(eqx.Module):
    """A linear layer from features to a scalar state value.

    **Arguments:**

    - `in_size`: the feature size.
    - `key`: initialisation randomness.
    """

    linear: eqx.nn.Linear

    def __init__(self, in_size: int, *, key: PRNGKeyArray):
        self.linear = eqx.nn.Linear(in_size, "scalar", key=key)

    def __call__(self, features: Float[Array, " in_size"]) -> Float[Array, ""]:
        return _linear(self.linear, features)


@final
class PolicyLogitHead(eqx.Module):
    """A linear layer to policy logits, with an optional value head beside it.

    **Arguments:**

    - `in_size`: the feature size.
    - `num_actions`: the number of discrete actions.
    - `with_value`: whether to add a [`podrace.networks.ValueHead`][] (actor-critic).
    - `key`: initialisation randomness.
    """

    linear: eqx.nn.Linear
    value_head: ValueHead | None
    num_actions: int = eqx.field(static=True)
    output_type = PolicyLogits

    def __init__(self, in_size: int, num_actions: int, *, with_value: bool = False, key: PRNGKeyArray):
        policy_key, value_key = jax.random.split(key)
        self.linear = eqx.nn.Linear(in_size, num_actions, key=policy_key)
        self.value_head = ValueHead(in_size, key=value_key) if with_value else None
        self.num_actions = num_actions

    def __call__(self, features: Float[Array, " in_size"]) -> PolicyLogits:
        value = None if self.value_head is None else self.value_head(features)
        return PolicyLogits(_linear(self.linear, features), value)


@final
class FeedForwardNetwork(AbstractNetwork[OutputT], Generic[OutputT]):
    """A torso followed by a head, with an empty carry.

    **Arguments:**

    - `torso`: maps an observation to features (e.g. [`podrace.networks.MLPTorso`][]).
    - `head`: maps features to a network output (e.g. [`podrace.networks.QValueHead`][]).
    """

    torso: MLPTorso
    head: QValueHead | PolicyLogitHead

    def __check_init__(self):
        if self.torso.output_size != self.head.linear.in_features:
            raise ValueError(
                f"The torso emits {self.torso.output_size} features but the head takes "
                f"{self.head.linear.in_features}; build the head with in_size={self.torso.output_size}."
            )

    @property
    def output_type(self) -> type[AbstractNetworkOutput]:
        return self.head.output_type

    @property
    def num_actions(self) -> int:
        return self.head.num_actions

    def __call__(self, observation: PyTree[Array], carry: tuple[()]) -> tuple[OutputT, tuple[()]]:
        return self.head(self.torso(observation)), carry  # pyright: ignore[reportReturnType]

    def initial_carry(self) -> tuple[()]:
        return ()

    def unroll(
        self, observations: PyTree[Array], carry: tuple[()], is_first: Bool[Array, " T"]
    ) -> tuple[OutputT, tuple[()]]:
        del is_first
        return jax.vmap(lambda observation: self(observation, carry)[0])(observations), carry
