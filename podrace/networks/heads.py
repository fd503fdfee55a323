import abc
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Generic, Literal, TypeVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from .._types import (
    AbstractNetworkOutput,
    CategoricalQValues,
    DeterministicAction,
    GaussianParams,
    PolicyLogits,
    QuantileQValues,
    QValues,
    TanhGaussianParams,
)
from .._validation import check_positive_int
from ._layers import apply_linear, init_layers
from .initializations import AbstractInitialization, FanInUniform


# Equinox's documented import: type checkers read it as the `ClassVar` it stands for.
if TYPE_CHECKING:
    from typing import ClassVar as AbstractClassVar
else:
    from equinox import AbstractClassVar


OutputT = TypeVar("OutputT", bound=AbstractNetworkOutput)


class AbstractHead(eqx.Module, Generic[OutputT]):
    """Maps a feature vector to a network output of type `output_type`.

    A head is the part of a network above its torso: [`podrace.networks.FeedForwardNetwork`][]
    and [`podrace.networks.ActorCriticNetwork`][] take any head and read only the
    attributes declared here, as do the checks that a network fits an environment, a
    policy and a loss. To add one, subclass this with its output type, set the
    attributes and implement `__call__`; see [`podrace.networks.QValueHead`][] for the
    shortest example.

    **Attributes:**

    - `in_size`: the number of features it takes (the torso's `output_size`).
    - `output_type`: the [`podrace.AbstractNetworkOutput`][] subclass it emits (a class
        attribute: set it in the class body).
    - `num_actions`: the number of discrete actions it scores, or the dimension of the
        continuous action vector it parameterises.
    - `emits_value`: whether its outputs carry a state value (`value` is not `None`).
    """

    in_size: eqx.AbstractVar[int]
    output_type: AbstractClassVar[type[AbstractNetworkOutput]]
    num_actions: eqx.AbstractVar[int]
    emits_value: eqx.AbstractVar[bool]

    def __check_init__(self):
        output_type = getattr(type(self), "output_type", None)
        if not (isinstance(output_type, type) and issubclass(output_type, AbstractNetworkOutput)):
            raise TypeError(
                f"{type(self).__name__} must set the class attribute output_type to the "
                f"podrace.AbstractNetworkOutput subclass it emits, got {output_type!r}."
            )

    @abc.abstractmethod
    def __call__(self, features: Float[Array, " in_size"]) -> OutputT:
        """Maps features to one (unbatched) output.

        **Arguments:**

        - `features`: the torso's features for one observation.

        **Returns:**

        An instance of `output_type`.
        """


class AbstractValueHead(eqx.Module):
    """Maps a feature vector to a scalar state value.

    [`podrace.networks.ActorCriticNetwork`][] takes any value head as its critic's;
    subclass this (with `in_size` and `__call__`) for another kind of value estimate.

    **Attributes:**

    - `in_size`: the number of features it takes (the torso's `output_size`).
    """

    in_size: eqx.AbstractVar[int]

    @abc.abstractmethod
    def __call__(self, features: Float[Array, " in_size"]) -> Float[Array, ""]:
        """Maps features to the state value.

        **Arguments:**

        - `features`: the torso's features for one observation.

        **Returns:**

        The value, a scalar.
        """


@final
class QValueHead(AbstractHead[QValues]):
    """A linear layer from features to one action value per action.

    **Arguments:**

    - `in_size`: the feature size.
    - `num_actions`: the number of discrete actions.
    - `initialization`: how the layer's weights and bias are drawn (an
        [`podrace.networks.AbstractInitialization`][]).
    - `key`: initialisation randomness.
    """

    linear: eqx.nn.Linear
    in_size: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    emits_value: bool = eqx.field(static=True)
    output_type = QValues

    def __init__(
        self,
        in_size: int,
        num_actions: int,
        *,
        initialization: AbstractInitialization = FanInUniform(),
        key: PRNGKeyArray,
    ):
        (self.linear,) = init_layers(
            key, functools.partial(eqx.nn.Linear, in_size, num_actions), initialization=initialization
        )
        self.in_size = in_size
        self.num_actions = num_actions
        self.emits_value = False

    def __call__(self, features: Float[Array, " in_size"]) -> QValues:
        return QValues(apply_linear(self.linear, features))


@final
class CategoricalQHead(AbstractHead[CategoricalQValues]):
    """A linear layer from features to a categorical return distribution per action (C51).

    The distributions sit on `num_atoms` evenly spaced returns from `v_min` to `v_max`.

    Reference: Bellemare et al., "A Distributional Perspective on Reinforcement
    Learning", ICML 2017.

    **Arguments:**

    - `in_size`: the feature size.
    - `num_actions`: the number of discrete actions.
    - `num_atoms`: the number of returns each distribution sits on (at least 2; 51 in the paper).
    - `v_min`, `v_max`: the smallest and largest return, `v_min < v_max`.
    - `initialization`: how the layer's weights and bias are drawn.
    - `key`: initialisation randomness.
    """

    linear: eqx.nn.Linear
    in_size: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_atoms: int = eqx.field(static=True)
    v_min: float = eqx.field(static=True)
    v_max: float = eqx.field(static=True)
    emits_value: bool = eqx.field(static=True)
    output_type = CategoricalQValues

    def __init__(
        self,
        in_size: int,
        num_actions: int,
        *,
        num_atoms: int = 51,
        v_min: float = -10.0,
        v_max: float = 10.0,
        initialization: AbstractInitialization = FanInUniform(),
        key: PRNGKeyArray,
    ):
        check_positive_int("CategoricalQHead", "num_atoms", num_atoms)
        if num_atoms < 2 or not float(v_min) < float(v_max):
            raise ValueError(
                f"CategoricalQHead: needs num_atoms >= 2 and v_min < v_max, got num_atoms={num_atoms}, "
                f"v_min={v_min}, v_max={v_max}."
            )
        (self.linear,) = init_layers(
            key, functools.partial(eqx.nn.Linear, in_size, num_actions * num_atoms), initialization=initialization
        )
        self.in_size = in_size
        self.num_actions = num_actions
        self.num_atoms = num_atoms
        self.v_min = float(v_min)
        self.v_max = float(v_max)
        self.emits_value = False

    def __call__(self, features: Float[Array, " in_size"]) -> CategoricalQValues:
        logits = apply_linear(self.linear, features).reshape(self.num_actions, self.num_atoms)
        return CategoricalQValues(logits, jnp.linspace(self.v_min, self.v_max, self.num_atoms))


@final
class QuantileQHead(AbstractHead[QuantileQValues]):
    """A linear layer from features to `num_quantiles` return quantiles per action (QR-DQN).

    Reference: Dabney et al., "Distributional Reinforcement Learning with Quantile
    Regression", AAAI 2018.

    **Arguments:**

    - `in_size`: the feature size.
    - `num_actions`: the number of discrete actions.
    - `num_quantiles`: quantiles per action (200 in the paper).
    - `initialization`: how the layer's weights and bias are drawn.
    - `key`: initialisation randomness.
    """

    linear: eqx.nn.Linear
    in_size: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_quantiles: int = eqx.field(static=True)
    emits_value: bool = eqx.field(static=True)
    output_type = QuantileQValues

    def __init__(
        self,
        in_size: int,
        num_actions: int,
        *,
        num_quantiles: int = 200,
        initialization: AbstractInitialization = FanInUniform(),
        key: PRNGKeyArray,
    ):
        check_positive_int("QuantileQHead", "num_quantiles", num_quantiles)
        (self.linear,) = init_layers(
            key, functools.partial(eqx.nn.Linear, in_size, num_actions * num_quantiles), initialization=initialization
        )
        self.in_size = in_size
        self.num_actions = num_actions
        self.num_quantiles = num_quantiles
        self.emits_value = False

    def __call__(self, features: Float[Array, " in_size"]) -> QuantileQValues:
        return QuantileQValues(apply_linear(self.linear, features).reshape(self.num_actions, self.num_quantiles))


@final
class ValueHead(AbstractValueHead):
    """A linear layer from features to a scalar state value.

    **Arguments:**

    - `in_size`: the feature size.
    - `initialization`: how the layer's weights and bias are drawn (an
        [`podrace.networks.AbstractInitialization`][]; CleanRL's PPO uses `Orthogonal(1.0)`).
    - `key`: initialisation randomness.
    """

    linear: eqx.nn.Linear
    in_size: int = eqx.field(static=True)

    def __init__(self, in_size: int, *, initialization: AbstractInitialization = FanInUniform(), key: PRNGKeyArray):
        (self.linear,) = init_layers(
            key, functools.partial(eqx.nn.Linear, in_size, "scalar"), initialization=initialization
        )
        self.in_size = in_size

    def __call__(self, features: Float[Array, " in_size"]) -> Float[Array, ""]:
        return apply_linear(self.linear, features)


def _value_head(
    owner: str, in_size: int, with_value: bool, initialization: AbstractInitialization, key: PRNGKeyArray
) -> ValueHead | None:
    """The value head beside a policy head's layer, or `None` without `with_value`."""
    if with_value:
        return ValueHead(in_size, initialization=initialization, key=key)
    if initialization != FanInUniform():
        raise ValueError(
            f"{owner}: value_initialization is for the value layer, which the head has only with "
            "with_value=True; pass with_value=True, or leave value_initialization out (for a separate critic, "
            "pass the initialization to its podrace.networks.ValueHead)."
        )
    return None


@final
class PolicyLogitHead(AbstractHead[PolicyLogits]):
    """A linear layer to policy logits, with an optional value head beside it.

    **Arguments:**

    - `in_size`: the feature size.
    - `num_actions`: the number of discrete actions.
    - `with_value`: whether to add a [`podrace.networks.ValueHead`][] (actor-critic).
    - `initialization`: how the logit layer's weights and bias are drawn (an
        [`podrace.networks.AbstractInitialization`][]; CleanRL's PPO uses `Orthogonal(0.01)`).
    - `value_initialization`: the same for the value layer, with `with_value` (CleanRL's
        PPO uses `Orthogonal(1.0)`).
    - `key`: initialisation randomness.
    """

    linear: eqx.nn.Linear
    value_head: ValueHead | None
    in_size: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    emits_value: bool = eqx.field(static=True)
    output_type = PolicyLogits

    def __init__(
        self,
        in_size: int,
        num_actions: int,
        *,
        with_value: bool = False,
        initialization: AbstractInitialization = FanInUniform(),
        value_initialization: AbstractInitialization = FanInUniform(),
        key: PRNGKeyArray,
    ):
        policy_key, value_key = jax.random.split(key)
        (self.linear,) = init_layers(
            policy_key, functools.partial(eqx.nn.Linear, in_size, num_actions), initialization=initialization
        )
        self.value_head = _value_head("PolicyLogitHead", in_size, with_value, value_initialization, value_key)
        self.in_size = in_size
        self.num_actions = num_actions
        self.emits_value = with_value

    def __call__(self, features: Float[Array, " in_size"]) -> PolicyLogits:
        value = None if self.value_head is None else self.value_head(features)
        return PolicyLogits(apply_linear(self.linear, features), value)


@final
class GaussianHead(AbstractHead[GaussianParams]):
    """A diagonal Gaussian policy head: a linear mean and a learnt standard deviation.

    With `std="parameter"` (the default) the log standard deviation is a parameter
    vector of its own, not a function of the features, as in PPO's usual
    continuous-control setup. With `std="softplus"` it depends on the state: a second
    linear layer's output `z` gives the standard deviation `softplus(z) + min_std`, as
    gymnax-blines' PPO computes it. The mean layer starts with its weights and bias
    scaled by `mean_init_scale`, so that the initial policy is nearly the same
    Gaussian around 0 in every state. Samples are unbounded; clip them in the
    environment (as [`podrace.envs.Pendulum`][] does). Its `num_actions` is `action_size`.

    Reference: Schulman et al., "Proximal Policy Optimization Algorithms", 2017;
    Andrychowicz et al., "What Matters In On-Policy Reinforcement Learning? A
    Large-Scale Empirical Study", ICLR 2021 (state-independent std, small last layer;
    softplus of a network output as one of the compared forms).

    **Arguments:**

    - `in_size`: the feature size.
    - `action_size`: the dimension of the (flat) action vector.
    - `with_value`: whether to add a [`podrace.networks.ValueHead`][] (actor-critic).
    - `std`: `"parameter"` (state-independent) or `"softplus"` (state-dependent).
    - `initial_log_std`: the initial log standard deviation of every action dimension
        (for `std="parameter"`).
    - `min_std`: the floor added to the softplus (for `std="softplus"`, > 0).
    - `mean_init_scale`: the factor on the mean layer's initial weights and bias, after
        `initialization` (1 for the mean layer as `initialization` draws it).
    - `initialization`: how the mean layer's (and with `std="softplus"`, the standard
        deviation layer's) weights and bias are drawn (an
        [`podrace.networks.AbstractInitialization`][]; gymnax-blines' PPO uses
        `LecunNormal(bias_scale=0.05)` with `mean_init_scale=1.0`).
    - `value_initialization`: the same for the value layer, with `with_value`.
    - `key`: initialisation randomness.
    """

    linear: eqx.nn.Linear
    log_std: Float[Array, " action_size"] | eqx.nn.Linear
    value_head: ValueHead | None
    min_std: float = eqx.field(static=True)
    in_size: int = eqx.field(static=True)
    action_size: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    emits_value: bool = eqx.field(static=True)
    output_type = GaussianParams

    def __init__(
        self,
        in_size: int,
        action_size: int,
        *,
        with_value: bool = False,
        std: Literal["parameter", "softplus"] = "parameter",
        initial_log_std: float = 0.0,
        min_std: float = 1e-3,
        mean_init_scale: float = 0.01,
        initialization: AbstractInitialization = FanInUniform(),
        value_initialization: AbstractInitialization = FanInUniform(),
        key: PRNGKeyArray,
    ):
        check_positive_int("GaussianHead", "action_size", action_size)
        if std not in ("parameter", "softplus"):
            raise ValueError(f"GaussianHead: std must be 'parameter' or 'softplus', got {std!r}.")
        if not min_std > 0:
            raise ValueError(f"GaussianHead: min_std must be positive, got {min_std}.")
        mean_key, value_key = jax.random.split(key)
        layer = functools.partial(eqx.nn.Linear, in_size, action_size)
        if std == "softplus":
            # The learnt log standard deviation is a function of the features: the layer of z.
            linear, self.log_std = init_layers(mean_key, layer, layer, initialization=initialization)
        else:
            (linear,) = init_layers(mean_key, layer, initialization=initialization)
            self.log_std = jnp.full((action_size,), initial_log_std, jnp.float32)
        self.linear = jax.tree.map(lambda x: mean_init_scale * x, linear)
        self.min_std = min_std
        self.value_head = _value_head("GaussianHead", in_size, with_value, value_initialization, value_key)
        self.in_size = in_size
        self.action_size = self.num_actions = action_size
        self.emits_value = with_value

    def __call__(self, features: Float[Array, " in_size"]) -> GaussianParams:
        value = None if self.value_head is None else self.value_head(features)
        if isinstance(self.log_std, eqx.nn.Linear):
            log_std = jnp.log(jax.nn.softplus(apply_linear(self.log_std, features)) + self.min_std)
        else:
            log_std = self.log_std
        return GaussianParams(apply_linear(self.linear, features), log_std, value)


def _action_bounds(
    owner: str, low: float | Sequence[float], high: float | Sequence[float], action_size: int
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """`low` and `high` broadcast to one float per action dimension, checked to bound a box."""
    check_positive_int(owner, "action_size", action_size)
    try:
        low_array = np.broadcast_to(np.asarray(low, np.float32), (action_size,))
        high_array = np.broadcast_to(np.asarray(high, np.float32), (action_size,))
    except ValueError as error:
        raise ValueError(f"{owner}: low and high must be numbers or {action_size} numbers each ({error}).") from None
    if not np.all(low_array < high_array):
        raise ValueError(
            f"{owner}: low must be below high in every action dimension, got low={low!r}, high={high!r}; "
            "pass the bounds of the environment's action space."
        )
    return tuple(map(float, low_array)), tuple(map(float, high_array))


@final
class TanhGaussianHead(AbstractHead[TanhGaussianParams]):
    """A tanh-squashed diagonal Gaussian policy head, with actions inside `[low, high]`.

    Two linear layers give the Gaussian's mean and a log standard deviation inside
    `[min_log_std, max_log_std]`, both functions of the state; the
    [`podrace.TanhGaussianParams`][] it emits squash samples into the action bounds.
    Pass the bounds of the environment's action space. Its `num_actions` is `action_size`.

    The log standard deviation layer's output `z` is brought into the range in one of
    two ways: `"tanh"` maps it smoothly, `min + (max - min) (tanh(z) + 1) / 2` (CleanRL's
    SAC), so the gradient never vanishes but is scaled down near the bounds; `"clip"`
    takes `clip(z, min, max)` (Stable-Baselines3's and rejax's SAC), the identity inside
    the range and no gradient outside it.

    Reference: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018
    (the squashed Gaussian policy); the log standard deviation bounds `[-5, 2]` are
    CleanRL's SAC's.

    **Arguments:**

    - `in_size`: the feature size.
    - `action_size`: the dimension of the (flat) action vector.
    - `low`, `high`: the action bounds: numbers, or one per action dimension.
    - `with_value`: whether to add a [`podrace.networks.ValueHead`][].
    - `min_log_std`, `max_log_std`: the range of the log standard deviation.
    - `log_std_bounding`: how the log standard deviation is kept in its range,
        `"tanh"` or `"clip"`.
    - `initialization`: how the mean and log standard deviation layers are drawn (an
        [`podrace.networks.AbstractInitialization`][]).
    - `value_initialization`: the same for the value layer, with `with_value`.
    - `key`: initialisation randomness.
    """

    mean_linear: eqx.nn.Linear
    log_std_linear: eqx.nn.Linear
    value_head: ValueHead | None
    low: tuple[float, ...] = eqx.field(static=True)
    high: tuple[float, ...] = eqx.field(static=True)
    min_log_std: float = eqx.field(static=True)
    max_log_std: float = eqx.field(static=True)
    log_std_bounding: Literal["tanh", "clip"] = eqx.field(static=True)
    in_size: int = eqx.field(static=True)
    action_size: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    emits_value: bool = eqx.field(static=True)
    output_type = TanhGaussianParams

    def __init__(
        self,
        in_size: int,
        action_size: int,
        *,
        low: float | Sequence[float] = -1.0,
        high: float | Sequence[float] = 1.0,
        with_value: bool = False,
        min_log_std: float = -5.0,
        max_log_std: float = 2.0,
        log_std_bounding: Literal["tanh", "clip"] = "tanh",
        initialization: AbstractInitialization = FanInUniform(),
        value_initialization: AbstractInitialization = FanInUniform(),
        key: PRNGKeyArray,
    ):
        self.low, self.high = _action_bounds("TanhGaussianHead", low, high, action_size)
        if not min_log_std < max_log_std:
            raise ValueError(
                f"TanhGaussianHead: min_log_std must be below max_log_std, got {min_log_std} and {max_log_std}."
            )
        if log_std_bounding not in ("tanh", "clip"):
            raise ValueError(f"TanhGaussianHead: log_std_bounding must be 'tanh' or 'clip', got {log_std_bounding!r}.")
        policy_key, value_key = jax.random.split(key)
        layer = functools.partial(eqx.nn.Linear, in_size, action_size)
        self.mean_linear, self.log_std_linear = init_layers(policy_key, layer, layer, initialization=initialization)
        self.value_head = _value_head("TanhGaussianHead", in_size, with_value, value_initialization, value_key)
        self.min_log_std, self.max_log_std = float(min_log_std), float(max_log_std)
        self.log_std_bounding = log_std_bounding
        self.in_size = in_size
        self.action_size = self.num_actions = action_size
        self.emits_value = with_value

    def __call__(self, features: Float[Array, " in_size"]) -> TanhGaussianParams:
        value = None if self.value_head is None else self.value_head(features)
        raw_log_std = apply_linear(self.log_std_linear, features)
        if self.log_std_bounding == "clip":
            log_std = jnp.clip(raw_log_std, self.min_log_std, self.max_log_std)
        else:
            squashed = jnp.tanh(raw_log_std)
            log_std = self.min_log_std + (self.max_log_std - self.min_log_std) * (squashed + 1) / 2
        low, high = jnp.asarray(self.low), jnp.asarray(self.high)
        return TanhGaussianParams(apply_linear(self.mean_linear, features), log_std, low, high, value)


@final
class DeterministicHead(AbstractHead[DeterministicAction]):
    """A deterministic actor's head: a linear layer through `tanh`, scaled into `[low, high]`.

    Pass the bounds of the environment's action space. Its `num_actions` is
    `action_size`; it emits no value.

    Reference: Lillicrap et al., "Continuous control with deep reinforcement
    learning", ICLR 2016 (DDPG's tanh output layer).

    **Arguments:**

    - `in_size`: the feature size.
    - `action_size`: the dimension of the (flat) action vector.
    - `low`, `high`: the action bounds: numbers, or one per action dimension.
    - `initialization`: how the layer's weights and bias are drawn (an
        [`podrace.networks.AbstractInitialization`][]).
    - `key`: initialisation randomness.
    """

    linear: eqx.nn.Linear
    low: tuple[float, ...] = eqx.field(static=True)
    high: tuple[float, ...] = eqx.field(static=True)
    in_size: int = eqx.field(static=True)
    action_size: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    emits_value: bool = eqx.field(static=True)
    output_type = DeterministicAction

    def __init__(
        self,
        in_size: int,
        action_size: int,
        *,
        low: float | Sequence[float] = -1.0,
        high: float | Sequence[float] = 1.0,
        initialization: AbstractInitialization = FanInUniform(),
        key: PRNGKeyArray,
    ):
        self.low, self.high = _action_bounds("DeterministicHead", low, high, action_size)
        (self.linear,) = init_layers(
            key, functools.partial(eqx.nn.Linear, in_size, action_size), initialization=initialization
        )
        self.in_size = in_size
        self.action_size = self.num_actions = action_size
        self.emits_value = False

    def __call__(self, features: Float[Array, " in_size"]) -> DeterministicAction:
        low, high = jnp.asarray(self.low), jnp.asarray(self.high)
        action = low + (high - low) * (jnp.tanh(apply_linear(self.linear, features)) + 1) / 2
        return DeterministicAction(action, low, high)
