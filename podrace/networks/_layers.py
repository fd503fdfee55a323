"""Layer helpers shared by torsos and heads."""

import equinox as eqx
from jaxtyping import Array, Float


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
