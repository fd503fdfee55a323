"""DQN: the Q-learning loss against a float64 loop, the replay buffer, target updates, epsilon, errors."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr

from . import helpers


ADAM = optax.adam(1e-3)


def _dqn(key, **kwargs) -> pr.learners.DQNLearner:
    options = dict(epsilon=0.1, buffer_size=60, batch_size=4, min_replay_size=8, target_update_period=2)
    options.update(kwargs)
    loss = options.pop("loss", pr.losses.QLearningLoss(discount=0.9))
    return pr.learners.DQNLearner(helpers.q_network(key), loss, ADAM, **options)


def _first_timesteps(num_envs: int) -> pr.TimeStep:
    return jax.vmap(lambda _: pr.TimeStep.first(jnp.zeros(helpers.OBS_SHAPE)))(jnp.arange(num_envs))


# --------------------------------------------------------------------------------------
# QLearningLoss against a float64 loop.
# --------------------------------------------------------------------------------------


def _reference_q_learning(loss, network, target_network, trajectory) -> float:
    """Mean (over transitions, masked) of half the squared n-step error, in float64."""
    timestep = trajectory.timestep

    def q_of(net):
        return np.asarray(jax.vmap(lambda o: net(o, ())[0].q_values)(timestep.observation), np.float64)

    q, target_q = q_of(network), q_of(target_network)
    reward, discount = np.asarray(timestep.reward, np.float64), np.asarray(timestep.discount, np.float64)
    is_first, is_last = np.asarray(timestep.is_first), np.asarray(timestep.is_last)
    actions, gamma, n = np.asarray(trajectory.policy_step.action), float(loss.discount), loss.n_step
    num_steps = len(actions)

    def bootstrap(t):  # the value of time step t
        action = np.argmax(q[t]) if loss.double else np.argmax(target_q[t])
        return target_q[t, action]

    total = 0.0
    for t in range(num_steps):
        if is_first[t + 1]:
            continue  # a reset step, not a transition
        target, scale, k = 0.0, 1.0, t + 1
        while True:
            target += scale * reward[k]
            scale *= gamma * discount[k]
            if is_last[k] or k - t == n or k == num_steps:
                target += scale * bootstrap(k)  # 0 after a termination
                break
            k += 1
        total += 0.5 * (target - q[t, actions[t]]) ** 2
    return total / num_steps


@pytest.mark.parametrize("n_step", [1, 3])
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_q_learning_loss_matches_a_float64_loop(n_step, double, seed):
    loss = pr.losses.QLearningLoss(discount=0.9, n_step=n_step, double=double)
    network, target_network = helpers.q_network(jax.random.key(seed)), helpers.q_network(jax.random.key(seed + 10))
    trajectory = helpers.random_trajectory(seed, 20)
    timestep = trajectory.timestep
    assert bool(jnp.any(timestep.terminated)) and bool(jnp.any(timestep.truncated))
    value, terms = loss.trajectory_loss(helpers.agent(network), trajectory, target_network)
    expected = _reference_q_learning(loss, network, target_network, trajectory)
    np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(terms["td_loss"], expected, rtol=1e-5, atol=1e-6)


def test_q_learning_loss_bootstraps_from_the_online_network_without_a_target():
    loss = pr.losses.QLearningLoss(discount=0.9)
    network = helpers.q_network(jax.random.key(0))
    trajectory = helpers.random_trajectory(3, 8)
    without, _ = loss.trajectory_loss(helpers.agent(network), trajectory)
    with_itself, _ = loss.trajectory_loss(helpers.agent(network), trajectory, network)
    np.testing.assert_allclose(without, with_itself, rtol=1e-6)
    # The targets are constants: the gradient is that of the prediction alone.
    grads = jax.grad(lambda net: loss.trajectory_loss(helpers.agent(net), trajectory)[0])(network)
    helpers.assert_all_finite(grads)


def test_huber_loss_is_quadratic_near_zero_and_linear_far_away():
    trajectory = helpers.random_trajectory(0, 8)
    network = helpers.q_network(jax.random.key(0))
    squared = pr.losses.QLearningLoss(discount=0.9)
    tight = pr.losses.QLearningLoss(discount=0.9, huber_delta=1e-3)
    loose = pr.losses.QLearningLoss(discount=0.9, huber_delta=1e6)
    np.testing.assert_allclose(
        loose.trajectory_loss(helpers.agent(network), trajectory)[0],
        squared.trajectory_loss(helpers.agent(network), trajectory)[0],
        rtol=1e-6,
    )
    assert (
        tight.trajectory_loss(helpers.agent(network), trajectory)[0]
        < squared.trajectory_loss(helpers.agent(network), trajectory)[0]
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(discount=1.5), r"discount must lie in \[0, 1\]"),
        (dict(discount=0.9, n_step=0), r"n_step must be an integer >= 1"),
        (dict(discount=0.9, huber_delta=0.0), r"huber_delta must be positive"),
    ],
)
def test_q_learning_loss_rejects_bad_hyperparameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        pr.losses.QLearningLoss(**kwargs)


# --------------------------------------------------------------------------------------
# The learner: replay, target network, epsilon.
# --------------------------------------------------------------------------------------


def test_replay_holds_each_environments_steps_in_order():
    learner = _dqn(jax.random.key(0), min_replay_size=1_000)
    state = learner.init(jax.random.key(1), _first_timesteps(3))
    first, second = helpers.random_trajectory(0, 5, 3), helpers.random_trajectory(1, 5, 3)
    for trajectory in (first, second):
        state, metrics = learner.update(state, trajectory)
        assert float(metrics.loss) == 0.0  # still filling
    timestep, policy_step = state.replay.experience
    for row in range(3):
        for k, trajectory in enumerate((first, second)):
            steps = slice(5 * k, 5 * k + 5)
            np.testing.assert_array_equal(timestep.observation[row, steps], trajectory.timestep.observation[:5, row])
            np.testing.assert_array_equal(policy_step.action[row, steps], trajectory.policy_step.action[:, row])
    assert int(state.num_transitions) == 30 and int(state.num_gradient_steps) == 0


@pytest.mark.parametrize(("period", "tau"), [(2, 1.0), (1, 0.25)])
def test_target_network_follows_the_online_one(period, tau):
    learner = _dqn(jax.random.key(0), target_update_period=period, tau=tau, min_replay_size=3)
    state = learner.init(jax.random.key(1), _first_timesteps(3))
    trajectories = [helpers.random_trajectory(seed, 5, 3) for seed in range(4)]
    for trajectory in trajectories:
        before = state
        state, _ = eqx.filter_jit(learner.update)(state, trajectory)
        expected = optax.incremental_update(state.params, before.target_params, tau)
        if int(state.num_gradient_steps) % period:
            expected = before.target_params
        helpers.assert_trees_close(state.target_params, expected, rtol=1e-6, atol=1e-7)
    assert int(state.num_gradient_steps) == 4


def test_epsilon_follows_its_schedule_over_transitions():
    schedule = optax.linear_schedule(1.0, 0.1, 30)
    learner = _dqn(jax.random.key(0), epsilon=schedule)
    state = learner.init(jax.random.key(1), _first_timesteps(3))
    assert float(learner.agent(state).policy.epsilon) == 1.0
    state, _ = learner.update(state, helpers.random_trajectory(0, 5, 3))
    np.testing.assert_allclose(learner.agent(state).policy.epsilon, schedule(15), rtol=1e-6)
    assert float(learner.policy.epsilon) == 1.0


def test_dqn_learner_update_is_jit_equal_to_eager():
    learner = _dqn(jax.random.key(0), min_replay_size=3, gradient_steps=2)
    state = learner.init(jax.random.key(1), _first_timesteps(3))
    trajectory = helpers.random_trajectory(0, 5, 3)
    eager = learner.update(state, trajectory)
    helpers.assert_trees_close(eqx.filter_jit(learner.update)(state, trajectory), eager, rtol=1e-5, atol=1e-6)
    assert float(eager[1].loss) > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(batch_size=0), r"batch_size must be a positive integer"),
        (dict(sequence_length=1), r"sequence_length must be an integer >= 2"),
        (dict(tau=1.5), r"tau must lie in \[0, 1\]"),
        (dict(epsilon=-0.1), r"epsilon must lie in \[0, 1\]"),
        (dict(loss=pr.losses.A2CLoss(discount=0.9)), r"A2CLoss is not a Q-value loss"),
        (
            dict(buffer_size=3, batch_size=4),
            r"DQNLearner: buffer_size=3 is smaller than batch_size=4: the replay buffer holds fewer transitions "
            r"than one batch draws.* Make buffer_size .* at least batch_size",
        ),
    ],
)
def test_dqn_learner_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _dqn(jax.random.key(0), **kwargs)


def test_dqn_learner_takes_a_buffer_that_holds_one_batch():
    assert _dqn(jax.random.key(0), buffer_size=4, batch_size=4).replay.buffer_size == 4


def test_dqn_learner_rejects_a_buffer_too_small_for_its_sequences():
    learner = _dqn(jax.random.key(0), buffer_size=8, sequence_length=3)
    with pytest.raises(ValueError, match=r"leaves 2 steps per environment, fewer than sequence_length=3"):
        learner.init(jax.random.key(0), _first_timesteps(4))
