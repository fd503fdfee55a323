"""Layer helpers shared by torsos, cores and heads."""

import functools
import itertools
import math
from collections.abc import Callable
from typing import TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray


LayerT = TypeVar("LayerT", bound=eqx.Module)


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


def fan_in_limit(layer: eqx.Module) -> float:
    """`1 / sqrt(fan_in)`: the bound of Equinox's default uniform initialisation of `layer`.

    The fan-in of a linear layer is its `in_features` (1 for `"scalar"`), of a
    convolution its input channels per group times the kernel's size, and of a GRU or
    LSTM cell its `hidden_size`, as in Equinox and PyTorch.
    """
    if isinstance(layer, eqx.nn.Linear):
        fan_in = 1 if layer.in_features == "scalar" else layer.in_features
    elif isinstance(layer, eqx.nn.Conv):
        fan_in = layer.in_channels // layer.groups * math.prod(layer.kernel_size)
    elif isinstance(layer, eqx.nn.GRUCell | eqx.nn.LSTMCell):
        fan_in = layer.hidden_size
    else:
        raise TypeError(f"fan_in_limit: no default initialisation is known for {type(layer).__name__}.")
    return 1 / math.sqrt(fan_in)


def init_layers(key: PRNGKeyArray, *constructors: Callable[..., LayerT]) -> tuple[LayerT, ...]:
    """Equinox layers with their default initialisation, all drawn in one random call.

    Each `constructor(key=...)` (e.g. `functools.partial(eqx.nn.Linear, 4, 64)`) is only
    traced, for its shapes. Every parameter is then filled from one uniform draw over
    them all, scaled to its layer's `fan_in_limit`: Equinox's (and PyTorch's) default
    distribution `U(-1 / sqrt(fan_in), 1 / sqrt(fan_in))`, with other values than the
    constructors would draw. One draw compiles one random-number kernel, where each
    parameter's own draw compiles one more: tens of milliseconds each on a CPU, most of
    a small network's construction time.
    """
    shapes = [eqx.filter_eval_shape(constructor, key=key) for constructor in constructors]

    def is_shape(x) -> bool:
        return isinstance(x, jax.ShapeDtypeStruct)

    leaves = [jax.tree.leaves(shape, is_leaf=is_shape) for shape in shapes]
    parameters = [
        (leaf.shape, leaf.dtype, fan_in_limit(shape))
        for shape, layer_leaves in zip(shapes, leaves, strict=True)
        for leaf in layer_leaves
        if is_shape(leaf)
    ]
    values = iter(_uniform_parameters(key, tuple(parameters)))
    return tuple(
        jax.tree.map(lambda leaf: next(values) if is_shape(leaf) else leaf, shape, is_leaf=is_shape) for shape in shapes
    )


@functools.partial(jax.jit, static_argnums=1)
def _uniform_parameters(
    key: PRNGKeyArray, parameters: tuple[tuple[tuple[int, ...], jnp.dtype, float], ...]
) -> list[Array]:
    """One uniform draw split into arrays of the given `(shape, dtype, limit)`, each in `[-limit, limit)`.

    Compiled on its own, so that eager construction compiles one program per layout of
    parameters (shared by parts of the same sizes) rather than one per operation.
    """
    sizes = [math.prod(shape) for shape, _, _ in parameters]
    noise = jax.random.uniform(key, (sum(sizes),), minval=-1.0, maxval=1.0)
    chunks = jnp.split(noise, list(itertools.accumulate(sizes))[:-1])
    return [
        (limit * chunk).reshape(shape).astype(dtype)
        for chunk, (shape, dtype, limit) in zip(chunks, parameters, strict=True)
    ]
