"""Ray actors for host environments: trajectories as in process, the lag schedule, faults, gradient workers.

One local Ray cluster (2 CPUs) serves the module; each pool has 2 actors of 1 CPU, so a
test closes its pool before the next one starts.
"""

import functools
import logging
import warnings

import equinox as eqx
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr
from podrace.executors.host import GymnasiumCollector, evaluate_on_host

from . import helpers


ray = pytest.importorskip("ray")
ray_actors = pytest.importorskip("podrace.executors.ray_actors")

NUM_ACTORS = 2
NUM_ENVS = 2  # per actor
ROLLOUT = 6
SEED = 5
MAX_EPISODE_STEPS = 5  # short episodes: truncations inside every rollout


@pytest.fixture(scope="module", autouse=True)
def ray_cluster():
    with warnings.catch_warnings():
        # Ray starts its processes by fork and exec, and JAX warns at every fork once its
        # threads run (earlier test modules start them); exec leaves none of them behind.
        warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    yield
    ray.shutdown()


def _learner(*, hidden: int = 16, loss: pr.losses.AbstractLoss | None = None, optimizer=None, **kwargs) -> pr.Learner:
    torso_key, head_key = jax.random.split(jax.random.key(0))
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((4,), (hidden,), activation=jnp.tanh, key=torso_key),
        pr.networks.PolicyLogitHead(hidden, 2, with_value=True, key=head_key),
    )
    return pr.Learner(
        network,
        pr.policies.Categorical(),
        loss or pr.losses.A2CLoss(discount=0.99),
        optimizer or optax.adam(1e-2),
        **kwargs,
    )


def _pool(kind, learner: pr.Learner, **kwargs):
    options = dict(num_actors=NUM_ACTORS, num_envs=NUM_ENVS, rollout_length=ROLLOUT, key=jax.random.key(1), seed=SEED)
    options.update(kwargs)
    return kind("CartPole-v1", learner, env_kwargs={"max_episode_steps": MAX_EPISODE_STEPS}, **options)


def _in_process_collectors(learner: pr.Learner, *, num_actors: int = NUM_ACTORS) -> list[GymnasiumCollector]:
    """What slot i's first actor runs, in this process: its seeds, its key, its vector env."""
    make_env = functools.partial(gymnasium.make, "CartPole-v1", max_episode_steps=MAX_EPISODE_STEPS)
    return [
        GymnasiumCollector(
            gymnasium.vector.SyncVectorEnv([make_env] * NUM_ENVS),
            learner,
            rollout_length=ROLLOUT,
            key=jax.random.fold_in(jax.random.key(1), slot),
            seed=SEED + slot * NUM_ENVS,
        )
        for slot in range(num_actors)
    ]


def _concatenate(trajectories: list[pr.Trajectory]) -> pr.Trajectory:
    timestep, policy_step = (
        jax.tree.map(lambda *x: jnp.concatenate(x, axis=1), *[getattr(t, part) for t in trajectories])
        for part in ("timestep", "policy_step")
    )
    return pr.Trajectory(timestep, policy_step, ())


def _structure(tree):
    return jax.tree.map(lambda x: (np.shape(x), np.asarray(x).dtype), tree)


def test_rollouts_equal_those_of_in_process_collectors():
    learner = _learner()
    initial = learner.init(jax.random.key(0))
    moved = jax.tree.map(lambda p: p + 0.1, initial.params)
    states = [
        initial,
        pr.LearnerState(moved, initial.opt_state, initial.num_updates, initial.num_transitions, initial.key),
    ]
    collectors = _in_process_collectors(learner)
    first = jax.tree.map(lambda *x: np.concatenate(x), *[collector.timestep for collector in collectors])
    with _pool(ray_actors.RayRolloutPool, learner) as pool:
        assert pool.num_envs == NUM_ACTORS * NUM_ENVS and pool.num_actors == NUM_ACTORS
        helpers.assert_trees_close(pool.timestep, first, rtol=0, atol=0)
        for version, state in enumerate(states):  # two rounds queued at once
            pool.submit(learner.agent(state), version)
        assert pool.num_pending == 2
        rounds = [pool.gather(), pool.gather()]
        with pytest.raises(RuntimeError, match="no round is pending"):
            pool.gather()
    for version, (state, rollouts) in enumerate(zip(states, rounds, strict=True)):
        for slot, (rollout, collector) in enumerate(zip(rollouts, collectors, strict=True)):
            assert (rollout.slot, rollout.sequence, rollout.incarnation) == (slot, version, slot)
            assert rollout.version == version
            expected, episodes = collector.collect(learner.agent(state))
            # The same types, shapes and dtypes as the in-process collector, and the same values.
            assert jax.tree.structure(rollout.trajectory) == jax.tree.structure(expected)
            assert _structure(rollout.trajectory) == _structure(expected)
            helpers.assert_trees_close(rollout.trajectory, expected, rtol=0, atol=0)
            np.testing.assert_array_equal(rollout.episodes.returns, episodes.returns)
            np.testing.assert_array_equal(rollout.episodes.lengths, episodes.lengths)
    assert np.any([r.trajectory.timestep.truncated.any() for rollouts in rounds for r in rollouts])


def test_train_with_ray_follows_the_lag_schedule():
    learner, max_lag, num_updates = _learner(), 2, 5
    seen: list[list[tuple[int, int, int]]] = []

    def on_rollouts(k, rollouts):
        seen.append([(r.slot, r.sequence, r.version) for r in rollouts])

    with _pool(ray_actors.RayRolloutPool, learner) as pool:
        result = ray_actors.train_with_ray(
            learner, pool, num_updates=num_updates, key=jax.random.key(0), max_lag=max_lag, on_rollouts=on_rollouts
        )
        assert pool.num_pending == 0
        # The same loop as a pipeline, for train_with_progress and the command line.
        pipeline = ray_actors.RayPipeline(learner, pool, max_lag=max_lag)
        assert isinstance(pipeline, pr.executors.pipeline.AbstractPipeline)
        assert (pipeline.num_members, pipeline.num_devices) == (1, 1)
        assert pipeline.frames_per_update == NUM_ACTORS * NUM_ENVS * ROLLOUT
        further = pipeline.train(result.state, num_updates=2)
        assert further.metrics.update.loss.shape == (2,) and int(further.state.num_updates) == num_updates + 2
        assert pool.num_pending == 0
    # Round k acts with the parameters after max(k - max_lag, 0) updates.
    versions = [max(k - max_lag, 0) for k in range(num_updates)]
    assert seen == [[(slot, k, versions[k]) for slot in range(NUM_ACTORS)] for k in range(num_updates)]
    assert result.metrics.update.loss.shape == (num_updates,)
    helpers.assert_all_finite(result.metrics.update)

    # The same schedule by hand, with in-process collectors and one batch of all actors' envs.
    collectors = _in_process_collectors(learner)
    states = [learner.init(jax.random.key(0))]
    episodes_completed = []
    for k in range(num_updates):
        collected = [collector.collect(learner.agent(states[versions[k]])) for collector in collectors]
        episodes_completed.append(sum(len(episodes.returns) for _, episodes in collected))
        states.append(learner.update(states[k], _concatenate([trajectory for trajectory, _ in collected]))[0])
    helpers.assert_trees_close(result.state.params, states[-1].params, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(result.metrics.episodes_completed, episodes_completed)


def test_a_killed_actor_is_replaced_and_its_work_redone():
    learner, num_updates = _learner(), 6
    delivered: list[tuple[int, int, int, int]] = []

    # Rollouts long enough (64 steps) that the one in flight is cut short by the kill.
    with _pool(ray_actors.RayRolloutPool, learner, num_envs=1, rollout_length=64) as pool:

        def on_rollouts(k, rollouts):
            delivered.extend((r.slot, r.sequence, r.version, r.incarnation) for r in rollouts)
            if k in (1, 3):  # round k + 1 is in flight on the actor killed
                ray.kill(pool.actors[k // 2])

        result = ray_actors.train_with_ray(
            learner, pool, num_updates=num_updates, key=jax.random.key(0), on_rollouts=on_rollouts
        )
        assert pool.num_replacements == 2
    ids = [(slot, sequence) for slot, sequence, _, _ in delivered]
    assert len(ids) == num_updates * NUM_ACTORS == len(set(ids))
    assert set(ids) == {(slot, k) for slot in range(NUM_ACTORS) for k in range(num_updates)}
    for slot, sequence, version, incarnation in delivered:
        assert version == max(sequence - 1, 0)  # redone with the parameters first sent
        killed_at = 1 if slot == 0 else 3
        if sequence <= killed_at:  # gathered before the kill
            assert incarnation == slot
        elif sequence == num_updates - 1:  # asked for after the kill
            assert incarnation == slot + NUM_ACTORS
        else:  # in flight at the kill: redone, unless it was finished
            assert incarnation in (slot, slot + NUM_ACTORS)
    assert result.metrics.update.loss.shape == (num_updates,)
    helpers.assert_all_finite(result.metrics.update)


def test_gradient_workers_update_as_computed_by_hand():
    # RMSProp as in Ray's Pong example; the summed gradients first, then the mean.
    learner = _learner(optimizer=optax.rmsprop(1e-2, decay=0.99))
    received: list[list] = []
    with _pool(ray_actors.RayGradientPool, learner) as pool:
        with pytest.raises(ValueError, match="num_epochs=1"):
            ray_actors.train_with_ray_gradients(_learner(num_epochs=2), pool, num_updates=1, key=jax.random.key(0))
        summed = ray_actors.train_with_ray_gradients(
            learner,
            pool,
            num_updates=2,
            key=jax.random.key(0),
            reduce="sum",
            on_gradients=lambda k, gradients: received.append(gradients),
        )
        pipeline = ray_actors.RayGradientPipeline(learner, pool)
        assert isinstance(pipeline, pr.executors.pipeline.AbstractPipeline)
        assert pipeline.frames_per_update == NUM_ACTORS * NUM_ENVS * ROLLOUT
        averaged = pipeline.train(summed.state, num_updates=1, metrics="grad_norm")
        # Evaluation, on the driver, in one actor's environments seeded as the first actor's.
        evaluation = pr.Evaluation(pr.policies.Mode(), num_episodes=3, key=jax.random.key(2), max_steps=20)
        evaluated = pipeline.evaluate(averaged.state, evaluation)
        assert pipeline.observation_spec == jax.ShapeDtypeStruct((4,), jnp.float32)
        assert pipeline.evaluation_env(averaged.state) is None

    collectors = _in_process_collectors(learner)
    state = learner.init(jax.random.key(0))
    for k in range(2):
        agent = learner.agent(state)
        grads = []
        for slot, collector in enumerate(collectors):
            trajectory, _ = collector.collect(agent)

            def loss(params, agent=agent, trajectory=trajectory):
                return learner.loss(pr.Agent(learner.network_with(params), agent.policy), trajectory)[0]

            grad = jax.grad(loss)(state.params)
            helpers.assert_trees_close(received[k][slot].gradients, jax.tree.leaves(grad), rtol=1e-5, atol=1e-7)
            grads.append(grad)
        total = jax.tree.map(lambda a, b: a + b, *grads)
        updates, opt_state = learner.optimizer.update(total, state.opt_state, state.params)
        state = eqx.tree_at(
            lambda s: (s.params, s.opt_state, s.num_updates),
            state,
            (optax.apply_updates(state.params, updates), opt_state, state.num_updates + 1),
        )
    helpers.assert_trees_close(summed.state.params, state.params, rtol=1e-5, atol=1e-6)
    helpers.assert_trees_close(summed.state.opt_state, state.opt_state, rtol=1e-5, atol=1e-9)
    assert int(summed.state.num_updates) == 2

    make_env = functools.partial(gymnasium.make, "CartPole-v1", max_episode_steps=MAX_EPISODE_STEPS)
    network = learner.network_with(averaged.state.params)
    expected = evaluate_on_host(
        gymnasium.vector.SyncVectorEnv([make_env] * NUM_ENVS),
        network,
        pr.policies.Mode(),
        num_episodes=3,
        key=jax.random.key(2),
        max_steps=20,
        seed=SEED,
    )
    helpers.assert_trees_close(evaluated, expected, rtol=0, atol=0)

    # The mean of equal batches' gradients: the learner's own update on all envs together.
    trajectories = [collector.collect(learner.agent(state))[0] for collector in collectors]
    expected, metrics = learner.update(state, _concatenate(trajectories))
    helpers.assert_trees_close(averaged.state.params, expected.params, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(averaged.metrics.update.grad_norm[0], metrics.grad_norm, rtol=1e-5)


def test_pools_and_loops_check_their_arguments():
    learner = _learner()
    with pytest.raises(ValueError, match="num_actors"):
        ray_actors.RayRolloutPool(
            "CartPole-v1", learner, num_actors=0, num_envs=1, rollout_length=4, key=jax.random.key(0)
        )
    with pytest.raises(ValueError, match="env_kwargs"):
        ray_actors.RayRolloutPool(
            gymnasium.make,
            learner,
            num_actors=1,
            num_envs=1,
            rollout_length=4,
            key=jax.random.key(0),
            env_kwargs={"a": 1},
        )
    with pytest.raises(RuntimeError, match="failed to start"):
        ray_actors.RayRolloutPool(
            "NoSuchEnv-v0", learner, num_actors=1, num_envs=1, rollout_length=4, key=jax.random.key(0)
        )


def _ppo_through_ray_actors(seed: int) -> tuple[float, float]:
    """PPO on CartPole through two Ray actors: the mean return of the first 20 updates' episodes, and the
    evaluation's after 250 updates."""
    torso_key, head_key, pool_key, learner_key, eval_key = jax.random.split(jax.random.key(seed), 5)
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso((4,), (64, 64), activation=jnp.tanh, key=torso_key),
        pr.networks.PolicyLogitHead(64, 2, with_value=True, key=head_key),
    )
    learner = pr.Learner(
        network,
        pr.policies.Categorical(),
        pr.losses.PPOLoss(discount=0.99, lambda_=0.95, value_coefficient=0.02),
        optax.chain(optax.clip_by_global_norm(0.5), optax.adam(1e-3)),
        num_epochs=4,
        num_minibatches=4,
    )
    with ray_actors.RayRolloutPool(
        "CartPole-v1", learner, num_actors=2, num_envs=4, rollout_length=128, key=pool_key, seed=seed
    ) as pool:
        result = ray_actors.train_with_ray(learner, pool, num_updates=250, key=learner_key)  # about 15 s
    returns = np.asarray(result.metrics.episode_return_sum)
    counts = np.asarray(result.metrics.episodes_completed)
    early = returns[:20].sum() / counts[:20].sum()
    evaluation = evaluate_on_host(
        gymnasium.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync"),
        learner.network_with(result.state.params),
        pr.policies.Categorical(),
        num_episodes=16,
        key=eval_key,
        max_steps=2_100,
        seed=seed + 100,
    )
    return float(early), float(evaluation.mean_return)


# PPO learning through Ray's processes runs with the other packages' learning tests, in
# `nox -s ecosystem`: alone on two cores it takes 6:21, more than CI's time budget holds.
@pytest.mark.ecosystem
def test_ppo_learns_cartpole_through_ray_actors():
    # Measured: evaluation 500 on every seed but seed 5 (498.1); early returns 30-36.
    results = {seed: _ppo_through_ray_actors(seed) for seed in range(10)}
    solved = [seed for seed, (early, evaluation) in results.items() if evaluation >= 450 and early < 50]
    assert len(solved) >= 9, results
