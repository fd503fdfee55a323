"""PPO: the loss against a float64 loop, epochs and minibatches in the learner, errors."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr

from . import helpers


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _reference_ppo(loss: pr.losses.PPOLoss, network, trajectory: pr.Trajectory) -> dict[str, float]:
    """The PPO terms for a batch `[T + 1, B]`, by explicit loops in float64."""
    timestep, policy_step = trajectory.timestep, trajectory.policy_step
    outputs = jax.vmap(jax.vmap(lambda o: network(o, ())[0]))(timestep.observation)
    log_probs = _log_softmax(np.asarray(outputs.logits, np.float64))
    values = np.asarray(outputs.value, np.float64)
    reward, discount = np.asarray(timestep.reward, np.float64), np.asarray(timestep.discount, np.float64)
    is_first, is_last = np.asarray(timestep.is_first), np.asarray(timestep.is_last)
    actions, log_mu = np.asarray(policy_step.action), np.asarray(policy_step.log_prob, np.float64)
    gamma, lam, eps = float(loss.discount), float(loss.lambda_), float(loss.clip_epsilon)
    num_steps, batch = actions.shape
    advantages = np.zeros((num_steps, batch))
    for b in range(batch):
        later = 0.0
        for t in reversed(range(num_steps)):
            delta = reward[t + 1, b] + gamma * discount[t + 1, b] * values[t + 1, b] - values[t, b]
            later = delta + gamma * discount[t + 1, b] * lam * (not is_last[t + 1, b]) * later
            advantages[t, b] = later
    mask = ~is_first[1:]
    returns = advantages + values[:-1]
    normalised = (advantages - advantages[mask].mean()) / (advantages[mask].std() + 1e-8)
    log_pi = np.take_along_axis(log_probs[:-1], actions[..., None], axis=-1)[..., 0]
    ratio = np.exp(log_pi - log_mu)
    surrogate = np.minimum(ratio * normalised, np.clip(ratio, 1 - eps, 1 + eps) * normalised)
    entropy = -(np.exp(log_probs[:-1]) * log_probs[:-1]).sum(axis=-1)
    terms = {
        "policy_loss": -(mask * surrogate).mean(),
        "value_loss": 0.5 * (mask * (returns - values[:-1]) ** 2).mean(),
        "entropy": (mask * entropy).mean(),
    }
    terms["loss"] = (
        terms["policy_loss"]
        + float(loss.value_coefficient) * terms["value_loss"]
        - float(loss.entropy_coefficient) * terms["entropy"]
    )
    return terms


def _behaviour_log_probs(trajectory: pr.Trajectory, seed: int) -> pr.Trajectory:
    """The trajectory with behaviour log-probabilities near (not at) the learnt policy's."""
    log_prob = np.random.default_rng(seed).uniform(-2.0, -0.2, trajectory.policy_step.action.shape)
    return eqx.tree_at(lambda t: t.policy_step.log_prob, trajectory, jnp.asarray(log_prob, jnp.float32))


@pytest.mark.parametrize(("seed", "associative_scan"), [(0, False), (1, False), (2, False), (0, True), (1, True)])
def test_ppo_loss_matches_a_float64_loop(seed, associative_scan):
    loss = pr.losses.PPOLoss(
        discount=0.9, lambda_=0.8, clip_epsilon=0.2, entropy_coefficient=0.05, associative_scan=associative_scan
    )
    network = helpers.logit_network(jax.random.key(seed), with_value=True)
    trajectory = _behaviour_log_probs(helpers.random_trajectory(seed, 10, 4), seed)
    value, terms = loss(helpers.agent(network), trajectory)
    expected = _reference_ppo(loss, network, trajectory)
    np.testing.assert_allclose(value, expected["loss"], rtol=2e-5, atol=1e-6)
    for name in ("policy_loss", "value_loss", "entropy"):
        np.testing.assert_allclose(terms[name], expected[name], rtol=2e-5, atol=1e-6, err_msg=name)


def test_ppo_targets_are_those_the_loss_computes_without_them():
    loss = pr.losses.PPOLoss(discount=0.9, lambda_=0.8)
    agent = helpers.agent(helpers.logit_network(jax.random.key(0), with_value=True))
    trajectory = _behaviour_log_probs(helpers.random_trajectory(0, 10, 4), 0)
    targets = loss.targets(agent, trajectory)
    assert [x.shape for x in targets] == [(10, 4), (10, 4)]
    value, terms = loss(agent, trajectory)
    value_with_targets, terms_with_targets = loss(agent, trajectory, targets=targets)
    np.testing.assert_allclose(value_with_targets, value, rtol=1e-6)
    helpers.assert_trees_close(terms_with_targets, terms, rtol=1e-6, atol=0)


def test_ppo_takes_its_advantages_and_returns_from_the_targets():
    # Targets of other parameters change the loss; the gradient still flows only into
    # the policy and the values of the network being learnt.
    loss = pr.losses.PPOLoss(discount=0.9, normalize_advantages=False)
    network = helpers.logit_network(jax.random.key(0), with_value=True)
    trajectory = helpers.random_trajectory(0, 6, 3)
    targets = loss.targets(helpers.agent(helpers.logit_network(jax.random.key(1), with_value=True)), trajectory)
    own = loss(helpers.agent(network), trajectory)[1]
    other = loss(helpers.agent(network), trajectory, targets=targets)[1]
    assert not np.allclose(own["value_loss"], other["value_loss"])
    doubled = loss(helpers.agent(network), trajectory, targets=(2 * targets[0], targets[1]))[1]
    # The value term reads only the returns; the policy term only the advantages.
    np.testing.assert_allclose(doubled["value_loss"], other["value_loss"], rtol=1e-6)
    assert not np.allclose(doubled["policy_loss"], other["policy_loss"])


def _reference_clipped_value_loss(loss, network, trajectory, targets) -> float:
    """The clipped value term of a batch `[T + 1, B]` in float64, the old values read from `targets`."""
    values = np.asarray(jax.vmap(jax.vmap(lambda o: network(o, ())[0]))(trajectory.timestep.observation).value)
    values = values[:-1].astype(np.float64)
    advantages, returns = (np.asarray(x, np.float64) for x in targets)
    old_values = returns - advantages
    eps = float(loss.clip_epsilon)
    clipped = old_values + np.clip(values - old_values, -eps, eps)
    errors = np.maximum((returns - values) ** 2, (returns - clipped) ** 2)
    mask = ~np.asarray(trajectory.timestep.is_first)[1:]
    return 0.5 * float((mask * errors).mean())


@pytest.mark.parametrize("seed", [0, 1])
def test_ppo_clipped_value_term_matches_a_float64_loop(seed):
    # Targets from other parameters: the values the update started from differ from
    # the network's, by more than the clip radius in some transitions.
    loss = pr.losses.PPOLoss(discount=0.9, lambda_=0.8, clip_epsilon=0.05, clip_value=True)
    network = helpers.logit_network(jax.random.key(seed), with_value=True)
    trajectory = _behaviour_log_probs(helpers.random_trajectory(seed, 10, 4), seed)
    targets = loss.targets(helpers.agent(helpers.logit_network(jax.random.key(seed + 10), with_value=True)), trajectory)
    _, terms = loss(helpers.agent(network), trajectory, targets=targets)
    expected = _reference_clipped_value_loss(loss, network, trajectory, targets)
    np.testing.assert_allclose(terms["value_loss"], expected, rtol=2e-5)
    unclipped = pr.losses.PPOLoss(discount=0.9, lambda_=0.8, clip_epsilon=0.05)
    assert terms["value_loss"] > unclipped(helpers.agent(network), trajectory, targets=targets)[1]["value_loss"]


def test_ppo_value_clipping_is_inactive_at_the_parameters_that_made_the_targets():
    agent = helpers.agent(helpers.logit_network(jax.random.key(0), with_value=True))
    trajectory = _behaviour_log_probs(helpers.random_trajectory(0, 10, 4), 0)
    clipped, plain = (pr.losses.PPOLoss(discount=0.9, clip_value=clip) for clip in (True, False))
    gradient = [jax.grad(lambda a, loss=loss: loss(a, trajectory)[0])(agent) for loss in (clipped, plain)]
    helpers.assert_trees_close(gradient[0], gradient[1], rtol=1e-5, atol=1e-7)


def test_ppo_gradient_is_zero_for_ratios_clipped_on_the_side_of_the_advantage():
    # With a clip radius near 0 and behaviour log-probabilities far below the learnt
    # ones, every ratio exceeds 1 + epsilon: positive advantages give no policy gradient.
    loss = pr.losses.PPOLoss(
        discount=0.9, clip_epsilon=1e-6, value_coefficient=0.0, entropy_coefficient=0.0, normalize_advantages=False
    )
    network = helpers.logit_network(jax.random.key(0), with_value=True)
    trajectory = helpers.random_trajectory(0, 6, 3)
    # Rewards of 10 and small values: every advantage is positive.
    trajectory = eqx.tree_at(
        lambda t: (t.policy_step.log_prob, t.timestep.reward),
        trajectory,
        (jnp.full_like(trajectory.policy_step.log_prob, -30.0), jnp.full_like(trajectory.timestep.reward, 10.0)),
    )
    grads = jax.grad(lambda net: loss(helpers.agent(net), trajectory)[0])(network)
    helpers.assert_trees_close(grads, jax.tree.map(jnp.zeros_like, grads), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(discount=0.9, lambda_=1.2), r"lambda_ must lie in \[0, 1\]"),
        (dict(discount=0.9, clip_epsilon=0.0), r"clip_epsilon must be positive"),
        (dict(discount=0.9, value_coefficient=-1.0), r"value_coefficient must be non-negative"),
    ],
)
def test_ppo_loss_rejects_bad_hyperparameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        pr.losses.PPOLoss(**kwargs)


def test_ppo_loss_needs_a_value_head():
    loss = pr.losses.PPOLoss(discount=0.9)
    with pytest.raises(ValueError, match=r"PPOLoss needs state values.*with_value=True"):
        loss(helpers.agent(helpers.logit_network(jax.random.key(0))), helpers.random_trajectory(0, 4, 2))


# --------------------------------------------------------------------------------------
# Epochs and minibatches.
# --------------------------------------------------------------------------------------


def test_minibatches_partition_the_environments():
    trajectory = helpers.random_trajectory(0, 4, 6)
    minibatches, _ = pr.learners.shuffled_minibatches(trajectory, 3, jax.random.key(0), axis_name=None)
    assert minibatches.timestep.reward.shape == (3, 5, 2)
    assert minibatches.policy_step.action.shape == (3, 4, 2)
    # Each environment's trajectory appears once, whole.
    columns = np.asarray(trajectory.timestep.observation).reshape(5, 6, -1).transpose(1, 0, 2).reshape(6, -1)
    picked = np.asarray(minibatches.timestep.observation).reshape(3, 5, 2, -1).transpose(0, 2, 1, 3).reshape(6, -1)
    assert sorted(map(tuple, picked)) == sorted(map(tuple, columns))
    # Groups of 3 consecutive environments send one environment to each minibatch.
    order = np.asarray(pr.learners.shuffled_minibatches(_env_indices(6), 3, jax.random.key(0), axis_name=None)[0].carry)
    assert sorted(order.ravel().tolist()) == list(range(6))
    for minibatch in order:
        assert sorted(minibatch // 3) == [0, 1]


def test_minibatches_split_the_targets_with_their_trajectories():
    trajectory = _env_indices(6)
    targets = jnp.broadcast_to(jnp.arange(6.0), (1, 6))
    minibatches, split = pr.learners.shuffled_minibatches(
        trajectory, 3, jax.random.key(0), axis_name=None, targets=targets
    )
    assert split.shape == (3, 1, 2)
    np.testing.assert_array_equal(split[:, 0, :], np.asarray(minibatches.carry, np.float32))


def test_transitions_are_the_steps_of_the_trajectories():
    trajectory = helpers.random_trajectory(0, 4, 3)
    targets = jnp.arange(12.0).reshape(4, 3)
    transitions, split = pr.learners.as_transitions(trajectory, targets)
    assert transitions.timestep.reward.shape == (2, 12)
    assert transitions.policy_step.action.shape == (1, 12)
    observation = np.asarray(trajectory.timestep.observation)
    for b in range(3):
        for t in range(4):
            n = b * 4 + t  # each environment's transitions together
            np.testing.assert_array_equal(transitions.timestep.observation[:, n], observation[t : t + 2, b])
            assert transitions.policy_step.action[0, n] == trajectory.policy_step.action[t, b]
            assert split[0, n] == targets[t, b]


def test_ppo_loss_of_all_transitions_equals_its_loss_of_the_trajectories():
    loss = pr.losses.PPOLoss(discount=0.9, lambda_=0.8, clip_value=True)
    agent = helpers.agent(helpers.logit_network(jax.random.key(0), with_value=True))
    trajectory = _behaviour_log_probs(helpers.random_trajectory(0, 10, 4), 0)
    targets = loss.targets(agent, trajectory)
    value, terms = loss(agent, trajectory, targets=targets)
    transitions, transition_targets = pr.learners.as_transitions(trajectory, targets)
    value_of_transitions, terms_of_transitions = loss(agent, transitions, targets=transition_targets)
    np.testing.assert_allclose(value_of_transitions, value, rtol=1e-5)
    helpers.assert_trees_close(terms_of_transitions, terms, rtol=1e-5, atol=1e-7)


def _env_indices(num_envs):
    """A batch of trajectories whose carry is each environment's index (to follow the split)."""
    trajectory = helpers.random_trajectory(0, 1, num_envs)
    return pr.Trajectory(trajectory.timestep, trajectory.policy_step, jnp.arange(num_envs))


@pytest.mark.parametrize("minibatches_of", ["trajectories", "transitions"])
def test_epochs_and_minibatches_take_one_gradient_step_each(minibatches_of):
    optimizer = optax.sgd(0.1)
    network = helpers.logit_network(jax.random.key(0), with_value=True)
    loss = pr.losses.PPOLoss(discount=0.9)
    learner = pr.Learner(
        network,
        pr.policies.Categorical(),
        loss,
        optimizer,
        num_epochs=2,
        num_minibatches=3,
        minibatches_of=minibatches_of,
    )
    trajectory = helpers.random_trajectory(0, 4, 6)
    state = learner.init(jax.random.key(1))
    new_state, metrics = jax.jit(lambda s, t: learner.update(s, t))(state, trajectory)

    # The same steps by hand: the advantages from the initial parameters (of whole
    # trajectories), the learner's key split, one permutation per epoch.
    _, shuffle_key = jax.random.split(state.key)
    targets = loss.targets(learner.agent(state), trajectory)
    if minibatches_of == "transitions":
        trajectory, targets = pr.learners.as_transitions(trajectory, targets)
    params, opt_state, losses = state.params, optimizer.init(state.params), []
    for epoch_key in jax.random.split(shuffle_key, 2):
        minibatches = pr.learners.shuffled_minibatches(trajectory, 3, epoch_key, axis_name=None, targets=targets)
        for m in range(3):
            batch, batch_targets = jax.tree.map(lambda x, m=m: x[m], minibatches)
            objective = functools.partial(
                lambda p, batch, targets: loss(
                    pr.Agent(learner.network_with(p), learner.policy), batch, targets=targets
                ),
                batch=batch,
                targets=batch_targets,
            )
            (value, _), grads = jax.value_and_grad(objective, has_aux=True)(params)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params, losses = optax.apply_updates(params, updates), [*losses, value]
    helpers.assert_trees_close(new_state.params, params, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(metrics.loss, np.mean(losses), rtol=1e-5)
    assert int(new_state.num_updates) == 1
    helpers.assert_trees_differ(jax.random.key_data(new_state.key), jax.random.key_data(state.key))


def test_minibatches_must_divide_the_environments():
    learner = helpers.make_learner(jax.random.key(0), num_minibatches=4)
    with pytest.raises(ValueError, match=r"num_minibatches=4 must divide the number of environments per device \(6\)"):
        learner.update(learner.init(jax.random.key(0)), helpers.random_trajectory(0, 4, 6))


def test_transition_minibatches_must_divide_the_transitions():
    learner = pr.Learner(
        helpers.logit_network(jax.random.key(0), with_value=True),
        pr.policies.Categorical(),
        pr.losses.PPOLoss(discount=0.9),
        helpers.ADAM,
        num_minibatches=5,
        minibatches_of="transitions",
    )
    pr.Anakin(pr.envs.Catch(rows=5, columns=3), learner, num_envs=6, rollout_length=5)  # 30 transitions
    message = r"num_minibatches=5 must divide the transitions per device \(6 environments x 4 steps\)"
    with pytest.raises(ValueError, match=message):
        learner.update(learner.init(jax.random.key(0)), helpers.random_trajectory(0, 4, 6))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: pr.Learner(
                helpers.recurrent_network(jax.random.key(0)),
                pr.policies.Categorical(),
                pr.losses.PPOLoss(discount=0.9),
                helpers.ADAM,
                minibatches_of="transitions",
            ),
            r"needs a feed-forward network",
        ),
        (
            lambda: helpers.policy_gradient_learner(
                jax.random.key(0), pr.losses.A2CLoss(discount=0.9), minibatches_of="transitions"
            ),
            r"A2CLoss computes them from whole trajectories",
        ),
    ],
)
def test_learner_refuses_transition_minibatches_it_cannot_learn_from(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("option", ["num_epochs", "num_minibatches"])
def test_learner_rejects_non_positive_epochs_and_minibatches(option):
    with pytest.raises(ValueError, match=rf"{option} must be a positive integer"):
        helpers.make_learner(jax.random.key(0), **{option: 0})


def test_pipelines_refuse_minibatches_that_do_not_divide_their_environments():
    learner = helpers.make_learner(jax.random.key(0), num_minibatches=4)
    with pytest.raises(ValueError, match=r"num_minibatches=4 must divide the number of environments per device \(6\)"):
        pr.Anakin(pr.envs.Catch(rows=5, columns=3), learner, num_envs=6, rollout_length=4)


@pytest.mark.parametrize(
    "loss",
    [
        pr.losses.PPOLoss(discount=0.9),
        pr.losses.A2CLoss(discount=0.9),
        pr.losses.ReinforceLoss(discount=0.9, baseline=True),
    ],
)
def test_pipelines_refuse_a_value_loss_on_a_head_without_values(loss):
    learner = pr.Learner(helpers.logit_network(jax.random.key(0)), pr.policies.Categorical(), loss, helpers.ADAM)
    with pytest.raises(ValueError, match=rf"{type(loss).__name__} needs state values.*with_value=True"):
        pr.Anakin(pr.envs.Catch(rows=5, columns=3), learner, num_envs=2, rollout_length=4)
