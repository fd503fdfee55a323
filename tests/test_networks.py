"""Networks: the shared contract, torsos and heads by hand, initialisations, construction errors."""

import math
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np
import optax
import pytest
from jaxtyping import Array, Float, PRNGKeyArray

import podrace as pr
from podrace.networks._layers import layer_fan_in

from . import helpers


def _apply(network, observation, carry=None):
    return network(observation, network.initial_carry() if carry is None else carry)


def _unroll(network, observations, carry, is_first):
    return network.unroll(observations, carry, is_first)


def _grads(network, observation, carry):
    def objective(network):
        output, _ = network(observation, carry)
        return sum(jnp.sum(jnp.square(leaf)) for leaf in jax.tree.leaves(output))

    return eqx.filter_grad(objective)(network)


APPLY = helpers.Compiled(_apply)
APPLY_BATCH = helpers.Compiled(helpers.vmap_over_last(_apply, 1))
UNROLL = helpers.Compiled(_unroll)
GRADS = helpers.Compiled(_grads)


def _observations(network, seed, batch):
    return helpers.random_observations(network, seed, batch)


def _first(tree):
    return jax.tree.map(lambda x: x[0], tree)


# Networks as a user writes them, with only what defines them; they keep the contract below
# beside podrace's own.


@final
class LinearQNetwork(pr.networks.AbstractNetwork[pr.QValues]):
    """Action values linear in the flattened observation: `output_type`, `num_actions` and
    `__call__`, nothing else."""

    linear: eqx.nn.Linear

    def __init__(self, observation_shape: tuple[int, ...], num_actions: int, *, key: PRNGKeyArray):
        self.linear = eqx.nn.Linear(math.prod(observation_shape), num_actions, key=key)

    @property
    def output_type(self):
        return pr.QValues

    @property
    def num_actions(self):
        return self.linear.out_features

    def __call__(self, observation, carry):
        return pr.QValues(self.linear(jnp.ravel(observation))), carry


@final
class DecayingMemoryQNetwork(pr.networks.AbstractRecurrentNetwork[pr.QValues]):
    """A recurrent network that adds `initial_state` only: its carry is a decaying sum of the
    flattened observations, and its action values are linear in the observation and the carry."""

    linear: eqx.nn.Linear
    size: int = eqx.field(static=True)

    def __init__(self, observation_shape: tuple[int, ...], num_actions: int, *, key: PRNGKeyArray):
        self.size = math.prod(observation_shape)
        self.linear = eqx.nn.Linear(2 * self.size, num_actions, key=key)

    @property
    def output_type(self):
        return pr.QValues

    @property
    def num_actions(self):
        return self.linear.out_features

    def initial_state(self):
        return jnp.zeros(self.size)

    def __call__(self, observation, carry):
        carry = 0.5 * carry + jnp.ravel(observation)
        return pr.QValues(self.linear(jnp.concatenate([jnp.ravel(observation), carry]))), carry


USER_NETWORKS = {
    "user-linear-q": lambda key: LinearQNetwork(helpers.OBS_SHAPE, helpers.NUM_ACTIONS, key=key),
    "user-decaying-memory-q": lambda key: DecayingMemoryQNetwork(helpers.OBS_SHAPE, helpers.NUM_ACTIONS, key=key),
}
NETWORKS = {**helpers.NETWORKS, **USER_NETWORKS}


@pytest.mark.parametrize("name", NETWORKS)
def test_network_output_type_and_shapes(name):
    network = NETWORKS[name](jax.random.key(0))
    output, carry = APPLY(network, _first(_observations(network, 1, 1)))
    assert isinstance(output, network.output_type)
    assert isinstance(network, pr.networks.AbstractNetwork)
    assert network.num_actions == helpers.NUM_ACTIONS
    helpers.assert_trees_close(jax.eval_shape(lambda: carry), jax.eval_shape(network.initial_carry))
    values = {
        pr.QValues: "q_values",
        pr.PolicyLogits: "logits",
        pr.GaussianParams: "mean",
        pr.TanhGaussianParams: "mean",
        pr.DeterministicAction: "action",
    }[type(output)]
    assert getattr(output, values).shape == (helpers.NUM_ACTIONS,) and getattr(output, values).dtype == jnp.float32
    if isinstance(output, pr.DeterministicAction | pr.TanhGaussianParams):  # bounded heads of helpers.bounded_network
        np.testing.assert_array_equal(output.low, -1.0)
        np.testing.assert_array_equal(output.high, 2.0)
    if isinstance(output, pr.DeterministicAction):
        assert np.all((output.action > -1.0) & (output.action < 2.0))


@pytest.mark.parametrize("name", NETWORKS)
def test_network_jit_equals_eager(name):
    network = NETWORKS[name](jax.random.key(0))
    helpers.check_jit_equals_eager(APPLY, network, _first(_observations(network, 2, 1)))


@pytest.mark.parametrize("name", NETWORKS)
def test_network_vmap_equals_loop(name):
    network = NETWORKS[name](jax.random.key(0))
    helpers.check_vmap_equals_loop(APPLY, APPLY_BATCH, (network,), (_observations(network, 3, 3),))


@pytest.mark.parametrize("name", NETWORKS)
def test_network_unroll_equals_step_by_step(name):
    network = NETWORKS[name](jax.random.key(0))
    observations = _observations(network, 4, 5)
    is_first = jnp.asarray([False, True, False, False, True])
    start = helpers.index(helpers.random_carry(network, 4, 1), 0)
    outputs, carry = UNROLL(network, observations, start, is_first)
    expected, step_carry = [], start
    for t in range(5):
        if is_first[t]:
            step_carry = network.initial_carry()
        output, step_carry = APPLY(network, helpers.index(observations, t), step_carry)
        expected.append(output)
    helpers.assert_trees_close(outputs, helpers.stack(expected), rtol=1e-5, atol=1e-6)
    helpers.assert_trees_close(carry, step_carry, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", NETWORKS)
def test_network_init_is_deterministic_under_a_key(name):
    factory = NETWORKS[name]
    helpers.assert_trees_close(factory(jax.random.key(5)), factory(jax.random.key(5)), rtol=0, atol=0)
    helpers.assert_trees_differ(factory(jax.random.key(5)), factory(jax.random.key(6)))


@pytest.mark.parametrize("name", NETWORKS)
def test_network_gradients_are_finite_and_reach_every_layer(name):
    network = NETWORKS[name](jax.random.key(0))
    # From a random carry: from zeros, a recurrent core's hidden-to-hidden weights get no gradient.
    carry = _first(helpers.random_carry(network, 7, 1))
    grads = GRADS(network, _first(_observations(network, 7, 1)), carry)
    helpers.assert_all_finite(grads)
    leaves = jax.tree.leaves(eqx.filter(grads, eqx.is_inexact_array))
    params = jax.tree.leaves(eqx.filter(network, eqx.is_inexact_array))
    assert len(leaves) == len(params)
    # Every weight matrix gets some gradient.
    assert all(float(jnp.max(jnp.abs(leaf))) > 0 for leaf in leaves if leaf.ndim == 2)


@pytest.mark.parametrize("name", NETWORKS)
def test_network_traces_once(name):
    networks = [NETWORKS[name](jax.random.key(seed)) for seed in range(3)]
    calls = [(network, _first(_observations(network, 10 + seed, 1))) for seed, network in enumerate(networks)]
    helpers.check_traced_once(APPLY, *calls)


# Each of podrace's parametrised parts, built large enough for its statistics, and Equinox's
# layers that it holds (each with its default initialisation's bound 1 / sqrt(fan_in)).
INITIALISED = {
    "mlp_torso": lambda key: pr.networks.MLPTorso((3, 4), (64, 32), key=key),
    "conv_torso": lambda key: pr.networks.ConvTorso((6, 5, 2), (16, 8), kernel_sizes=3, hidden_sizes=(32,), key=key),
    "gru_core": lambda key: pr.networks.GRUCore(12, 48, key=key),
    "lstm_core": lambda key: pr.networks.LSTMCore(12, 48, key=key),
    "q_value_head": lambda key: pr.networks.QValueHead(64, 6, key=key),
    "value_head": lambda key: pr.networks.ValueHead(256, key=key),
    "policy_logit_head": lambda key: pr.networks.PolicyLogitHead(64, 6, with_value=True, key=key),
    "gaussian_head": lambda key: pr.networks.GaussianHead(64, 6, with_value=True, mean_init_scale=1.0, key=key),
}


def _equinox_layers(module):
    layer_types = (eqx.nn.Linear, eqx.nn.Conv, eqx.nn.GRUCell, eqx.nn.LSTMCell)
    leaves = jax.tree.leaves(module, is_leaf=lambda x: isinstance(x, layer_types))
    return [leaf for leaf in leaves if isinstance(leaf, layer_types)]


@pytest.mark.parametrize("name", INITIALISED)
def test_parameters_follow_equinox_default_initialisation(name):
    """Every parameter is uniform in +-1 / sqrt(fan_in), as Equinox's own constructors draw it."""
    layers = _equinox_layers(INITIALISED[name](jax.random.key(0)))
    assert layers
    for layer in layers:
        limit = 1 / np.sqrt(layer_fan_in(layer))
        values = np.concatenate([np.ravel(leaf) for leaf in jax.tree.leaves(eqx.filter(layer, eqx.is_array))])
        assert np.all(np.abs(values) <= limit)
        # A uniform in [-limit, limit] has mean 0 and standard deviation limit / sqrt(3); over
        # n values their estimates have standard errors limit / sqrt(3 n) and limit / sqrt(15 n).
        n = values.size
        assert abs(values.mean()) < 5 * limit / np.sqrt(3 * n)
        assert abs(values.std() - limit / np.sqrt(3)) < 5 * limit / np.sqrt(15 * n)
        # Each parameter has values of its own (the draw is split, not repeated).
        assert len(np.unique(values)) > 0.99 * n


def _random_draws(build) -> int:
    return str(jax.make_jaxpr(build)(jax.random.key(0))).count("random_bits[")


@pytest.mark.parametrize("name", INITIALISED)
def test_each_part_draws_its_parameters_in_one_random_call(name):
    """A constructor compiles one random-number kernel for all its layers, not one per parameter."""
    # The heads with a value output draw it with a key of their own.
    assert _random_draws(INITIALISED[name]) == (2 if name in ("policy_logit_head", "gaussian_head") else 1)


# Each part that takes an `initialization` (and a `value_initialization`, for the heads with a value
# layer), of the sizes of INITIALISED; the Gaussian heads' mean layers are left unscaled.
INITIALISABLE = {
    "mlp_torso": lambda key, **options: pr.networks.MLPTorso((3, 4), (64, 32), key=key, **options),
    "conv_torso": lambda key, **options: pr.networks.ConvTorso(
        (6, 5, 2), (16, 8), kernel_sizes=3, hidden_sizes=(32,), key=key, **options
    ),
    "q_value_head": lambda key, **options: pr.networks.QValueHead(64, 6, key=key, **options),
    "value_head": lambda key, **options: pr.networks.ValueHead(256, key=key, **options),
    "policy_logit_head": lambda key, **options: pr.networks.PolicyLogitHead(64, 6, with_value=True, key=key, **options),
    "gaussian_head": lambda key, **options: pr.networks.GaussianHead(
        64, 6, with_value=True, mean_init_scale=1.0, key=key, **options
    ),
    "gaussian_head_softplus_std": lambda key, **options: pr.networks.GaussianHead(
        64, 6, with_value=True, std="softplus", mean_init_scale=1.0, key=key, **options
    ),
}
WITH_VALUE = ("policy_logit_head", "gaussian_head", "gaussian_head_softplus_std")
INITIALIZATIONS = {
    "fan_in_uniform": pr.networks.FanInUniform(),
    "orthogonal": pr.networks.Orthogonal(math.sqrt(2)),
    "lecun_normal": pr.networks.LecunNormal(bias_scale=0.05),
    "he_normal": pr.networks.HeNormal(),
}


def _initialised(name, initialization, key=None):
    """INITIALISABLE's part `name`, with `initialization` for all its layers."""
    options = {"initialization": initialization}
    if name in WITH_VALUE:
        options["value_initialization"] = initialization
    return INITIALISABLE[name](jax.random.key(0) if key is None else key, **options)


def _weights_and_biases(layer):
    """A layer's weight as a matrix of outputs by inputs (a convolution's flattened), and its bias."""
    weight = np.asarray(layer.weight)
    return weight.reshape(weight.shape[0], -1), np.ravel(layer.bias)


@pytest.mark.parametrize("initialization", INITIALIZATIONS)
@pytest.mark.parametrize("name", INITIALISABLE)
def test_each_part_draws_its_parameters_in_one_random_call_with_every_initialization(name, initialization):
    draws = _random_draws(lambda key: _initialised(name, INITIALIZATIONS[initialization], key))
    assert draws == (2 if name in WITH_VALUE else 1)


@pytest.mark.parametrize("name", INITIALISABLE)
def test_fan_in_uniform_is_the_default_bit_for_bit(name):
    key = jax.random.key(3)
    explicit = _initialised(name, pr.networks.FanInUniform(), key)
    helpers.assert_trees_close(explicit, INITIALISABLE[name](key), rtol=0, atol=0)


def test_the_default_initialisation_draws_the_values_it_always_has():
    """The values that podrace's documented results and seeds were built with, pinned."""
    layer = pr.networks.MLPTorso((2,), (3,), key=jax.random.key(0)).layers[0]
    weight = [[0.6330967545509338, 0.6768141388893127], [-0.23717565834522247, -0.04430948570370674]]
    weight += [[0.09883756190538406, -0.47305014729499817]]
    bias = [-0.2684253454208374, 0.2679659426212311, 0.3489806056022644]
    np.testing.assert_array_equal(layer.weight, np.asarray(weight, np.float32))
    np.testing.assert_array_equal(layer.bias, np.asarray(bias, np.float32))


def test_lecun_normal_draws_the_values_it_always_has():
    """The values gymnax-blines' recipes were measured with, pinned (HeNormal shares its sampler).

    They are the CPU's draws: a GPU's inverse error function differs in the last bit.
    """
    initialization = pr.networks.LecunNormal(bias_scale=0.05)
    with jax.default_device(jax.devices("cpu")[0]):
        layer = pr.networks.MLPTorso((2,), (3,), initialization=initialization, key=jax.random.key(0)).layers[0]
    weight = [[1.170405387878418, 1.37843918800354], [-0.33173832297325134, -0.06031730771064758]]
    weight += [[0.13505136966705322, -0.7336252927780151]]
    bias = [0.015509731136262417, 0.034474026411771774, 0.03733832761645317]
    np.testing.assert_array_equal(layer.weight, np.asarray(weight, np.float32))
    np.testing.assert_array_equal(layer.bias, np.asarray(bias, np.float32))


@pytest.mark.parametrize("name", INITIALISABLE)
def test_orthogonal_weights_times_the_gain_and_zero_biases(name):
    gain = math.sqrt(2)
    layers = _equinox_layers(_initialised(name, pr.networks.Orthogonal(gain)))
    assert layers
    for layer in layers:
        weight, bias = _weights_and_biases(layer)
        # Orthonormal rows for a wide matrix, orthonormal columns for a tall one.
        gram = weight @ weight.T if weight.shape[0] <= weight.shape[1] else weight.T @ weight
        np.testing.assert_allclose(gram, gain**2 * np.eye(len(gram)), atol=1e-5)
        np.testing.assert_array_equal(bias, 0)


def _qr_operand_ranks(jaxpr: jax.extend.core.Jaxpr) -> list[int]:
    """The ranks of the matrices that every QR of `jaxpr` (and of its sub-programs) factorises."""
    ranks = []
    for equation in jaxpr.eqns:
        if equation.primitive.name in ("qr", "geqrf"):
            ranks += [variable.aval.ndim for variable in equation.invars]
        for sub in jax.extend.core.jaxprs_in_params(equation.params):
            ranks += _qr_operand_ranks(sub)
    return ranks


def test_orthogonal_under_vmap_factorises_one_matrix_at_a_time():
    """A batched QR can wait forever on XLA's CPU thread pool when two run at once (see
    `podrace.networks.initializations._qr`): under `vmap` every QR takes one matrix, and
    the weights equal those drawn one key at a time."""

    def torso(key):
        return pr.networks.MLPTorso((4,), (16, 8), initialization=pr.networks.Orthogonal(2.0), key=key)

    keys = jax.random.split(jax.random.key(0), 3)
    batched = eqx.filter_vmap(torso)(keys)
    for index, key in enumerate(keys):
        helpers.assert_trees_close(helpers.index(batched, index), torso(key), rtol=0, atol=0)
    ranks = _qr_operand_ranks(jax.make_jaxpr(lambda keys: eqx.filter_vmap(torso)(keys).layers)(keys).jaxpr)
    assert ranks and set(ranks) == {2}, ranks


def test_orthogonal_gains_of_cleanrl_ppo_and_the_mean_scale_on_top():
    key = jax.random.key(1)
    head = pr.networks.PolicyLogitHead(
        64,
        6,
        with_value=True,
        initialization=pr.networks.Orthogonal(0.01),
        value_initialization=pr.networks.Orthogonal(1.0),
        key=key,
    )
    logits = np.asarray(head.linear.weight)
    np.testing.assert_allclose(logits @ logits.T, 1e-4 * np.eye(6), atol=1e-9)
    assert head.value_head is not None
    np.testing.assert_allclose(np.linalg.norm(head.value_head.linear.weight), 1.0, rtol=1e-6)
    # Without value_initialization the value layer keeps the default, whatever the logit layer's.
    default = pr.networks.PolicyLogitHead(64, 6, with_value=True, key=key)
    orthogonal_logits = pr.networks.PolicyLogitHead(
        64, 6, with_value=True, initialization=pr.networks.Orthogonal(0.01), key=key
    )
    helpers.assert_trees_close(orthogonal_logits.value_head, default.value_head, rtol=0, atol=0)
    # GaussianHead scales its mean layer by mean_init_scale after drawing it.
    gaussian = pr.networks.GaussianHead(64, 6, initialization=pr.networks.Orthogonal(1.0), key=key)
    mean = np.asarray(gaussian.linear.weight)
    np.testing.assert_allclose(mean @ mean.T, 1e-4 * np.eye(6), atol=1e-9)


# The standard deviation of a standard normal truncated to [-2, 2], as flax and JAX write it.
TRUNCATED_STD = 0.87962566103423978


@pytest.mark.parametrize("name", INITIALISABLE)
def test_lecun_normal_weights_are_bounded_and_biases_in_their_range(name):
    layers = _equinox_layers(_initialised(name, pr.networks.LecunNormal(bias_scale=0.05)))
    assert layers
    for layer in layers:
        weight, bias = _weights_and_biases(layer)
        bound = 2 / math.sqrt(layer_fan_in(layer)) / TRUNCATED_STD
        assert np.all(np.abs(weight) <= bound * (1 + 1e-6))
        assert np.all((bias >= 0) & (bias < 0.05))


@pytest.mark.parametrize(
    ("initialization", "variance_scale", "oracle"),
    [
        (pr.networks.LecunNormal(), 1.0, jax.nn.initializers.lecun_normal()),
        (pr.networks.HeNormal(), 2.0, jax.nn.initializers.he_normal()),
    ],
)
def test_lecun_and_he_normal_are_normals_truncated_at_two_standard_deviations(initialization, variance_scale, oracle):
    fan_in = 512
    torso = pr.networks.MLPTorso((64, 8), (512,), initialization=initialization, key=jax.random.key(0))
    weight, bias = _weights_and_biases(torso.layers[0])
    np.testing.assert_array_equal(bias, 0)
    values, n = np.ravel(weight).astype(np.float64), weight.size
    variance = variance_scale / fan_in
    scale = math.sqrt(variance) / TRUNCATED_STD  # the standard deviation before truncation
    # Truncated at 2 standard deviations: within them, and reaching them.
    assert np.max(np.abs(values)) <= 2 * scale * (1 + 1e-6) and np.max(np.abs(values)) > 1.99 * scale
    # Mean 0 and variance `variance_scale / fan_in`, each within 5 standard errors of its estimate.
    assert abs(values.mean()) < 5 * values.std() / math.sqrt(n)
    squares = values**2
    assert abs(squares.mean() - variance) < 5 * squares.std() / math.sqrt(n)
    # The share beyond one standard deviation is the truncated normal's, not the uniform's (1 / 2) nor the normal's.
    beyond = (math.erf(math.sqrt(2)) - math.erf(math.sqrt(0.5))) / math.erf(math.sqrt(2))
    assert abs(np.mean(np.abs(values) > scale) - beyond) < 5 * math.sqrt(beyond * (1 - beyond) / n)
    # The same distribution as JAX's (and flax's) initialiser: a two-sample Kolmogorov-Smirnov
    # distance below its critical value at a significance of 1e-6.
    reference = np.sort(np.ravel(oracle(jax.random.key(1), (fan_in, 512))))
    grid = np.sort(values)
    distance = np.max(np.abs(np.searchsorted(grid, grid, "right") / n - np.searchsorted(reference, grid, "right") / n))
    assert distance < math.sqrt(-0.5 * math.log(0.5e-6)) * math.sqrt(2 / n)


def test_lecun_normal_biases_are_uniform_in_zero_to_the_bias_scale():
    torso = pr.networks.MLPTorso((4,), (20000,), initialization=pr.networks.LecunNormal(0.05), key=jax.random.key(0))
    bias = np.asarray(torso.layers[0].bias, np.float64)
    assert np.all((bias >= 0) & (bias < 0.05))
    # A uniform in [0, 0.05) has mean 0.025 and standard deviation 0.05 / sqrt(12); over n values
    # their estimates have standard errors 0.05 / sqrt(12 n) and 0.05 / sqrt(60 n).
    assert abs(bias.mean() - 0.025) < 5 * 0.05 / math.sqrt(12 * bias.size)
    assert abs(bias.std() - 0.05 / math.sqrt(12)) < 5 * 0.05 / math.sqrt(60 * bias.size)


# A wrong type is a TypeError naming the argument: podrace's own, or at test time the
# jaxtyping hook's, which checks the annotations first.
@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: pr.networks.Orthogonal(-1.0), ValueError, r"Orthogonal: gain must be finite and non-negative"),
        (lambda: pr.networks.Orthogonal(float("nan")), ValueError, "gain must be finite and non-negative"),
        (lambda: pr.networks.Orthogonal(jnp.asarray(2.0)), TypeError, "gain"),
        (lambda: pr.networks.LecunNormal(bias_scale=-0.05), ValueError, "LecunNormal: bias_scale must be"),
        (
            lambda: pr.networks.MLPTorso((3,), (4,), initialization="orthogonal", key=jax.random.key(0)),
            TypeError,
            "initialization",
        ),
        (
            lambda: pr.networks.PolicyLogitHead(
                4, 2, value_initialization=pr.networks.Orthogonal(1.0), key=jax.random.key(0)
            ),
            ValueError,
            r"PolicyLogitHead: value_initialization .* pass with_value=True",
        ),
        (
            lambda: pr.networks.GaussianHead(
                4, 2, value_initialization=pr.networks.LecunNormal(), key=jax.random.key(0)
            ),
            ValueError,
            r"GaussianHead: value_initialization .* pass with_value=True",
        ),
    ],
)
def test_initializations_reject_bad_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_layer_fan_in_matches_equinox_and_refuses_unknown_layers():
    def shaped(layer, *args):  # the layer's structure, without compiling its initialisation
        return eqx.filter_eval_shape(layer, *args, key=jax.random.key(0))

    assert layer_fan_in(shaped(eqx.nn.Linear, 16, 3)) == 16
    assert layer_fan_in(shaped(eqx.nn.Linear, 16, "scalar")) == 16
    assert layer_fan_in(shaped(eqx.nn.Linear, "scalar", 3)) == 1
    assert layer_fan_in(shaped(eqx.nn.Conv2d, 4, 2, 2)) == 16
    assert layer_fan_in(shaped(eqx.nn.GRUCell, 3, 16)) == 16
    with pytest.raises(TypeError, match="LayerNorm"):
        layer_fan_in(eqx.nn.LayerNorm(4))


def test_mlp_torso_by_hand():
    torso = pr.networks.MLPTorso((2, 3), (4, 2), activation=jnp.tanh, key=jax.random.key(0))
    assert torso.output_size == 2
    assert [layer.weight.shape for layer in torso.layers] == [(4, 6), (2, 4)]
    observation = helpers.normal(1, (2, 3))
    x = np.asarray(observation).reshape(-1)
    for layer in torso.layers:
        x = np.tanh(np.asarray(layer.weight) @ x + np.asarray(layer.bias))
    np.testing.assert_allclose(torso(observation), x, rtol=1e-5, atol=1e-6)


def test_heads_by_hand():
    features = helpers.normal(0, (5,))
    q_head = pr.networks.QValueHead(5, 4, key=jax.random.key(1))
    expected = np.asarray(q_head.linear.weight) @ np.asarray(features) + np.asarray(q_head.linear.bias)
    np.testing.assert_allclose(q_head(features).q_values, expected, rtol=1e-5, atol=1e-6)
    assert q_head.output_type is pr.QValues and q_head.num_actions == 4

    head = pr.networks.PolicyLogitHead(5, 4, with_value=True, key=jax.random.key(2))
    output = head(features)
    assert output.logits.shape == (4,)
    assert output.value is not None and output.value.shape == ()
    value_head = head.value_head
    assert value_head is not None
    np.testing.assert_allclose(output.value, value_head(features), rtol=1e-6)
    assert pr.networks.PolicyLogitHead(5, 4, key=jax.random.key(2))(features).value is None
    assert head.in_size == q_head.in_size == 5 and head.emits_value and not q_head.emits_value

    gaussian = pr.networks.GaussianHead(5, 2, key=jax.random.key(3))
    assert gaussian.num_actions == gaussian.action_size == 2 and gaussian.in_size == 5 and not gaussian.emits_value
    for part in (q_head, head, gaussian):
        assert isinstance(part, pr.networks.AbstractHead)
    assert isinstance(pr.networks.ValueHead(5, key=jax.random.key(4)), pr.networks.AbstractValueHead)


def test_network_sizes_are_static_and_parameters_are_leaves():
    network = helpers.q_network(jax.random.key(0), hidden_sizes=(7,))
    params, static = eqx.partition(network, eqx.is_inexact_array)
    assert len(jax.tree.leaves(params)) == 4
    assert network.torso.output_size == 7 and network.num_actions == helpers.NUM_ACTIONS
    # Structure (sizes, activation) is the same for two initialisations.
    other_params, other_static = eqx.partition(helpers.q_network(jax.random.key(1), hidden_sizes=(7,)), eqx.is_array)
    assert jax.tree.structure(static) == jax.tree.structure(other_static)
    del other_params


@pytest.mark.parametrize("hidden_sizes", [(), (0,), (8, -1)])
def test_mlp_torso_rejects_bad_hidden_sizes(hidden_sizes):
    with pytest.raises(ValueError, match="at least one positive hidden size"):
        pr.networks.MLPTorso(helpers.OBS_SHAPE, hidden_sizes, key=jax.random.key(0))


def test_feed_forward_network_rejects_a_head_of_the_wrong_width():
    torso = pr.networks.MLPTorso(helpers.OBS_SHAPE, (8,), key=jax.random.key(0))
    head = pr.networks.QValueHead(6, 3, key=jax.random.key(1))
    with pytest.raises(ValueError, match=r"torso emits 8 features but the head takes 6.*in_size=8"):
        pr.networks.FeedForwardNetwork(torso, head)


def test_actor_critic_network_keeps_policy_and_value_apart():
    network = helpers.separate_actor_critic_network(jax.random.key(0))
    observation = helpers.normal(0, helpers.OBS_SHAPE)
    output, carry = network(observation, ())
    assert carry == () and network.output_type is pr.PolicyLogits and network.num_actions == helpers.NUM_ACTIONS
    np.testing.assert_allclose(output.logits, network.head(network.actor_torso(observation)).logits, rtol=1e-6)
    np.testing.assert_allclose(output.value, network.value_head(network.critic_torso(observation)), rtol=1e-6)
    # The value depends on the critic alone, the logits on the actor alone.
    value_grads = jax.grad(lambda net: net(observation, ())[0].value)(network)
    logit_grads = jax.grad(lambda net: jnp.sum(net(observation, ())[0].logits))(network)
    for grads, untouched in ((value_grads, ("actor_torso", "head")), (logit_grads, ("critic_torso", "value_head"))):
        for name in untouched:
            assert all(float(jnp.max(jnp.abs(leaf))) == 0 for leaf in jax.tree.leaves(getattr(grads, name)))
    outputs, _ = network.unroll(jnp.stack([observation, 2 * observation]), (), jnp.zeros(2, bool))
    np.testing.assert_allclose(outputs.value[0], output.value, rtol=1e-6)


def test_actor_critic_network_rejects_a_head_with_its_own_value_and_mismatched_sizes():
    key = jax.random.key(0)
    network = helpers.separate_actor_critic_network(key)
    head = pr.networks.PolicyLogitHead(8, helpers.NUM_ACTIONS, with_value=True, key=key)
    with pytest.raises(ValueError, match=r"with_value=False"):
        pr.networks.ActorCriticNetwork(network.actor_torso, head, network.critic_torso, network.value_head)
    with pytest.raises(ValueError, match=r"torso emits 6 features but the value head takes 8"):
        pr.networks.ActorCriticNetwork(
            pr.networks.MLPTorso(helpers.OBS_SHAPE, (8,), key=key),
            pr.networks.PolicyLogitHead(8, helpers.NUM_ACTIONS, key=key),
            pr.networks.MLPTorso(helpers.OBS_SHAPE, (6,), key=key),
            pr.networks.ValueHead(8, key=key),
        )


# --------------------------------------------------------------------------------------
# ConvTorso.
# --------------------------------------------------------------------------------------


def test_conv_torso_by_hand():
    torso = pr.networks.ConvTorso((5, 4, 2), (3,), kernel_sizes=2, strides=2, key=jax.random.key(0))
    conv = torso.convs[0]
    assert isinstance(torso, pr.networks.AbstractTorso) and torso.layers == ()
    assert torso.output_size == 3 * 3 * 2  # SAME: ceil(5 / 2) x ceil(4 / 2) positions, 3 channels
    observation = helpers.normal(1, (5, 4, 2))
    # The same convolution in channels-last layout, zero-padded at the end (SAME).
    expected = jax.lax.conv_general_dilated(
        observation[None],
        jnp.transpose(conv.weight, (2, 3, 1, 0)),
        window_strides=(2, 2),
        padding=((0, 1), (0, 0)),
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )[0] + jnp.reshape(conv.bias, (1, 1, 3))
    # Features are flattened channel-first.
    expected = np.maximum(np.transpose(np.asarray(expected), (2, 0, 1)).reshape(-1), 0)
    np.testing.assert_allclose(torso(observation), expected, rtol=1e-5, atol=1e-6)
    # Integer images are cast (not rescaled) to the parameters' dtype.
    pixels = jnp.asarray(np.arange(40).reshape(5, 4, 2) % 7, jnp.uint8)
    np.testing.assert_allclose(torso(pixels), torso(pixels.astype(jnp.float32)), rtol=1e-6)


def test_a_channels_first_conv_torso_equals_the_channels_last_one_on_the_moved_image():
    key = jax.random.key(0)
    options = dict(kernel_sizes=(3, 2), strides=(2, 1), padding="VALID", hidden_sizes=(5,))
    last = pr.networks.ConvTorso((9, 7, 4), (3, 2), key=key, **options)
    first = pr.networks.ConvTorso((4, 9, 7), (3, 2), channels_first=True, key=key, **options)
    assert first.output_size == last.output_size
    helpers.assert_trees_close(first.convs, last.convs, rtol=0, atol=0)
    observation = helpers.normal(1, (9, 7, 4))
    np.testing.assert_array_equal(first(jnp.moveaxis(observation, -1, 0)), last(observation))
    with pytest.raises(ValueError, match=r"shape \(channels, height, width\), got \(9, 7\)"):
        pr.networks.ConvTorso((9, 7), (3,), channels_first=True, key=key)


def test_conv_torso_with_layer_norm_and_a_scaled_observation_by_hand():
    """Each layer normalised before its ReLU (a convolution's over its channels at each position), as flax's
    LayerNorm on a channels-last map; the observation scaled first."""
    key = jax.random.key(0)
    torso = pr.networks.ConvTorso(
        (5, 4, 2),
        (3,),
        padding="VALID",
        hidden_sizes=(6,),
        observation_scale=0.5,
        layer_norm=True,
        layer_norm_eps=1e-6,
        key=key,
    )
    assert torso.norms is not None
    # Learnt scales and offsets away from their initial 1 and 0, so that the test sees them.
    torso = eqx.tree_at(
        lambda t: [t.norms[0].weight, t.norms[0].bias, t.norms[1].weight, t.norms[1].bias],
        torso,
        [helpers.normal(2, (3,)), helpers.normal(3, (3,)), helpers.normal(4, (6,)), helpers.normal(5, (6,))],
    )
    observation = helpers.normal(1, (5, 4, 2))

    def layer_norm(x, weight, bias):
        mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(variance + 1e-6) * np.asarray(weight) + np.asarray(bias)

    conv = torso.convs[0]
    feature_map = jax.lax.conv_general_dilated(
        0.5 * observation[None],
        jnp.transpose(conv.weight, (2, 3, 1, 0)),
        window_strides=(1, 1),
        padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )[0] + jnp.reshape(conv.bias, (1, 1, 3))
    feature_map = np.maximum(layer_norm(np.asarray(feature_map), torso.norms[0].weight, torso.norms[0].bias), 0)
    features = np.transpose(feature_map, (2, 0, 1)).reshape(-1)  # flattened channel-first
    dense = torso.layers[0]
    expected = np.maximum(
        layer_norm(
            features @ np.asarray(dense.weight).T + np.asarray(dense.bias), torso.norms[1].weight, torso.norms[1].bias
        ),
        0,
    )
    np.testing.assert_allclose(torso(observation), expected, rtol=1e-5, atol=1e-5)
    # Without the options, the same parameters give the plain torso.
    plain = pr.networks.ConvTorso((5, 4, 2), (3,), padding="VALID", hidden_sizes=(6,), key=key)
    assert plain.norms is None and plain.observation_scale == 1.0
    helpers.assert_trees_close(plain.convs, torso.convs, rtol=0, atol=0)


@pytest.mark.parametrize(
    "shape, options",
    [
        ((5, 3, 1), dict(channels=(4,))),
        ((5, 3, 1), dict(channels=(4, 6), kernel_sizes=(3, 2), strides=(1, 2), hidden_sizes=(8,))),
        ((9, 7, 3), dict(channels=(4, 4, 2), kernel_sizes=3, strides=2)),
        ((9, 7, 3), dict(channels=(4, 2), kernel_sizes=(3, 2), strides=(2, 1), padding="VALID")),
        ((10, 10, 1), dict(channels=(2,), kernel_sizes=4, strides=3, padding="VALID", hidden_sizes=(5, 7))),
    ],
)
def test_conv_torso_output_size_matches_its_output(shape, options):
    torso = pr.networks.ConvTorso(shape, key=jax.random.key(0), **options)
    output = jax.eval_shape(torso, jax.ShapeDtypeStruct(shape, jnp.float32))
    assert output.shape == (torso.output_size,) and output.dtype == jnp.float32


@pytest.mark.parametrize(
    "shape, options, match",
    [
        ((5, 3), dict(channels=(4,)), r"observations of shape \(height, width, channels\), got \(5, 3\)"),
        ((5, 3, 1), dict(channels=()), "at least one convolution"),
        ((5, 3, 1), dict(channels=(4, 4), kernel_sizes=(3,)), r"kernel_sizes must be .* one per convolution \(2\)"),
        ((5, 3, 1), dict(channels=(4,), strides=0), "strides must be a positive integer"),
        ((5, 3, 1), dict(channels=(4,), hidden_sizes=(0,)), "hidden_sizes must be positive"),
        ((5, 3, 1), dict(channels=(4,), layer_norm=True, layer_norm_eps=0.0), "layer_norm_eps must be a positive"),
        ((5, 3, 1), dict(channels=(4,), observation_scale=float("nan")), "observation_scale must be a finite"),
        (
            (5, 3, 1),
            dict(channels=(4,), kernel_sizes=4, padding="VALID"),
            "does not fit .* use smaller kernels or SAME",
        ),
    ],
)
def test_conv_torso_rejects_bad_configurations(shape, options, match):
    with pytest.raises(ValueError, match=match):
        pr.networks.ConvTorso(shape, key=jax.random.key(0), **options)


def test_conv_q_network_trains_in_anakin_on_catch():
    env = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)
    network = helpers.conv_q_network(jax.random.key(0), env.observation_space.shape, env.action_space.num_values)
    loss = pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9)
    learner = pr.Learner(network, pr.policies.Greedy(), loss, optax.adam(1e-2))
    pipeline = pr.Anakin(env, learner, num_envs=2, rollout_length=4)
    state = pipeline.init(jax.random.key(1))
    result = pipeline.train(state, num_updates=3, metrics="grad_norm")
    assert result.metrics.update.loss.shape == (3,)
    helpers.assert_all_finite(result.metrics.update)
    assert np.all(np.asarray(result.metrics.update.grad_norm) > 0)
    helpers.assert_all_finite(result.state.learner.params)
    helpers.assert_trees_differ(result.state.learner.params.torso.convs, state.learner.params.torso.convs)


# --------------------------------------------------------------------------------------
# A head from outside the library.
# --------------------------------------------------------------------------------------


@final
class DuelingQHead(pr.networks.AbstractHead[pr.QValues]):
    """A dueling head (Wang et al., 2016): a state value plus mean-centred advantages."""

    value: eqx.nn.Linear
    advantages: eqx.nn.Linear
    in_size: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    emits_value: bool = eqx.field(static=True)
    output_type = pr.QValues

    def __init__(self, in_size: int, num_actions: int, *, key: PRNGKeyArray):
        value_key, advantage_key = jax.random.split(key)
        self.value = eqx.nn.Linear(in_size, "scalar", key=value_key)
        self.advantages = eqx.nn.Linear(in_size, num_actions, key=advantage_key)
        self.in_size, self.num_actions, self.emits_value = in_size, num_actions, False

    def __call__(self, features: Float[Array, " in_size"]) -> pr.QValues:
        advantages = self.advantages(features)
        return pr.QValues(self.value(features) + advantages - jnp.mean(advantages))


@pytest.mark.parametrize("conv", [False, True], ids=["mlp", "conv"])
def test_a_user_defined_head_plugs_into_the_networks_and_checks(conv):
    torso_key, head_key = jax.random.split(jax.random.key(0))
    if conv:
        torso = pr.networks.ConvTorso(helpers.OBS_SHAPE, (4,), hidden_sizes=(8,), key=torso_key)
    else:
        torso = pr.networks.MLPTorso(helpers.OBS_SHAPE, (8,), key=torso_key)
    head = DuelingQHead(torso.output_size, helpers.NUM_ACTIONS, key=head_key)
    network = pr.networks.FeedForwardNetwork(torso, head)
    assert network.output_type is pr.QValues and network.num_actions == helpers.NUM_ACTIONS
    observation = helpers.normal(0, helpers.OBS_SHAPE)
    output, carry = APPLY(network, observation)
    assert carry == ()
    value, advantages = head.value(torso(observation)), head.advantages(torso(observation))
    expected = np.asarray(value) + np.asarray(advantages) - np.mean(np.asarray(advantages))
    np.testing.assert_allclose(output.q_values, expected, rtol=1e-5, atol=1e-6)
    # The library's checks read the head's attributes: it acts and learns in Catch...
    learner = pr.Learner(network, pr.policies.Greedy(), pr.losses.QLearningLoss(discount=0.99), optax.adam(1e-2))
    pr.Anakin(
        pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS), learner, num_envs=2, rollout_length=2
    )
    # ...but not with a policy for logits, nor with a torso of another width, nor as an actor-critic's policy.
    with pytest.raises(ValueError, match=r"reads PolicyLogits but the network emits QValues"):
        pr.Learner(network, pr.policies.Categorical(), pr.losses.QLearningLoss(discount=0.99), optax.adam(1e-2))
    with pytest.raises(ValueError, match=r"torso emits 6 features but the head takes 8"):
        pr.networks.FeedForwardNetwork(pr.networks.MLPTorso(helpers.OBS_SHAPE, (6,), key=torso_key), head)
    with pytest.raises(ValueError, match=r"head emits QValues, which has no value"):
        pr.networks.ActorCriticNetwork(torso, head, torso, pr.networks.ValueHead(8, key=head_key))


def test_a_head_must_name_its_output_type():
    @final
    class NoOutputType(pr.networks.AbstractHead[pr.QValues]):
        """A head that forgets its output_type."""

        in_size: int = 3
        num_actions: int = 2
        emits_value: bool = False

        def __call__(self, features: Float[Array, " in_size"]) -> pr.QValues:
            return pr.QValues(features[:2])

    # Equinox refuses the unset abstract class attribute (AbstractHead.output_type) by name.
    with pytest.raises(TypeError, match=r"abstract class attributes \{'output_type'\}"):
        NoOutputType()


def test_actor_critic_network_takes_any_torso():
    keys = jax.random.split(jax.random.key(0), 4)
    actor = pr.networks.ConvTorso(helpers.OBS_SHAPE, (4,), hidden_sizes=(8,), key=keys[0])
    critic = pr.networks.MLPTorso(helpers.OBS_SHAPE, (6,), key=keys[1])
    network = pr.networks.ActorCriticNetwork(
        actor,
        pr.networks.GaussianHead(8, 2, key=keys[2]),
        critic,
        pr.networks.ValueHead(6, key=keys[3]),
    )
    observation = helpers.normal(0, helpers.OBS_SHAPE)
    output, _ = network(observation, ())
    assert network.output_type is pr.GaussianParams and network.num_actions == 2
    np.testing.assert_allclose(output.value, network.value_head(critic(observation)), rtol=1e-6)


def test_bounded_heads_refuse_empty_bounds():
    for head in (pr.networks.TanhGaussianHead, pr.networks.DeterministicHead):
        with pytest.raises(ValueError, match=r"low must be below high.*action space"):
            head(4, 2, low=[-1.0, 1.0], high=1.0, key=jax.random.key(0))
        with pytest.raises(ValueError, match="2 numbers each"):
            head(4, 2, low=[-1.0, 0.0, 1.0], high=2.0, key=jax.random.key(0))


def test_a_tanh_gaussian_head_keeps_its_log_std_inside_its_range():
    head = pr.networks.TanhGaussianHead(4, 2, min_log_std=-3.0, max_log_std=1.0, key=jax.random.key(0))
    output = jax.vmap(head)(100.0 * helpers.normal(0, (64, 4)))
    assert np.all(output.log_std >= -3.0) and np.all(output.log_std <= 1.0)
    with pytest.raises(ValueError, match="min_log_std must be below max_log_std"):
        pr.networks.TanhGaussianHead(4, 2, min_log_std=1.0, max_log_std=1.0, key=jax.random.key(0))


def test_a_tanh_gaussian_head_clips_its_log_std_or_maps_it_through_tanh():
    features = 3.0 * helpers.normal(0, (64, 4))
    tanh = pr.networks.TanhGaussianHead(4, 2, min_log_std=-3.0, max_log_std=1.0, key=jax.random.key(0))
    clip = pr.networks.TanhGaussianHead(
        4, 2, min_log_std=-3.0, max_log_std=1.0, log_std_bounding="clip", key=jax.random.key(0)
    )
    raw = jax.vmap(lambda x: tanh.log_std_linear.weight @ x + tanh.log_std_linear.bias)(features)
    np.testing.assert_allclose(jax.vmap(clip)(features).log_std, np.clip(raw, -3.0, 1.0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(jax.vmap(tanh)(features).log_std, -3.0 + 4.0 * (np.tanh(raw) + 1) / 2, rtol=1e-5)
    assert np.any(raw < -3.0) or np.any(raw > 1.0)
    # The test session's type checks refuse it before the constructor's ValueError can.
    with pytest.raises((ValueError, jaxtyping.TypeCheckError), match="log_std_bounding"):
        pr.networks.TanhGaussianHead(4, 2, log_std_bounding="sigmoid", key=jax.random.key(0))


def test_mlp_torso_takes_integer_observations_as_floats():
    torso = pr.networks.MLPTorso((5, 5, 3), (8,), key=jax.random.key(0))
    symbols = jax.random.randint(jax.random.key(1), (5, 5, 3), 0, 11).astype(jnp.uint8)
    np.testing.assert_array_equal(torso(symbols), torso(symbols.astype(jnp.float32)))


# --------------------------------------------------------------------------------------
# What a network opts into, and what it has without.
# --------------------------------------------------------------------------------------


def test_a_network_with_only_what_defines_it_has_no_carry_and_reads_plain_observations():
    network = LinearQNetwork(helpers.OBS_SHAPE, helpers.NUM_ACTIONS, key=jax.random.key(0))
    assert network.initial_carry() == () and network.reset_carry((), jnp.asarray(True)) == ()
    assert not network.reads_previous_action_reward
    observations = _observations(network, 1, 4)
    outputs, carry = UNROLL(network, observations, (), jnp.asarray([True, False, True, False]))
    assert carry == ()
    helpers.assert_trees_close(outputs, jax.vmap(lambda o: network(o, ())[0])(observations), rtol=0, atol=0)


def test_a_recurrent_network_of_a_user_starts_from_its_initial_state_and_unrolls_step_by_step():
    network = DecayingMemoryQNetwork(helpers.OBS_SHAPE, helpers.NUM_ACTIONS, key=jax.random.key(0))
    assert isinstance(network, pr.networks.AbstractRecurrentNetwork)
    assert not isinstance(network, pr.networks.AbstractSequenceNetwork) and not network.reads_previous_action_reward
    np.testing.assert_array_equal(network.initial_carry(), np.zeros(math.prod(helpers.OBS_SHAPE)))
    observations, is_first = _observations(network, 2, 5), jnp.asarray([False, True, False, False, True])
    start = jnp.ones(network.size)
    helpers.assert_trees_close(
        UNROLL(network, observations, start, is_first),
        pr.networks.unroll_step_by_step(network, observations, start, is_first),
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize("name", USER_NETWORKS)
def test_a_network_of_a_user_learns_in_anakin_and_evaluates(name):
    env = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)
    network = USER_NETWORKS[name](jax.random.key(0))
    loss = pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9)
    learner = pr.Learner(network, pr.policies.EpsilonGreedy(0.1), loss, optax.adam(1e-2))
    pipeline = pr.Anakin(env, learner, num_envs=2, rollout_length=4)
    state = pipeline.init(jax.random.key(1))
    result = pipeline.train(state, num_updates=3)
    helpers.assert_all_finite(result.metrics.update)
    helpers.assert_trees_differ(result.state.learner.params, state.learner.params)
    # Each environment's carry, kept across rollouts: `()` without a carry.
    expected = jax.tree.map(lambda c: (2, *c.shape), jax.eval_shape(network.initial_carry))
    assert jax.tree.map(jnp.shape, result.state.envs.carry) == expected
    trained = learner.network_at(result.state.learner)
    evaluation = pr.evaluate(env, trained, pr.policies.Greedy(), num_episodes=2, key=jax.random.key(2))
    assert bool(evaluation.completed.all())


def test_the_built_in_networks_opt_into_what_they_use():
    feed_forward, actor_critic = (
        helpers.NETWORKS["mlp-q"](jax.random.key(0)),
        helpers.NETWORKS["separate-actor-critic"](jax.random.key(0)),
    )
    for network in (feed_forward, actor_critic):
        assert not isinstance(
            network,
            pr.networks.AbstractRecurrentNetwork
            | pr.networks.AbstractSequenceNetwork
            | pr.networks.AbstractActionRewardNetwork,
        )
    for name, reads in [("gru-actor-critic", False), ("lstm-logits-previous-action-reward", True)]:
        network = helpers.NETWORKS[name](jax.random.key(0))
        assert isinstance(network, pr.networks.AbstractRecurrentNetwork)
        assert isinstance(network, pr.networks.AbstractSequenceNetwork)
        assert network.reads_previous_action_reward is reads and network.previous_action_reward is reads
        # Its unroll is its own (the torso and the head over all time steps at once).
        observations, is_first = _observations(network, 3, 4), jnp.asarray([True, False, False, True])
        carry = network.initial_carry()
        helpers.assert_trees_close(
            UNROLL(network, observations, carry, is_first),
            network.unroll_sequence(observations, carry, is_first),
            rtol=0,
            atol=0,
        )


def test_the_earlier_feed_forward_base_is_refused_with_what_to_write_instead():
    with pytest.raises(AttributeError, match=r"subclass podrace\.networks\.AbstractNetwork"):
        pr.networks.AbstractFeedForwardNetwork  # noqa: B018
