"""The off-policy actor-critics' losses (DDPG, TD3, SAC, discrete SAC): the contract of
`helpers.ACTOR_CRITIC_LOSSES`, each objective against its paper's equations written
out in float64, and a critic loss written outside the library in a TD3 learner."""

import pathlib
import re
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np
import optax
import pytest
import rlax
from jaxtyping import Array, Float, PRNGKeyArray

import podrace as pr
from podrace import configs

from . import helpers


BATCH = 8


def _setup(name: str, seed: int = 0):
    case = helpers.ACTOR_CRITIC_LOSSES[name]
    learner, transitions = case.setup(seed, BATCH)
    return case, learner, transitions


@pytest.mark.parametrize("name", helpers.ACTOR_CRITIC_LOSSES)
def test_the_loss_under_jit_equals_eager_with_finite_gradients_and_is_deterministic(name):
    case, learner, transitions = _setup(name)
    key = jax.random.key(3)
    params = case.params(learner)

    def value_and_grad(params, transitions, key):
        return jax.value_and_grad(case.objective(learner, transitions, key), has_aux=True)(params)

    (eager, eager_terms), grads = value_and_grad(params, transitions, key)
    (jitted, jitted_terms), _ = eqx.filter_jit(value_and_grad)(params, transitions, key)
    np.testing.assert_allclose(jitted, eager, rtol=1e-5, atol=1e-6)
    helpers.assert_trees_close(jitted_terms, eager_terms, rtol=1e-5, atol=1e-6)
    assert np.isfinite(float(eager)) and all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
    assert any(np.any(g != 0) for g in jax.tree.leaves(grads))
    (again, _), _ = value_and_grad(params, transitions, key)
    assert float(again) == float(eager)
    assert f"{case.part}" in eager_terms


def _float64(x) -> np.ndarray:
    return np.asarray(x, np.float64)


def _critic_values(critic, observation, action) -> np.ndarray:
    return _float64(jax.vmap(critic)(observation, action))


def test_td3_critic_loss_is_clipped_double_q_learning_onto_a_smoothed_target_action():
    """Fujimoto et al. (2018), eq. 10 and 14, in float64 with the same noise."""
    _, learner, transitions = _setup("td3-critic")
    loss = pr.losses.TD3CriticLoss(discount=0.9, target_noise=0.4, target_noise_clip=0.3)
    key = jax.random.key(5)
    targets = loss.targets(transitions, target_actor=learner.actor, target_critic=learner.critic, key=key)
    value, terms = loss(learner.critic, transitions, targets)

    outputs = jax.vmap(lambda o: learner.actor(o, ())[0])(transitions.next_observation)
    low, high, mu = _float64(outputs.low), _float64(outputs.high), _float64(outputs.action)
    half_range = (high - low) / 2
    noise = np.clip(_float64(jax.random.normal(key, mu.shape)) * 0.4, -0.3, 0.3) * half_range
    next_action = np.clip(mu + noise, low, high)
    next_values = _critic_values(learner.critic, transitions.next_observation, jnp.asarray(next_action, jnp.float32))
    expected_targets = _float64(transitions.reward) + 0.9 * _float64(transitions.discount) * next_values.min(axis=1)
    values = _critic_values(learner.critic, transitions.observation, transitions.action)
    mask = _float64(transitions.mask)
    expected = np.sum(mask * np.sum((values - expected_targets[:, None]) ** 2, axis=1)) / BATCH
    np.testing.assert_allclose(targets, expected_targets, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose([value, terms["critic"]], [expected, expected], rtol=1e-5, atol=1e-6)
    assert 0 < mask.sum() < BATCH  # the batch has masked transitions, which count 0


def test_deterministic_actor_loss_follows_the_deterministic_policy_gradient():
    """The loss is -Q_1(s, mu(s)) (Silver et al., 2014); its gradient is rlax's DPG loss's."""
    case, learner, transitions = _setup("deterministic-actor")
    loss = pr.losses.DeterministicActorLoss()
    params = case.params(learner)
    value, _ = loss(learner.actor, transitions, critic=learner.critic)
    actions = jax.vmap(lambda o: learner.actor(o, ())[0].action)(transitions.observation)
    q = _critic_values(learner.critic, transitions.observation, actions)[:, 0]
    mask = _float64(transitions.mask)
    np.testing.assert_allclose(value, -np.sum(mask * q) / BATCH, rtol=1e-5, atol=1e-6)

    def first_critic(observation, action):
        return learner.critic(observation, action)[0]

    def rlax_objective(params):
        actor = pr.learners.with_params(learner.actor, params)
        a_t = jax.vmap(lambda o: actor(o, ())[0].action)(transitions.observation)
        dqda_t = jax.vmap(jax.grad(first_critic, argnums=1))(transitions.observation, a_t)
        per_transition = jnp.sum(jax.vmap(rlax.dpg_loss)(a_t, dqda_t), axis=-1)
        return jnp.sum(transitions.mask * per_transition) / BATCH

    ours = jax.grad(lambda p: loss(pr.learners.with_params(learner.actor, p), transitions, critic=learner.critic)[0])
    helpers.assert_trees_close(ours(params), jax.grad(rlax_objective)(params), rtol=1e-4, atol=1e-6)


def _tanh_gaussian_log_prob(output, action) -> np.ndarray:
    """log pi(a|s) of the squashed Gaussian, in float64 from its definition (Haarnoja et al., 2018, appendix C)."""
    low, high = _float64(output.low), _float64(output.high)
    half = (high - low) / 2
    squashed = (_float64(action) - low) / half - 1
    gaussian = np.arctanh(squashed)
    mean, std = _float64(output.mean), np.exp(_float64(output.log_std))
    log_normal = -0.5 * ((gaussian - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
    return np.sum(log_normal - np.log(1 - squashed**2) - np.log(half), axis=-1)


def test_sac_critic_and_actor_losses_are_the_papers_soft_objectives():
    """Haarnoja et al. (2018), eq. 5-7, in float64 on the actions the losses sample."""
    _, learner, transitions = _setup("sac-critic")
    critic_loss, actor_loss = pr.losses.SACCriticLoss(discount=0.95), pr.losses.SACActorLoss()
    temperature, key = jnp.asarray(0.3), jax.random.key(7)
    targets = critic_loss.targets(
        transitions, actor=learner.actor, target_critic=learner.critic, temperature=temperature, key=key
    )
    next_action, next_log_prob = pr.losses.tanh_gaussian_actions(learner.actor, transitions.next_observation, key)
    next_outputs = jax.vmap(lambda o: learner.actor(o, ())[0])(transitions.next_observation)
    np.testing.assert_allclose(next_log_prob, _tanh_gaussian_log_prob(next_outputs, next_action), rtol=1e-3, atol=1e-3)
    soft_value = _critic_values(learner.critic, transitions.next_observation, next_action).min(axis=1)
    soft_value -= 0.3 * _tanh_gaussian_log_prob(next_outputs, next_action)
    expected_targets = _float64(transitions.reward) + 0.95 * _float64(transitions.discount) * soft_value
    np.testing.assert_allclose(targets, expected_targets, rtol=1e-3, atol=1e-3)

    mask = _float64(transitions.mask)
    value, terms = actor_loss(learner.actor, transitions, critic=learner.critic, temperature=temperature, key=key)
    actions, _ = pr.losses.tanh_gaussian_actions(learner.actor, transitions.observation, key)
    outputs = jax.vmap(lambda o: learner.actor(o, ())[0])(transitions.observation)
    log_prob = _tanh_gaussian_log_prob(outputs, actions)
    q = _critic_values(learner.critic, transitions.observation, actions).min(axis=1)
    count = max(mask.sum(), 1.0)
    np.testing.assert_allclose(value, np.sum(mask * (0.3 * log_prob - q)) / count, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(terms["entropy"], -np.sum(mask * log_prob) / count, rtol=1e-3, atol=1e-3)


def test_discrete_sac_losses_take_the_expectations_over_actions_exactly():
    """Christodoulou (2019), eq. 10 and 12, in float64."""
    _, learner, transitions = _setup("discrete-sac-critic")
    critic_loss, actor_loss = pr.losses.DiscreteSACCriticLoss(discount=0.9), pr.losses.DiscreteSACActorLoss()
    temperature, key = jnp.asarray(0.2), jax.random.key(0)

    def log_policy(observation):
        logits = _float64(jax.vmap(lambda o: learner.actor(o, ())[0].logits)(observation))
        return logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))

    def min_q(observation):
        return _float64(pr.losses.stacked_q_values(learner.critic, observation)).min(axis=1)

    targets = critic_loss.targets(
        transitions, actor=learner.actor, target_critic=learner.critic, temperature=temperature, key=key
    )
    next_log_pi = log_policy(transitions.next_observation)
    soft_value = np.sum(np.exp(next_log_pi) * (min_q(transitions.next_observation) - 0.2 * next_log_pi), axis=-1)
    expected = _float64(transitions.reward) + 0.9 * _float64(transitions.discount) * soft_value
    np.testing.assert_allclose(targets, expected, rtol=1e-5, atol=1e-6)

    mask = _float64(transitions.mask)
    value, terms = actor_loss(learner.actor, transitions, critic=learner.critic, temperature=temperature, key=key)
    log_pi = log_policy(transitions.observation)
    pi, count = np.exp(log_pi), max(mask.sum(), 1.0)
    per_state = np.sum(pi * (0.2 * log_pi - min_q(transitions.observation)), axis=-1)
    np.testing.assert_allclose(value, np.sum(mask * per_state) / count, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(terms["entropy"], np.sum(mask * -np.sum(pi * log_pi, axis=-1)) / count, rtol=1e-5)


def test_temperature_loss_steers_alpha_toward_the_target_entropy():
    loss = pr.losses.TemperatureLoss(target_entropy=-1.0)
    value, terms = loss(jnp.log(jnp.asarray(0.5)), jnp.asarray(0.25))
    np.testing.assert_allclose([value, terms["alpha"]], [np.log(0.5) * 1.25, 0.5], rtol=1e-6)
    # Entropy above its target: the gradient raises log alpha's loss, so a step lowers alpha.
    assert jax.grad(lambda log_alpha: loss(log_alpha, jnp.asarray(0.25))[0])(0.0) > 0


def test_temperature_loss_multiplied_by_alpha_is_the_papers_eq_18():
    loss = pr.losses.TemperatureLoss(target_entropy=-1.0, multiplier="temperature")
    log_alpha, entropy = jnp.log(jnp.asarray(0.5)), jnp.asarray(0.25)
    value, terms = loss(log_alpha, entropy)
    np.testing.assert_allclose([value, terms["alpha"]], [0.5 * 1.25, 0.5], rtol=1e-6)
    # The same sign as with log alpha, alpha times the gradient.
    gradient = jax.grad(lambda log_alpha: loss(log_alpha, entropy)[0])(log_alpha)
    np.testing.assert_allclose(gradient, 0.5 * 1.25, rtol=1e-6)
    # The test session's type checks refuse it before the constructor's ValueError can.
    with pytest.raises((ValueError, jaxtyping.TypeCheckError), match="multiplier"):
        pr.losses.TemperatureLoss(target_entropy=-1.0, multiplier="alpha")


@final
class SquaredTD3CriticLoss(pr.losses.AbstractDeterministicCriticLoss):
    """TD3's critic loss as a user would write it from the paper, outside the library:
    its targets are TD3's, its regression written out, or a Huber loss with `huber_delta`."""

    smoothing: pr.losses.TD3CriticLoss
    huber_delta: float | None = None

    def targets(
        self,
        transitions: pr.losses.Transitions,
        *,
        target_actor: pr.networks.AbstractNetwork,
        target_critic: pr.networks.AbstractCritic,
        key: PRNGKeyArray,
    ) -> Float[Array, " B"]:
        return self.smoothing.targets(transitions, target_actor=target_actor, target_critic=target_critic, key=key)

    def __call__(self, critic, transitions, targets):
        errors = jax.vmap(critic)(transitions.observation, transitions.action) - targets[:, None]
        per_critic = (
            jnp.square(errors) if self.huber_delta is None else optax.huber_loss(errors, delta=self.huber_delta)
        )
        loss = jnp.mean(transitions.mask * jnp.sum(per_critic, axis=-1))
        return loss, {"critic": loss}


def _train_td3(critic_loss: pr.losses.AbstractDeterministicCriticLoss | None, num_updates: int = 6):
    """TD3 on `Point` with `critic_loss`, updated on the same random rollouts."""
    default = helpers.td3_learner(jax.random.key(0))
    kwargs = dict(buffer_size=240, batch_size=4, min_replay_size=12, gradient_steps=3)
    learner = pr.learners.TD3Learner(
        default.actor, default.critic, helpers.ADAM, helpers.ADAM, critic_loss=critic_loss, **kwargs
    )
    trajectory = helpers.LEARNERS["td3"].random_trajectory(learner.initial_agent(), 0, 6, 3)
    state = learner.init(jax.random.key(1), jax.tree.map(lambda x: x[0], trajectory.timestep))
    update = eqx.filter_jit(learner.update)
    for _ in range(num_updates):
        state, _ = update(state, trajectory)
    return state


def test_td3_trains_with_a_critic_loss_written_outside_the_library():
    library = _train_td3(None)
    smoothing = pr.losses.TD3CriticLoss()
    outside = _train_td3(SquaredTD3CriticLoss(smoothing))
    assert int(outside.num_gradient_steps) > 0
    helpers.assert_trees_close(outside.critic_params, library.critic_params, rtol=1e-5, atol=1e-6)
    helpers.assert_trees_close(outside.actor_params, library.actor_params, rtol=1e-5, atol=1e-6)
    # The same class with a Huber regression is another objective: on errors beyond its
    # threshold, a smaller loss than the squared error's.
    _, learner, transitions = _setup("td3-critic")
    targets = smoothing.targets(
        transitions, target_actor=learner.actor, target_critic=learner.critic, key=jax.random.key(0)
    )
    squared, _ = SquaredTD3CriticLoss(smoothing)(learner.critic, transitions, targets + 10.0)
    huber, _ = SquaredTD3CriticLoss(smoothing, huber_delta=0.1)(learner.critic, transitions, targets + 10.0)
    assert 0 < float(huber) < float(squared)


def test_the_learners_refuse_losses_that_do_not_fit():
    td3, sac = helpers.td3_learner(jax.random.key(0)), helpers.sac_learner(jax.random.key(0))
    kwargs = dict(buffer_size=240, batch_size=4)
    adam = helpers.ADAM
    with pytest.raises(ValueError, match="discount, target_noise configure the default critic_loss"):
        pr.learners.TD3Learner(
            td3.actor,
            td3.critic,
            adam,
            adam,
            critic_loss=pr.losses.TD3CriticLoss(),
            discount=0.9,
            target_noise=0.1,
            **kwargs,
        )
    with pytest.raises(ValueError, match="DiscreteSACCriticLoss reads an actor emitting PolicyLogits"):
        pr.learners.SACLearner(
            sac.actor, sac.critic, adam, adam, adam, critic_loss=pr.losses.DiscreteSACCriticLoss(), **kwargs
        )
    with pytest.raises(ValueError, match="target_entropy configure the default temperature_loss"):
        temperature_loss = pr.losses.TemperatureLoss(target_entropy=-1.0)
        pr.learners.SACLearner(
            sac.actor, sac.critic, adam, adam, adam, temperature_loss=temperature_loss, target_entropy=-2.0, **kwargs
        )
    single = pr.networks.MLPCritic(helpers.POINT_OBS_SHAPE, 1, (8,), num_critics=1, key=jax.random.key(1))
    with pytest.raises(ValueError, match="ddpg sets policy_delay itself"):
        pr.learners.ddpg(td3.actor, single, adam, adam, policy_delay=2, **kwargs)
    with pytest.raises(ValueError, match="TD3CriticLoss: discount"):
        pr.losses.TD3CriticLoss(discount=1.5)


@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_the_docs_composition_in_python_is_the_command_lines_learner(algo):
    """`docs/actor_critic.md`'s first code block writes out the settings of
    `podrace train pendulum td3|sac`: the same networks, losses and settings."""
    page = (pathlib.Path(__file__).parents[1] / "docs" / "actor_critic.md").read_text()
    namespace: dict = {}
    exec(re.findall(r"```python\n(.*?)```", page, re.DOTALL)[0], namespace)
    env, key = pr.envs.pendulum_v1(), jax.random.key(4)
    written = namespace[f"{algo}_learner"](env, key)
    config = configs.default_config("pendulum", algo)
    built = config.learner(env.action_space, env.observation_space.shape, key)

    def parts(learner):
        losses = [learner.critic_loss, learner.actor_loss, getattr(learner, "temperature_loss", None)]
        arrays = eqx.filter((learner.actor, learner.critic, losses, learner.tau), eqx.is_array)
        static = (learner.batch_size, learner.replay, learner.min_replay_size, learner.gradient_steps)
        return arrays, static

    (written_arrays, written_static), (built_arrays, built_static) = parts(written), parts(built)
    assert jax.tree.structure(written_arrays) == jax.tree.structure(built_arrays)
    helpers.assert_trees_close(written_arrays, built_arrays, rtol=0, atol=0)
    assert written_static == built_static
    assert type(written.exploration) is type(built.exploration)
    assert config.num_envs == 4 and config.rollout_length == 1 and config.num_updates == 5_000
