"""SAC: a stochastic actor, twin Q-critics and a learnt temperature, for continuous or discrete actions."""

from typing import Any, ClassVar, final

import jax
from jaxtyping import PRNGKeyArray

from .._types import Discrete
from ..learners import AbstractLearner, DiscreteSACLearner, SACLearner
from ..networks import FeedForwardNetwork, PolicyLogitHead, QValueHead, TanhGaussianHead
from ..policies import AbstractPolicy, Mode, TanhGaussian, random_first_steps
from .actor_critic import AbstractActorCriticConfig, flat_box
from .base import finite_float, setting


@final
class SACConfig(AbstractActorCriticConfig):
    """SAC (Haarnoja et al., 2018): an MLP actor with a tanh-squashed Gaussian head, twin
    MLP critics and a temperature steered to `target_entropy`; for discrete actions
    (Christodoulou, 2019), a categorical actor and twin MLP Q-networks. Evaluated at the
    policy's mode.

    ```python
    config = pr.configs.SACConfig(hidden=(64, 64), activation="relu", gradient_steps=4)
    pipeline = config.pipeline(pr.envs.pendulum_v1(), jax.random.key(0))
    ```
    """

    ALGORITHMS: ClassVar[tuple[str, ...]] = ("sac",)

    algorithm: str = setting("sac", "sac", None)
    target_entropy: float | None = setting(
        None,
        "the entropy the temperature steers to (minus the action size by default; for discrete actions "
        "0.98 log(actions))",
        finite_float,
        static=False,
    )

    def learner(self, action_space: Any, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> AbstractLearner:
        optimizer = self.optimizer()
        if isinstance(action_space, Discrete):
            return DiscreteSACLearner(
                *self._discrete_networks(action_space.num_values, observation_shape, key),
                optimizer,
                optimizer,
                optimizer,
                target_entropy=self.target_entropy,
                **self.replay_settings(),
            )
        action_size, low, high = flat_box(self.algorithm, action_space)
        torso_key, head_key, critic_key = jax.random.split(key, 3)
        actor = FeedForwardNetwork(
            self.torso(observation_shape, torso_key),
            TanhGaussianHead(self.hidden[-1], action_size, low=low, high=high, key=head_key),
        )
        return SACLearner(
            actor,
            self.critic(observation_shape, action_size, 2, critic_key),
            optimizer,
            optimizer,
            optimizer,
            exploration=TanhGaussian(random_first_steps(self.random_steps)),
            target_entropy=self.target_entropy,
            **self.replay_settings(),
        )

    def _discrete_networks(
        self, num_actions: int, observation_shape: tuple[int, ...], key: PRNGKeyArray
    ) -> tuple[FeedForwardNetwork, list[FeedForwardNetwork]]:
        """A categorical actor and twin Q-networks, MLPs of the same hidden sizes."""
        if self.random_steps > 0:
            raise ValueError(
                "random_steps takes uniformly random actions of continuous control; leave it out for sac "
                "on discrete actions, whose categorical actor starts near uniform."
            )
        features = self.hidden[-1]
        actor_key, *critic_keys = jax.random.split(key, 3)
        torso_key, head_key = jax.random.split(actor_key)
        actor = FeedForwardNetwork(
            self.torso(observation_shape, torso_key), PolicyLogitHead(features, num_actions, key=head_key)
        )
        critics = []
        for critic_key in critic_keys:
            torso_key, head_key = jax.random.split(critic_key)
            critics.append(
                FeedForwardNetwork(
                    self.torso(observation_shape, torso_key), QValueHead(features, num_actions, key=head_key)
                )
            )
        return actor, critics

    def evaluation_policy(self) -> AbstractPolicy:
        return Mode()
