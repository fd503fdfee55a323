"""Networks: the shared contract, torsos and heads by hand, construction errors."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr

from . import helpers


def _apply(network, observation):
    output, carry = network(observation, network.initial_carry())
    return output, carry


def _unroll(network, observations, is_first):
    return network.unroll(observations, network.initial_carry(), is_first)


def _grads(network, observation):
    def objective(network):
        output, _ = network(observation, network.initial_carry())
        return sum(jnp.sum(jnp.square(leaf)) for leaf in jax.tree.leaves(output))

    return eqx.filter_grad(objective)(network)


APPLY = helpers.Compiled(_apply)
APPLY_BATCH = helpers.Compiled(helpers.vmap_over_last(_apply, 1))
UNROLL = helpers.Compiled(_unroll)
GRADS = helpers.Compiled(_grads)


def _observations(seed, batch):
    return helpers.normal(seed, (batch, *helpers.OBS_SHAPE))


@pytest.mark.parametrize("name", helpers.NETWORKS)
def test_network_output_type_and_shapes(name):
    network = helpers.NETWORKS[name](jax.random.key(0))
    output, carry = APPLY(network, _observations(1, 1)[0])
    assert isinstance(output, network.output_type)
    assert isinstance(network, pr.networks.AbstractNetwork)
    assert network.num_actions == helpers.NUM_ACTIONS
    assert carry == network.initial_carry() == ()
    values = output.q_values if isinstance(output, pr.QValues) else output.logits
    assert values.shape == (helpers.NUM_ACTIONS,) and values.dtype == jnp.float32


@pytest.mark.parametrize("name", helpers.NETWORKS)
def test_network_jit_equals_eager(name):
    network = helpers.NETWORKS[name](jax.random.key(0))
    helpers.check_jit_equals_eager(APPLY, network, _observations(2, 1)[0])


@pytest.mark.parametrize("name", helpers.NETWORKS)
def test_network_vmap_equals_loop(name):
    network = helpers.NETWORKS[name](jax.random.key(0))
    helpers.check_vmap_equals_loop(APPLY, APPLY_BATCH, (network,), (_observations(3, 3),))


@pytest.mark.parametrize("name", helpers.NETWORKS)
def test_network_unroll_equals_step_by_step(name):
    network = helpers.NETWORKS[name](jax.random.key(0))
    observations = _observations(4, 3)
    is_first = jnp.asarray([True, False, True])
    outputs, carry = UNROLL(network, observations, is_first)
    assert carry == network.initial_carry()
    expected = APPLY_BATCH(network, observations)[0]
    helpers.assert_trees_close(outputs, expected)


@pytest.mark.parametrize("name", helpers.NETWORKS)
def test_network_init_is_deterministic_under_a_key(name):
    factory = helpers.NETWORKS[name]
    helpers.assert_trees_close(factory(jax.random.key(5)), factory(jax.random.key(5)), rtol=0, atol=0)
    helpers.assert_trees_differ(factory(jax.random.key(5)), factory(jax.random.key(6)))


@pytest.mark.parametrize("name", helpers.NETWORKS)
def test_network_gradients_are_finite_and_reach_every_layer(name):
    network = helpers.NETWORKS[name](jax.random.key(0))
    grads = GRADS(network, _observations(7, 1)[0])
    helpers.assert_all_finite(grads)
    leaves = jax.tree.leaves(eqx.filter(grads, eqx.is_inexact_array))
    params = jax.tree.leaves(eqx.filter(network, eqx.is_inexact_array))
    assert len(leaves) == len(params)
    # Every weight matrix gets some gradient.
    assert all(float(jnp.max(jnp.abs(leaf))) > 0 for leaf in leaves if leaf.ndim == 2)


@pytest.mark.parametrize("name", helpers.NETWORKS)
def test_network_traces_once(name):
    calls = [(helpers.NETWORKS[name](jax.random.key(seed)), _observations(10 + seed, 1)[0]) for seed in range(3)]
    helpers.check_traced_once(APPLY, *calls)


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
