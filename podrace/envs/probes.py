"""Probe environments: one- and two-step tasks whose values are known in closed form.

Each probe isolates one part of a learner (the value regression, backpropagation
through the network, discounting, the policy update, their interaction), so that a
learner that fails a probe points at the part that is broken.

Reference: Jones, "Debugging RL, Without the Agonizing Pain", 2021
(https://andyljones.com/posts/rl-debugging.html).
"""

import abc
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from .._types import Box, Discrete, TimeStep
from ._base import AbstractEnv


@final
class ProbeState(eqx.Module):
    """The state of a probe: the observation it shows, which determines everything else.

    **Arguments:**

    - `observation`: the current observation, shape `(1,)`.
    """

    observation: Float[Array, " 1"]


class AbstractProbe(AbstractEnv[ProbeState]):
    """A probe environment: an episode of one or two steps whose values are known in closed form.

    Every probe shows a `float32` observation of shape `(1,)` in `[-1, 1]` and takes the
    actions of `Discrete(2)`, so that any discrete-action learner runs on every probe
    (probes whose reward ignores the action accept it all the same). Episodes
    terminate; the terminal step shows the last observation again (its value is never
    used, the discount there being 0).

    `observations` lists what an episode shows before its end, and `optimal_q_values`
    and `optimal_value` give the values of the optimal policy there: a learner that
    solves the probe predicts them. Those are also the values of an actor-critic's
    policy once it picks the optimal actions.

    Reference: Jones, "Debugging RL, Without the Agonizing Pain", 2021.
    """

    @property
    def observation_space(self) -> Box:
        return Box(-1.0, 1.0, (1,))

    @property
    def action_space(self) -> Discrete:
        return Discrete(2)

    @property
    @abc.abstractmethod
    def observations(self) -> Float[Array, "num_observations 1"]:
        """Every observation that an episode shows before its end, one per row."""

    @abc.abstractmethod
    def optimal_q_values(self, observation: Float[Array, " 1"], discount: ArrayLike) -> Float[Array, " 2"]:
        """The optimal action values `Q*(observation, a)` of the two actions.

        **Arguments:**

        - `observation`: one of `observations`.
        - `discount`: the agent's discount factor.

        **Returns:**

        The expected discounted return of each action, acting optimally afterwards.
        """

    def optimal_value(self, observation: Float[Array, " 1"], discount: ArrayLike) -> Float[Array, ""]:
        """The optimal state value `V*(observation) = max_a Q*(observation, a)`.

        **Arguments:**

        - `observation`: one of `observations`.
        - `discount`: the agent's discount factor.

        **Returns:**

        The expected discounted return of the optimal policy from `observation`.
        """
        return jnp.max(self.optimal_q_values(observation, discount))


def _constant(value: float) -> Float[Array, " 1"]:
    return jnp.full((1,), value, jnp.float32)


def _random_sign(key: PRNGKeyArray) -> Float[Array, " 1"]:
    """+1 or -1 with probability 1/2 each."""
    return jax.random.rademacher(key, (1,), jnp.float32)


def _start(observation: Float[Array, " 1"]) -> tuple[ProbeState, TimeStep]:
    """The state and first time step of an episode that shows `observation` first."""
    return ProbeState(observation), TimeStep.first(observation)


def _matches_sign(action: Array, observation: Float[Array, " 1"]) -> Array:
    """Whether `action` is 1 for a positive observation and 0 for a negative one."""
    return (action == 1) == (observation[0] > 0)


@final
class ConstantRewardProbe(AbstractProbe):
    """Probe 1: a constant observation 0, one step, reward +1 whatever the action.

    `V = 1`. It isolates the value regression: a learner that does not learn it has a
    broken value loss or optimiser.

    Reference: Jones, "Debugging RL, Without the Agonizing Pain", 2021 (probe 1).
    """

    @property
    def observations(self) -> Float[Array, "num_observations 1"]:
        return _constant(0.0)[None]

    def reset(self, key: PRNGKeyArray) -> tuple[ProbeState, TimeStep]:
        del key
        return _start(_constant(0.0))

    def step(self, state: ProbeState, action: Array, key: PRNGKeyArray) -> tuple[ProbeState, TimeStep]:
        del action, key
        return state, TimeStep.transition(state.observation, 1.0, True)

    def optimal_q_values(self, observation: Float[Array, " 1"], discount: ArrayLike) -> Float[Array, " 2"]:
        del observation, discount
        return jnp.ones(2, jnp.float32)


@final
class ObservationRewardProbe(AbstractProbe):
    """Probe 2: an observation of +1 or -1 at random, one step, reward equal to the observation.

    `V(observation) = observation`, whatever the action. A learner that solves
    [`podrace.envs.ConstantRewardProbe`][] but not this one does not backpropagate
    through its network correctly.

    Reference: Jones, "Debugging RL, Without the Agonizing Pain", 2021 (probe 2).
    """

    @property
    def observations(self) -> Float[Array, "num_observations 1"]:
        return jnp.asarray([[-1.0], [1.0]], jnp.float32)

    def reset(self, key: PRNGKeyArray) -> tuple[ProbeState, TimeStep]:
        return _start(_random_sign(key))

    def step(self, state: ProbeState, action: Array, key: PRNGKeyArray) -> tuple[ProbeState, TimeStep]:
        del action, key
        return state, TimeStep.transition(state.observation, state.observation[0], True)

    def optimal_q_values(self, observation: Float[Array, " 1"], discount: ArrayLike) -> Float[Array, " 2"]:
        del discount
        return jnp.broadcast_to(observation, (2,)).astype(jnp.float32)


@final
class DelayedRewardProbe(AbstractProbe):
    """Probe 3: two steps, observation 0 then 1, reward 0 then +1, whatever the actions.

    `V(0) = discount` and `V(1) = 1`. A learner that solves
    [`podrace.envs.ObservationRewardProbe`][] but not this one discounts or bootstraps
    wrongly.

    Reference: Jones, "Debugging RL, Without the Agonizing Pain", 2021 (probe 3).
    """

    @property
    def observations(self) -> Float[Array, "num_observations 1"]:
        return jnp.asarray([[0.0], [1.0]], jnp.float32)

    def reset(self, key: PRNGKeyArray) -> tuple[ProbeState, TimeStep]:
        del key
        return _start(_constant(0.0))

    def step(self, state: ProbeState, action: Array, key: PRNGKeyArray) -> tuple[ProbeState, TimeStep]:
        del action, key
        second_step = state.observation[0] == 1.0
        state = ProbeState(_constant(1.0))
        return state, TimeStep.transition(state.observation, jnp.where(second_step, 1.0, 0.0), second_step)

    def optimal_q_values(self, observation: Float[Array, " 1"], discount: ArrayLike) -> Float[Array, " 2"]:
        value = jnp.where(observation[0] == 1.0, 1.0, jnp.asarray(discount, jnp.float32))
        return jnp.broadcast_to(value, (2,)).astype(jnp.float32)


@final
class ActionRewardProbe(AbstractProbe):
    """Probe 4: a constant observation 0, one step, reward +1 for action 1 and -1 for action 0.

    `Q(0, a) = (-1, +1)` and `V = 1` under the optimal policy. The first probe that
    exercises the policy: a learner that does not pick action 1 has a broken advantage,
    policy loss or policy update.

    Reference: Jones, "Debugging RL, Without the Agonizing Pain", 2021 (probe 4).
    """

    @property
    def observations(self) -> Float[Array, "num_observations 1"]:
        return _constant(0.0)[None]

    def reset(self, key: PRNGKeyArray) -> tuple[ProbeState, TimeStep]:
        del key
        return _start(_constant(0.0))

    def step(self, state: ProbeState, action: Array, key: PRNGKeyArray) -> tuple[ProbeState, TimeStep]:
        del key
        return state, TimeStep.transition(state.observation, jnp.where(action == 1, 1.0, -1.0), True)

    def optimal_q_values(self, observation: Float[Array, " 1"], discount: ArrayLike) -> Float[Array, " 2"]:
        del observation, discount
        return jnp.asarray([-1.0, 1.0], jnp.float32)


@final
class ObservationActionRewardProbe(AbstractProbe):
    """Probe 5: an observation of +1 or -1 at random, one step, reward +1 for the action that matches it.

    Action 1 matches +1 and action 0 matches -1; the other action earns -1. So
    `Q(+1, a) = (-1, +1)`, `Q(-1, a) = (+1, -1)` and `V = 1` in both states under the
    optimal policy. The policy must read the observation and the value must learn
    from fresh experience: a learner that solves the other probes but not this one
    may, for example, feed its value or policy stale or misaligned batches.

    Reference: Jones, "Debugging RL, Without the Agonizing Pain", 2021 (probe 5).
    """

    @property
    def observations(self) -> Float[Array, "num_observations 1"]:
        return jnp.asarray([[-1.0], [1.0]], jnp.float32)

    def reset(self, key: PRNGKeyArray) -> tuple[ProbeState, TimeStep]:
        return _start(_random_sign(key))

    def step(self, state: ProbeState, action: Array, key: PRNGKeyArray) -> tuple[ProbeState, TimeStep]:
        del key
        reward = jnp.where(_matches_sign(action, state.observation), 1.0, -1.0)
        return state, TimeStep.transition(state.observation, reward, True)

    def optimal_q_values(self, observation: Float[Array, " 1"], discount: ArrayLike) -> Float[Array, " 2"]:
        del discount
        return jnp.where(_matches_sign(jnp.arange(2), observation), 1.0, -1.0).astype(jnp.float32)
