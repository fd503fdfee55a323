"""MuZero: mctx's search over a learnt model, acting from observations alone.

The network's three functions, the agent's search outputs (jit, vmap, masks), the loss
against a float64 hand computation of the paper's unrolled targets, the refusals, the
command line, and learning Catch.
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxtyping import TypeCheckError

import podrace as pr
from podrace import cli, configs

from . import helpers


pytest.importorskip("mctx")

NUM_SIMULATIONS = 4


def _network(key=None, support_size=None) -> pr.networks.MuZeroNetwork:
    key = jax.random.key(0) if key is None else key
    return pr.networks.MuZeroNetwork(
        helpers.OBS_SHAPE, helpers.NUM_ACTIONS, latent_size=8, hidden_sizes=(16,), support_size=support_size, key=key
    )


def _agent(search=None) -> pr.search.MuZeroAgent:
    search = pr.search.GumbelMuZeroSearch(NUM_SIMULATIONS) if search is None else search
    return pr.search.MuZeroAgent(_network(), search, discount=0.9)


def _act(agent, observation, key):
    return agent(observation, agent.initial_carry(), key)[0]


ACT = eqx.filter_jit(_act)
ACT_BATCH = eqx.filter_jit(jax.vmap(_act, in_axes=(None, 0, 0)))


# --------------------------------------------------------------------------------------
# The network and the agent.
# --------------------------------------------------------------------------------------


def test_the_network_is_prediction_of_representation_with_latents_in_the_unit_interval():
    network = _network()
    observation = jax.random.normal(jax.random.key(1), helpers.OBS_SHAPE)
    latent = network.represent(observation)
    assert latent.shape == (8,)
    assert float(jnp.min(latent)) == 0.0 and float(jnp.max(latent)) == pytest.approx(1.0)
    following, reward = network.transition(latent, jnp.asarray(2))
    assert following.shape == (8,) and reward.shape == ()
    assert float(jnp.min(following)) == 0.0 and float(jnp.max(following)) == pytest.approx(1.0)
    output, carry = network(observation, ())
    helpers.assert_trees_close(output, network.predict(latent), rtol=0, atol=0)
    assert carry == () and output.logits.shape == (helpers.NUM_ACTIONS,) and output.value is not None


@pytest.mark.parametrize("search", [pr.search.GumbelMuZeroSearch(NUM_SIMULATIONS), pr.search.MuZeroSearch(8)])
def test_the_agent_acts_from_an_observation_with_its_search_statistics(search):
    agent = _agent(search)
    observations = jax.random.normal(jax.random.key(2), (5, *helpers.OBS_SHAPE))
    keys = jax.random.split(jax.random.key(3), 5)
    steps = ACT_BATCH(agent, observations, keys)
    statistics = steps.extras
    assert isinstance(statistics, pr.SearchStatistics)
    assert statistics.policy.shape == statistics.visit_counts.shape == (5, helpers.NUM_ACTIONS)
    assert statistics.value.shape == statistics.discount.shape == steps.action.shape == (5,)
    np.testing.assert_allclose(np.asarray(statistics.policy).sum(axis=-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(statistics.visit_counts).sum(axis=-1), search.num_simulations)
    np.testing.assert_allclose(np.asarray(statistics.discount), 0.9, rtol=1e-6)
    chosen = np.take_along_axis(np.asarray(statistics.policy), np.asarray(steps.action)[:, None], axis=-1)[:, 0]
    np.testing.assert_allclose(np.asarray(steps.log_prob), np.log(chosen), rtol=1e-5, atol=1e-6)
    # vmap equals a loop, jit equals eager, and a key gives the same step.
    for index in range(5):
        one = ACT(agent, observations[index], keys[index])
        helpers.assert_trees_close(jax.tree.map(lambda x, i=index: x[i], steps), one, rtol=1e-5, atol=1e-6)
    helpers.assert_trees_close(_act(agent, observations[0], keys[0]), ACT(agent, observations[0], keys[0]), rtol=1e-5)


def test_the_agent_never_picks_a_masked_action():
    agent = _agent()
    observations = jax.random.normal(jax.random.key(4), (32, *helpers.OBS_SHAPE))
    masks = jnp.zeros((32, helpers.NUM_ACTIONS), bool).at[:, 1].set(True).at[::2, 2].set(True)
    steps = ACT_BATCH(agent, pr.MaskedObservation(observations, masks), jax.random.split(jax.random.key(5), 32))
    chosen = np.take_along_axis(np.asarray(masks), np.asarray(steps.action)[:, None], axis=-1)[:, 0]
    assert np.all(chosen)
    assert np.all(np.asarray(steps.extras.policy)[~np.asarray(masks)] == 0)


def test_muzero_refuses_other_networks_continuous_actions_and_trajectories_without_a_search():
    # The signature's check at test time; without it, the agent's own ValueError.
    with pytest.raises((ValueError, TypeCheckError), match="MuZeroNetwork"):
        pr.search.MuZeroAgent(helpers.logit_network(jax.random.key(0), with_value=True))  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="muzero searches over discrete actions"):
        configs.MuZeroConfig(algorithm="muzero").pipeline(pr.envs.pendulum_v1(), jax.random.key(0))
    loss = pr.losses.MuZeroLoss()
    trajectory = helpers.random_trajectory(0, 6, search_statistics=True)
    with pytest.raises(ValueError, match="unrolls a learnt model"):
        loss.trajectory_loss(helpers.agent(helpers.logit_network(jax.random.key(0), with_value=True)), trajectory)
    with pytest.raises(ValueError, match=r"collect it with podrace\.search\.MuZeroAgent"):
        loss.trajectory_loss(helpers.agent(_network()), helpers.random_trajectory(0, 6))


# --------------------------------------------------------------------------------------
# The loss against a float64 hand computation.
# --------------------------------------------------------------------------------------


def np_signed_hyperbolic(x):
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + 1e-3 * x


def np_value_loss(network, output, target):
    """Squared error of a scalar output; for a categorical one, the cross-entropy from its
    atoms' logits to the two-hot encoding of the transformed target (Appendix F)."""
    if network.support_size is None:
        return (target - float(output)) ** 2
    size = network.support_size
    position = np.clip(np_signed_hyperbolic(target), -size, size) + size
    lower = int(np.floor(position))
    probs = np.zeros(2 * size + 1)
    probs[lower] += 1.0 - (position - lower)
    if lower < 2 * size:
        probs[lower + 1] += position - lower
    logits = np.asarray(output, np.float64)
    log_probs = logits - logits.max() - np.log(np.sum(np.exp(logits - logits.max())))
    return -np.sum(probs * log_probs)


def np_muzero_loss(network, trajectory, *, steps, n, value_coefficient):
    """Schrittwieser et al. (2020), eq. 1, one start and one unrolled step at a time: the
    model's outputs (float32, from the network) against targets computed in float64."""
    timestep, statistics = trajectory.timestep, trajectory.policy_step.extras
    reward = np.asarray(timestep.reward, np.float64)
    is_last, terminated = np.asarray(timestep.is_last), np.asarray(timestep.terminated)
    num_steps = reward.shape[0] - 1
    search_discount = np.asarray(statistics.discount, np.float64) * np.asarray(timestep.discount[1:], np.float64)
    bootstrap = np.concatenate(
        [np.asarray(statistics.value[1:], np.float64), [float(network(timestep.observation[-1], ())[0].value)]]
    )

    def value_target(t):
        """The n-step return, bootstrapped from the root value n steps on (at T if
        sooner), stopped at an episode's last step."""
        total, scale = 0.0, 1.0
        for i in range(1, n + 1):
            u = t + i
            total += scale * reward[u]
            scale *= search_discount[u - 1]
            if is_last[u] or u == num_steps or i == n:
                return total + scale * bootstrap[u - 1]
        raise AssertionError

    policy_loss = value_loss = reward_loss = 0.0
    actions = np.asarray(trajectory.policy_step.action)
    for t in range(num_steps):
        if is_last[t]:
            continue
        latent = network.represent(timestep.observation[t])
        predicted_reward = None
        for k in range(steps + 1):
            u = t + k
            ends = [e for e in range(t, u) if e <= num_steps and is_last[e]]
            alive = not ends and u <= num_steps
            absorbed = bool(ends) and terminated[ends[0]]
            logits, value = network.prediction_outputs(latent)
            logits = np.asarray(logits, np.float64)
            if alive and u < num_steps and not is_last[u]:
                log_policy = logits - np.log(np.sum(np.exp(logits - logits.max()))) - logits.max()
                policy_loss -= np.sum(np.asarray(statistics.policy[u], np.float64) * log_policy)
                value_loss += np_value_loss(network, value, value_target(u))
            elif (alive and is_last[u] and terminated[u]) or absorbed:
                value_loss += np_value_loss(network, value, 0.0)
            if k >= 1:
                if alive:
                    reward_loss += np_value_loss(network, predicted_reward, reward[u])
                elif absorbed:
                    reward_loss += np_value_loss(network, predicted_reward, 0.0)
            if k < steps:
                action = actions[u] if u < num_steps else 0
                latent, predicted_reward = network.transition_outputs(latent, jnp.asarray(action))
    terms = {name: total / num_steps for name, total in (("policy_loss", policy_loss), ("value_loss", value_loss))}
    terms["reward_loss"] = reward_loss / num_steps
    return terms["policy_loss"] + value_coefficient * terms["value_loss"] + terms["reward_loss"], terms


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize(("steps", "n", "support_size"), [(3, 2, None), (1, 5, None), (5, 10, None), (3, 4, 2)])
def test_the_loss_is_the_papers_unrolled_loss_with_absorbing_terminations(seed, steps, n, support_size):
    """Scalar values and rewards, and categorical ones on a support of 5 atoms."""
    network = _network(jax.random.key(seed), support_size)
    trajectory = helpers.random_trajectory(seed, 9, search_statistics=True, episode_end_probability=0.3)
    loss = pr.losses.MuZeroLoss(num_unroll_steps=steps, n_step=n, value_coefficient=0.5)
    value, terms = eqx.filter_jit(loss.trajectory_loss)(helpers.agent(network), trajectory)
    expected, expected_terms = np_muzero_loss(network, trajectory, steps=steps, n=n, value_coefficient=0.5)
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)
    for name, term in expected_terms.items():
        np.testing.assert_allclose(float(terms[name]), term, rtol=1e-5, atol=1e-6)


def test_a_categorical_networks_values_and_rewards_are_the_untransformed_means_of_its_atoms():
    network = _network(support_size=3)
    latent = network.represent(jnp.ones(helpers.OBS_SHAPE))
    logits, value_atoms = network.prediction_outputs(latent)
    next_latent, reward_atoms = network.transition_outputs(latent, jnp.asarray(1))
    assert value_atoms.shape == reward_atoms.shape == (7,)
    one = jnp.asarray(1)
    for atoms, scalar in (
        (value_atoms, network.predict(latent).value),
        (reward_atoms, network.transition(latent, one)[1]),
    ):
        probs = np.exp(np.asarray(atoms, np.float64) - float(jnp.max(atoms)))
        mean = np.sum(probs / probs.sum() * np.arange(-3, 4))
        np.testing.assert_allclose(np_signed_hyperbolic(float(scalar)), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(network.predict(latent).logits, logits)
    np.testing.assert_array_equal(network.transition(latent, one)[0], next_latent)
    with pytest.raises(ValueError, match="support_size must be None"):
        _network(support_size=0)


def test_the_hand_computation_sees_terminations_and_truncations():
    ends = [
        helpers.random_trajectory(seed, 9, search_statistics=True, episode_end_probability=0.3) for seed in range(4)
    ]
    assert any(bool(jnp.any(t.timestep.terminated)) for t in ends)
    assert any(bool(jnp.any(t.timestep.truncated)) for t in ends)


def test_the_dynamics_learn_only_from_unrolled_steps_and_the_gradient_into_them_is_halved():
    """With one unrolled step the reward head's gradient comes from the reward term alone;
    the representation's gradient is finite and nonzero."""
    network = _network()
    trajectory = helpers.random_trajectory(5, 8, search_statistics=True)
    loss = pr.losses.MuZeroLoss(num_unroll_steps=1, n_step=3)
    grads = eqx.filter_grad(lambda network: loss.trajectory_loss(helpers.agent(network), trajectory)[0])(network)
    helpers.assert_all_finite(eqx.filter(grads, eqx.is_inexact_array))
    assert float(jnp.sum(jnp.abs(grads.reward.linear.weight))) > 0
    assert float(jnp.sum(jnp.abs(grads.representation.layers[0].weight))) > 0


# --------------------------------------------------------------------------------------
# The command line and learning.
# --------------------------------------------------------------------------------------


def test_the_replay_learner_draws_sequences_of_k_plus_n_plus_one_steps_and_refuses_other_agents():
    loss = pr.losses.MuZeroLoss(num_unroll_steps=3, n_step=4)
    learner = pr.learners.MuZeroReplayLearner(_agent(), loss, optax.adam(1e-3), buffer_size=100, batch_size=4)
    assert learner.replay.sequence_length == 8
    longer = pr.learners.MuZeroReplayLearner(
        _agent(), loss, optax.adam(1e-3), buffer_size=100, batch_size=4, sequence_length=12
    )
    assert longer.replay.sequence_length == 12
    alphazero = pr.search.AlphaZeroAgent(helpers.logit_network(jax.random.key(0), with_value=True))
    with pytest.raises((ValueError, TypeCheckError), match="MuZeroAgent"):
        pr.learners.MuZeroReplayLearner(alphazero, loss, optax.adam(1e-3), buffer_size=100, batch_size=4)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="buffer_size=2 is smaller than batch_size=4"):
        pr.learners.MuZeroReplayLearner(_agent(), loss, optax.adam(1e-3), buffer_size=2, batch_size=4)


def test_the_configuration_learns_from_replay_with_categorical_values_when_asked():
    config = configs.MuZeroConfig(algorithm="muzero", replay=True, support_size=5, gradient_steps=3)
    pipeline = config.pipeline(pr.envs.Catch(), jax.random.key(0))
    assert isinstance(pipeline.learner, pr.learners.MuZeroReplayLearner)
    assert pipeline.learner.search_agent.network.support_size == 5
    assert config.gradient_steps_per_update == 3
    assert isinstance(
        configs.MuZeroConfig(algorithm="muzero").pipeline(pr.envs.Catch(), jax.random.key(0)).learner,
        pr.learners.AlphaZeroLearner,
    )


def test_podrace_train_catch_muzero_runs_and_evaluate_plays_each_seed_with_its_search(tmp_path, capsys):
    run = ["train", "catch", "muzero", "--num-envs", "4", "--rollout-length", "8", "--hidden", "8", "--seeds", "2"]
    saving = ["--checkpoint-dir", str(tmp_path / "run"), "--output", str(tmp_path / "c.png")]
    assert cli.main([*run, "--num-updates", "2", "--updates-per-call", "1", *saving]) == 0
    assert "mean episode reward" in capsys.readouterr().out
    assert cli.main(["evaluate", str(tmp_path / "run"), "--num-episodes", "2"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("the agent's gumbel search of 8 simulations, no noise") == 2, printed
    assert "seed 0: mean return" in printed and "seed 1: mean return" in printed, printed


def _learns_catch(**changes):
    """`podrace train catch muzero`'s settings with `changes` on seeds 0-9 in one program:
    the search agent's training returns over the last 50 updates, by seed."""
    run = dataclasses.replace(helpers.cli_run("catch", "muzero", **changes), seed=0, seeds=10)
    population, key = run.make()
    metrics = population.train(population.init(key), num_updates=run.config.num_updates).metrics
    returns = np.asarray(
        metrics.episode_return_sum[:, -50:].sum(axis=1) / metrics.episodes_completed[:, -50:].sum(axis=1)
    )
    print(f"MuZero on Catch {changes}, by seed: {np.round(returns, 3)}")
    return returns


@pytest.mark.slow
def test_muzero_learns_catch_on_ten_seeds():
    returns = _learns_catch()
    assert np.sum(returns >= configs.TUNED["catch", "muzero"].solved_at) >= 9, returns


@pytest.mark.slow
def test_gumbel_muzero_with_two_simulations_learns_catch():
    # The fewest simulations Gumbel MuZero searches with, the end of "2 to 4" that learns
    # least; 4 simulations learnt Catch on all ten seeds (0.907 to 0.977) when this test
    # ran with them, and are left out to keep the slow session within its time.
    returns = _learns_catch(num_simulations=2)
    assert np.sum(returns >= configs.TUNED["catch", "muzero"].solved_at) >= 9, returns


@pytest.mark.slow
def test_muzero_from_replay_balances_cartpole_on_ten_seeds():
    """`podrace train cartpole muzero` on seeds 0-9 in one program; each seed's agent then
    plays 10 episodes searching greedily (no Gumbel noise), as `Tuned.measure` says."""
    tuned = configs.TUNED["cartpole", "muzero"]
    run = dataclasses.replace(helpers.cli_run("cartpole", "muzero"), seed=0, seeds=10)
    population, key = run.make()
    state = population.train(population.init(key), num_updates=run.config.num_updates).state
    greedy = run.config.evaluation_search()
    env = pr.envs.CartPole()

    def play(hyperparameters, learner_state):
        agent = population.make_pipeline(hyperparameters).learner.agent(learner_state)
        agent = eqx.tree_at(lambda agent: agent.search, agent, greedy)
        return pr.evaluate_agent(env, agent, num_episodes=10, key=jax.random.key(10), max_steps=500).returns

    returns = np.asarray(eqx.filter_jit(jax.vmap(play))(population.hyperparameters, state.learner)).mean(axis=1)
    print(f"MuZero on CartPole, greedy search, by seed: {np.round(returns, 1)}")  # shown by pytest -rP
    assert np.sum(returns >= tuned.solved_at) >= 9, returns
