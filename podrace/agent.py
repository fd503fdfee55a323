"""Agents: what acts. [`podrace.Agent`][] is a network and the policy over its outputs."""

import abc
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray, PyTree, Shaped

from ._types import AbstractNetworkOutput, MaskedObservation, PolicyStep, Trajectory, entropy_or_estimate, legal_actions
from .networks import AbstractNetwork
from .policies import AbstractPolicy


class AbstractAgent(eqx.Module):
    """What acts in an environment: chooses an action for one observation, carrying a
    recurrent state between steps.

    Executors use only this: the rollout, the host collectors and the Ray actors act
    with any agent. [`podrace.Agent`][] acts by a policy over a network's outputs; an
    agent that acts otherwise (by search over a learnt model, say) is another member.
    """

    @abc.abstractmethod
    def __call__(
        self, observation: PyTree[Array], carry: PyTree[Array], key: PRNGKeyArray
    ) -> tuple[PolicyStep, PyTree[Array]]:
        """Chooses an action for one observation (unbatched; `vmap` it over envs).

        **Arguments:**

        - `observation`: one observation.
        - `carry`: the recurrent state (reset by the caller where `is_first`).
        - `key`: the randomness of acting.

        **Returns:**

        The policy step and the next carry.
        """

    @abc.abstractmethod
    def initial_carry(self) -> PyTree[Array]:
        """The recurrent state an episode starts from (empty for a feed-forward agent)."""

    @abc.abstractmethod
    def reset_carry(self, carry: PyTree[Array], is_first: Array) -> PyTree[Array]:
        """`carry`, or the initial carry where `is_first` (one environment's)."""

    @property
    @abc.abstractmethod
    def reads_previous_action_reward(self) -> bool:
        """Whether its observations carry the previous action and reward
        ([`podrace.ObservationActionReward`][])."""


class AbstractMemorylessAgent(AbstractAgent):
    """An agent that acts on the current observation alone: no recurrent state, and no
    previous action and reward in its observations (a search agent, a random player)."""

    def initial_carry(self) -> tuple[()]:
        return ()

    def reset_carry(self, carry: PyTree[Array], is_first: Array) -> PyTree[Array]:
        del is_first
        return carry

    @property
    def reads_previous_action_reward(self) -> bool:
        return False


@final
class Agent(AbstractAgent):
    """A network and the policy over its outputs: what acts, and what losses differentiate.

    Rollouts and host collectors act with it; losses read the network's outputs along
    a trajectory and, for policy gradients, the policy's log-probabilities of the
    actions taken, so a new policy brings its own probabilities.

    **Arguments:**

    - `network`: the network, with the parameters to act or learn with.
    - `policy`: the policy over its outputs.
    """

    network: AbstractNetwork
    policy: AbstractPolicy

    def __call__(
        self, observation: PyTree[Array], carry: PyTree[Array], key: PRNGKeyArray
    ) -> tuple[PolicyStep, PyTree[Array]]:
        """Chooses an action for one observation (unbatched; `vmap` it over envs).

        **Arguments:**

        - `observation`: one observation.
        - `carry`: the network's recurrent state (reset by the caller where `is_first`).
        - `key`: the policy's randomness.

        **Returns:**

        The policy step and the next carry.
        """
        output, carry = self.network(observation, carry)
        return self.policy(output, key), carry

    def initial_carry(self) -> PyTree[Array]:
        return self.network.initial_carry()

    def reset_carry(self, carry: PyTree[Array], is_first: Array) -> PyTree[Array]:
        return self.network.reset_carry(carry, is_first)

    @property
    def reads_previous_action_reward(self) -> bool:
        return self.network.reads_previous_action_reward

    def outputs(self, trajectory: Trajectory) -> AbstractNetworkOutput:
        """The network's outputs at time steps `0..T` of one trajectory `[T + 1]`.

        The network unrolls from the trajectory's initial carry, resetting it where a
        time step is first of its episode.
        """
        timestep = trajectory.timestep
        return self.network.unroll(timestep.observation, trajectory.carry, timestep.is_first)[0]

    def batch_outputs(self, trajectory: Trajectory) -> AbstractNetworkOutput:
        """The network's outputs at every time step of a batch of trajectories, `[T + 1, B, ...]`.

        A recurrent network unrolls each trajectory as `outputs` does; a feed-forward one
        runs once over all `(T + 1) * B` observations, a single batch that compiles to
        faster programs than a batch of sequences (several times faster on a CPU with
        layer normalisation).
        """
        carry = self.network.initial_carry()
        if jax.tree.leaves(carry):
            return trajectory.map_batch(self.outputs, out_axes=1)
        num_steps, batch_size = trajectory.timestep.reward.shape
        observations = jax.tree.map(
            lambda x: x.reshape(num_steps * batch_size, *x.shape[2:]), trajectory.timestep.observation
        )
        outputs = jax.vmap(lambda observation: self.network(observation, carry)[0])(observations)
        return jax.tree.map(lambda x: x.reshape(num_steps, batch_size, *x.shape[1:]), outputs)

    def log_prob_and_entropy(
        self, outputs: AbstractNetworkOutput, actions: Shaped[Array, " T *action_shape"]
    ) -> tuple[Float[Array, " T"], Float[Array, " T"]]:
        """`log pi(a_t | s_t)` of the actions taken and the entropy of `pi(. | s_t)`, for each `t`.

        Both come from the policy's `distribution`, so they serve discrete and
        continuous actions alike.

        **Arguments:**

        - `outputs`: network outputs with a leading time axis of at least `T` (as
            `outputs` gives for a trajectory's `T + 1` time steps); the first `T` are used.
        - `actions`: the actions `a_0, ..., a_{T-1}`.

        **Returns:**

        The log-probabilities and the entropies, each of shape `[T]`.
        """
        num_steps = actions.shape[0]
        outputs = jax.tree.map(lambda x: x[:num_steps], outputs)

        def one_step(output: AbstractNetworkOutput, action: Array) -> tuple[Array, Array]:
            distribution = self.policy.distribution(output)
            log_prob = jnp.asarray(distribution.log_prob(action))
            return log_prob, entropy_or_estimate(distribution, log_prob)

        return jax.vmap(one_step)(outputs, actions)


@final
class RandomAgent(AbstractMemorylessAgent):
    """Chooses uniformly among the legal actions: the floor a trained agent of a game is
    measured against, and an opponent for [`podrace.play_match`][].

    Where observations are [`podrace.MaskedObservation`][]s the choice is among the
    actions their mask allows (every action where it allows none); otherwise among all
    `num_actions`. Its policy step reports the uniform choice's log-probability and entropy.

    **Arguments:**

    - `num_actions`: the number of discrete actions (`env.action_space.num_values`).
    """

    num_actions: int = eqx.field(static=True)

    def __check_init__(self):
        if not isinstance(self.num_actions, int) or self.num_actions < 1:
            raise ValueError(f"RandomAgent: num_actions must be a positive integer, got {self.num_actions!r}.")

    def __call__(
        self, observation: PyTree[Array], carry: PyTree[Array], key: PRNGKeyArray
    ) -> tuple[PolicyStep, PyTree[Array]]:
        legal = jnp.ones(self.num_actions, bool)
        if isinstance(observation, MaskedObservation):
            legal = legal_actions(observation.action_mask)
        num_legal = jnp.sum(legal)
        action = jax.random.choice(key, self.num_actions, p=legal / num_legal)
        log_prob = -jnp.log(num_legal.astype(jnp.float32))
        return PolicyStep(action.astype(jnp.int32), log_prob, -log_prob), carry
