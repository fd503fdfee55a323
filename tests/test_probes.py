"""Probe environments: their dynamics by hand, `check_env`, and every discrete learner solving them.

The learning tests train each learner on all five probes and ten seeds at once (one
`pr.Population`, so one compiled program per learner), then compare the trained
network's values at every probe observation with the probe's analytic values.
"""

import functools
from collections.abc import Callable
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxtyping import Array, Int, PRNGKeyArray

import podrace as pr

from . import helpers


PROBES: tuple[pr.envs.AbstractProbe, ...] = (
    pr.envs.ConstantRewardProbe(),
    pr.envs.ObservationRewardProbe(),
    pr.envs.DelayedRewardProbe(),
    pr.envs.ActionRewardProbe(),
    pr.envs.ObservationActionRewardProbe(),
)
PROBE_IDS = [type(probe).__name__ for probe in PROBES]
# Below 0.9, so that a loss that drops the discount (V(0) = 1 on DelayedRewardProbe)
# misses the analytic value by more than the tolerance.
DISCOUNT = 0.8
TOLERANCE = 0.1


def _steps(env, actions, key=0):
    state, timestep = env.reset(jax.random.key(key))
    timesteps = [timestep]
    for t, action in enumerate(actions):
        state, timestep = env.step(state, jnp.asarray(action, jnp.int32), jax.random.key(100 + t))
        timesteps.append(timestep)
    return timesteps


def _check_ends_after(timesteps, num_steps):
    assert bool(timesteps[0].is_first)
    for t, timestep in enumerate(timesteps[1:], start=1):
        assert not bool(timestep.is_first) and not bool(timestep.truncated)
        assert bool(timestep.terminated) == (t == num_steps)
        assert float(timestep.discount) == (0.0 if t == num_steps else 1.0)


# --------------------------------------------------------------------------------------
# Dynamics.
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", [0, 1])
def test_constant_reward_probe(action):
    env = pr.envs.ConstantRewardProbe()
    timesteps = _steps(env, [action])
    _check_ends_after(timesteps, 1)
    assert [t.observation.tolist() for t in timesteps] == [[0.0], [0.0]]
    assert float(timesteps[1].reward) == 1.0
    np.testing.assert_array_equal(env.observations, [[0.0]])
    np.testing.assert_array_equal(env.optimal_q_values(jnp.zeros(1), DISCOUNT), [1.0, 1.0])
    assert float(env.optimal_value(jnp.zeros(1), DISCOUNT)) == 1.0


@pytest.mark.parametrize("action", [0, 1])
def test_observation_reward_probe(action):
    env = pr.envs.ObservationRewardProbe()
    for key in range(4):
        timesteps = _steps(env, [action], key)
        _check_ends_after(timesteps, 1)
        observation = float(timesteps[0].observation[0])
        assert observation in (-1.0, 1.0)
        assert float(timesteps[1].observation[0]) == observation
        assert float(timesteps[1].reward) == observation
    np.testing.assert_array_equal(env.observations, [[-1.0], [1.0]])
    for observation in (-1.0, 1.0):
        np.testing.assert_array_equal(env.optimal_q_values(jnp.full(1, observation), DISCOUNT), [observation] * 2)
        assert float(env.optimal_value(jnp.full(1, observation), DISCOUNT)) == observation


@pytest.mark.parametrize("actions", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_delayed_reward_probe(actions):
    env = pr.envs.DelayedRewardProbe()
    timesteps = _steps(env, actions)
    _check_ends_after(timesteps, 2)
    assert [t.observation.tolist() for t in timesteps] == [[0.0], [1.0], [1.0]]
    assert [float(t.reward) for t in timesteps] == [0.0, 0.0, 1.0]
    np.testing.assert_array_equal(env.observations, [[0.0], [1.0]])
    for discount in (0.5, DISCOUNT, 1.0):
        np.testing.assert_allclose(env.optimal_q_values(jnp.zeros(1), discount), [discount] * 2)
        np.testing.assert_allclose(env.optimal_value(jnp.zeros(1), discount), discount)
        np.testing.assert_array_equal(env.optimal_q_values(jnp.ones(1), discount), [1.0, 1.0])


def test_action_reward_probe():
    env = pr.envs.ActionRewardProbe()
    for action, reward in ((0, -1.0), (1, 1.0)):
        timesteps = _steps(env, [action])
        _check_ends_after(timesteps, 1)
        assert [t.observation.tolist() for t in timesteps] == [[0.0], [0.0]]
        assert float(timesteps[1].reward) == reward
    np.testing.assert_array_equal(env.observations, [[0.0]])
    np.testing.assert_array_equal(env.optimal_q_values(jnp.zeros(1), DISCOUNT), [-1.0, 1.0])
    assert float(env.optimal_value(jnp.zeros(1), DISCOUNT)) == 1.0


def test_observation_action_reward_probe():
    env = pr.envs.ObservationActionRewardProbe()
    seen = set()
    for key in range(6):
        for action in (0, 1):
            timesteps = _steps(env, [action], key)
            _check_ends_after(timesteps, 1)
            observation = float(timesteps[0].observation[0])
            assert float(timesteps[1].observation[0]) == observation
            matches = action == (1 if observation > 0 else 0)
            assert float(timesteps[1].reward) == (1.0 if matches else -1.0)
            seen.add(observation)
    assert seen == {-1.0, 1.0}
    np.testing.assert_array_equal(env.observations, [[-1.0], [1.0]])
    np.testing.assert_array_equal(env.optimal_q_values(-jnp.ones(1), DISCOUNT), [1.0, -1.0])
    np.testing.assert_array_equal(env.optimal_q_values(jnp.ones(1), DISCOUNT), [-1.0, 1.0])
    for observation in (-1.0, 1.0):
        assert float(env.optimal_value(jnp.full(1, observation), DISCOUNT)) == 1.0


@pytest.mark.parametrize("env", [PROBES[1], PROBES[4]], ids=[PROBE_IDS[1], PROBE_IDS[4]])
def test_random_observations_are_plus_or_minus_one_with_equal_probability(env):
    _, timesteps = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 4000))
    observations = np.asarray(timesteps.observation)
    assert observations.shape == (4000, 1) and observations.dtype == np.float32
    assert set(np.unique(observations).tolist()) == {-1.0, 1.0}
    np.testing.assert_allclose(np.mean(observations == 1.0), 0.5, atol=0.03)


@pytest.mark.parametrize("env", PROBES, ids=PROBE_IDS)
def test_probe_spaces_and_check_env(env):
    assert env.observation_space == pr.Box(-1.0, 1.0, (1,))
    assert env.action_space == pr.Discrete(2)
    assert jax.tree.leaves(env) == []  # array-free: a probe hashes as a jit key
    report = pr.envs.check_env(env, num_steps=20)
    assert report.skipped == {}


# --------------------------------------------------------------------------------------
# Learning: every discrete learner solves every probe it can.
# --------------------------------------------------------------------------------------


@final
class AnyProbe(pr.envs.AbstractEnv[pr.envs.ProbeState]):
    """The probe `PROBES[index]`: an array leaf, so that one population trains all five."""

    index: Int[Array, ""]

    @property
    def observation_space(self) -> pr.Box:
        return PROBES[0].observation_space

    @property
    def action_space(self) -> pr.Discrete:
        return PROBES[0].action_space

    def reset(self, key: PRNGKeyArray) -> tuple[pr.envs.ProbeState, pr.TimeStep]:
        return jax.lax.switch(self.index, [probe.reset for probe in PROBES], key)

    def step(
        self, state: pr.envs.ProbeState, action: Array, key: PRNGKeyArray
    ) -> tuple[pr.envs.ProbeState, pr.TimeStep]:
        return jax.lax.switch(self.index, [probe.step for probe in PROBES], state, action, key)


NUM_SEEDS = 10
NUM_ENVS = 16
# Longer than every probe episode and its reset step, so REINFORCE sees whole episodes.
ROLLOUT_LENGTH = 8
NUM_UPDATES = 300
HIDDEN_SIZE = 16
OPTIMIZER = optax.adam(1e-2)
# Every observation of any probe; each probe's own are picked from them.
OBSERVATIONS = np.asarray([[-1.0], [0.0], [1.0]], np.float32)


def _q_network(key: PRNGKeyArray, output_type: type = pr.QValues) -> pr.networks.FeedForwardNetwork:
    return helpers.q_network(key, (1,), 2, (HIDDEN_SIZE,), output_type=output_type)


def _actor_critic_network(key: PRNGKeyArray) -> pr.networks.FeedForwardNetwork:
    torso_key, head_key = jax.random.split(key)
    return pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((1,), (HIDDEN_SIZE,), key=torso_key),
        pr.networks.PolicyLogitHead(HIDDEN_SIZE, 2, with_value=True, key=head_key),
    )


def _q_learner(loss: pr.losses.AbstractLoss) -> Callable[[PRNGKeyArray], pr.Learner]:
    # Half the actions at random, so that the values of the worse actions are learnt too.
    return lambda key: pr.Learner(_q_network(key), pr.policies.EpsilonGreedy(0.5), loss, OPTIMIZER)


def _actor_critic_learner(loss: pr.losses.AbstractLoss, **options: int) -> Callable[[PRNGKeyArray], pr.Learner]:
    return lambda key: pr.Learner(_actor_critic_network(key), pr.policies.Categorical(), loss, OPTIMIZER, **options)


def _dqn_learner(loss: pr.losses.AbstractQLoss) -> Callable[[PRNGKeyArray], pr.learners.DQNLearner]:
    """DQN with `loss`, its network's head fitting it (plain, categorical or quantile values)."""
    return lambda key: pr.learners.DQNLearner(
        _q_network(key, loss.input_type),
        loss,
        OPTIMIZER,
        epsilon=0.5,
        buffer_size=512,
        batch_size=32,
        min_replay_size=64,
        target_update_period=10,
    )


def _pqn_learner(loss: pr.losses.AbstractLoss) -> Callable[[PRNGKeyArray], pr.Learner]:
    return lambda key: pr.Learner(
        helpers.q_network(key, (1,), 2, (HIDDEN_SIZE,), layer_norm=True, output_type=loss.input_type),
        pr.policies.EpsilonGreedy(0.5),
        loss,
        OPTIMIZER,
        num_epochs=2,
        num_minibatches=2,
        minibatches_of="transitions",
    )


PROBE_LEARNERS: dict[str, Callable[[PRNGKeyArray], pr.learners.AbstractLearner]] = {
    "td-lambda-q": _q_learner(pr.losses.TDLambdaQLoss(discount=DISCOUNT, lambda_=0.9)),
    "q-learning": _q_learner(pr.losses.QLearningLoss(discount=DISCOUNT)),
    "dqn": _dqn_learner(pr.losses.QLearningLoss(discount=DISCOUNT)),
    "c51": _dqn_learner(pr.losses.CategoricalQLoss(discount=DISCOUNT)),
    "qr-dqn": _dqn_learner(pr.losses.QuantileQLoss(discount=DISCOUNT)),
    # PQN: a layer-normalised Q-network, returns computed once per update, minibatches of transitions.
    "pqn": _pqn_learner(pr.losses.PQNLoss(discount=DISCOUNT, lambda_=0.65)),
    "c51-pqn": _pqn_learner(pr.losses.CategoricalPQNLoss(discount=DISCOUNT, lambda_=0.65)),
    "a2c": _actor_critic_learner(pr.losses.A2CLoss(discount=DISCOUNT)),
    "ppo-two-epochs-two-minibatches": _actor_critic_learner(
        pr.losses.PPOLoss(discount=DISCOUNT), num_epochs=2, num_minibatches=2
    ),
    "reinforce-with-baseline": _actor_critic_learner(pr.losses.ReinforceLoss(discount=DISCOUNT, baseline=True)),
    "vtrace": _actor_critic_learner(pr.losses.VTraceLoss(discount=DISCOUNT)),
}


def _make_pipeline(
    make_learner: Callable[[PRNGKeyArray], pr.learners.AbstractLearner], hyperparameters: tuple[Array, PRNGKeyArray]
) -> pr.Anakin:
    index, key = hyperparameters
    return pr.Anakin(AnyProbe(index), make_learner(key), num_envs=NUM_ENVS, rollout_length=ROLLOUT_LENGTH)


def _train_population(
    make_learner: Callable[[PRNGKeyArray], pr.learners.AbstractLearner],
) -> tuple[pr.Population, pr.AnakinState]:
    """Trains a learner on every probe (seeds 0 to `NUM_SEEDS - 1`, each drawing its network
    from `jax.random.key(seed)`), as one population of members stacked probe-major."""
    indices = jnp.repeat(jnp.arange(len(PROBES)), NUM_SEEDS)
    keys = jnp.tile(jax.vmap(jax.random.key)(jnp.arange(NUM_SEEDS)), len(PROBES))
    population = pr.Population(functools.partial(_make_pipeline, make_learner), (indices, keys))
    result = population.train(population.init(jax.random.key(NUM_SEEDS)), num_updates=NUM_UPDATES)
    return population, result.state


def _on_observations(networks: pr.networks.AbstractNetwork):
    """The outputs of stacked networks at every observation of `OBSERVATIONS`."""
    return eqx.filter_vmap(lambda network: jax.vmap(lambda o: network(o, ())[0])(jnp.asarray(OBSERVATIONS)))(networks)


SHAPE = (len(PROBES), NUM_SEEDS, len(OBSERVATIONS))


@pytest.mark.parametrize("name", PROBE_LEARNERS)
def test_learner_solves_every_probe(name):
    """At every observation of every probe, each seed's trained network predicts the probe's
    analytic values within `TOLERANCE` (the Q-values of both actions, or the value of the
    optimal policy), and prefers the optimal action where the probe rewards one."""
    population, state = _train_population(PROBE_LEARNERS[name])
    outputs = _on_observations(population.networks(state))
    q_learner = isinstance(outputs, pr.AbstractActionValues)
    if q_learner:
        learnt = preferences = np.asarray(outputs.q_values).reshape(*SHAPE, 2)
    else:
        learnt = np.asarray(outputs.value).reshape(SHAPE)
        preferences = np.asarray(outputs.logits).reshape(*SHAPE, 2)
    _assert_solved(learnt, preferences, q_learner)


def _discrete_sac(key: PRNGKeyArray) -> pr.learners.DiscreteSACLearner:
    """Discrete SAC steered to a near-greedy policy (0.05 nats), so that its soft values
    approach the probes' analytic ones."""
    actor_key, *critic_keys = jax.random.split(key, 3)
    return pr.learners.DiscreteSACLearner(
        helpers.logit_network(actor_key, (1,), 2),
        [_q_network(critic_key) for critic_key in critic_keys],
        OPTIMIZER,
        OPTIMIZER,
        OPTIMIZER,
        buffer_size=512,
        batch_size=32,
        min_replay_size=64,
        discount=DISCOUNT,
        target_entropy=0.05,
        tau=0.05,
    )


def test_discrete_sac_solves_every_probe():
    """Discrete SAC's twin critics (their minimum) predict the probes' analytic Q-values, and
    its actor prefers the optimal action where a probe rewards one."""
    population, state = _train_population(_discrete_sac)
    learner = population.member(0).learner
    assert isinstance(learner, pr.learners.DiscreteSACLearner)
    critics = eqx.filter_vmap(lambda params: pr.learners.with_params(learner.critic, params))(
        state.learner.critic_params
    )
    values = eqx.filter_vmap(lambda critic: _on_observations(critic).q_values)(critics)
    learnt = np.min(np.asarray(values), axis=1).reshape(*SHAPE, 2)  # [members, critics, observations, 2]
    preferences = np.asarray(_on_observations(population.networks(state)).logits).reshape(*SHAPE, 2)
    _assert_solved(learnt, preferences, q_learner=True)


def _assert_solved(learnt: np.ndarray, preferences: np.ndarray, q_learner: bool) -> None:
    """Every seed's learnt values within `TOLERANCE` of the analytic ones, and its preferred action optimal."""
    failures = []
    for p, probe in enumerate(PROBES):
        for observation in np.asarray(probe.observations):
            row = int(np.flatnonzero(OBSERVATIONS[:, 0] == observation[0])[0])
            optimal_q_values = np.asarray(probe.optimal_q_values(jnp.asarray(observation), DISCOUNT))
            expected = (
                optimal_q_values if q_learner else np.asarray(probe.optimal_value(jnp.asarray(observation), DISCOUNT))
            )
            # ActionRewardProbe and ObservationActionRewardProbe reward one action.
            optimal_action = int(np.argmax(optimal_q_values)) if np.ptp(optimal_q_values) > 0 else None
            for seed in range(NUM_SEEDS):
                where = f"{PROBE_IDS[p]}, seed {seed}, observation {observation[0]:+.0f}"
                if np.max(np.abs(learnt[p, seed, row] - expected)) > TOLERANCE:
                    failures.append(f"{where}: learnt {learnt[p, seed, row]}, analytic {expected}")
                preferred = int(np.argmax(preferences[p, seed, row]))
                if optimal_action is not None and preferred != optimal_action:
                    failures.append(f"{where}: prefers action {preferred}, the optimal one is {optimal_action}")
    assert not failures, "\n".join(failures)
