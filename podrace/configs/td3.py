"""DDPG and TD3: a deterministic actor and Q-critics, learnt off-policy."""

from typing import Any, ClassVar, final

import jax
from jaxtyping import PRNGKeyArray

from ..learners import AbstractLearner, TD3Learner, ddpg
from ..networks import DeterministicHead, FeedForwardNetwork
from ..policies import AbstractPolicy, Deterministic, GaussianNoise, random_first_steps
from .actor_critic import AbstractActorCriticConfig, flat_box
from .base import non_negative_float, positive_float, positive_int, setting


@final
class TD3Config(AbstractActorCriticConfig):
    """DDPG (Lillicrap et al., 2016) and TD3 (Fujimoto et al., 2018): an MLP actor with a
    bounded deterministic head, exploring with Gaussian noise, and MLP critics (one for
    `ddpg`, twin for `td3`, which also smooths its target policy and delays its actor);
    evaluated with the actor's action.

    ```python
    config = pr.configs.TD3Config(algorithm="td3", hidden=(64, 64), activation="relu", random_steps=1_000)
    pipeline = config.pipeline(pr.envs.pendulum_v1(), jax.random.key(0))
    ```
    """

    ALGORITHMS: ClassVar[tuple[str, ...]] = ("ddpg", "td3")

    algorithm: str = setting("td3", "ddpg or td3", None)
    exploration_noise: float = setting(
        0.1, "Gaussian action noise, relative to half the action range", positive_float, static=False
    )
    target_noise: float = setting(
        0.2, "td3: target policy smoothing noise, relative to half the range", non_negative_float, static=False
    )
    policy_delay: int = setting(2, "td3: critic steps per actor and target step", positive_int)

    def learner(self, action_space: Any, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> AbstractLearner:
        action_size, low, high = flat_box(self.algorithm, action_space)
        torso_key, head_key, critic_key = jax.random.split(key, 3)
        features = self.hidden[-1]
        actor = FeedForwardNetwork(
            self.torso(observation_shape, torso_key),
            DeterministicHead(features, action_size, low=low, high=high, key=head_key),
        )
        num_critics = 1 if self.algorithm == "ddpg" else 2
        critic = self.critic(observation_shape, action_size, num_critics, critic_key)
        optimizer = self.optimizer()
        exploration = GaussianNoise(self.exploration_noise, random_first_steps(self.random_steps))
        if self.algorithm == "ddpg":
            return ddpg(actor, critic, optimizer, optimizer, exploration=exploration, **self.replay_settings())
        return TD3Learner(
            actor,
            critic,
            optimizer,
            optimizer,
            exploration=exploration,
            target_noise=self.target_noise,
            policy_delay=self.policy_delay,
            **self.replay_settings(),
        )

    def evaluation_policy(self) -> AbstractPolicy:
        return Deterministic()
