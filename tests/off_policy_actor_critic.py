"""A deterministic off-policy actor-critic learner (DDPG), written outside the library.

It shows that a learner family is one file on podrace's public parts: an actor network
with a [`podrace.networks.DeterministicHead`][], a [`podrace.networks.MLPCritic`][] with
target copies of both, a [`podrace.learners.SequenceReplay`][], and one optax optimiser
per network. The tests hold it to the same contract as the library's learners
(`helpers.LEARNERS`), and check that it learns as the library's
[`podrace.learners.ddpg`][] does at the same settings (`tests/test_off_policy.py`), which
solves Pendulum (`tests/test_learning.py`).

Reference: Lillicrap et al., "Continuous control with deep reinforcement learning",
ICLR 2016.
"""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

import podrace as pr


@final
class DDPGState(eqx.Module):
    actor_params: PyTree[Array]
    critic_params: PyTree[Array]
    target_actor_params: PyTree[Array]
    target_critic_params: PyTree[Array]
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    replay: PyTree[Array]
    num_updates: Int[Array, ""]
    num_transitions: Int[Array, ""]
    key: PRNGKeyArray


@final
class DDPGLearner(pr.learners.AbstractLearner[DDPGState]):
    """Each update stores the rollout, then takes `gradient_steps` steps on replayed
    transitions: the critic regresses `r + discount * d * Q'(s', mu'(s'))`, the actor
    climbs `Q(s, mu(s))` of the first critic, and both targets follow by Polyak averaging."""

    actor: pr.networks.AbstractNetwork
    critic: pr.networks.AbstractCritic
    policy: pr.policies.GaussianNoise
    replay: pr.learners.SequenceReplay
    actor_optimizer: optax.GradientTransformation
    critic_optimizer: optax.GradientTransformation
    discount: Float[Array, ""] = eqx.field(converter=lambda x: jnp.asarray(x, jnp.float32))
    tau: Float[Array, ""] = eqx.field(converter=lambda x: jnp.asarray(x, jnp.float32))
    batch_size: int = eqx.field(static=True)
    min_replay_size: int = eqx.field(static=True)
    gradient_steps: int = eqx.field(static=True, default=1)
    check_nans: bool = eqx.field(static=True, default=False)

    def init(self, key: PRNGKeyArray, timestep: pr.TimeStep) -> DDPGState:
        observation = jax.tree.map(lambda x: x[0], timestep.observation)
        step = jax.eval_shape(lambda: self.initial_agent()(observation, (), jax.random.key(0))[0])
        replay = self.replay.init(timestep, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), step))
        actor_params = eqx.filter(self.actor, eqx.is_inexact_array)
        critic_params = eqx.filter(self.critic, eqx.is_inexact_array)
        zero = jnp.asarray(0, jnp.int32)
        return DDPGState(
            actor_params,
            critic_params,
            actor_params,
            critic_params,
            self.actor_optimizer.init(actor_params),
            self.critic_optimizer.init(critic_params),
            replay,
            zero,
            zero,
            key,
        )

    def initial_agent(self) -> pr.Agent:
        return pr.Agent(self.actor, self.policy)

    def network_at(self, state: DDPGState) -> pr.networks.AbstractNetwork:
        return pr.learners.with_params(self.actor, state.actor_params)

    def agent(self, state: DDPGState) -> pr.Agent:
        return pr.Agent(self.network_at(state), self.policy.at(state.num_transitions))

    def check_fits(self, action_space, observation, *, num_envs: int, env_name: str) -> None:
        del num_envs
        pr.learners.check_agent_fits(self.actor, self.policy, action_space, observation, env_name=env_name)
        self.critic.check_fits(action_space, observation, env_name=env_name)

    def device_local(self, state: DDPGState) -> PyTree[bool]:
        replicated = jax.tree.map(lambda _: False, state)
        return eqx.tree_at(lambda s: s.replay, replicated, self.replay.device_local(state.replay))

    def _losses(self, state: DDPGState, batch: pr.Trajectory, axis_name: str | None):
        """The critic's and the actor's objectives on replayed transitions `[2, B]`."""
        timestep = batch.timestep
        observation, next_observation = timestep.observation[0], timestep.observation[1]
        # No loss on a transition into a first time step: it only resets the environment.
        mask = batch.map_batch(pr.losses.transition_mask)[:, 0]
        target_actor = pr.learners.with_params(self.actor, state.target_actor_params)
        target_critic = pr.learners.with_params(self.critic, state.target_critic_params)
        next_action = jax.vmap(lambda o: target_actor(o, ())[0].action)(next_observation)
        next_value = jnp.min(jax.vmap(target_critic)(next_observation, next_action), axis=-1)
        target = jax.lax.stop_gradient(timestep.reward[1] + self.discount * timestep.discount[1] * next_value)

        def critic_objective(params):
            critic = pr.learners.with_params(self.critic, params)
            values = jax.vmap(critic)(observation, batch.policy_step.action[0])
            loss = jnp.mean(mask * jnp.sum(jnp.square(values - target[:, None]), axis=-1))
            return loss, {"critic": loss}

        def actor_objective(params, critic_params):
            actor = pr.learners.with_params(self.actor, params)
            critic = pr.learners.with_params(self.critic, critic_params)
            actions = jax.vmap(lambda o: actor(o, ())[0].action)(observation)
            loss = -jnp.mean(mask * jax.vmap(critic)(observation, actions)[:, 0])
            return loss, {"actor": loss}

        return critic_objective, actor_objective

    def _gradient_step(self, state: DDPGState, key: PRNGKeyArray, axis_name: str | None):
        batch = self.replay.sample(state.replay, key, self.batch_size)
        critic_objective, actor_objective = self._losses(state, batch, axis_name)
        options = dict(axis_name=axis_name, check_nans=self.check_nans)
        critic_params, critic_opt_state, critic_metrics = pr.learners.gradient_step(
            self.critic_optimizer, state.critic_params, state.critic_opt_state, critic_objective, **options
        )
        actor_params, actor_opt_state, actor_metrics = pr.learners.gradient_step(
            self.actor_optimizer,
            state.actor_params,
            state.actor_opt_state,
            lambda params: actor_objective(params, critic_params),
            **options,
        )
        target_actor_params, target_critic_params = optax.incremental_update(
            (actor_params, critic_params), (state.target_actor_params, state.target_critic_params), self.tau
        )
        state = eqx.tree_at(
            lambda s: (
                s.actor_params,
                s.critic_params,
                s.target_actor_params,
                s.target_critic_params,
                s.actor_opt_state,
                s.critic_opt_state,
            ),
            state,
            (actor_params, critic_params, target_actor_params, target_critic_params, actor_opt_state, critic_opt_state),
        )
        metrics = pr.UpdateMetrics(
            critic_metrics.loss + actor_metrics.loss,
            {**critic_metrics.terms, **actor_metrics.terms},
            jnp.hypot(critic_metrics.grad_norm, actor_metrics.grad_norm),
        )
        return state, metrics

    def update(
        self, state: DDPGState, trajectory: pr.Trajectory, *, axis_name: str | None = None
    ) -> tuple[DDPGState, pr.UpdateMetrics]:
        num_steps, num_envs = trajectory.timestep.reward.shape
        num_devices = 1 if axis_name is None else jax.lax.psum(1, axis_name)
        num_transitions = state.num_transitions + (num_steps - 1) * num_envs * num_devices
        replay = self.replay.add(state.replay, trajectory)
        state = eqx.tree_at(lambda s: (s.replay, s.num_transitions), state, (replay, num_transitions))

        def learn(state: DDPGState) -> tuple[DDPGState, pr.UpdateMetrics]:
            key, *step_keys = jax.random.split(state.key, self.gradient_steps + 1)
            state, metrics = jax.lax.scan(
                lambda state, key: self._gradient_step(state, key, axis_name), state, jnp.stack(step_keys)
            )
            return eqx.tree_at(lambda s: s.key, state, key), jax.tree.map(lambda x: jnp.mean(x, axis=0), metrics)

        def wait(state: DDPGState) -> tuple[DDPGState, pr.UpdateMetrics]:
            metrics = jax.eval_shape(learn, state)[1]
            return state, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metrics)

        ready = self.replay.ready(state.replay) & (num_transitions >= self.min_replay_size)
        state, metrics = jax.lax.cond(ready, learn, wait, state)
        return eqx.tree_at(lambda s: s.num_updates, state, state.num_updates + 1), metrics


def ddpg_learner(
    key: PRNGKeyArray,
    observation_shape: tuple[int, ...],
    action_size: int,
    *,
    low: float,
    high: float,
    hidden_sizes: tuple[int, ...] = (8,),
    optimizer: optax.GradientTransformation,
    discount: float = 0.99,
    tau: float = 0.005,
    noise: float = 0.1,
    buffer_size: int = 240,
    batch_size: int = 4,
    min_replay_size: int = 12,
    gradient_steps: int = 1,
) -> DDPGLearner:
    """A DDPG learner for `observation_shape` and actions of `action_size` in `[low, high]`, with
    `optimizer` for both networks (build it once: learners built alike then share compiled code)."""
    torso_key, head_key, critic_key = jax.random.split(key, 3)
    actor = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(observation_shape, hidden_sizes, key=torso_key),
        pr.networks.DeterministicHead(hidden_sizes[-1], action_size, low=low, high=high, key=head_key),
    )
    critic = pr.networks.MLPCritic(observation_shape, action_size, hidden_sizes, num_critics=1, key=critic_key)
    return DDPGLearner(
        actor,
        critic,
        pr.policies.GaussianNoise(noise),
        pr.learners.SequenceReplay(buffer_size, sequence_length=2),
        optimizer,
        optimizer,
        discount,
        tau,
        batch_size=batch_size,
        min_replay_size=min_replay_size,
        gradient_steps=gradient_steps,
    )
