"""Layer helpers shared by torsos, cores and heads."""

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import TypeVar

import equinox as eqx
import jax
from jaxtyping import Array, Float, PRNGKeyArray

from ..compilation import compiled_once
from .initializations import AbstractInitialization, FanInUniform, ParameterSpec


LayerT = TypeVar("LayerT", bound=eqx.Module)


def dense_layers(in_size: int, hidden_sizes: Sequence[int]) -> list[Callable[..., eqx.nn.Linear]]:
    """The constructors of fully connected layers from `in_size` features through `hidden_sizes`."""
    sizes = [in_size, *hidden_sizes]
    return [functools.partial(eqx.nn.Linear, i, o) for i, o in itertools.pairwise(sizes)]


def apply_linear(layer: eqx.nn.Linear, x: Float[Array, " in_features"]) -> Array:
    """Applies `layer` as `x @ weight.T + bias`.

    Same result as `layer(x)`, but under `vmap` over a batch this form lowers to one
    row-major matmul, which XLA's CPU backend runs markedly faster than the batched
    matrix-vector product of `weight @ x`.
    """
    y = x @ layer.weight.T
    if layer.bias is not None:
        y = y + layer.bias
    return y[0] if layer.out_features == "scalar" else y


def layer_fan_in(layer: eqx.Module) -> int:
    """The number of inputs of `layer`, from which its initialisation is scaled.

    The fan-in of a linear layer is its `in_features` (1 for `"scalar"`), of a
    convolution its input channels per group times the kernel's size, and of a GRU or
    LSTM cell its `hidden_size`, as in Equinox and PyTorch.
    """
    if isinstance(layer, eqx.nn.Linear):
        return 1 if layer.in_features == "scalar" else layer.in_features
    if isinstance(layer, eqx.nn.Conv):
        return layer.in_channels // layer.groups * math.prod(layer.kernel_size)
    if isinstance(layer, eqx.nn.GRUCell | eqx.nn.LSTMCell):
        return layer.hidden_size
    raise TypeError(f"layer_fan_in: no initialisation is known for {type(layer).__name__}.")


def init_layers(
    key: PRNGKeyArray,
    *constructors: Callable[..., LayerT],
    initialization: AbstractInitialization = FanInUniform(),
) -> tuple[LayerT, ...]:
    """Equinox layers with their parameters drawn by `initialization`, all in one random call.

    Each `constructor(key=...)` (e.g. `functools.partial(eqx.nn.Linear, 4, 64)`) is only
    traced, for its shapes. Every parameter is then filled by one
    `initialization.draw` over them all (by default [`podrace.networks.FanInUniform`][]:
    Equinox's and PyTorch's default distribution, with other values than the
    constructors would draw). One draw compiles one random-number kernel, where each
    parameter's own draw compiles one more: tens of milliseconds each on a CPU, most of
    a small network's construction time.
    """
    if not isinstance(initialization, AbstractInitialization):
        raise TypeError(
            "initialization must be a podrace.networks.AbstractInitialization, such as FanInUniform(), "
            f"Orthogonal(gain), LecunNormal(bias_scale) or HeNormal(); got {initialization!r}."
        )
    shapes = [eqx.filter_eval_shape(constructor, key=key) for constructor in constructors]

    def is_shape(x) -> bool:
        return isinstance(x, jax.ShapeDtypeStruct)

    parameters = [
        ParameterSpec(leaf.shape, leaf.dtype, layer_fan_in(shape), is_bias=path[-1].name.startswith("bias"))
        for shape in shapes
        for path, leaf in jax.tree_util.tree_flatten_with_path(shape, is_leaf=is_shape)[0]
        if is_shape(leaf)
    ]
    values = iter(_draw(initialization, key, tuple(parameters)))
    return tuple(
        jax.tree.map(lambda leaf: next(values) if is_shape(leaf) else leaf, shape, is_leaf=is_shape) for shape in shapes
    )


@compiled_once
def _draw(
    initialization: AbstractInitialization, key: PRNGKeyArray, parameters: tuple[ParameterSpec, ...]
) -> list[Array]:
    """`initialization.draw(key, parameters)`, compiled on its own.

    So that eager construction compiles one program per initialisation and layout of
    parameters (shared by parts of the same sizes) rather than one per operation.
    """
    return initialization.draw(key, parameters)
