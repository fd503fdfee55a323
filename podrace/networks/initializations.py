"""How torsos and heads draw their initial parameters: one random draw per part."""

import abc
import itertools
import math
import numbers
from typing import NamedTuple, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray


@final
class ParameterSpec(NamedTuple):
    """The shape of one parameter array of a layer, as an initialisation receives it.

    **Attributes:**

    - `shape`: the array's shape; a weight's first axis is its output (Equinox's layout:
        `(out_features, in_features)` for a linear layer, `(out_channels, in_channels,
        height, width)` for a convolution).
    - `dtype`: the array's dtype.
    - `fan_in`: the number of inputs of its layer: `in_features` for a linear layer (1
        for `"scalar"`), input channels per group times the kernel's size for a
        convolution, `hidden_size` for a GRU or LSTM cell (as Equinox and PyTorch count it).
    - `is_bias`: whether it is a bias (added to the layer's output) rather than a weight.
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    fan_in: int
    is_bias: bool


class AbstractInitialization(eqx.Module):
    """How a torso or head draws the initial weights and biases of its layers.

    Parts take one as their `initialization` argument; every parameter of a part comes
    from one call to `draw`. To add an initialisation, subclass this and implement
    `draw` with a single random draw split among the parameters (one
    `jax.random.uniform` or `jax.random.normal` over their total size): XLA compiles
    each random draw as a kernel of its own, so a draw per parameter makes a small
    network several times slower to build.
    """

    @abc.abstractmethod
    def draw(self, key: PRNGKeyArray, parameters: tuple[ParameterSpec, ...]) -> list[Array]:
        """Every parameter of a part's layers, from one random draw.

        **Arguments:**

        - `key`: the part's initialisation randomness.
        - `parameters`: the shape, dtype, fan-in and kind of each parameter, layer by layer.

        **Returns:**

        One array per entry of `parameters`, of its shape and dtype.
        """


def _total_size(parameters: tuple[ParameterSpec, ...]) -> int:
    return sum(math.prod(parameter.shape) for parameter in parameters)


def _split(values: Float[Array, " total"], parameters: tuple[ParameterSpec, ...]) -> list[Array]:
    """`values` split into consecutive chunks of the sizes of `parameters`, each flat."""
    sizes = [math.prod(parameter.shape) for parameter in parameters]
    return jnp.split(values, list(itertools.accumulate(sizes))[:-1])


def _non_negative_number(owner: str, name: str, value: object) -> float:
    """`value` as a float, or a `TypeError` / `ValueError` unless it is a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a Python number (e.g. math.sqrt(2)), got {value!r}.")
    number = float(value)
    if not (math.isfinite(number) and number >= 0):
        raise ValueError(f"{owner}: {name} must be finite and non-negative, got {value!r}.")
    return number


@final
class FanInUniform(AbstractInitialization):
    """Every weight and bias uniform in `+-1 / sqrt(fan_in)`: Equinox's and PyTorch's default.

    The distribution that `equinox.nn.Linear`, `equinox.nn.Conv` and their PyTorch
    counterparts draw each parameter from, though not the values they would draw with
    the same key, since here one draw fills all of a part's parameters. podrace's
    default, which its documented results were trained with.
    """

    def draw(self, key: PRNGKeyArray, parameters: tuple[ParameterSpec, ...]) -> list[Array]:
        noise = jax.random.uniform(key, (_total_size(parameters),), minval=-1.0, maxval=1.0)
        return [
            ((1 / math.sqrt(parameter.fan_in)) * chunk).reshape(parameter.shape).astype(parameter.dtype)
            for chunk, parameter in zip(_split(noise, parameters), parameters, strict=True)
        ]


@final
class Orthogonal(AbstractInitialization):
    """Orthogonal weights times `gain`, and zero biases.

    Each weight, as a matrix of its output axis by all its other axes (`(out_channels,
    in_channels * height * width)` for a convolution), has orthonormal rows (if it has no
    more rows than columns) or orthonormal columns, times `gain`: the Q of the QR
    decomposition of a standard normal matrix, with the signs of R's diagonal, as
    `torch.nn.init.orthogonal_` and flax's `orthogonal` draw it. CleanRL's and
    PureJaxRL's PPO use `gain=math.sqrt(2)` for the hidden layers, 0.01 for the policy's
    output layer and 1 for the value's.

    References: Saxe et al., "Exact solutions to the nonlinear dynamics of learning in
    deep linear neural networks", ICLR 2014; Huang et al., "The 37 Implementation
    Details of Proximal Policy Optimization", ICLR Blog Track 2022.

    **Arguments:**

    - `gain`: the factor on the orthogonal matrices (a non-negative Python number).
    """

    gain: float = eqx.field(static=True)

    def __init__(self, gain: float = 1.0):
        self.gain = _non_negative_number("Orthogonal", "gain", gain)

    def draw(self, key: PRNGKeyArray, parameters: tuple[ParameterSpec, ...]) -> list[Array]:
        weights = tuple(parameter for parameter in parameters if not parameter.is_bias)
        noise = jax.random.normal(key, (_total_size(weights),))
        chunks = iter(_split(noise, weights))
        values = []
        for parameter in parameters:
            if parameter.is_bias:
                values.append(jnp.zeros(parameter.shape, parameter.dtype))
                continue
            rows, columns = parameter.shape[0], math.prod(parameter.shape[1:])
            # The QR of a tall matrix: Q has orthonormal columns; a wide weight is its transpose.
            q, r = _qr(next(chunks).reshape(max(rows, columns), min(rows, columns)))
            q = q * jnp.sign(jnp.diagonal(r))[None, :]
            matrix = q.T if rows < columns else q
            values.append((self.gain * matrix).reshape(parameter.shape).astype(parameter.dtype))
        return values


@jax.custom_batching.custom_vmap
def _qr(matrix: Float[Array, "rows columns"]) -> tuple[Array, Array]:
    """`jnp.linalg.qr`, run one matrix at a time under `vmap`.

    A batched QR on the CPU splits its batch over XLA's thread pool and waits for it
    from a thread of that pool; two of them at once (one per weight of a network built
    under `vmap`, as a `Population` builds its members) can take every thread of a
    small pool and wait forever (jaxlib 0.10's `ParallelBatchMap`, on a 2-core CPU).
    The same factorisations, one matrix at a time, give the same values.
    """
    q, r = jnp.linalg.qr(matrix)
    return q, r


@_qr.def_vmap
def _qr_one_at_a_time(
    axis_size: int, in_batched: list[bool], matrices: Array
) -> tuple[tuple[Array, Array], tuple[bool, bool]]:
    del axis_size, in_batched
    return jax.lax.map(_qr, matrices), (True, True)


# The standard deviation of a standard normal truncated to [-2, 2]: 1 - 2 a phi(a) / (2 Phi(a) - 1) at a = 2.
_TRUNCATED_STD = math.sqrt(1 - 4 * math.exp(-2) / math.sqrt(2 * math.pi) / math.erf(math.sqrt(2)))


def _truncated_normal(
    key: PRNGKeyArray, parameters: tuple[ParameterSpec, ...], variance_scale: float, bias_scale: float
) -> list[Array]:
    """Weights from a normal truncated at two standard deviations, of variance `variance_scale / fan_in`,
    and biases uniform in `[0, bias_scale)`: flax's `variance_scaling(variance_scale, "fan_in", "truncated_normal")`."""
    noise = jax.random.uniform(key, (_total_size(parameters),))
    # Inverse transform sampling of the truncated normal, as jax.random.truncated_normal.
    lower, upper = math.erf(-math.sqrt(2)), math.erf(math.sqrt(2))
    values = []
    for chunk, parameter in zip(_split(noise, parameters), parameters, strict=True):
        if parameter.is_bias:
            value = bias_scale * chunk
        else:
            standard = jnp.clip(math.sqrt(2) * jax.lax.erf_inv(lower + (upper - lower) * chunk), -2.0, 2.0)
            value = (math.sqrt(variance_scale) / math.sqrt(parameter.fan_in) / _TRUNCATED_STD) * standard
        values.append(value.reshape(parameter.shape).astype(parameter.dtype))
    return values


@final
class LecunNormal(AbstractInitialization):
    """Truncated normal weights of variance `1 / fan_in`, and biases uniform in `[0, bias_scale)`.

    Each weight is a normal truncated at two standard deviations and rescaled so that
    its variance is `1 / fan_in`: flax's default `lecun_normal()` (`variance_scaling(1.0,
    "fan_in", "truncated_normal")`). With `bias_scale=0` (the default) the biases are
    0, as flax's default `zeros`; gymnax-blines' PPO networks draw them uniform in
    `[0, 0.05)` (`bias_scale=0.05`, flax's `uniform(0.05)`).

    Reference: LeCun et al., "Efficient BackProp", Neural Networks: Tricks of the Trade, 1998.

    **Arguments:**

    - `bias_scale`: the upper end of the biases' range (a non-negative Python number).
    """

    bias_scale: float = eqx.field(static=True)

    def __init__(self, bias_scale: float = 0.0):
        self.bias_scale = _non_negative_number("LecunNormal", "bias_scale", bias_scale)

    def draw(self, key: PRNGKeyArray, parameters: tuple[ParameterSpec, ...]) -> list[Array]:
        return _truncated_normal(key, parameters, 1.0, self.bias_scale)


@final
class HeNormal(AbstractInitialization):
    """Truncated normal weights of variance `2 / fan_in`, and zero biases: flax's `he_normal()`.

    The weights of [`podrace.networks.LecunNormal`][] with twice the variance
    (`variance_scaling(2.0, "fan_in", "truncated_normal")`), which keeps the variance
    of the activations through ReLU layers; purejaxql's PQN Q-networks use it.

    Reference: He et al., "Delving Deep into Rectifiers", ICCV 2015.
    """

    def draw(self, key: PRNGKeyArray, parameters: tuple[ParameterSpec, ...]) -> list[Array]:
        return _truncated_normal(key, parameters, 2.0, 0.0)
