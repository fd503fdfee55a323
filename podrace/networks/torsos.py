import abc
import functools
import math
from collections.abc import Callable, Sequence
from typing import Literal, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray, PyTree, Shaped

from ._layers import apply_linear, dense_layers, init_layers
from .initializations import AbstractInitialization, FanInUniform


class AbstractTorso(eqx.Module):
    """Maps one (unbatched) observation to a feature vector of `output_size` elements.

    A torso is the part of a network below its head: [`podrace.networks.FeedForwardNetwork`][]
    and [`podrace.networks.ActorCriticNetwork`][] take any torso, and check only that its
    `output_size` is the head's `in_size`. To add one (a transformer over a set of
    entities, say), subclass this, set `output_size` at construction and implement
    `__call__`.
    """

    output_size: eqx.AbstractVar[int]

    @abc.abstractmethod
    def __call__(self, observation: PyTree[Array]) -> Float[Array, " output_size"]:
        """Maps one observation to features.

        **Arguments:**

        - `observation`: one (unbatched) observation.

        **Returns:**

        A vector of `output_size` features.
        """


@final
class MLPTorso(AbstractTorso):
    """Flattens an observation and applies fully connected layers with an activation.

    Integer and boolean observations (a grid world's symbols) are taken as the floats of
    the layers' weights.

    **Arguments:**

    - `observation_shape`: the shape of one observation.
    - `hidden_sizes`: the width of each hidden layer.
    - `activation`: applied after every layer.
    - `layer_norm`: normalise every layer's output (with a learnt scale and offset)
        before its activation, as PQN's Q-network does (Ba et al., "Layer
        Normalization", 2016; Gallici et al., "Simplifying Deep Temporal Difference
        Learning", ICLR 2025).
    - `layer_norm_eps`: the constant added to the variance in each normalisation
        (PyTorch's 1e-5 by default; flax's is 1e-6).
    - `initialization`: how every layer's weights and bias are drawn (an
        [`podrace.networks.AbstractInitialization`][]; CleanRL's PPO uses
        `Orthogonal(math.sqrt(2))`).
    - `key`: initialisation randomness.
    """

    layers: tuple[eqx.nn.Linear, ...]
    norms: tuple[eqx.nn.LayerNorm, ...] | None
    activation: Callable[[Array], Array] = eqx.field(static=True)
    output_size: int = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: Sequence[int],
        hidden_sizes: Sequence[int],
        *,
        activation: Callable[[Array], Array] = jax.nn.relu,
        layer_norm: bool = False,
        layer_norm_eps: float = 1e-5,
        initialization: AbstractInitialization = FanInUniform(),
        key: PRNGKeyArray,
    ):
        if not hidden_sizes or any(size <= 0 for size in hidden_sizes):
            raise ValueError(f"MLPTorso needs at least one positive hidden size, got {tuple(hidden_sizes)}.")
        self.layers = init_layers(
            key, *dense_layers(math.prod(observation_shape), hidden_sizes), initialization=initialization
        )
        self.norms = _layer_norms("MLPTorso", hidden_sizes, layer_norm, layer_norm_eps)
        self.activation = activation
        self.output_size = hidden_sizes[-1]

    def __call__(self, observation: Array) -> Float[Array, " output_size"]:
        x = jnp.ravel(observation).astype(self.layers[0].weight.dtype)
        for index, layer in enumerate(self.layers):
            x = apply_linear(layer, x)
            if self.norms is not None:
                x = self.norms[index](x)
            x = self.activation(x)
        return x


def _layer_norms(owner: str, sizes: Sequence[int], layer_norm: bool, eps: float) -> tuple[eqx.nn.LayerNorm, ...] | None:
    """One layer normalisation (learnt scale and offset) per size, or `None` without `layer_norm`."""
    if not (isinstance(eps, int | float) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"{owner}: layer_norm_eps must be a positive number, got {eps!r}.")
    return tuple(eqx.nn.LayerNorm(size, eps=eps) for size in sizes) if layer_norm else None


def _per_layer(name: str, value: int | Sequence[int], num_layers: int) -> tuple[int, ...]:
    values = (value,) * num_layers if isinstance(value, int) else tuple(value)
    if len(values) != num_layers or any(not isinstance(v, int) or isinstance(v, bool) or v <= 0 for v in values):
        raise ValueError(
            f"ConvTorso: {name} must be a positive integer or one per convolution ({num_layers}), got {value!r}."
        )
    return values


@final
class ConvTorso(AbstractTorso):
    """Convolutions over an image, then flattening and optional dense layers.

    The observation is one `[height, width, channels]` image (as [`podrace.envs.Catch`][]
    emits its `rows x columns x 1` board), or with `channels_first` one `[channels,
    height, width]` image (EnvPool's and Gymnasium's stacked Atari frames), cast to the
    parameters' dtype and multiplied by `observation_scale`. Each convolution (square
    kernels, no dilation) is followed by `activation`, as is each dense layer; with
    `layer_norm`, each output is normalised before its activation (a convolution's over
    its channels at each position, as flax's `LayerNorm` on a channels-last map).
    `output_size` is worked out at construction from the shapes alone.

    **Arguments:**

    - `observation_shape`: the shape `(height, width, channels)` of one observation, or
        `(channels, height, width)` with `channels_first`.
    - `channels`: the output channels of each convolution (at least one).
    - `kernel_sizes`: the kernel size of each convolution, or one for all.
    - `strides`: the stride of each convolution, or one for all.
    - `padding`: `"SAME"` (output size `ceil(input / stride)`) or `"VALID"` (no padding).
    - `hidden_sizes`: the width of each dense layer after flattening (none by default:
        the features are the flattened last feature map).
    - `activation`: applied after every layer.
    - `observation_scale`: the factor on the observation (1 by default; purejaxql's PQN
        divides MinAtar's 0/1 boards by 255).
    - `layer_norm`: normalise every layer's output (with a learnt scale and offset)
        before its activation, as PQN's Q-networks do.
    - `layer_norm_eps`: the constant added to the variance in each normalisation
        (PyTorch's 1e-5 by default; flax's is 1e-6).
    - `initialization`: how every convolution's and dense layer's weights and bias are
        drawn (an [`podrace.networks.AbstractInitialization`][]; [`podrace.networks.Orthogonal`][]
        treats a convolution's weight as a matrix of output channels by inputs to one output).
    - `channels_first`: whether the observation's channels come first.
    - `key`: initialisation randomness.
    """

    convs: tuple[eqx.nn.Conv2d, ...]
    layers: tuple[eqx.nn.Linear, ...]
    norms: tuple[eqx.nn.LayerNorm, ...] | None
    activation: Callable[[Array], Array] = eqx.field(static=True)
    observation_scale: float = eqx.field(static=True)
    channels_first: bool = eqx.field(static=True)
    output_size: int = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: Sequence[int],
        channels: Sequence[int],
        *,
        kernel_sizes: int | Sequence[int] = 3,
        strides: int | Sequence[int] = 1,
        padding: Literal["SAME", "VALID"] = "SAME",
        hidden_sizes: Sequence[int] = (),
        activation: Callable[[Array], Array] = jax.nn.relu,
        observation_scale: float = 1.0,
        layer_norm: bool = False,
        layer_norm_eps: float = 1e-5,
        initialization: AbstractInitialization = FanInUniform(),
        channels_first: bool = False,
        key: PRNGKeyArray,
    ):
        layout = "(channels, height, width)" if channels_first else "(height, width, channels)"
        if len(observation_shape) != 3 or any(size <= 0 for size in observation_shape):
            raise ValueError(f"ConvTorso takes observations of shape {layout}, got {tuple(observation_shape)}.")
        if not channels:
            raise ValueError("ConvTorso needs at least one convolution (channels is empty).")
        channels = _per_layer("channels", tuple(channels), len(channels))
        kernel_sizes = _per_layer("kernel_sizes", kernel_sizes, len(channels))
        strides = _per_layer("strides", strides, len(channels))
        hidden_sizes = tuple(hidden_sizes)
        if any(size <= 0 for size in hidden_sizes):
            raise ValueError(f"ConvTorso: hidden_sizes must be positive, got {hidden_sizes}.")
        if padding not in ("SAME", "VALID"):
            raise ValueError(f'ConvTorso: padding must be "SAME" or "VALID", got {padding!r}.')
        if not (isinstance(observation_scale, int | float) and math.isfinite(observation_scale)):
            raise ValueError(f"ConvTorso: observation_scale must be a finite number, got {observation_scale!r}.")

        if channels_first:
            in_channels, height, width = observation_shape
        else:
            height, width, in_channels = observation_shape
        image_size = (height, width)
        convs = []
        for index, (out_channels, kernel_size, stride) in enumerate(zip(channels, kernel_sizes, strides, strict=True)):
            convs.append(
                functools.partial(eqx.nn.Conv2d, in_channels, out_channels, kernel_size, stride, padding=padding)
            )
            if padding == "SAME":
                height, width = -(-height // stride), -(-width // stride)
            else:
                height, width = (height - kernel_size) // stride + 1, (width - kernel_size) // stride + 1
            if height <= 0 or width <= 0:
                raise ValueError(
                    f"ConvTorso: with VALID padding, the {kernel_size}x{kernel_size} kernel of convolution {index} "
                    f"does not fit in what is left of the {image_size} observation; use smaller "
                    "kernels or SAME."
                )
            in_channels = out_channels
        layers = init_layers(
            key, *convs, *dense_layers(height * width * in_channels, hidden_sizes), initialization=initialization
        )
        self.convs = tuple(layer for layer in layers if isinstance(layer, eqx.nn.Conv2d))
        self.layers = tuple(layer for layer in layers if isinstance(layer, eqx.nn.Linear))
        self.norms = _layer_norms("ConvTorso", (*channels, *hidden_sizes), layer_norm, layer_norm_eps)
        self.activation = activation
        self.observation_scale = float(observation_scale)
        self.channels_first = channels_first
        self.output_size = hidden_sizes[-1] if hidden_sizes else height * width * in_channels

    def _normalised(self, index: int, x: Array) -> Array:
        """`x` through layer `index`'s normalisation, if any (a feature map over its leading channel axis)."""
        if self.norms is None:
            return x
        if x.ndim == 1:
            return self.norms[index](x)
        return jnp.moveaxis(jax.vmap(jax.vmap(self.norms[index]))(jnp.moveaxis(x, 0, -1)), -1, 0)

    def __call__(self, observation: Shaped[Array, "_ _ _"]) -> Float[Array, " output_size"]:
        x = jnp.asarray(observation, self.convs[0].weight.dtype)
        if not self.channels_first:
            x = jnp.moveaxis(x, -1, 0)
        if self.observation_scale != 1.0:
            x = self.observation_scale * x
        for index, conv in enumerate(self.convs):
            x = self.activation(self._normalised(index, conv(x)))
        x = jnp.ravel(x)
        for index, layer in enumerate(self.layers, start=len(self.convs)):
            x = self.activation(self._normalised(index, apply_linear(layer, x)))
        return x
