"""Critics of continuous actions: the shared contract and the fit checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr

from . import helpers


def _values(critic, observation, action):
    return critic(observation, action)


VALUES = helpers.Compiled(_values)
VALUES_BATCH = helpers.Compiled(helpers.vmap_over_last(_values, 1))
OBSERVATION = jax.ShapeDtypeStruct(helpers.OBS_SHAPE, jnp.float32)


def _inputs(seed, batch):
    return helpers.normal(seed, (batch, *helpers.OBS_SHAPE)), helpers.normal(seed + 1, (batch, helpers.NUM_ACTIONS))


@pytest.mark.parametrize("name", helpers.CRITICS)
def test_critic_emits_one_value_per_critic(name):
    critic = helpers.CRITICS[name](jax.random.key(0))
    assert isinstance(critic, pr.networks.AbstractCritic) and critic.action_size == helpers.NUM_ACTIONS
    observations, actions = _inputs(0, 1)
    values = VALUES(critic, observations[0], actions[0])
    assert values.shape == (critic.num_critics,) and values.dtype == jnp.float32
    if critic.num_critics > 1:  # each critic draws its own initial parameters
        assert len(set(np.asarray(values).tolist())) == critic.num_critics


@pytest.mark.parametrize("name", helpers.CRITICS)
def test_critic_jit_equals_eager(name):
    critic = helpers.CRITICS[name](jax.random.key(0))
    observations, actions = _inputs(2, 1)
    helpers.check_jit_equals_eager(VALUES, critic, observations[0], actions[0])


@pytest.mark.parametrize("name", helpers.CRITICS)
def test_critic_vmap_equals_loop(name):
    critic = helpers.CRITICS[name](jax.random.key(0))
    helpers.check_vmap_equals_loop(VALUES, VALUES_BATCH, (critic,), _inputs(4, 3))


@pytest.mark.parametrize("name", helpers.CRITICS)
def test_critic_traces_once_and_has_finite_gradients(name):
    critic = helpers.CRITICS[name](jax.random.key(0))
    calls = [(critic, *(x[0] for x in _inputs(seed, 1))) for seed in range(3)]
    helpers.check_traced_once(VALUES, *calls)
    observations, actions = _inputs(6, 1)
    grads = jax.grad(lambda critic, action: jnp.sum(critic(observations[0], action)), argnums=(0, 1))(
        critic, actions[0]
    )
    helpers.assert_all_finite(grads)
    assert float(jnp.abs(grads[1]).sum()) > 0  # the values depend on the action


def test_critic_fits_a_box_of_its_action_size():
    critic = helpers.CRITICS["mlp-twin-critic"](jax.random.key(0))
    critic.check_fits(pr.Box(-1.0, 1.0, (helpers.NUM_ACTIONS,)), OBSERVATION, env_name="Box3")
    with pytest.raises(ValueError, match=r"size 3 but Box2's actions have shape \(2,\).*action_size=2"):
        critic.check_fits(pr.Box(-1.0, 1.0, (2,)), OBSERVATION, env_name="Box2")
    with pytest.raises(ValueError, match=r"scores real action vectors.*QValueHead"):
        critic.check_fits(pr.Discrete(3), OBSERVATION, env_name="Catch")
    with pytest.raises(ValueError, match="cannot take Wide's observations"):
        critic.check_fits(
            pr.Box(-1.0, 1.0, (helpers.NUM_ACTIONS,)), jax.ShapeDtypeStruct((4, 4), jnp.float32), env_name="Wide"
        )


def test_critic_arguments_are_checked():
    with pytest.raises(ValueError, match="num_critics must be a positive integer"):
        pr.networks.MLPCritic(helpers.OBS_SHAPE, 2, (8,), num_critics=0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="at least one positive hidden size"):
        pr.networks.MLPCritic(helpers.OBS_SHAPE, 2, (), key=jax.random.key(0))
