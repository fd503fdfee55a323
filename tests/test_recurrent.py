"""Recurrent networks, the previous-action-and-reward input, the memory task and the rlplay actor."""

import equinox as eqx
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr
from podrace.executors.actor import RlplayActor
from podrace.executors.host import GymnasiumCollector, evaluate_on_host

from . import helpers


RECURRENT = [
    name for name in helpers.NETWORKS if jax.tree.leaves(helpers.NETWORKS[name](jax.random.key(0)).initial_carry())
]
NUM_STEPS = 7


def _unroll(network, observations, carry, is_first):
    return network.unroll(observations, carry, is_first)


def _image(observations):
    return observations.observation if isinstance(observations, pr.ObservationActionReward) else observations


def _last_output_gradient(network, observations, is_first):
    """d(sum of the last step's output) / d(first observation), unrolled from the initial carry."""

    def last_output(first_image):
        observed = eqx.tree_at(_image, observations, _image(observations).at[0].set(first_image))
        outputs, _ = network.unroll(observed, network.initial_carry(), is_first)
        return sum(jnp.sum(leaf[-1]) for leaf in jax.tree.leaves(outputs))

    return jax.grad(last_output)(_image(observations)[0])


UNROLL = helpers.Compiled(_unroll)
LAST_OUTPUT_GRADIENT = helpers.Compiled(_last_output_gradient)


def test_registry_covers_both_cores_and_the_previous_action_reward_input():
    networks = [helpers.NETWORKS[name](jax.random.key(0)) for name in RECURRENT]
    assert {type(network.core) for network in networks} == {pr.networks.GRUCore, pr.networks.LSTMCore}
    assert any(network.reads_previous_action_reward for network in networks)


@pytest.mark.parametrize("name", RECURRENT)
def test_carry_is_reset_exactly_where_is_first(name):
    network = helpers.NETWORKS[name](jax.random.key(0))
    observations = helpers.random_observations(network, 0, NUM_STEPS)
    is_first = jnp.asarray([False, False, False, True, False, False, False])
    carries = [helpers.index(helpers.random_carry(network, seed, 1), 0) for seed in (1, 2)]
    (outputs_a, _), (outputs_b, _) = (UNROLL(network, observations, carry, is_first) for carry in carries)
    # Before the reset every step depends on the carry it started from: no other reset.
    for t in range(3):
        helpers.assert_trees_differ(helpers.index(outputs_a, t), helpers.index(outputs_b, t))
    # From the reset on, the start is forgotten, and the outputs are those of a fresh unroll.
    suffix = jax.tree.map(lambda x: x[3:], observations)
    fresh, _ = UNROLL(network, suffix, network.initial_carry(), is_first[3:])
    for outputs in (outputs_a, outputs_b):
        helpers.assert_trees_close(jax.tree.map(lambda x: x[3:], outputs), fresh, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", RECURRENT)
def test_gradient_flows_through_the_whole_rollout_and_stops_at_a_reset(name):
    network = helpers.NETWORKS[name](jax.random.key(0))
    observations = helpers.random_observations(network, 3, NUM_STEPS)
    no_reset = jnp.zeros(NUM_STEPS, bool)
    through = LAST_OUTPUT_GRADIENT(network, observations, no_reset)
    assert float(jnp.max(jnp.abs(through))) > 0
    cut = LAST_OUTPUT_GRADIENT(network, observations, no_reset.at[4].set(True))
    np.testing.assert_array_equal(cut, 0.0)


@pytest.mark.parametrize("core", ["gru", "lstm"])
def test_cores_equal_the_equinox_cells(core):
    made = helpers.CORES[core](5, 4, key=jax.random.key(0))
    features = helpers.normal(0, (5,))
    carry = jax.tree.map(lambda x: jnp.tanh(helpers.normal(1, x.shape)), made.initial_carry())
    output, next_carry = made(features, carry)
    expected = made.cell(features, carry)
    helpers.assert_trees_close(next_carry, expected, rtol=1e-6, atol=1e-6)
    helpers.assert_trees_close(output, expected if core == "gru" else expected[0], rtol=1e-6, atol=1e-6)


def test_recurrent_network_checks_its_sizes_and_its_observations():
    keys = jax.random.split(jax.random.key(0), 3)
    torso = pr.networks.MLPTorso((4,), (8,), key=keys[0])
    head = pr.networks.PolicyLogitHead(6, 3, key=keys[1])
    with pytest.raises(ValueError, match="input_size=8"):
        pr.networks.RecurrentNetwork(torso, pr.networks.GRUCore(7, 6, key=keys[2]), head)
    with pytest.raises(ValueError, match=r"plus 4 for the previous action and reward.*input_size=12"):
        pr.networks.RecurrentNetwork(torso, pr.networks.GRUCore(8, 6, key=keys[2]), head, previous_action_reward=True)
    with pytest.raises(ValueError, match="in_size=5"):
        pr.networks.RecurrentNetwork(torso, pr.networks.LSTMCore(8, 5, key=keys[2]), head)
    with pytest.raises(ValueError, match="hidden_size"):
        pr.networks.GRUCore(8, 0, key=keys[2])
    reads = pr.networks.RecurrentNetwork(
        torso, pr.networks.GRUCore(12, 6, key=keys[2]), head, previous_action_reward=True
    )
    with pytest.raises(TypeError, match="PreviousActionReward"):
        reads(jnp.zeros(4), reads.initial_carry())
    plain = pr.networks.RecurrentNetwork(torso, pr.networks.GRUCore(8, 6, key=keys[2]), head)
    observation = pr.ObservationActionReward(jnp.zeros(4), jnp.asarray(1), jnp.asarray(0.5))
    with pytest.raises(TypeError, match="previous_action_reward=True"):
        plain(observation, plain.initial_carry())
    # Inside a pipeline the error comes at construction.
    env = pr.envs.Catch(rows=3, columns=3)
    reads = helpers.recurrent_network(jax.random.key(0), (3, 3, 1), previous_action_reward=True)
    learner = pr.Learner(reads, pr.policies.Categorical(), pr.losses.A2CLoss(discount=0.99), optax.adam(1e-3))
    with pytest.raises(ValueError, match="PreviousActionReward"):
        pr.Anakin(env, learner, num_envs=2, rollout_length=4)
    plain = helpers.recurrent_network(jax.random.key(0), (3, 3, 1))
    learner = pr.Learner(plain, pr.policies.Categorical(), pr.losses.A2CLoss(discount=0.99), optax.adam(1e-3))
    with pytest.raises(ValueError, match="previous_action_reward=True"):
        pr.Anakin(pr.envs.PreviousActionReward(env), learner, num_envs=2, rollout_length=4)


def test_previous_action_reward_wrapper():
    env = pr.envs.AutoReset(pr.envs.PreviousActionReward(pr.envs.Catch(rows=3, columns=3)))
    pr.envs.check_env(env)
    state, timestep = env.reset(jax.random.key(0))
    np.testing.assert_array_equal(timestep.observation.action, 0)
    np.testing.assert_array_equal(timestep.observation.reward, 0.0)
    for action in (2, 0):
        state, timestep = env.step(state, jnp.asarray(action), jax.random.key(1))
        assert int(timestep.observation.action) == action
        assert float(timestep.observation.reward) == float(timestep.reward)
    assert bool(timestep.is_last) and float(timestep.reward) != 0.0
    state, timestep = env.step(state, jnp.asarray(2), jax.random.key(2))
    assert bool(timestep.is_first)
    assert int(timestep.observation.action) == 0 and float(timestep.observation.reward) == 0.0
    space = env.observation_space
    assert bool(space.contains(timestep.observation)) and not bool(space.contains(timestep.observation.observation))


def _play(env, actions):
    state, timestep = env.reset(jax.random.key(3))
    steps = [timestep]
    for action in actions:
        state, timestep = env.step(state, jnp.asarray(action, jnp.int32), jax.random.key(0))
        steps.append(timestep)
    return state, steps


@pytest.mark.parametrize("delay", [0, 3])
def test_repeat_first_by_hand(delay):
    env = pr.envs.RepeatFirst(num_symbols=3, delay=delay)
    pr.envs.check_env(env)
    state, steps = _play(env, [0] * (delay + 1))
    symbol = int(state.symbol)
    np.testing.assert_array_equal(steps[0].observation, np.eye(4)[symbol] * (np.arange(4) < 3))
    for timestep in steps[1 : delay + 1]:
        np.testing.assert_array_equal(timestep.observation, 0.0)
        assert not bool(timestep.is_last) and float(timestep.reward) == 0.0
    np.testing.assert_array_equal(steps[delay + 1].observation, [0, 0, 0, 1])
    for answer, reward in ((symbol, 1.0), ((symbol + 1) % 3, 0.0)):
        _, steps = _play(env, [answer] * (delay + 2))
        assert float(steps[-1].reward) == reward and bool(steps[-1].terminated)
        assert not any(bool(t.is_last) for t in steps[:-1])


def test_repeat_first_delay_is_an_array_leaf():
    delays = jnp.asarray([0, 2, 5])
    envs = eqx.filter_vmap(lambda d: pr.envs.RepeatFirst(delay=d))(delays)

    def episode_length(env):
        state, _ = env.reset(jax.random.key(0))

        def step(carry, _):
            state, done, length = carry
            state, timestep = env.step(state, jnp.asarray(0), jax.random.key(0))
            return (state, done | timestep.is_last, length + ~done), None

        (_, _, length), _ = jax.lax.scan(step, (state, jnp.asarray(False), jnp.asarray(0)), length=10)
        return length

    np.testing.assert_array_equal(eqx.filter_vmap(episode_length)(envs), delays + 2)
    with pytest.raises(ValueError, match="num_symbols"):
        pr.envs.RepeatFirst(num_symbols=1)
    with pytest.raises(ValueError, match="delay"):
        pr.envs.RepeatFirst(delay=-1)


# --------------------------------------------------------------------------------------
# Rollouts keep the carry each trajectory starts from: the losses' unroll reproduces
# what the agent computed while acting.
# --------------------------------------------------------------------------------------


def _behaviour_log_probs_are_reproduced(agent: pr.Agent, trajectory: pr.Trajectory) -> None:
    def per_env(timestep, policy_step, carry):
        traj = pr.Trajectory(timestep, policy_step, carry)
        return agent.log_prob_and_entropy(agent.outputs(traj), policy_step.action)[0]

    recomputed = jax.vmap(per_env, in_axes=(1, 1, 0), out_axes=1)(
        trajectory.timestep, trajectory.policy_step, trajectory.carry
    )
    np.testing.assert_allclose(recomputed, trajectory.policy_step.log_prob, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["gru-ppo-two-epochs-three-minibatches", "lstm-a2c-previous-action-reward"])
def test_anakin_rollouts_keep_their_initial_carry_across_updates(name):
    case = helpers.LEARNERS[name]
    learner = case.make(jax.random.key(0))
    env = pr.envs.AutoReset(case.env())
    state = pr.executors.anakin.init_state(env, learner, jax.random.key(1), num_envs=3)
    agent = learner.agent(state.learner)
    envs, first, _ = pr.executors.anakin.rollout(env, agent, state.envs, 5)
    _, second, _ = pr.executors.anakin.rollout(env, agent, envs, 5)
    # The second rollout starts from the carry the first one ended with (not a fresh one).
    helpers.assert_trees_close(second.carry, envs.carry, rtol=0, atol=0)
    helpers.assert_trees_differ(second.carry, first.carry)
    for trajectory in (first, second):
        _behaviour_log_probs_are_reproduced(agent, trajectory)


@pytest.mark.parametrize("previous_action_reward", [False, True])
def test_host_collector_keeps_the_carry_of_each_rollout(previous_action_reward):
    envs = gymnasium.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync", max_episode_steps=6)
    network = helpers.recurrent_network(jax.random.key(0), (4,), 2, previous_action_reward=previous_action_reward)
    learner = pr.Learner(network, pr.policies.Categorical(), pr.losses.A2CLoss(discount=0.99), optax.adam(1e-3))
    collector = GymnasiumCollector(envs, learner, rollout_length=8, key=jax.random.key(1), seed=0)
    agent = learner.agent(learner.init(jax.random.key(2)))
    first, _ = collector.collect(agent)
    second, _ = collector.collect(agent)
    helpers.assert_trees_differ(second.carry, first.carry)
    for trajectory in (first, second):
        _behaviour_log_probs_are_reproduced(agent, trajectory)
    if previous_action_reward:  # as PreviousActionReward gives them on device
        timestep = second.timestep
        observed = timestep.observation
        first_steps = np.asarray(timestep.is_first[1:])
        np.testing.assert_array_equal(observed.action[1:], np.where(first_steps, 0, second.policy_step.action))
        np.testing.assert_array_equal(observed.reward, np.where(timestep.is_first, 0.0, timestep.reward))
        assert first_steps.any() and np.all(observed.reward[1:][~first_steps] == 1.0)
        returns = evaluate_on_host(
            envs, network, pr.policies.Categorical(), num_episodes=3, key=jax.random.key(0), max_steps=20
        )
        assert np.all(np.asarray(returns.returns) > 0)
    collector.close()


def test_dqn_refuses_recurrent_networks():
    network = helpers.recurrent_network(jax.random.key(0), output_type=pr.QValues)
    with pytest.raises(ValueError, match="recurrent"):
        pr.learners.DQNLearner(
            network,
            pr.losses.QLearningLoss(discount=0.99),
            optax.adam(1e-3),
            epsilon=0.1,
            buffer_size=16,
            batch_size=4,
            min_replay_size=4,
            target_update_period=2,
        )


def test_population_of_recurrent_members_equals_each_member_alone():
    def member(key):
        learner = helpers.recurrent_learner(key, pr.losses.PPOLoss(discount=0.99), num_minibatches=2)
        return pr.Anakin(
            pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS), learner, num_envs=2, rollout_length=5
        )

    keys = jax.random.split(jax.random.key(0), 2)
    population = pr.Population(member, keys)
    result = population.train(population.init(jax.random.key(1)), num_updates=3)
    for i in range(2):
        alone = member(keys[i])
        run = alone.train(alone.init(jax.random.split(jax.random.key(1), 2)[i]), num_updates=3)
        helpers.assert_trees_close(
            helpers.index(result.state.learner.params, i), run.state.learner.params, rtol=1e-5, atol=1e-6
        )


# --------------------------------------------------------------------------------------
# The rlplay actor.
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["gru-ppo-two-epochs-three-minibatches", "lstm-a2c-previous-action-reward", "gru-td-lambda-q"]
)
def test_rlplay_actor_equals_the_network_called_directly(name):
    case = helpers.LEARNERS[name]
    learner = case.make(jax.random.key(0))
    network = learner.network
    trajectory = case.random_trajectory(network, 0, NUM_STEPS, 3)
    agent = learner.agent(learner.init(jax.random.key(0)))
    actor = RlplayActor(agent, jax.random.key(4))
    timestep = trajectory.timestep
    reads = network.reads_previous_action_reward
    observations = timestep.observation.observation if reads else timestep.observation
    hx = trajectory.carry
    # The previous actions and rewards the trajectory saw, but arbitrary where an episode
    # starts: the actor must ignore them there.
    if reads:
        previous_actions, rewards = timestep.observation.action, timestep.observation.reward
    else:
        previous_actions = jnp.concatenate([trajectory.policy_step.action[:1], trajectory.policy_step.action])
        rewards = timestep.reward
    previous_actions = jnp.where(timestep.is_first, 2, previous_actions)
    rewards = jnp.where(timestep.is_first, 7.0, rewards)
    expected = jax.vmap(
        lambda ts, carry: network.unroll(ts.observation, carry, ts.is_first)[0], in_axes=(1, 0), out_axes=1
    )(timestep, trajectory.carry)
    for t in range(NUM_STEPS + 1):
        value = actor.value(observations[t], previous_actions[t], rewards[t], timestep.is_first[t], hx)
        action, hx, info = actor.step(observations[t], previous_actions[t], rewards[t], timestep.is_first[t], hx)
        output = helpers.index(expected, t)
        if isinstance(output, pr.QValues):
            np.testing.assert_allclose(info["logits"], output.q_values, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(info["value"], np.max(output.q_values, axis=-1), rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_allclose(info["logits"], output.logits, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(info["value"], output.value, rtol=1e-5, atol=1e-6)
            log_probs = jax.vmap(lambda logits, a: jax.nn.log_softmax(logits)[a])(output.logits, action)
            np.testing.assert_allclose(info["log_prob"], log_probs, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(value, info["value"], rtol=1e-6, atol=1e-6)
        assert action.shape == (3,) and action.dtype == jnp.int32


def test_rlplay_actor_reset_load_and_randomness():
    network = helpers.recurrent_network(jax.random.key(0))
    agent = pr.Agent(network, pr.policies.Categorical())
    actor = RlplayActor(agent, jax.random.key(0))
    hx = helpers.random_carry(network, 0, 4)
    reset = actor.reset(2, hx)
    np.testing.assert_array_equal(reset[2], 0.0)
    np.testing.assert_array_equal(np.delete(np.asarray(reset), 2, axis=0), np.delete(np.asarray(hx), 2, axis=0))
    helpers.assert_trees_close(actor.reset([0, 2], hx), actor.reset(np.asarray([True, False, True, False]), hx))
    helpers.assert_trees_close(actor.initial_hx(4), jnp.zeros((4, 6)))
    with pytest.raises(ValueError, match="shape"):
        actor.reset(np.ones(3, bool), hx)
    # Each step draws new actions; a new actor with the same key repeats them.
    observation, fin = helpers.normal(0, (64, *helpers.OBS_SHAPE)), jnp.zeros(64, bool)
    zeros, hx = jnp.zeros(64, jnp.int32), helpers.random_carry(network, 1, 64)
    first, _, _ = actor.step(observation, zeros, zeros, fin, hx)
    second, _, _ = actor.step(observation, zeros, zeros, fin, hx)
    assert not np.array_equal(first, second)
    again, _, _ = RlplayActor(agent, jax.random.key(0)).step(observation, zeros, zeros, fin, hx)
    np.testing.assert_array_equal(first, again)
    # Loading new parameters changes what it computes; a different structure is refused.
    other = pr.Agent(helpers.recurrent_network(jax.random.key(1)), pr.policies.Categorical())
    before = actor.value(observation, zeros, zeros, fin, hx)
    actor.load(other)
    helpers.assert_trees_differ(actor.value(observation, zeros, zeros, fin, hx), before)
    with pytest.raises(ValueError, match="structure"):
        actor.load(pr.Agent(helpers.logit_network(jax.random.key(0)), pr.policies.Categorical()))
