"""Learning tests: every loss and learner solves Catch; CartPole, Pendulum and memory tasks (marker `slow`).

Each test trains ten seeds, 0 to 9, side by side in one program (`eqx.filter_vmap`
over `jax.random.key(seed)`, which draws the network's initial parameters, the run and
the evaluation), and asserts that at least nine of the ten final agents reach what a
solved task reaches: settings that hold on seeds nobody chose, not on a few picked ones.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr
from podrace.executors.actor import RlplayActor


NUM_SEEDS = 10
MIN_SOLVED = 9


def _train_and_evaluate(
    make_pipeline: Callable[[jax.Array], pr.Anakin],
    policy: pr.policies.AbstractPolicy,
    *,
    num_updates: int,
    eval_env: pr.envs.AbstractEnv,
    num_episodes: int = 100,
) -> np.ndarray:
    """The final agents' mean evaluation returns for seeds 0 to 9.

    `make_pipeline` builds a seed's pipeline, network included, from a key; all seeds
    run as one compiled program.
    """

    def run(key):
        network_key, run_key, eval_key = jax.random.split(key, 3)
        pipeline = make_pipeline(network_key)
        result = pipeline.train(pipeline.init(run_key), num_updates=num_updates)
        network = pipeline.learner.network_at(result.state.learner)
        return pr.evaluate(eval_env, network, policy, num_episodes=num_episodes, key=eval_key).mean_return

    keys = jax.vmap(jax.random.key)(jnp.arange(NUM_SEEDS))
    return np.asarray(eqx.filter_vmap(run)(keys))


def _assert_solved(returns: np.ndarray, threshold: float) -> None:
    solved = int(np.sum(returns >= threshold))
    per_seed = ", ".join(f"{seed}: {value:.3g}" for seed, value in enumerate(returns))
    assert solved >= MIN_SOLVED, f"{solved}/{NUM_SEEDS} seeds reach {threshold} (returns by seed: {per_seed})"


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
    "vtrace": pr.losses.VTraceLoss(discount=0.99),
}


def _acts_on_q_values(loss: pr.losses.AbstractLoss) -> bool:
    return issubclass(pr.QValues, loss.input_type)


def catch_pipeline(loss: pr.losses.AbstractLoss, key, **options) -> pr.Anakin:
    """The Catch agent for any loss: the head and the acting policy follow what the loss reads."""
    env = pr.envs.Catch()
    torso_key, head_key = jax.random.split(key)
    torso = pr.networks.MLPTorso(env.observation_space.shape, (256,), key=torso_key)
    if _acts_on_q_values(loss):
        head, policy = pr.networks.QValueHead(256, 3, key=head_key), pr.policies.EpsilonGreedy(0.05)
    else:
        head, policy = pr.networks.PolicyLogitHead(256, 3, with_value=True, key=head_key), pr.policies.Categorical()
    learner = pr.Learner(pr.networks.FeedForwardNetwork(torso, head), policy, loss, optax.adam(1e-3), **options)
    return pr.Anakin(env, learner, num_envs=64, rollout_length=16)


def _catch_evaluation_policy(loss: pr.losses.AbstractLoss) -> pr.policies.AbstractPolicy:
    """The policy the final agent is evaluated with."""
    return pr.policies.Greedy() if _acts_on_q_values(loss) else pr.policies.Categorical()


@pytest.mark.parametrize("name", CATCH_LOSSES)
def test_swapping_the_loss_still_learns_catch(name):
    loss = CATCH_LOSSES[name]
    returns = _train_and_evaluate(
        lambda key: catch_pipeline(loss, key), _catch_evaluation_policy(loss), num_updates=500, eval_env=pr.envs.Catch()
    )
    _assert_solved(returns, 0.9)


def test_ppo_with_epochs_and_minibatches_learns_catch():
    loss = pr.losses.PPOLoss(discount=0.99)
    returns = _train_and_evaluate(
        lambda key: catch_pipeline(loss, key, num_epochs=4, num_minibatches=4),
        pr.policies.Categorical(),
        num_updates=150,
        eval_env=pr.envs.Catch(),
    )
    _assert_solved(returns, 0.9)


def test_dqn_learns_catch():
    env = pr.envs.Catch()

    def make_pipeline(key):
        torso_key, head_key = jax.random.split(key)
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
        return pr.Anakin(env, learner, num_envs=16, rollout_length=4)

    returns = _train_and_evaluate(make_pipeline, pr.policies.Greedy(), num_updates=1_500, eval_env=env)
    _assert_solved(returns, 0.9)


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


def _train_on_cartpole(
    make_pipeline: Callable[[jax.Array], pr.Anakin], policy: pr.policies.AbstractPolicy, *, num_updates: int
) -> np.ndarray:
    return _train_and_evaluate(
        make_pipeline, policy, num_updates=num_updates, eval_env=pr.envs.cartpole_v1(), num_episodes=32
    )


@pytest.mark.slow
def test_a2c_solves_cartpole():
    num_updates = 2_000

    def make_pipeline(key):
        optimizer = optax.chain(
            optax.clip_by_global_norm(5.0), optax.adam(optax.linear_schedule(3e-3, 0.0, num_updates))
        )
        learner = pr.Learner(
            _cartpole_separate_actor_critic(key),
            pr.policies.Categorical(),
            pr.losses.A2CLoss(discount=0.99),
            optimizer,
        )
        return pr.Anakin(pr.envs.cartpole_v1(), learner, num_envs=16, rollout_length=32)

    _assert_solved(_train_on_cartpole(make_pipeline, pr.policies.Categorical(), num_updates=num_updates), 450)


@pytest.mark.slow
def test_reinforce_solves_cartpole():
    # Rollouts of 500 steps, so that most episodes end inside one (only whole
    # episodes have Monte Carlo returns).
    num_updates = 200

    def make_pipeline(key):
        learner = pr.Learner(
            _cartpole_separate_actor_critic(key),
            pr.policies.Categorical(),
            pr.losses.ReinforceLoss(discount=0.99, baseline=True),
            optax.adam(optax.linear_schedule(1e-2, 0.0, num_updates)),
        )
        return pr.Anakin(pr.envs.cartpole_v1(), learner, num_envs=16, rollout_length=500)

    _assert_solved(_train_on_cartpole(make_pipeline, pr.policies.Categorical(), num_updates=num_updates), 450)


@pytest.mark.slow
def test_ppo_solves_cartpole():
    def make_pipeline(key):
        learner = pr.Learner(
            _cartpole_actor_critic(key),
            pr.policies.Categorical(),
            pr.losses.PPOLoss(discount=0.99, lambda_=0.95, value_coefficient=0.02),
            optax.chain(optax.clip_by_global_norm(0.5), optax.adam(1e-3)),
            num_epochs=4,
            num_minibatches=4,
        )
        return pr.Anakin(pr.envs.cartpole_v1(), learner, num_envs=8, rollout_length=128)

    _assert_solved(_train_on_cartpole(make_pipeline, pr.policies.Categorical(), num_updates=400), 450)


@pytest.mark.slow
def test_dqn_solves_cartpole():
    # CleanRL's DQN for CartPole (500k environment steps, one gradient step per 10, the
    # target copied every 500) with the learning rate annealed to 0, which steadies the
    # final agent: at a constant rate one seed in ten or twenty ends below 450.
    num_updates = 50_000

    def make_pipeline(key):
        torso_key, head_key = jax.random.split(key)
        network = pr.networks.FeedForwardNetwork(
            pr.networks.MLPTorso((4,), (120, 84), key=torso_key), pr.networks.QValueHead(84, 2, key=head_key)
        )
        learner = pr.learners.DQNLearner(
            network,
            pr.losses.QLearningLoss(discount=0.99),
            optax.adam(optax.linear_schedule(2.5e-4, 0.0, num_updates)),
            epsilon=optax.linear_schedule(1.0, 0.05, 250_000),
            buffer_size=10_000,
            batch_size=128,
            min_replay_size=10_000,
            target_update_period=50,
        )
        return pr.Anakin(pr.envs.cartpole_v1(), learner, num_envs=10, rollout_length=1)

    _assert_solved(_train_on_cartpole(make_pipeline, pr.policies.Greedy(), num_updates=num_updates), 450)


@pytest.mark.slow
def test_gaussian_ppo_solves_pendulum():
    env = pr.envs.pendulum_v1()

    def make_pipeline(key):
        torso_key, head_key = jax.random.split(key)
        network = pr.networks.FeedForwardNetwork(
            pr.networks.MLPTorso((3,), (64, 64), activation=jnp.tanh, key=torso_key),
            pr.networks.GaussianHead(64, 1, with_value=True, key=head_key),
        )
        loss = pr.losses.PPOLoss(discount=0.95, lambda_=0.95, value_coefficient=0.05, entropy_coefficient=0.0)
        optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(1e-3))
        learner = pr.Learner(network, pr.policies.Gaussian(), loss, optimizer, num_epochs=10, num_minibatches=8)
        return pr.Anakin(env, learner, num_envs=16, rollout_length=200)

    returns = _train_and_evaluate(
        make_pipeline, pr.policies.Gaussian(), num_updates=160, eval_env=pr.envs.pendulum_v1(), num_episodes=32
    )
    _assert_solved(returns, -300)


# --------------------------------------------------------------------------------------
# Memory: recurrent agents, on device and through the rlplay actor on the host.
# --------------------------------------------------------------------------------------


def _memory_network(key, observation_size: int, num_actions: int, *, recurrent: bool) -> pr.networks.AbstractNetwork:
    """A 32-unit MLP torso and a policy head with a value, with a 32-unit GRU between them if `recurrent`."""
    torso_key, core_key, head_key = jax.random.split(key, 3)
    torso = pr.networks.MLPTorso((observation_size,), (32,), key=torso_key)
    head = pr.networks.PolicyLogitHead(32, num_actions, with_value=True, key=head_key)
    if not recurrent:
        return pr.networks.FeedForwardNetwork(torso, head)
    return pr.networks.RecurrentNetwork(torso, pr.networks.GRUCore(32, 32, key=core_key), head)


def _memory_learner(network: pr.networks.AbstractNetwork) -> pr.Learner:
    # Without advantage normalisation: once every episode earns 1, normalising would blow
    # the advantages' noise up to unit size and unsettle the solved policy.
    loss = pr.losses.PPOLoss(discount=0.99, normalize_advantages=False)
    return pr.Learner(network, pr.policies.Categorical(), loss, optax.adam(3e-3), num_epochs=2, num_minibatches=2)


REPEAT_FIRST = pr.envs.RepeatFirst(num_symbols=4, delay=4)
NUM_MEMORY_UPDATES = 400


def _train_on_repeat_first(*, recurrent: bool) -> np.ndarray:
    def make_pipeline(key):
        network = _memory_network(key, 5, 4, recurrent=recurrent)
        return pr.Anakin(REPEAT_FIRST, _memory_learner(network), num_envs=16, rollout_length=24)

    return _train_and_evaluate(make_pipeline, pr.policies.Mode(), num_updates=NUM_MEMORY_UPDATES, eval_env=REPEAT_FIRST)


@pytest.mark.slow
def test_recurrent_ppo_solves_repeat_first_where_feed_forward_ppo_cannot():
    # The query looks the same whatever the symbol: without memory the expected return is
    # 1/4 (the chance of naming the symbol), with memory 1.
    _assert_solved(_train_on_repeat_first(recurrent=True), 0.9)
    feed_forward = _train_on_repeat_first(recurrent=False)
    assert np.all(feed_forward < 0.5), f"feed-forward PPO returns by seed: {np.round(feed_forward, 3)}"


@eqx.filter_jit
def _update(learner: pr.Learner, state: pr.LearnerState, trajectory: pr.Trajectory):
    return learner.update(state, trajectory)


def _train_on_memory_chain_through_the_rlplay_actor(seed: int, *, num_updates: int) -> float:
    """GRU-PPO on gymnax's MemoryChain, collected by a host loop that acts through
    `RlplayActor` as an rlplay sampler would; the learner updates on each rollout.

    Returns the trained agent's mean evaluation return, acting on its most probable
    actions (+1 when it repeats the context bit, -1 otherwise).
    """
    num_envs, rollout_length = 16, 24
    env = pr.envs.AutoReset(pr.envs.GymnaxEnv.make("MemoryChain-bsuite"))
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    network_key, init_key, actor_key, env_key, eval_key = jax.random.split(jax.random.key(seed), 5)
    learner = _memory_learner(_memory_network(network_key, 3, 2, recurrent=True))
    state = learner.init(init_key)
    actor = RlplayActor(learner.agent(state), actor_key)
    env_state, timestep = reset(jax.random.split(env_key, num_envs))
    previous_action, hx = jnp.zeros(num_envs, jnp.int32), actor.initial_hx(num_envs)
    for index in range(num_updates):
        start_hx, timesteps, policy_steps = hx, [timestep], []
        step_keys = jax.random.split(jax.random.fold_in(env_key, index), rollout_length * num_envs)
        for t in range(rollout_length):
            action, hx, info = actor.step(timestep.observation, previous_action, timestep.reward, timestep.is_first, hx)
            policy_steps.append(pr.PolicyStep(action, info["log_prob"], info["entropy"]))
            env_state, timestep = step(env_state, action, step_keys[t * num_envs : (t + 1) * num_envs])
            timesteps.append(timestep)
            previous_action = action
        stacked = (jax.tree.map(lambda *x: jnp.stack(x), *steps) for steps in (timesteps, policy_steps))
        state, _ = _update(learner, state, pr.Trajectory(*stacked, start_hx))
        actor.load(learner.agent(state))
    network = learner.network_at(state)
    bare = pr.envs.GymnaxEnv.make("MemoryChain-bsuite")
    return float(pr.evaluate(bare, network, pr.policies.Mode(), num_episodes=100, key=eval_key).mean_return)


@pytest.mark.slow
def test_recurrent_ppo_solves_memory_chain_through_the_rlplay_actor():
    # Context bit shown first, answer 5 steps later: +1 if it repeats the bit, -1 if not
    # (0 expected without memory).
    returns = np.asarray([_train_on_memory_chain_through_the_rlplay_actor(seed, num_updates=200) for seed in range(10)])
    _assert_solved(returns, 0.9)
