"""Learning tests: every loss and learner solves Catch; CartPole and Pendulum (marker `slow`).

Several seeds train side by side in one program (`eqx.filter_vmap` over the run's
key); the thresholds are what a solved task reaches, measured on the final agent.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr


SEEDS = jax.random.split(jax.random.key(2026), 3)


def _train_and_evaluate(pipeline: pr.Anakin, policy, *, num_updates: int, eval_env, num_episodes: int = 100):
    """The final agents' mean evaluation returns, one per seed, and the training metrics."""

    def run(key):
        run_key, eval_key = jax.random.split(key)
        result = pipeline.train(pipeline.init(run_key), num_updates=num_updates)
        network = pipeline.learner.network_with(result.state.learner.params)
        evaluation = pr.evaluate(eval_env, network, policy, num_episodes=num_episodes, key=eval_key)
        return evaluation.mean_return, result.metrics

    return eqx.filter_vmap(run)(SEEDS)


# --------------------------------------------------------------------------------------
# Catch: one composed script, only the loss changes.
# --------------------------------------------------------------------------------------


CATCH_LOSSES = {
    "td-lambda-q": pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9),
    "q-learning": pr.losses.QLearningLoss(discount=0.99),
    "reinforce": pr.losses.ReinforceLoss(discount=0.99),
    "reinforce-with-baseline": pr.losses.ReinforceLoss(discount=0.99, baseline=True),
    "a2c": pr.losses.A2CLoss(discount=0.99),
    "ppo": pr.losses.PPOLoss(discount=0.99),
}


def catch_pipeline(loss: pr.losses.AbstractLoss, key, **options) -> tuple[pr.Anakin, pr.policies.AbstractPolicy]:
    """The Catch agent for any loss: the head and the acting policy follow what the loss reads."""
    env = pr.envs.Catch()
    torso_key, head_key = jax.random.split(key)
    torso = pr.networks.MLPTorso(env.observation_space.shape, (256,), key=torso_key)
    if issubclass(pr.QValues, loss.input_type):
        head, policy, greedy = (
            pr.networks.QValueHead(256, 3, key=head_key),
            pr.policies.EpsilonGreedy(0.05),
            pr.policies.Greedy(),
        )
    else:
        head = pr.networks.PolicyLogitHead(256, 3, with_value=True, key=head_key)
        policy = greedy = pr.policies.Categorical()
    learner = pr.Learner(pr.networks.FeedForwardNetwork(torso, head), policy, loss, optax.adam(1e-3), **options)
    return pr.Anakin(env, learner, num_envs=64, rollout_length=16), greedy


@pytest.mark.parametrize("name", CATCH_LOSSES)
def test_swapping_the_loss_still_learns_catch(name):
    pipeline, policy = catch_pipeline(CATCH_LOSSES[name], jax.random.key(0))
    returns, _ = _train_and_evaluate(pipeline, policy, num_updates=500, eval_env=pr.envs.Catch())
    assert np.all(np.asarray(returns) >= 0.9), returns


def test_ppo_with_epochs_and_minibatches_learns_catch():
    loss = pr.losses.PPOLoss(discount=0.99)
    pipeline, policy = catch_pipeline(loss, jax.random.key(0), num_epochs=4, num_minibatches=4)
    returns, _ = _train_and_evaluate(pipeline, policy, num_updates=150, eval_env=pr.envs.Catch())
    assert np.all(np.asarray(returns) >= 0.9), returns


def test_dqn_learns_catch():
    env = pr.envs.Catch()
    torso_key, head_key = jax.random.split(jax.random.key(0))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(env.observation_space.shape, (64,), key=torso_key),
        pr.networks.QValueHead(64, 3, key=head_key),
    )
    learner = pr.learners.DQNLearner(
        network,
        pr.losses.QLearningLoss(discount=0.99, double=True),
        optax.adam(1e-3),
        epsilon=optax.linear_schedule(1.0, 0.05, 20_000),
        buffer_size=20_000,
        batch_size=64,
        min_replay_size=1_000,
        target_update_period=100,
    )
    pipeline = pr.Anakin(env, learner, num_envs=16, rollout_length=4)
    returns, _ = _train_and_evaluate(pipeline, pr.policies.Greedy(), num_updates=1_500, eval_env=env)
    assert np.all(np.asarray(returns) >= 0.9), returns


# --------------------------------------------------------------------------------------
# CartPole-v1 (500-step episodes) and Pendulum.
# --------------------------------------------------------------------------------------


def _cartpole_actor_critic(key) -> pr.networks.FeedForwardNetwork:
    torso_key, head_key = jax.random.split(key)
    torso = pr.networks.MLPTorso((4,), (64, 64), activation=jnp.tanh, key=torso_key)
    return pr.networks.FeedForwardNetwork(torso, pr.networks.PolicyLogitHead(64, 2, with_value=True, key=head_key))


def _cartpole_separate_actor_critic(key) -> pr.networks.ActorCriticNetwork:
    actor_key, head_key, critic_key, value_key = jax.random.split(key, 4)
    return pr.networks.ActorCriticNetwork(
        pr.networks.MLPTorso((4,), (64, 64), activation=jnp.tanh, key=actor_key),
        pr.networks.PolicyLogitHead(64, 2, key=head_key),
        pr.networks.MLPTorso((4,), (64, 64), activation=jnp.tanh, key=critic_key),
        pr.networks.ValueHead(64, key=value_key),
    )


@pytest.mark.slow
def test_a2c_solves_cartpole():
    num_updates = 2_000
    optimizer = optax.chain(optax.clip_by_global_norm(5.0), optax.adam(optax.linear_schedule(3e-3, 0.0, num_updates)))
    learner = pr.Learner(
        _cartpole_separate_actor_critic(jax.random.key(0)),
        pr.policies.Categorical(),
        pr.losses.A2CLoss(discount=0.99),
        optimizer,
    )
    pipeline = pr.Anakin(pr.envs.cartpole_v1(), learner, num_envs=16, rollout_length=32)
    returns, _ = _train_and_evaluate(
        pipeline, pr.policies.Categorical(), num_updates=num_updates, eval_env=pr.envs.cartpole_v1(), num_episodes=32
    )
    assert np.all(np.asarray(returns) >= 450), returns


@pytest.mark.slow
def test_reinforce_solves_cartpole():
    # Rollouts of 500 steps, so that most episodes end inside one (only whole
    # episodes have Monte Carlo returns).
    num_updates = 200
    learner = pr.Learner(
        _cartpole_separate_actor_critic(jax.random.key(0)),
        pr.policies.Categorical(),
        pr.losses.ReinforceLoss(discount=0.99, baseline=True),
        optax.adam(optax.linear_schedule(1e-2, 0.0, num_updates)),
    )
    pipeline = pr.Anakin(pr.envs.cartpole_v1(), learner, num_envs=16, rollout_length=500)
    returns, _ = _train_and_evaluate(
        pipeline, pr.policies.Categorical(), num_updates=num_updates, eval_env=pr.envs.cartpole_v1(), num_episodes=32
    )
    assert np.all(np.asarray(returns) >= 400), returns


@pytest.mark.slow
def test_ppo_solves_cartpole():
    loss = pr.losses.PPOLoss(discount=0.99, lambda_=0.95, value_coefficient=0.02)
    optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(1e-3))
    learner = pr.Learner(
        _cartpole_actor_critic(jax.random.key(0)),
        pr.policies.Categorical(),
        loss,
        optimizer,
        num_epochs=4,
        num_minibatches=4,
    )
    pipeline = pr.Anakin(pr.envs.cartpole_v1(), learner, num_envs=8, rollout_length=128)
    returns, _ = _train_and_evaluate(
        pipeline, pr.policies.Categorical(), num_updates=400, eval_env=pr.envs.cartpole_v1(), num_episodes=32
    )
    assert np.all(np.asarray(returns) >= 450), returns


@pytest.mark.slow
def test_dqn_solves_cartpole():
    torso_key, head_key = jax.random.split(jax.random.key(0))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((4,), (120, 84), key=torso_key), pr.networks.QValueHead(84, 2, key=head_key)
    )
    learner = pr.learners.DQNLearner(
        network,
        pr.losses.QLearningLoss(discount=0.99),
        optax.adam(2.5e-4),
        epsilon=optax.linear_schedule(1.0, 0.05, 250_000),
        buffer_size=10_000,
        batch_size=128,
        min_replay_size=10_000,
        target_update_period=50,
    )
    pipeline = pr.Anakin(pr.envs.cartpole_v1(), learner, num_envs=10, rollout_length=1)
    returns, _ = _train_and_evaluate(
        pipeline, pr.policies.Greedy(), num_updates=40_000, eval_env=pr.envs.cartpole_v1(), num_episodes=32
    )
    assert np.all(np.asarray(returns) >= 450), returns


@pytest.mark.slow
def test_gaussian_ppo_solves_pendulum():
    env = pr.envs.pendulum_v1()
    torso_key, head_key = jax.random.split(jax.random.key(0))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((3,), (64, 64), activation=jnp.tanh, key=torso_key),
        pr.networks.GaussianHead(64, 1, with_value=True, key=head_key),
    )
    loss = pr.losses.PPOLoss(discount=0.95, lambda_=0.95, value_coefficient=0.05, entropy_coefficient=0.0)
    optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(1e-3))
    learner = pr.Learner(network, pr.policies.Gaussian(), loss, optimizer, num_epochs=10, num_minibatches=8)
    pipeline = pr.Anakin(env, learner, num_envs=16, rollout_length=200)
    returns, _ = _train_and_evaluate(
        pipeline, pr.policies.Gaussian(), num_updates=160, eval_env=pr.envs.pendulum_v1(), num_episodes=32
    )
    assert np.all(np.asarray(returns) >= -300), returns
