"""The base of the agents that read the environment's state and step the environment
itself as their model (AlphaZero)."""

import abc
from typing import Any

from jaxtyping import Array, PRNGKeyArray, PyTree

from .._types import PolicyStep, TimeStep
from ..agent import AbstractAgent
from ..envs import AbstractEnv


class AbstractEnvModelAgent(AbstractAgent):
    """An agent that plans with the environment itself as its model: it reads the state of
    the environment it acts in and steps copies of it (AlphaZero's search).

    This extends the agents' contract as reading the previous action and reward does: the
    executor hands the agent more than the observation. [`podrace.Anakin`][]'s rollout
    calls `act_in` with the environment without its automatic reset and that
    environment's state; every other agent is still called with the observation alone.
    Because the model is the environment the executor steps, it cannot disagree with it.
    Such an agent cannot act from an observation alone: calling it as a plain agent raises
    a `TypeError` that says so.

    Reference: Silver et al., "A general reinforcement learning algorithm that masters
    chess, shogi, and Go through self-play", Science 2018 (search with the game's rules
    as the model).
    """

    @abc.abstractmethod
    def act_in(
        self,
        env: AbstractEnv,
        env_state: PyTree[Array],
        timestep: TimeStep,
        carry: PyTree[Array],
        key: PRNGKeyArray,
    ) -> tuple[PolicyStep, PyTree[Array]]:
        """Chooses an action in one (unbatched) environment by planning with `env`'s `step`.

        **Arguments:**

        - `env`: the environment, without an automatic reset (a bare environment, stepped
            past an episode's last step by no one).
        - `env_state`: its current state.
        - `timestep`: its latest time step (the observation, and whether the episode ended).
        - `carry`: the agent's recurrent state (reset by the caller where `is_first`).
        - `key`: the randomness of acting and of the model's steps.

        **Returns:**

        The policy step (with what the search found in its `extras`) and the next carry.
        """

    def __call__(self, observation: PyTree[Array], carry: PyTree[Array], key: PRNGKeyArray) -> Any:
        """Refuses: the agent plans from the environment's state, which an observation
        does not hold.

        **Arguments:**

        - `observation`, `carry`, `key`: as for every agent.

        **Returns:**

        Nothing: it raises `TypeError`, naming `act_in` and `podrace.Anakin`.
        """
        del observation, carry, key
        raise TypeError(
            f"{type(self).__name__} plans with the environment's state, which an observation alone does not hold: "
            "act with agent.act_in(env, env_state, timestep, carry, key), as podrace.Anakin's rollout does "
            "(host collectors and actors, which see observations only, cannot run it)."
        )
