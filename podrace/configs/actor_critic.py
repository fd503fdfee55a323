"""The settings and parts shared by the off-policy actor-critic families (TD3, SAC)."""

from typing import Any

from jaxtyping import PRNGKeyArray

from .._types import Box
from ..networks import MLPCritic, MLPTorso
from .base import ACTIVATIONS, non_negative_int, setting, unit_interval
from .replay import AbstractReplayConfig


class AbstractActorCriticConfig(AbstractReplayConfig):
    """An actor and critics of MLPs, learnt off-policy from replay with Polyak-averaged targets."""

    tau: float = setting(0.005, "the Polyak step of the target networks", unit_interval, static=False)
    random_steps: int = setting(0, "environment steps of uniformly random actions first", non_negative_int)

    def replay_settings(self) -> dict[str, Any]:
        """The replay and target keyword arguments every actor-critic learner takes."""
        return dict(
            buffer_size=self.buffer_size,
            batch_size=self.batch_size,
            discount=self.discount,
            tau=self.tau,
            min_replay_size=self.min_replay_size,
            gradient_steps=self.gradient_steps,
        )

    def torso(self, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> MLPTorso:
        """The actor's MLP torso."""
        return MLPTorso(observation_shape, self.hidden, activation=ACTIVATIONS[self.activation], key=key)

    def critic(
        self, observation_shape: tuple[int, ...], action_size: int, num_critics: int, key: PRNGKeyArray
    ) -> MLPCritic:
        """`num_critics` MLP critics of the observation and the action."""
        return MLPCritic(
            observation_shape,
            action_size,
            self.hidden,
            num_critics=num_critics,
            activation=ACTIVATIONS[self.activation],
            key=key,
        )


def flat_box(algorithm: str, action_space: Any) -> tuple[int, list[float], list[float]]:
    """The size and bounds of a flat Box of actions, which `algorithm` learns; otherwise a `ValueError`."""
    if not isinstance(action_space, Box) or len(action_space.shape) != 1:
        raise ValueError(
            f"{algorithm} learns continuous actions; the environment's actions are {type(action_space).__name__}. "
            "Use it on an environment with a flat Box action space, such as pendulum."
        )
    return action_space.shape[0], action_space.low.tolist(), action_space.high.tolist()
