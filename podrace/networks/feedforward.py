import math
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray, PyTree

from .._types import AbstractNetworkOutput, GaussianParams, PolicyLogits, QValues
from .._validation import check_positive_int
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
        sizes = [math.prod(observation_shape), *hidden_sizes]
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
class GaussianHead(eqx.Module):
    """A diagonal Gaussian policy head: a linear mean and a learnt, state-independent log-std.

    The log standard deviation is a parameter vector of its own, not a function of the
    features, as in PPO's usual continuous-control setup. The mean layer starts with
    its weights and bias scaled by `mean_init_scale`, so that the initial policy is
    nearly the same Gaussian around 0 in every state. Samples are unbounded; clip them
    in the environment (as [`podrace.envs.Pendulum`][] does).

    Reference: Schulman et al., "Proximal Policy Optimization Algorithms", 2017;
    Andrychowicz et al., "What Matters In On-Policy Reinforcement Learning? A
    Large-Scale Empirical Study", ICLR 2021 (state-independent std, small last layer).

    **Arguments:**

    - `in_size`: the feature size.
    - `action_size`: the dimension of the (flat) action vector.
    - `with_value`: whether to add a [`podrace.networks.ValueHead`][] (actor-critic).
    - `initial_log_std`: the initial log standard deviation of every action dimension.
    - `mean_init_scale`: the factor on the mean layer's initial weights and bias.
    - `key`: initialisation randomness.
    """

    linear: eqx.nn.Linear
    log_std: Float[Array, " action_size"]
    value_head: ValueHead | None
    action_size: int = eqx.field(static=True)
    output_type = GaussianParams

    def __init__(
        self,
        in_size: int,
        action_size: int,
        *,
        with_value: bool = False,
        initial_log_std: float = 0.0,
        mean_init_scale: float = 0.01,
        key: PRNGKeyArray,
    ):
        check_positive_int("GaussianHead", "action_size", action_size)
        mean_key, value_key = jax.random.split(key)
        linear = eqx.nn.Linear(in_size, action_size, key=mean_key)
        self.linear = jax.tree.map(lambda x: mean_init_scale * x, linear)
        self.log_std = jnp.full((action_size,), initial_log_std, jnp.float32)
        self.value_head = ValueHead(in_size, key=value_key) if with_value else None
        self.action_size = action_size

    def __call__(self, features: Float[Array, " in_size"]) -> GaussianParams:
        value = None if self.value_head is None else self.value_head(features)
        return GaussianParams(_linear(self.linear, features), self.log_std, value)


class AbstractFeedForwardNetwork(AbstractNetwork[OutputT], Generic[OutputT]):
    """A network without recurrent state: empty carry, and `unroll` is a `vmap` over time.

    Subclasses implement `__call__`, `output_type` and `num_actions`.
    """

    def initial_carry(self) -> tuple[()]:
        return ()

    def unroll(
        self, observations: PyTree[Array], carry: tuple[()], is_first: Bool[Array, " T"]
    ) -> tuple[OutputT, tuple[()]]:
        del is_first
        return jax.vmap(lambda observation: self(observation, carry)[0])(observations), carry


@final
class FeedForwardNetwork(AbstractFeedForwardNetwork[OutputT], Generic[OutputT]):
    """A torso followed by a head, with an empty carry.

    **Arguments:**

    - `torso`: maps an observation to features (e.g. [`podrace.networks.MLPTorso`][]).
    - `head`: maps features to a network output (e.g. [`podrace.networks.QValueHead`][]
        or [`podrace.networks.GaussianHead`][]).
    """

    torso: MLPTorso
    head: QValueHead | PolicyLogitHead | GaussianHead

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
        return self.head.action_size if isinstance(self.head, GaussianHead) else self.head.num_actions

    def __call__(self, observation: PyTree[Array], carry: tuple[()]) -> tuple[OutputT, tuple[()]]:
        return self.head(self.torso(observation)), carry  # pyright: ignore[reportReturnType]


@final
class ActorCriticNetwork(AbstractFeedForwardNetwork[OutputT], Generic[OutputT]):
    """A policy network and a separate value network, sharing no parameters.

    Emits the policy head's output with the critic's value in it. Keeping the critic
    apart lets the value loss (whose scale follows the returns) train without pulling
    on the policy's features.

    Reference: Andrychowicz et al., "What Matters In On-Policy Reinforcement Learning?
    A Large-Scale Empirical Study", ICLR 2021 (separate policy and value networks).

    **Arguments:**

    - `actor_torso`: the policy's torso.
    - `head`: a policy head without a value ([`podrace.networks.PolicyLogitHead`][] or
        [`podrace.networks.GaussianHead`][]).
    - `critic_torso`: the value's torso.
    - `value_head`: the [`podrace.networks.ValueHead`][] on the critic's features.
    """

    actor_torso: MLPTorso
    head: PolicyLogitHead | GaussianHead
    critic_torso: MLPTorso
    value_head: ValueHead

    def __check_init__(self):
        if self.head.value_head is not None:
            raise ValueError("ActorCriticNetwork: build the policy head with with_value=False; the critic gives it.")
        for name, torso, layer in (
            ("policy head", self.actor_torso, self.head.linear),
            ("value head", self.critic_torso, self.value_head.linear),
        ):
            if torso.output_size != layer.in_features:
                raise ValueError(
                    f"ActorCriticNetwork: the torso emits {torso.output_size} features but the {name} takes "
                    f"{layer.in_features}; build it with in_size={torso.output_size}."
                )

    @property
    def output_type(self) -> type[AbstractNetworkOutput]:
        return self.head.output_type

    @property
    def num_actions(self) -> int:
        return self.head.action_size if isinstance(self.head, GaussianHead) else self.head.num_actions

    def __call__(self, observation: PyTree[Array], carry: tuple[()]) -> tuple[OutputT, tuple[()]]:
        output = self.head(self.actor_torso(observation))
        value = self.value_head(self.critic_torso(observation))
        with_value = eqx.tree_at(lambda o: o.value, output, value, is_leaf=lambda x: x is None)
        return with_value, carry  # pyright: ignore[reportReturnType]
