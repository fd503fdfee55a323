"""Registries of components and shared checks for the contract tests.

Every family has a registry `name -> factory`; the contract tests of a family are
parametrised over its registry, so adding a component is one line here.
"""

import dataclasses
import functools
import importlib.util
import os
import pathlib
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, Literal, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import rlax
from jaxtyping import Array, Bool, Float, PRNGKeyArray

import podrace as pr
from podrace import configs

from . import off_policy_actor_critic


# Observation shape and action count of the component-level contract tests: those of
# the small pipeline's Catch, so that compiled pieces are shared between test modules.
CATCH_ROWS, CATCH_COLUMNS = 5, 3
OBS_SHAPE = (CATCH_ROWS, CATCH_COLUMNS, 1)
NUM_ACTIONS = 3


# --------------------------------------------------------------------------------------
# Trees. Test code works in NumPy where it can: outside jit every JAX operation on a new
# shape is compiled on its own, and those compilations dominate the suite's run time.
# --------------------------------------------------------------------------------------


def _is_key(leaf: Any) -> bool:
    return isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _as_numpy(leaf: Any) -> np.ndarray:
    if _is_key(leaf):
        leaf = jax.random.key_data(leaf)
    return np.asarray(leaf)


def assert_trees_close(actual: Any, expected: Any, *, rtol: float = 1e-6, atol: float = 1e-6) -> None:
    """Same structure; floating leaves close, the others (ints, bools, keys) equal."""
    actual_leaves, actual_def = jax.tree.flatten(actual)
    expected_leaves, expected_def = jax.tree.flatten(expected)
    assert actual_def == expected_def, f"tree structures differ:\n{actual_def}\n{expected_def}"
    for index, (a, e) in enumerate(zip(actual_leaves, expected_leaves, strict=True)):
        if not isinstance(a, jax.Array | np.ndarray | np.generic):
            assert a == e, f"leaf {index}: {a!r} != {e!r}"
            continue
        a, e = _as_numpy(a), _as_numpy(e)
        assert a.shape == e.shape, f"leaf {index}: shape {a.shape} != {e.shape}"
        assert a.dtype == e.dtype, f"leaf {index}: dtype {a.dtype} != {e.dtype}"
        if np.issubdtype(a.dtype, np.inexact):
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"leaf {index}")
        else:
            np.testing.assert_array_equal(a, e, err_msg=f"leaf {index}")


def assert_trees_differ(a: Any, b: Any) -> None:
    """At least one leaf differs."""
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    assert any(not np.array_equal(_as_numpy(x), _as_numpy(y)) for x, y in pairs), "trees are equal"


def assert_all_finite(tree: Any) -> None:
    for leaf in jax.tree.leaves(eqx.filter(tree, eqx.is_inexact_array)):
        assert np.all(np.isfinite(np.asarray(leaf))), f"non-finite values in {leaf}"


def stack(trees: list[Any]) -> Any:
    """Stacks pytrees along a new leading axis, as NumPy (keys as their raw data); for
    comparisons with `assert_trees_close`."""
    return jax.tree.map(lambda *leaves: np.stack([_as_numpy(leaf) for leaf in leaves]), *trees)


def take(tree: Any, where: Any, axis: int = 0) -> Any:
    """`leaf[..., where, ...]` on `axis` of every leaf, in NumPy (key arrays stay keys)."""

    def leaf_take(leaf):
        selector = (slice(None),) * axis + (where,)
        if _is_key(leaf):
            return jax.random.wrap_key_data(np.asarray(jax.random.key_data(leaf))[selector])
        return np.asarray(leaf)[selector]

    return jax.tree.map(leaf_take, tree)


def index(tree: Any, i: int) -> Any:
    """Element `i` of the leading axis of every leaf (NumPy, except key arrays)."""
    return jax.tree.map(lambda leaf: leaf[i] if _is_key(leaf) else np.asarray(leaf)[i], tree)


# --------------------------------------------------------------------------------------
# Shared contract checks.
# --------------------------------------------------------------------------------------


@final
class Compiled:
    """`eqx.filter_jit(fn)` that counts its traces (`eqx.debug.assert_max_traces`).

    Define instances at module level: the compilation cache then lives as long as the
    session, and tests of one component with the same static structure share it.
    """

    def __init__(self, fn: Callable):
        self.fn = fn
        self.counted = eqx.debug.assert_max_traces(fn, max_traces=None)
        self.jitted = eqx.filter_jit(self.counted)

    def __call__(self, *args: Any) -> Any:
        return self.jitted(*args)

    @property
    def num_traces(self) -> int:
        return eqx.debug.get_num_traces(self.counted)


def check_jit_equals_eager(compiled: Compiled, *args: Any, rtol: float = 1e-6, atol: float = 1e-6) -> Any:
    """The compiled function equals the same run op by op (`jax.disable_jit`)."""
    out = compiled(*args)
    with jax.disable_jit():
        eager = compiled.fn(*args)
    assert_trees_close(out, eager, rtol=rtol, atol=atol)
    return out


def check_vmap_equals_loop(
    compiled: Compiled, vmapped: Compiled, fixed: tuple[Any, ...], batched: tuple[Any, ...], **tolerances: float
) -> Any:
    """`vmapped(*fixed, *batched)` (mapped over the leading axis of `batched`) equals a
    loop of `compiled(*fixed, *batched[i])`."""
    batch_size = jax.tree.leaves(batched)[0].shape[0]
    out = vmapped(*fixed, *batched)
    looped = stack([compiled(*fixed, *index(batched, i)) for i in range(batch_size)])
    assert_trees_close(out, looped, **tolerances)
    return out


def check_traced_once(compiled: Compiled, *calls: tuple[Any, ...]) -> None:
    """After the first call, calls whose arrays differ only in value do not retrace."""
    assert len(calls) >= 2
    before = compiled.num_traces
    jax.block_until_ready(compiled(*calls[0]))
    after_first = compiled.num_traces
    assert after_first - before <= 1
    for args in calls[1:]:
        jax.block_until_ready(compiled(*args))
    assert compiled.num_traces == after_first


def vmap_over_last(fn: Callable, num_fixed: int) -> Callable:
    """`fn` vmapped over all arguments after the first `num_fixed` ones."""

    def mapped(*args):
        fixed, batched = args[:num_fixed], args[num_fixed:]
        return eqx.filter_vmap(lambda *b: fn(*fixed, *b))(*batched)

    return mapped


# --------------------------------------------------------------------------------------
# Environments.
# --------------------------------------------------------------------------------------


@final
class PointState(eqx.Module):
    position: Float[Array, " 1"]


@final
class Point(pr.envs.AbstractEnv[PointState]):
    """A tiny continuous-action environment: move a point on a line towards 0."""

    @property
    def observation_space(self) -> pr.Box:
        return pr.Box(-10.0, 10.0, (1,))

    @property
    def action_space(self) -> pr.Box:
        return pr.Box(-1.0, 1.0, (1,))

    def reset(self, key: PRNGKeyArray) -> tuple[PointState, pr.TimeStep]:
        state = PointState(jax.random.uniform(key, (1,), minval=-5.0, maxval=5.0))
        return state, pr.TimeStep.first(state.position)

    def step(self, state: PointState, action: Array, key: PRNGKeyArray) -> tuple[PointState, pr.TimeStep]:
        del key
        state = PointState(jnp.clip(state.position + action, -10.0, 10.0))
        reward = -jnp.abs(state.position[0])
        return state, pr.TimeStep.transition(state.position, reward, reward > -0.1)


@final
class PicksState(eqx.Module):
    picked: Bool[Array, " num_actions"]


@final
class Picks(pr.envs.AbstractEnv[PicksState]):
    """A tiny environment with a legal-action mask: pick each of `NUM_ACTIONS` cells once.

    A reset marks one random cell as picked; the legal actions are the cells not yet
    picked. A legal pick earns 1, and the episode terminates once every cell is picked
    (where no action is legal); an illegal one earns -1 and terminates.
    """

    @property
    def observation_space(self) -> pr.MaskedObservationSpace:
        return pr.MaskedObservationSpace(pr.Box(0.0, 1.0, (NUM_ACTIONS,)), pr.Discrete(NUM_ACTIONS))

    @property
    def action_space(self) -> pr.Discrete:
        return pr.Discrete(NUM_ACTIONS)

    def observe(self, state: PicksState) -> pr.MaskedObservation:
        return pr.MaskedObservation(state.picked.astype(jnp.float32), ~state.picked)

    def reset(self, key: PRNGKeyArray) -> tuple[PicksState, pr.TimeStep]:
        state = PicksState(jax.nn.one_hot(jax.random.randint(key, (), 0, NUM_ACTIONS), NUM_ACTIONS) > 0)
        return state, pr.TimeStep.first(self.observe(state))

    def step(self, state: PicksState, action: Array, key: PRNGKeyArray) -> tuple[PicksState, pr.TimeStep]:
        del key
        legal = ~state.picked[action]
        state = PicksState(state.picked.at[action].set(True))
        reward = jnp.where(legal, 1.0, -1.0)
        return state, pr.TimeStep.transition(self.observe(state), reward, ~legal | jnp.all(state.picked))


# Mostly the small pipeline's board: op-by-op (eager) runs then share compiled primitives.
ENVS: dict[str, Callable[[], pr.envs.AbstractEnv]] = {
    "catch": lambda: pr.envs.Catch(),
    "auto-reset-catch": lambda: pr.envs.AutoReset(pr.envs.Catch(rows=CATCH_ROWS, columns=CATCH_COLUMNS)),
    "time-limit-catch": lambda: pr.envs.TimeLimit(
        pr.envs.Catch(rows=CATCH_ROWS, columns=CATCH_COLUMNS), max_episode_steps=3
    ),
    "auto-reset-time-limit-catch": lambda: pr.envs.AutoReset(
        pr.envs.TimeLimit(pr.envs.Catch(rows=CATCH_ROWS, columns=CATCH_COLUMNS), max_episode_steps=3)
    ),
    "point": Point,
    "cartpole-v1": pr.envs.cartpole_v1,
    "auto-reset-time-limit-cartpole": lambda: pr.envs.AutoReset(pr.envs.TimeLimit(pr.envs.CartPole(), 4)),
    "auto-reset-truncation-as-termination-cartpole": lambda: pr.envs.AutoReset(
        pr.envs.TruncationAsTermination(pr.envs.TimeLimit(pr.envs.CartPole(), 4))
    ),
    "pendulum-v1": pr.envs.pendulum_v1,
    "normalize-observation-pendulum": lambda: pr.envs.NormalizeObservation(
        pr.envs.pendulum_v1(),
        pr.envs.RunningStatistics(jnp.asarray(50.0), jnp.asarray([0.5, -0.2, 1.0]), jnp.asarray([0.3, 0.4, 4.0])),
        clip=3.0,
    ),
    "auto-reset-deep-sea": lambda: pr.envs.AutoReset(pr.envs.DeepSea(size=4)),
    "auto-reset-stochastic-deep-sea": lambda: pr.envs.AutoReset(pr.envs.DeepSea(size=4, deterministic=False)),
    "gymnax-cartpole": lambda: pr.envs.GymnaxEnv.make("CartPole-v1"),
    "gymnax-catch": lambda: pr.envs.AutoReset(pr.envs.GymnaxEnv.make("Catch-bsuite")),
    "auto-reset-observation-reward-probe": lambda: pr.envs.AutoReset(pr.envs.ObservationRewardProbe()),
    "auto-reset-observation-action-reward-probe": lambda: pr.envs.AutoReset(pr.envs.ObservationActionRewardProbe()),
    "auto-reset-picks": lambda: pr.envs.AutoReset(Picks()),
    # The other probes show the same observations under every key, which
    # test_env_is_deterministic_under_a_key refuses; tests/test_probes.py checks them with check_env.
}


def run_env(env: pr.envs.AbstractEnv, key: PRNGKeyArray, num_steps: int) -> tuple[Any, pr.TimeStep, Array]:
    """Resets and takes `num_steps` uniformly random actions.

    Returns the final state, the `num_steps + 1` time steps and the actions.
    """
    reset_key, key = jax.random.split(key)
    state, first = env.reset(reset_key)

    def step(state, key):
        action_key, step_key = jax.random.split(key)
        action = env.action_space.sample(action_key)
        state, timestep = env.step(state, action, step_key)
        return state, (timestep, action)

    state, (timesteps, actions) = jax.lax.scan(step, state, jax.random.split(key, num_steps))
    timesteps = jax.tree.map(lambda f, rest: jnp.concatenate([f[None], rest]), first, timesteps)
    return state, timesteps, actions


# --------------------------------------------------------------------------------------
# Networks.
# --------------------------------------------------------------------------------------


def q_network(
    key: PRNGKeyArray,
    observation_shape: tuple[int, ...] = OBS_SHAPE,
    num_actions: int = NUM_ACTIONS,
    hidden_sizes: tuple[int, ...] = (8,),
    activation: Callable[[Array], Array] = jax.nn.relu,
    layer_norm: bool = False,
    output_type: type = pr.QValues,
) -> pr.networks.FeedForwardNetwork:
    """An MLP and a head of action values: plain, categorical (11 atoms) or quantiles (8)."""
    torso_key, head_key = jax.random.split(key)
    torso = pr.networks.MLPTorso(
        observation_shape, hidden_sizes, activation=activation, layer_norm=layer_norm, key=torso_key
    )
    return pr.networks.FeedForwardNetwork(torso, Q_HEADS[output_type](hidden_sizes[-1], num_actions, key=head_key))


Q_HEADS: dict[type, Callable[..., pr.networks.AbstractHead]] = {
    pr.QValues: pr.networks.QValueHead,
    pr.CategoricalQValues: functools.partial(pr.networks.CategoricalQHead, num_atoms=11, v_min=-2.0, v_max=2.0),
    pr.QuantileQValues: functools.partial(pr.networks.QuantileQHead, num_quantiles=8),
}


def logit_network(
    key: PRNGKeyArray,
    observation_shape: tuple[int, ...] = OBS_SHAPE,
    num_actions: int = NUM_ACTIONS,
    *,
    with_value: bool = False,
) -> pr.networks.FeedForwardNetwork:
    torso_key, head_key = jax.random.split(key)
    torso = pr.networks.MLPTorso(observation_shape, (8,), key=torso_key)
    head = pr.networks.PolicyLogitHead(8, num_actions, with_value=with_value, key=head_key)
    return pr.networks.FeedForwardNetwork(torso, head)


def gaussian_network(
    key: PRNGKeyArray,
    observation_shape: tuple[int, ...] = OBS_SHAPE,
    action_size: int = 2,
    *,
    with_value: bool = False,
    std: Literal["parameter", "softplus"] = "parameter",
    initial_log_std: float = 0.0,
) -> pr.networks.FeedForwardNetwork:
    torso_key, head_key = jax.random.split(key)
    torso = pr.networks.MLPTorso(observation_shape, (8,), key=torso_key)
    head = pr.networks.GaussianHead(
        8, action_size, with_value=with_value, std=std, initial_log_std=initial_log_std, key=head_key
    )
    return pr.networks.FeedForwardNetwork(torso, head)


def bounded_network(
    key: PRNGKeyArray,
    head: Callable[..., pr.networks.AbstractHead],
    observation_shape: tuple[int, ...] = OBS_SHAPE,
    action_size: int = 2,
    **head_options: Any,
) -> pr.networks.FeedForwardNetwork:
    """An MLP with a head of actions inside [-1, 2] (`TanhGaussianHead` or `DeterministicHead`)."""
    torso_key, head_key = jax.random.split(key)
    torso = pr.networks.MLPTorso(observation_shape, (8,), key=torso_key)
    return pr.networks.FeedForwardNetwork(torso, head(8, action_size, low=-1.0, high=2.0, key=head_key, **head_options))


# Critics of continuous actions, on `OBS_SHAPE` observations and `NUM_ACTIONS`-sized actions.
CRITICS: dict[str, Callable[[PRNGKeyArray], pr.networks.AbstractCritic]] = {
    "mlp-twin-critic": lambda key: pr.networks.MLPCritic(OBS_SHAPE, NUM_ACTIONS, (8,), key=key),
    "mlp-one-critic-two-layers-tanh": lambda key: pr.networks.MLPCritic(
        OBS_SHAPE, NUM_ACTIONS, (8, 6), num_critics=1, activation=jax.nn.tanh, key=key
    ),
}


def separate_actor_critic_network(
    key: PRNGKeyArray, observation_shape: tuple[int, ...] = OBS_SHAPE, num_actions: int = NUM_ACTIONS
) -> pr.networks.ActorCriticNetwork:
    actor_key, head_key, critic_key, value_key = jax.random.split(key, 4)
    return pr.networks.ActorCriticNetwork(
        pr.networks.MLPTorso(observation_shape, (8,), key=actor_key),
        pr.networks.PolicyLogitHead(8, num_actions, key=head_key),
        pr.networks.MLPTorso(observation_shape, (6,), key=critic_key),
        pr.networks.ValueHead(6, key=value_key),
    )


def orthogonal_actor_critic_network(
    key: PRNGKeyArray,
    observation_shape: tuple[int, ...] = OBS_SHAPE,
    num_actions: int = NUM_ACTIONS,
    *,
    shared_torso: bool = False,
) -> pr.networks.FeedForwardNetwork | pr.networks.ActorCriticNetwork:
    """CleanRL's PPO initialisation: orthogonal, gain sqrt(2) in the torsos, 0.01 on the logits, 1 on the value."""
    hidden, policy, value = pr.networks.Orthogonal(2**0.5), pr.networks.Orthogonal(0.01), pr.networks.Orthogonal(1.0)
    actor_key, head_key, critic_key, value_key = jax.random.split(key, 4)
    actor = pr.networks.MLPTorso(observation_shape, (8,), initialization=hidden, key=actor_key)
    if shared_torso:
        head = pr.networks.PolicyLogitHead(
            8, num_actions, with_value=True, initialization=policy, value_initialization=value, key=head_key
        )
        return pr.networks.FeedForwardNetwork(actor, head)
    return pr.networks.ActorCriticNetwork(
        actor,
        pr.networks.PolicyLogitHead(8, num_actions, initialization=policy, key=head_key),
        pr.networks.MLPTorso(observation_shape, (6,), initialization=hidden, key=critic_key),
        pr.networks.ValueHead(6, initialization=value, key=value_key),
    )


def lecun_normal_gaussian_network(
    key: PRNGKeyArray, observation_shape: tuple[int, ...] = OBS_SHAPE, action_size: int = 2
) -> pr.networks.FeedForwardNetwork:
    """gymnax-blines' PPO initialisation (flax's LeCun normal, biases uniform in [0, 0.05)), softplus std."""
    initialization = pr.networks.LecunNormal(bias_scale=0.05)
    torso_key, head_key = jax.random.split(key)
    torso = pr.networks.MLPTorso(observation_shape, (8,), initialization=initialization, key=torso_key)
    head = pr.networks.GaussianHead(
        8,
        action_size,
        with_value=True,
        std="softplus",
        mean_init_scale=1.0,
        initialization=initialization,
        value_initialization=initialization,
        key=head_key,
    )
    return pr.networks.FeedForwardNetwork(torso, head)


def conv_q_network(
    key: PRNGKeyArray,
    observation_shape: tuple[int, ...] = OBS_SHAPE,
    num_actions: int = NUM_ACTIONS,
    **options: Any,
) -> pr.networks.FeedForwardNetwork:
    """A small convolutional Q-network: a stride-2 second convolution, then one dense layer (`options`
    go to its `ConvTorso`)."""
    torso_key, head_key = jax.random.split(key)
    torso = pr.networks.ConvTorso(
        observation_shape, (4, 6), kernel_sizes=(3, 2), strides=(1, 2), hidden_sizes=(8,), key=torso_key, **options
    )
    return pr.networks.FeedForwardNetwork(torso, pr.networks.QValueHead(torso.output_size, num_actions, key=head_key))


CORES: dict[str, Callable[..., pr.networks.AbstractCore]] = {"gru": pr.networks.GRUCore, "lstm": pr.networks.LSTMCore}


def recurrent_network(
    key: PRNGKeyArray,
    observation_shape: tuple[int, ...] = OBS_SHAPE,
    num_actions: int = NUM_ACTIONS,
    *,
    core: str = "gru",
    output_type: type = pr.PolicyLogits,
    previous_action_reward: bool = False,
    hidden_size: int = 6,
    layer_norm: bool = False,
) -> pr.networks.RecurrentNetwork:
    """MLP torso (8, layer-normalised with `layer_norm`), a recurrent core and a head:
    Q-values, or logits / Gaussian with a value."""
    torso_key, core_key, head_key = jax.random.split(key, 3)
    torso = pr.networks.MLPTorso(observation_shape, (8,), layer_norm=layer_norm, key=torso_key)
    core_input = 8 + (num_actions + 1 if previous_action_reward else 0)
    heads = {
        pr.QValues: lambda: pr.networks.QValueHead(hidden_size, num_actions, key=head_key),
        pr.PolicyLogits: lambda: pr.networks.PolicyLogitHead(hidden_size, num_actions, with_value=True, key=head_key),
        pr.GaussianParams: lambda: pr.networks.GaussianHead(hidden_size, num_actions, with_value=True, key=head_key),
    }
    return pr.networks.RecurrentNetwork(
        torso,
        CORES[core](core_input, hidden_size, key=core_key),
        heads[output_type](),
        previous_action_reward=previous_action_reward,
    )


def random_observations(network: pr.networks.AbstractNetwork, seed: int, batch: int) -> Any:
    """`batch` random observations of the component-level shape, with a previous action and
    reward for networks that read them."""
    observations = normal(seed, (batch, *OBS_SHAPE))
    if not network.reads_previous_action_reward:
        return observations
    rng = np.random.default_rng(seed + 1000)
    if not issubclass(network.output_type, (pr.QValues, pr.PolicyLogits)):
        actions = jnp.asarray(rng.normal(size=(batch, network.num_actions)), jnp.float32)
    else:
        actions = jnp.asarray(rng.integers(0, network.num_actions, batch), jnp.int32)
    return pr.ObservationActionReward(observations, actions, normal(seed + 2000, (batch,)))


def random_carry(network: pr.AbstractAgent | pr.networks.AbstractNetwork, seed: int, batch: int) -> Any:
    """A batch of random carries of the network's (or agent's) structure, in (-1, 1) (`()` if it has none)."""
    leaves, treedef = jax.tree.flatten(network.initial_carry())
    noise = [jnp.tanh(normal(seed + i, (batch, *jnp.shape(leaf)))) for i, leaf in enumerate(leaves)]
    return jax.tree.unflatten(treedef, noise)


NETWORKS: dict[str, Callable[[PRNGKeyArray], pr.networks.AbstractNetwork]] = {
    "mlp-q": q_network,
    "mlp-q-two-layers-tanh": lambda key: q_network(key, hidden_sizes=(8, 6), activation=jax.nn.tanh),
    "mlp-logits": logit_network,
    "mlp-actor-critic": lambda key: logit_network(key, with_value=True),
    "separate-actor-critic": lambda key: separate_actor_critic_network(key),
    "separate-actor-critic-orthogonal": lambda key: orthogonal_actor_critic_network(key),
    "mlp-actor-critic-orthogonal": lambda key: orthogonal_actor_critic_network(key, shared_torso=True),
    "mlp-gaussian": lambda key: gaussian_network(key, action_size=NUM_ACTIONS),
    "mlp-gaussian-with-value": lambda key: gaussian_network(
        key, action_size=NUM_ACTIONS, with_value=True, initial_log_std=-0.5
    ),
    "mlp-gaussian-softplus-std": lambda key: gaussian_network(key, action_size=NUM_ACTIONS, std="softplus"),
    "mlp-gaussian-lecun-normal": lambda key: lecun_normal_gaussian_network(key, action_size=NUM_ACTIONS),
    "mlp-tanh-gaussian": lambda key: bounded_network(key, pr.networks.TanhGaussianHead, action_size=NUM_ACTIONS),
    "mlp-tanh-gaussian-with-value": lambda key: bounded_network(
        key, pr.networks.TanhGaussianHead, action_size=NUM_ACTIONS, with_value=True
    ),
    "mlp-deterministic": lambda key: bounded_network(key, pr.networks.DeterministicHead, action_size=NUM_ACTIONS),
    "conv-q": conv_q_network,
    "conv-q-layer-norm-he-normal-scaled": lambda key: conv_q_network(
        key, observation_scale=1 / 255, layer_norm=True, layer_norm_eps=1e-6, initialization=pr.networks.HeNormal()
    ),
    "gru-actor-critic": recurrent_network,
    "lstm-q": lambda key: recurrent_network(key, core="lstm", output_type=pr.QValues),
    "lstm-logits-previous-action-reward": lambda key: recurrent_network(key, core="lstm", previous_action_reward=True),
    "gru-gaussian-previous-action-reward": lambda key: recurrent_network(
        key, output_type=pr.GaussianParams, previous_action_reward=True
    ),
}


def network_for(output_type: type, key: PRNGKeyArray, **kwargs: Any) -> pr.networks.AbstractNetwork:
    """A small network emitting `output_type`."""
    if output_type in Q_HEADS:
        return q_network(key, output_type=output_type, **kwargs)
    if output_type is pr.PolicyLogits:
        return logit_network(key, **kwargs)
    raise NotImplementedError(output_type)


def uninformed_network(
    action_space: pr.AbstractSpace, observation_shape: tuple[int, ...]
) -> pr.networks.AbstractNetwork:
    """An AlphaZero network that gives every legal action the same prior and every state
    the value 0 (its last layers zero): a search with it knows only what it finds in the
    environment."""
    config = pr.configs.AlphaZeroConfig(algorithm="alphazero", hidden=(8,))
    network = config.network(action_space, observation_shape, jax.random.key(0))
    return eqx.tree_at(
        lambda network: (network.head.linear, network.head.value_head.linear),
        network,
        replace_fn=lambda linear: eqx.tree_at(
            lambda linear: (linear.weight, linear.bias), linear, replace_fn=jnp.zeros_like
        ),
    )


def agent(network: pr.networks.AbstractNetwork) -> pr.Agent:
    """`network` with the usual policy for its outputs (greedy, categorical or Gaussian)."""
    policies = {
        pr.QValues: pr.policies.Greedy,
        pr.CategoricalQValues: pr.policies.Greedy,
        pr.QuantileQValues: pr.policies.Greedy,
        pr.PolicyLogits: pr.policies.Categorical,
        pr.TanhGaussianParams: pr.policies.TanhGaussian,
        pr.DeterministicAction: pr.policies.Deterministic,
    }
    return pr.Agent(network, policies.get(network.output_type, pr.policies.Gaussian)())


def random_output(
    output_type: type, seed: int, batch: tuple[int, ...] = (), num_actions: int = NUM_ACTIONS
) -> pr.AbstractNetworkOutput:
    """A random network output (a batch of them if `batch`, built leaf-wise)."""
    values = jnp.asarray(np.random.default_rng(seed).normal(size=(*batch, num_actions)), jnp.float32)
    if output_type is pr.QValues:
        return eqx.tree_at(lambda o: o.q_values, pr.QValues(jnp.zeros(num_actions)), values)
    if output_type in (pr.CategoricalQValues, pr.QuantileQValues):
        # Five atoms or quantiles per action, spread around each action's value.
        spread = jnp.asarray(np.random.default_rng(seed + 1).normal(size=(*batch, num_actions, 5)), jnp.float32)
        per_atom = values[..., None] + spread
        if output_type is pr.QuantileQValues:
            return eqx.tree_at(lambda o: o.quantiles, pr.QuantileQValues(jnp.zeros((num_actions, 5))), per_atom)
        atoms = jnp.broadcast_to(jnp.linspace(-2.0, 2.0, 5), (*batch, 5))
        template = pr.CategoricalQValues(jnp.zeros((num_actions, 5)), jnp.zeros(5))
        return eqx.tree_at(lambda o: (o.logits, o.atoms), template, (per_atom, atoms))
    if output_type is pr.PolicyLogits:
        return eqx.tree_at(lambda o: o.logits, pr.PolicyLogits(jnp.zeros(num_actions)), values)
    if output_type is pr.GaussianParams:
        # `num_actions` is the action size; log-stds in a moderate range around 0.
        template = pr.GaussianParams(jnp.zeros(num_actions), jnp.zeros(num_actions))
        return eqx.tree_at(lambda o: (o.mean, o.log_std), template, (values, 0.5 * jnp.tanh(values[..., ::-1])))
    # Bounded outputs: actions in [-1, 2] in every dimension.
    low, high = jnp.full((*batch, num_actions), -1.0), jnp.full((*batch, num_actions), 2.0)
    zeros = jnp.zeros(num_actions)
    if output_type is pr.TanhGaussianParams:
        template = pr.TanhGaussianParams(zeros, zeros, zeros, zeros)
        leaves = (values, 0.5 * jnp.tanh(values[..., ::-1]), low, high)
        return eqx.tree_at(lambda o: (o.mean, o.log_std, o.low, o.high), template, leaves)
    if output_type is pr.DeterministicAction:
        template = pr.DeterministicAction(zeros, zeros, zeros)
        return eqx.tree_at(lambda o: (o.action, o.low, o.high), template, (0.5 + 1.5 * jnp.tanh(values), low, high))
    raise NotImplementedError(output_type)


def normal(seed: int, shape: tuple[int, ...]) -> Array:
    """Standard normal float32 samples, drawn with NumPy."""
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


# --------------------------------------------------------------------------------------
# Policies.
# --------------------------------------------------------------------------------------

# Every policy, with the network output it is tested on (Gaussian outputs have
# `NUM_ACTIONS` action dimensions).
POLICIES: dict[str, tuple[Callable[[], pr.policies.AbstractPolicy], type[pr.AbstractNetworkOutput]]] = {
    "greedy": (pr.policies.Greedy, pr.QValues),
    "epsilon-greedy": (lambda: pr.policies.EpsilonGreedy(0.3), pr.QValues),
    "softmax": (lambda: pr.policies.Softmax(0.5), pr.QValues),
    "greedy-categorical": (pr.policies.Greedy, pr.CategoricalQValues),
    "epsilon-greedy-quantiles": (lambda: pr.policies.EpsilonGreedy(0.3), pr.QuantileQValues),
    "categorical": (pr.policies.Categorical, pr.PolicyLogits),
    "mode": (pr.policies.Mode, pr.PolicyLogits),
    "gaussian": (pr.policies.Gaussian, pr.GaussianParams),
    "mode-gaussian": (pr.policies.Mode, pr.GaussianParams),
    "tanh-gaussian": (pr.policies.TanhGaussian, pr.TanhGaussianParams),
    "mode-tanh-gaussian": (pr.policies.Mode, pr.TanhGaussianParams),
    "deterministic": (pr.policies.Deterministic, pr.DeterministicAction),
    "gaussian-noise": (lambda: pr.policies.GaussianNoise(0.3), pr.DeterministicAction),
    "gaussian-noise-random-actions": (lambda: pr.policies.GaussianNoise(0.3, 0.5), pr.DeterministicAction),
    "tanh-gaussian-random-actions": (lambda: pr.policies.TanhGaussian(0.5), pr.TanhGaussianParams),
}

# --------------------------------------------------------------------------------------
# Losses.
# --------------------------------------------------------------------------------------


@final
@dataclasses.dataclass(frozen=True)
class LossCase:
    """A loss of the registry, with the network and actions it is tested with.

    Q-value losses get a Q-network; the others a policy head with a value, over
    discrete actions or, if `continuous`, Gaussian actions of `ACTION_SIZE`. A loss of
    what a search found (`search`) gets trajectories with random `SearchStatistics`; a
    loss of a learnt model (`model`) gets a `MuZeroNetwork`.
    """

    make: Callable[[], pr.losses.AbstractLoss]
    continuous: bool = False
    search: bool = False
    model: bool = False

    def setup(self, seed: int, num_steps: int, batch_size: int) -> tuple[Any, Any, pr.Trajectory]:
        """The loss, a network for it and a random batch of trajectories `[T + 1, B]`."""
        loss, key = self.make(), jax.random.key(seed)
        if issubclass(loss.input_type, pr.AbstractActionValues):
            network = q_network(key, output_type=loss.input_type)
        elif self.continuous:
            network = gaussian_network(key, action_size=ACTION_SIZE, with_value=True)
        elif self.model:
            network = pr.networks.MuZeroNetwork(OBS_SHAPE, NUM_ACTIONS, latent_size=8, hidden_sizes=(16,), key=key)
        else:
            network = logit_network(key, with_value=True)
        action_size = ACTION_SIZE if self.continuous else None
        trajectory = random_trajectory(
            seed, num_steps, batch_size, action_size=action_size, search_statistics=self.search
        )
        return loss, network, trajectory


ACTION_SIZE = 2

LOSSES: dict[str, LossCase] = {
    "td-lambda-q": LossCase(lambda: pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9)),
    "td-lambda-q-one-step": LossCase(lambda: pr.losses.TDLambdaQLoss(discount=0.9, lambda_=0.0)),
    "td-lambda-q-monte-carlo": LossCase(lambda: pr.losses.TDLambdaQLoss(discount=1.0, lambda_=1.0)),
    "q-learning": LossCase(lambda: pr.losses.QLearningLoss(discount=0.99)),
    "q-learning-three-step-huber": LossCase(lambda: pr.losses.QLearningLoss(discount=0.9, n_step=3, huber_delta=1.0)),
    "double-q-learning": LossCase(lambda: pr.losses.QLearningLoss(discount=0.99, double=True)),
    "pqn": LossCase(lambda: pr.losses.PQNLoss(discount=0.99, lambda_=0.65)),
    "c51": LossCase(lambda: pr.losses.CategoricalQLoss(discount=0.99)),
    "c51-pqn": LossCase(lambda: pr.losses.CategoricalPQNLoss(discount=0.99, lambda_=0.65)),
    "c51-double": LossCase(lambda: pr.losses.CategoricalQLoss(discount=0.9, double=True)),
    "qr-dqn": LossCase(lambda: pr.losses.QuantileQLoss(discount=0.99)),
    "qr-dqn-double-unsmoothed": LossCase(lambda: pr.losses.QuantileQLoss(discount=0.9, double=True, huber_delta=None)),
    "a2c": LossCase(lambda: pr.losses.A2CLoss(discount=0.99, lambda_=0.9)),
    "a2c-gaussian": LossCase(lambda: pr.losses.A2CLoss(discount=0.9), continuous=True),
    "reinforce": LossCase(lambda: pr.losses.ReinforceLoss(discount=0.99, entropy_coefficient=0.01)),
    "reinforce-with-baseline": LossCase(lambda: pr.losses.ReinforceLoss(discount=0.99, baseline=True)),
    "ppo": LossCase(lambda: pr.losses.PPOLoss(discount=0.99)),
    "ppo-gaussian": LossCase(lambda: pr.losses.PPOLoss(discount=0.9, normalize_advantages=False), continuous=True),
    "vtrace": LossCase(lambda: pr.losses.VTraceLoss(discount=0.99, lambda_=0.9, rho_bar=2.0, c_bar=0.5)),
    "vtrace-gaussian": LossCase(lambda: pr.losses.VTraceLoss(discount=0.9), continuous=True),
    # AlphaZero: Monte Carlo value targets over the rollout, and TD(lambda) after 2 steps.
    "alphazero": LossCase(pr.losses.AlphaZeroLoss, search=True),
    "alphazero-two-step-lambda": LossCase(
        lambda: pr.losses.AlphaZeroLoss(n_step=2, lambda_=0.8, value_coefficient=0.5), search=True
    ),
    # MuZero: the model unrolled 3 steps from each start, 2-step value targets.
    "muzero": LossCase(
        lambda: pr.losses.MuZeroLoss(num_unroll_steps=3, n_step=2, value_coefficient=0.5), search=True, model=True
    ),
}


def random_trajectory(
    seed: int,
    num_steps: int,
    batch_size: int | None = None,
    *,
    observation_shape: tuple[int, ...] = OBS_SHAPE,
    num_actions: int = NUM_ACTIONS,
    action_size: int | None = None,
    episode_end_probability: float = 0.25,
    previous_action_reward: bool = False,
    carry: Any = (),
    search_statistics: bool = False,
) -> pr.Trajectory:
    """A trajectory `[T + 1]` (or a batch `[T + 1, B]`) with a valid episode structure.

    Episodes end at random (terminated or truncated at random); the step after a last
    step is a first step with reward 0 and discount 1. Actions are indices below
    `num_actions`, or standard normal vectors of `action_size` if that is given. With
    `previous_action_reward`, observations are `ObservationActionReward`s as
    `PreviousActionReward` makes them. `carry` is the trajectory's initial carry. With
    `search_statistics`, the policy steps' extras are random `SearchStatistics` (search
    policies, values, visit counts of 8 simulations and discounts of 0.9 or -0.9, as
    between the players of a game).
    """
    rng = np.random.default_rng(seed)
    batch = () if batch_size is None else (batch_size,)
    length = num_steps + 1
    ends = rng.random((length, *batch)) < episode_end_probability
    terminates = rng.random((length, *batch)) < 0.5
    is_first = np.zeros((length, *batch), bool)
    is_first[0] = rng.random(batch) < 0.5
    terminated = np.zeros_like(is_first)
    truncated = np.zeros_like(is_first)
    for t in range(length):
        if t > 0:
            is_first[t] = terminated[t - 1] | truncated[t - 1]
        terminated[t] = ~is_first[t] & ends[t] & terminates[t]
        truncated[t] = ~is_first[t] & ends[t] & ~terminates[t]
    arrays = dict(
        observation=rng.normal(size=(length, *batch, *observation_shape)).astype(np.float32),
        reward=np.where(is_first, 0.0, rng.normal(size=is_first.shape)).astype(np.float32),
        discount=np.where(terminated, 0.0, 1.0).astype(np.float32),
        is_first=is_first,
        terminated=terminated,
        truncated=truncated,
    )
    # A time step is typed per step; a batch of them is the same module with stacked leaves.
    template = pr.TimeStep.first(jnp.zeros(observation_shape))
    timestep = eqx.tree_at(
        lambda t: [getattr(t, name) for name in arrays], template, [jnp.asarray(a) for a in arrays.values()]
    )
    zero = jnp.zeros((), jnp.float32)
    if action_size is None:
        actions = jnp.asarray(rng.integers(0, num_actions, (num_steps, *batch)), jnp.int32)
    else:
        actions = jnp.asarray(rng.normal(size=(num_steps, *batch, action_size)), jnp.float32)
    if previous_action_reward:
        previous = jnp.concatenate([jnp.zeros_like(actions[:1]), actions])
        first = jnp.asarray(is_first).reshape(is_first.shape + (1,) * (previous.ndim - is_first.ndim))
        timestep = eqx.tree_at(
            lambda t: t.observation,
            timestep,
            pr.ObservationActionReward(
                timestep.observation, jnp.where(first, jnp.zeros_like(previous), previous), timestep.reward
            ),
        )
    policy_step = eqx.tree_at(
        lambda p: (p.action, p.log_prob, p.entropy),
        pr.PolicyStep(actions[(0,) * (1 + len(batch))], zero, zero),
        (
            actions,
            jnp.zeros((num_steps, *batch), jnp.float32),
            jnp.zeros((num_steps, *batch), jnp.float32),
        ),
    )
    if search_statistics:
        statistics = random_search_statistics(rng, (num_steps, *batch), num_actions)
        policy_step = pr.PolicyStep(policy_step.action, policy_step.log_prob, policy_step.entropy, statistics)
    return pr.Trajectory(timestep, policy_step, carry)


def random_search_statistics(
    rng: np.random.Generator, batch: tuple[int, ...], num_actions: int, num_simulations: int = 8
) -> pr.SearchStatistics:
    """What a search of `num_simulations` might report, for each of a batch of steps."""
    visits = rng.multinomial(num_simulations, np.full(num_actions, 1 / num_actions), size=batch).astype(np.float32)
    logits = rng.normal(size=(*batch, num_actions))
    policy = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    discount = np.where(rng.random(batch) < 0.5, 0.9, -0.9)
    return pr.SearchStatistics(
        policy=jnp.asarray(policy, jnp.float32),
        value=jnp.asarray(rng.normal(size=batch), jnp.float32),
        visit_counts=jnp.asarray(visits),
        discount=jnp.asarray(discount, jnp.float32),
    )


# --------------------------------------------------------------------------------------
# Learners and pipelines.
# --------------------------------------------------------------------------------------


# optax transformations are static parts of a learner compared by identity: build each
# once so that learners built alike share compiled code.
ADAM = optax.adam(1e-2)
SGD_LEARNING_RATE = 0.1
SGD = optax.sgd(SGD_LEARNING_RATE)
CLIPPED_ADAM = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-2))


def make_learner(
    key: PRNGKeyArray,
    *,
    policy: pr.policies.AbstractPolicy | None = None,
    loss: pr.losses.AbstractLoss | None = None,
    optimizer: optax.GradientTransformation = ADAM,
    observation_shape: tuple[int, ...] = OBS_SHAPE,
    num_actions: int = NUM_ACTIONS,
    hidden_sizes: tuple[int, ...] = (8,),
    check_nans: bool = False,
    num_epochs: int = 1,
    num_minibatches: int = 1,
) -> pr.Learner:
    policy = pr.policies.Greedy() if policy is None else policy
    loss = pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9) if loss is None else loss
    network = q_network(key, observation_shape, num_actions, hidden_sizes)
    return pr.Learner(
        network, policy, loss, optimizer, check_nans=check_nans, num_epochs=num_epochs, num_minibatches=num_minibatches
    )


def policy_gradient_learner(
    key: PRNGKeyArray,
    loss: pr.losses.AbstractLoss,
    *,
    continuous: bool = False,
    std: Literal["parameter", "softplus"] = "parameter",
    **learner_options: Any,
) -> pr.Learner:
    """A policy-gradient learner: Catch-sized logits, or Gaussian actions (with `std`) on `Point`."""
    if continuous:
        network = gaussian_network(key, POINT_OBS_SHAPE, action_size=1, with_value=True, std=std)
        policy = pr.policies.Gaussian()
    else:
        network, policy = logit_network(key, with_value=True), pr.policies.Categorical()
    return pr.Learner(network, policy, loss, CLIPPED_ADAM, **learner_options)


def dqn_learner(key: PRNGKeyArray, loss: pr.losses.AbstractQLoss | None = None) -> pr.learners.DQNLearner:
    """DQN with a small replay buffer, double Q-learning by default; the network's head fits
    `loss` (plain, categorical or quantile values)."""
    loss = pr.losses.QLearningLoss(discount=0.99, double=True) if loss is None else loss
    return pr.learners.DQNLearner(
        q_network(key, output_type=loss.input_type),
        loss,
        ADAM,
        epsilon=0.1,
        buffer_size=240,
        batch_size=4,
        min_replay_size=12,
        target_update_period=2,
    )


POINT_OBS_SHAPE = (1,)


def pqn_learner(key: PRNGKeyArray, loss: pr.losses.AbstractLoss | None = None) -> pr.Learner:
    """PQN: a layer-normalised Q-network, epsilon-greedy on a schedule, Q(lambda) returns
    computed once per update, epochs of minibatches of single transitions; `loss` a
    PQN loss of action values (the default) or of categorical distributions."""
    loss = pr.losses.PQNLoss(discount=0.99, lambda_=0.65) if loss is None else loss
    return pr.Learner(
        q_network(key, layer_norm=True, output_type=loss.input_type),
        pr.policies.EpsilonGreedy(optax.linear_schedule(1.0, 0.05, 100)),
        loss,
        CLIPPED_ADAM,
        num_epochs=2,
        num_minibatches=3,
        minibatches_of="transitions",
    )


def td3_learner(key: PRNGKeyArray) -> pr.learners.TD3Learner:
    """TD3 on `Point`: a deterministic actor, twin critics, a small replay buffer."""
    actor_key, critic_key = jax.random.split(key)
    actor = bounded_network(actor_key, pr.networks.DeterministicHead, POINT_OBS_SHAPE, 1)
    critic = pr.networks.MLPCritic(POINT_OBS_SHAPE, 1, (8,), key=critic_key)
    return pr.learners.TD3Learner(
        actor, critic, ADAM, ADAM, buffer_size=240, batch_size=4, min_replay_size=12, gradient_steps=3
    )


def sac_learner(key: PRNGKeyArray) -> pr.learners.SACLearner:
    """SAC on `Point`: a tanh-Gaussian actor, twin critics, a learned temperature."""
    actor_key, critic_key = jax.random.split(key)
    actor = bounded_network(actor_key, pr.networks.TanhGaussianHead, POINT_OBS_SHAPE, 1)
    critic = pr.networks.MLPCritic(POINT_OBS_SHAPE, 1, (8,), key=critic_key)
    return pr.learners.SACLearner(
        actor, critic, ADAM, ADAM, ADAM, buffer_size=240, batch_size=4, min_replay_size=12, gradient_steps=2
    )


def discrete_sac_learner(key: PRNGKeyArray) -> pr.learners.DiscreteSACLearner:
    """Discrete SAC on Catch: a categorical actor, twin Q-networks, a learned temperature."""
    actor_key, *critic_keys = jax.random.split(key, 3)
    return pr.learners.DiscreteSACLearner(
        logit_network(actor_key),
        [q_network(critic_key) for critic_key in critic_keys],
        ADAM,
        ADAM,
        ADAM,
        buffer_size=240,
        batch_size=4,
        min_replay_size=12,
        gradient_steps=2,
    )


@final
@dataclasses.dataclass(frozen=True)
class ActorCriticLossCase:
    """A loss of an off-policy actor-critic, tested on the networks of a learner of the registry.

    `part` names the loss the learner holds (`critic`, `actor` or `temperature`);
    `loss`, if given, replaces it.
    """

    learner: Callable[[PRNGKeyArray], Any]
    part: str
    loss: Callable[[], Any] | None = None

    def setup(self, seed: int, batch_size: int) -> tuple[Any, pr.losses.Transitions]:
        """The learner holding the loss, and a random batch of transitions for its environment."""
        learner = self.learner(jax.random.key(seed))
        if self.loss is not None:
            learner = eqx.tree_at(lambda ac: getattr(ac, f"{self.part}_loss"), learner, self.loss())
        continuous = isinstance(learner.critic, pr.networks.AbstractCritic)
        shape = dict(observation_shape=POINT_OBS_SHAPE, action_size=1) if continuous else {}
        return learner, pr.losses.one_step_transitions(random_trajectory(seed, 1, batch_size, **shape))

    def params(self, learner: Any) -> Any:
        """The arrays the loss is differentiated by."""
        if self.part == "temperature":
            return jnp.log(learner.initial_temperature)
        return eqx.filter(getattr(learner, self.part), eqx.is_inexact_array)

    def objective(self, learner: Any, transitions: pr.losses.Transitions, key: PRNGKeyArray) -> Callable[..., Any]:
        """The loss as its learner calls it, a function of `params` to `(loss, terms)`."""
        loss = getattr(learner, f"{self.part}_loss")
        soft = isinstance(learner, pr.learners.AbstractSoftActorCriticLearner)
        temperature = learner.initial_temperature if soft else None
        if self.part == "temperature":
            return lambda log_temperature: loss(log_temperature, jnp.asarray(0.3))
        if self.part == "actor":
            extra = dict(temperature=temperature, key=key) if soft else {}
            return lambda params: loss(
                pr.learners.with_params(learner.actor, params), transitions, critic=learner.critic, **extra
            )
        if soft:
            targets = loss.targets(
                transitions, actor=learner.actor, target_critic=learner.critic, temperature=temperature, key=key
            )
        else:
            targets = loss.targets(transitions, target_actor=learner.actor, target_critic=learner.critic, key=key)
        return lambda params: loss(pr.learners.with_params(learner.critic, params), transitions, targets)


ACTOR_CRITIC_LOSSES: dict[str, ActorCriticLossCase] = {
    "td3-critic": ActorCriticLossCase(td3_learner, "critic"),
    "ddpg-critic": ActorCriticLossCase(
        td3_learner, "critic", lambda: pr.losses.TD3CriticLoss(discount=0.9, target_noise=0.0)
    ),
    "deterministic-actor": ActorCriticLossCase(td3_learner, "actor"),
    "sac-critic": ActorCriticLossCase(sac_learner, "critic"),
    "sac-actor": ActorCriticLossCase(sac_learner, "actor"),
    "temperature": ActorCriticLossCase(sac_learner, "temperature"),
    "discrete-sac-critic": ActorCriticLossCase(discrete_sac_learner, "critic"),
    "discrete-sac-actor": ActorCriticLossCase(discrete_sac_learner, "actor"),
}


@final
@dataclasses.dataclass(frozen=True)
class LearnerCase:
    """A learner of the registry and the environment it is tested in.

    `device_invariant`: whether training on 2 devices with half the environments each
    gives the parameters of 1 device with all of them (up to float rounding).
    """

    make: Callable[[PRNGKeyArray], pr.learners.AbstractLearner]
    continuous: bool = False
    device_invariant: bool = True
    previous_action_reward: bool = False
    search: bool = False

    def env(self) -> pr.envs.AbstractEnv:
        env = Point() if self.continuous else pr.envs.Catch(rows=CATCH_ROWS, columns=CATCH_COLUMNS)
        return pr.envs.PreviousActionReward(env) if self.previous_action_reward else env

    def random_trajectory(
        self, agent: pr.AbstractAgent | pr.networks.AbstractNetwork, seed: int, num_steps: int, batch_size: int
    ) -> pr.Trajectory:
        """Random trajectories for the case's environment, starting from random carries of `agent`."""
        kwargs = dict(previous_action_reward=self.previous_action_reward, carry=random_carry(agent, seed, batch_size))
        if self.search:
            kwargs["search_statistics"] = True
        if self.continuous:
            return random_trajectory(
                seed, num_steps, batch_size, observation_shape=POINT_OBS_SHAPE, action_size=1, **kwargs
            )
        return random_trajectory(seed, num_steps, batch_size, **kwargs)


def recurrent_learner(
    key: PRNGKeyArray,
    loss: pr.losses.AbstractLoss,
    *,
    core: str = "gru",
    continuous: bool = False,
    previous_action_reward: bool = False,
    policy: pr.policies.AbstractPolicy | None = None,
    num_epochs: int = 1,
    num_minibatches: int = 1,
    layer_norm: bool = False,
) -> pr.Learner:
    """A learner with a recurrent network: Q-values for Q-losses, else logits (or Gaussian on `Point`)."""
    if loss.input_type is pr.QValues:
        output_type, default_policy = pr.QValues, pr.policies.EpsilonGreedy(0.1)
    elif continuous:
        output_type, default_policy = pr.GaussianParams, pr.policies.Gaussian()
    else:
        output_type, default_policy = pr.PolicyLogits, pr.policies.Categorical()
    network = recurrent_network(
        key,
        POINT_OBS_SHAPE if continuous else OBS_SHAPE,
        1 if continuous else NUM_ACTIONS,
        core=core,
        output_type=output_type,
        previous_action_reward=previous_action_reward,
        layer_norm=layer_norm,
    )
    policy = default_policy if policy is None else policy
    return pr.Learner(network, policy, loss, CLIPPED_ADAM, num_epochs=num_epochs, num_minibatches=num_minibatches)


def muzero_learner(
    key: PRNGKeyArray, *, replay: bool = False, support_size: int | None = None
) -> pr.learners.AlphaZeroLearner | pr.learners.MuZeroReplayLearner:
    """A small MuZero agent (4 simulations, 2 unrolled steps, 2-step targets), learnt
    on-policy in 2 epochs of 3 minibatches or from replay (2 gradient steps on 4 sequences)."""
    network = pr.networks.MuZeroNetwork(
        OBS_SHAPE, NUM_ACTIONS, latent_size=8, hidden_sizes=(16,), support_size=support_size, key=key
    )
    agent = pr.search.MuZeroAgent(network, pr.search.GumbelMuZeroSearch(4), discount=0.9)
    loss = pr.losses.MuZeroLoss(num_unroll_steps=2, n_step=2)
    if replay:
        return pr.learners.MuZeroReplayLearner(
            agent, loss, ADAM, buffer_size=60, batch_size=4, min_replay_size=1, gradient_steps=2
        )
    return pr.learners.AlphaZeroLearner(agent, loss, ADAM, num_epochs=2, num_minibatches=3)


LEARNERS: dict[str, LearnerCase] = {
    "greedy-td-lambda-adam": LearnerCase(make_learner),
    "greedy-one-step-sgd": LearnerCase(
        lambda key: make_learner(key, loss=pr.losses.TDLambdaQLoss(discount=0.9, lambda_=0.0), optimizer=SGD)
    ),
    "greedy-td-lambda-clipped-adam-check-nans": LearnerCase(
        lambda key: make_learner(key, optimizer=CLIPPED_ADAM, check_nans=True)
    ),
    "greedy-q-learning-two-epochs-three-minibatches": LearnerCase(
        lambda key: make_learner(key, loss=pr.losses.QLearningLoss(discount=0.99), num_epochs=2, num_minibatches=3)
    ),
    "epsilon-greedy-three-step-q": LearnerCase(
        lambda key: make_learner(
            key, policy=pr.policies.EpsilonGreedy(0.2), loss=pr.losses.QLearningLoss(discount=0.9, n_step=3)
        )
    ),
    "a2c": LearnerCase(lambda key: policy_gradient_learner(key, pr.losses.A2CLoss(discount=0.99, lambda_=0.9))),
    "a2c-three-minibatches": LearnerCase(
        lambda key: policy_gradient_learner(key, pr.losses.A2CLoss(discount=0.99), num_minibatches=3)
    ),
    "reinforce-with-baseline": LearnerCase(
        lambda key: policy_gradient_learner(key, pr.losses.ReinforceLoss(discount=0.99, baseline=True))
    ),
    "ppo-two-epochs-three-minibatches": LearnerCase(
        lambda key: policy_gradient_learner(key, pr.losses.PPOLoss(discount=0.99), num_epochs=2, num_minibatches=3)
    ),
    "gaussian-ppo-two-epochs-three-minibatches": LearnerCase(
        lambda key: policy_gradient_learner(
            key, pr.losses.PPOLoss(discount=0.9), continuous=True, num_epochs=2, num_minibatches=3
        ),
        continuous=True,
    ),
    # The published PPOs' options: single transitions in the minibatches, clipped
    # values, a state-dependent standard deviation.
    "gaussian-softplus-ppo-clipped-values-transitions": LearnerCase(
        lambda key: policy_gradient_learner(
            key,
            pr.losses.PPOLoss(discount=0.9, clip_value=True),
            continuous=True,
            std="softplus",
            num_epochs=2,
            num_minibatches=3,
            minibatches_of="transitions",
        ),
        continuous=True,
    ),
    "gaussian-a2c": LearnerCase(
        lambda key: policy_gradient_learner(key, pr.losses.A2CLoss(discount=0.9), continuous=True), continuous=True
    ),
    "vtrace-two-epochs-three-minibatches": LearnerCase(
        lambda key: policy_gradient_learner(
            key, pr.losses.VTraceLoss(discount=0.99, lambda_=0.9), num_epochs=2, num_minibatches=3
        )
    ),
    # Each device replays its own environments' experience and samples its own batch
    # (from the same key): the sampled sequences depend on how the batch is split.
    "dqn-double-q": LearnerCase(dqn_learner, device_invariant=False),
    # Recurrent networks: each trajectory unrolls from the carry it started with.
    "gru-ppo-two-epochs-three-minibatches": LearnerCase(
        lambda key: recurrent_learner(key, pr.losses.PPOLoss(discount=0.99), num_epochs=2, num_minibatches=3)
    ),
    "lstm-a2c-previous-action-reward": LearnerCase(
        lambda key: recurrent_learner(
            key, pr.losses.A2CLoss(discount=0.99, lambda_=0.9), core="lstm", previous_action_reward=True
        ),
        previous_action_reward=True,
    ),
    "gru-reinforce-with-baseline": LearnerCase(
        lambda key: recurrent_learner(key, pr.losses.ReinforceLoss(discount=0.99, baseline=True))
    ),
    "gru-gaussian-vtrace": LearnerCase(
        lambda key: recurrent_learner(key, pr.losses.VTraceLoss(discount=0.9), continuous=True), continuous=True
    ),
    "gru-td-lambda-q": LearnerCase(
        lambda key: recurrent_learner(key, pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9))
    ),
    # A learner family written outside the library (tests/off_policy_actor_critic.py).
    # Each device replays its own environments' experience, as for DQN.
    "ddpg-outside-the-library": LearnerCase(
        lambda key: off_policy_actor_critic.ddpg_learner(key, POINT_OBS_SHAPE, 1, low=-1.0, high=1.0, optimizer=ADAM),
        continuous=True,
        device_invariant=False,
    ),
    "pqn-layer-norm-transitions": LearnerCase(pqn_learner),
    "c51-pqn-layer-norm-transitions": LearnerCase(
        lambda key: pqn_learner(key, pr.losses.CategoricalPQNLoss(discount=0.99, lambda_=0.65))
    ),
    # Recurrent PQN: minibatches of whole trajectories, each unrolling from its start's carry.
    "gru-pqn-layer-norm": LearnerCase(
        lambda key: recurrent_learner(
            key,
            pr.losses.PQNLoss(discount=0.99, lambda_=0.65),
            policy=pr.policies.EpsilonGreedy(optax.linear_schedule(1.0, 0.05, 100)),
            num_epochs=2,
            num_minibatches=3,
            layer_norm=True,
        )
    ),
    # Distributional DQN: replay per device, as for DQN.
    "c51": LearnerCase(lambda key: dqn_learner(key, pr.losses.CategoricalQLoss(discount=0.99)), device_invariant=False),
    "qr-dqn-double": LearnerCase(
        lambda key: dqn_learner(key, pr.losses.QuantileQLoss(discount=0.99, double=True)), device_invariant=False
    ),
    # The library's off-policy actor-critic learners: each device replays its own experience.
    "td3": LearnerCase(td3_learner, continuous=True, device_invariant=False),
    "sac": LearnerCase(sac_learner, continuous=True, device_invariant=False),
    "discrete-sac": LearnerCase(discrete_sac_learner, device_invariant=False),
    "gru-gaussian-ppo-previous-action-reward": LearnerCase(
        lambda key: recurrent_learner(
            key, pr.losses.PPOLoss(discount=0.9), continuous=True, previous_action_reward=True, num_minibatches=3
        ),
        continuous=True,
        previous_action_reward=True,
    ),
    # MuZero searches a learnt model from observations: on-policy, and from replay (each
    # device replays its own experience, as for DQN), with categorical values and rewards.
    "muzero-two-epochs-three-minibatches": LearnerCase(muzero_learner, search=True),
    "muzero-replay-categorical": LearnerCase(
        lambda key: muzero_learner(key, replay=True, support_size=3), search=True, device_invariant=False
    ),
}


def small_pipeline(
    key: PRNGKeyArray,
    *,
    env: pr.envs.AbstractEnv | None = None,
    num_envs: int = 3,
    rollout_length: int = 6,
    **learner_kwargs: Any,
) -> pr.Anakin:
    """A small Anakin pipeline, by default on a 5x3 Catch (episodes of 4 steps)."""
    env = pr.envs.Catch(rows=CATCH_ROWS, columns=CATCH_COLUMNS) if env is None else env
    shape = env.observation_space.shape  # pyright: ignore[reportAttributeAccessIssue]
    learner = make_learner(key, observation_shape=shape, **learner_kwargs)
    return pr.Anakin(env, learner, num_envs=num_envs, rollout_length=rollout_length)


# --------------------------------------------------------------------------------------
# Independent oracles.
# --------------------------------------------------------------------------------------


def reference_td_lambda_q_loss(
    network: pr.networks.AbstractNetwork, trajectory: pr.Trajectory, *, discount: Any, lambda_: Any
) -> Float[Array, ""]:
    """TD(lambda) Q-learning on one trajectory `[T + 1]`, written with rlax.

    The same objective as the Podracer colab, plus the masking episode boundaries need:
    no loss on a transition into a first step (it only resets the environment), lambda
    cut to 0 at a last step (bootstrap from its observation, never across a reset) and
    the agent's discount times the environment's (0 on termination).
    """
    timestep = trajectory.timestep
    q_values = jax.vmap(lambda observation: network(observation, network.initial_carry())[0].q_values)(
        timestep.observation
    )
    is_last = (timestep.terminated | timestep.truncated).astype(jnp.float32)
    errors = rlax.td_lambda(
        v_tm1=rlax.batched_index(q_values[:-1], trajectory.policy_step.action),
        r_t=timestep.reward[1:],
        discount_t=discount * timestep.discount[1:],
        v_t=jnp.max(q_values[1:], axis=-1),
        lambda_=lambda_ * (1.0 - is_last[1:]),
        stop_target_gradients=True,
    )
    mask = 1.0 - timestep.is_first[1:].astype(jnp.float32)
    return jnp.mean(mask * jnp.square(errors))


# --------------------------------------------------------------------------------------
# Runs on forced CPU devices, in subprocesses (see multidevice_worker.py).
# --------------------------------------------------------------------------------------

WORKER = pathlib.Path(__file__).with_name("multidevice_worker.py")
MULTIDEVICE_NUM_ENVS = 3  # per device on two devices; the one-device run has twice as many
# The learners of the registry that also run over two processes (multi-host).
MULTIPROCESS_LEARNERS = ("ppo-two-epochs-three-minibatches", "dqn-double-q", "gru-ppo-two-epochs-three-minibatches")


def cli_run(env: str, algo: str, **changes: Any) -> configs.Run:
    """The run of `podrace train ENV ALGO` with `changes` to its own settings (`seed`,
    `seeds`, ...) or its configuration's."""
    run = configs.Run(env, configs.default_config(env, algo))
    own = {field.name for field in dataclasses.fields(run)}
    config = dataclasses.replace(run.config, **{name: value for name, value in changes.items() if name not in own})
    return dataclasses.replace(run, config=config, **{name: value for name, value in changes.items() if name in own})


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of the call)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_processes(
    command: Callable[[str, int], list[str]], *, num_devices: int, num_processes: int = 2, timeout: float = 600.0
) -> list[subprocess.CompletedProcess[str]]:
    """Runs `command(coordinator_address, process_id)` for every process of a `jax.distributed`
    run on 127.0.0.1, side by side, each on `num_devices` forced CPU devices, and returns
    what each printed; kills them all once `timeout` seconds have passed."""
    address = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={num_devices}")
    processes = [
        subprocess.Popen(
            command(address, process_id), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for process_id in range(num_processes)
    ]
    deadline = time.monotonic() + timeout
    try:
        outputs = [process.communicate(timeout=max(0.0, deadline - time.monotonic())) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    return [
        subprocess.CompletedProcess(process.args, process.returncode, out, err)
        for process, (out, err) in zip(processes, outputs, strict=True)
    ]


@final
class MultideviceRuns:
    """The worker subprocesses: two devices (Anakin, filter_pmap, DQN, a population, every
    learner of the registry), one device (Anakin, the pmapped runs done separately, the
    same population, every learner), and two processes of one CPU device each, joined by
    `jax.distributed` on 127.0.0.1 (Anakin, DQN, the population, `MULTIPROCESS_LEARNERS`),
    each process writing to `two_processes / process-ID`."""

    def __init__(self, out: pathlib.Path):
        self.two_devices = out / "two-devices"
        self.one_device = out / "one-device"
        self.two_processes = out / "two-processes"
        self._processes = [
            self._start(self.two_devices, 2, MULTIDEVICE_NUM_ENVS, "--pmap", "--dqn", "--population", "--learners"),
            self._start(self.one_device, 1, 2 * MULTIDEVICE_NUM_ENVS, "--separate", "--population", "--learners"),
        ]
        coordinator = f"127.0.0.1:{free_port()}"
        self.two_processes.mkdir(parents=True)
        self._processes += [
            self._start(
                self.two_processes,
                1,
                MULTIDEVICE_NUM_ENVS,
                "--dqn",
                "--population",
                "--learners",
                "--only",
                *MULTIPROCESS_LEARNERS,
                "--coordinator-address",
                coordinator,
                "--num-processes",
                "2",
                "--process-id",
                str(process_id),
            )
            for process_id in range(2)
        ]

    @staticmethod
    def _start(out: pathlib.Path, num_devices: int, num_envs: int, *flags: str) -> tuple[str, subprocess.Popen]:
        out.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={num_devices}")
        command = [sys.executable, str(WORKER), str(out), "--num-envs", str(num_envs), *flags]
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return " ".join(command[2:]), process

    def wait(self, timeout: float = 900.0) -> None:
        """Waits for every run; fails with its output if one failed."""
        for name, process in self._processes:
            output, _ = process.communicate(timeout=timeout)
            assert process.returncode == 0, f"worker {name} failed:\n{output}"

    def kill(self) -> None:
        for _, process in self._processes:
            if process.poll() is None:
                process.kill()
                process.communicate()


def every_env(env_ids: list[str], checked_by_default: tuple[str, ...]) -> list:
    """Parameters of a test over every registered environment of another package: those
    of `checked_by_default` in the default session, the others marked `ecosystem` (their
    session, `nox -s ecosystem`, takes tens of minutes: each is compiled, and run eagerly
    too, by `check_env`)."""
    return [
        env_id if env_id in checked_by_default else pytest.param(env_id, marks=pytest.mark.ecosystem)
        for env_id in env_ids
    ]


_TWO_DEVICES_SCRIPT = """
import sys
import jax
import numpy as np
import podrace as pr
from podrace import configs
from podrace.envs.names import make_env

def train(devices, num_envs):
    mesh = jax.sharding.Mesh(jax.devices()[:devices], ("devices",))
    pipeline = pr.Anakin(env, learner, num_envs=num_envs, rollout_length=4, mesh=mesh, normalization=normalization)
    state = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=2).state
    statistics = [] if normalization is None else [leaf[0] for leaf in jax.tree.leaves(state.envs.normalization)[:-1]]
    return jax.tree.leaves(state.learner.params) + statistics

normalization = pr.RunningNormalization() if sys.argv[2] == "normalized" else None
config = configs.OnPolicyConfig(algorithm="ppo", rollout_length=4, num_minibatches=2)
env = make_env(sys.argv[1])
learner = config.learner(env.action_space, configs.observation_shape(env), jax.random.key(0))
for one, two in zip(train(1, 8), train(2, 4), strict=True):
    np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-5)  # sums in another order
print("equal")
"""


def assert_two_devices_train_as_one(env_name: str, *, normalized: bool = False) -> None:
    """Two PPO updates of the command line's `env_name` on two forced CPU devices (four
    environments each) end with the parameters of one device with eight, in a subprocess;
    `normalized`: with a `RunningNormalization`, whose statistics must agree too."""
    run = subprocess.run(
        [sys.executable, "-c", _TWO_DEVICES_SCRIPT, env_name, "normalized" if normalized else "raw"],
        env=dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0 and "equal" in run.stdout, run.stderr[-3000:]


def fresh_module_without(module_name: str, missing: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh copy of podrace's `module_name`, imported while the packages `missing` are
    not installed (as far as imports can tell), outside `sys.modules`."""
    for name in missing:
        monkeypatch.setitem(sys.modules, name, None)
    spec = importlib.util.find_spec(module_name)
    assert spec is not None and spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    return fresh
