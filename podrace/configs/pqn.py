"""PQN: Q(lambda) from parallel rollouts, in epochs of minibatches of single transitions."""

from typing import Any, ClassVar, final

import optax
from jaxtyping import PRNGKeyArray

from ..learners import AbstractLearner, Learner
from ..losses import AbstractLoss, CategoricalPQNLoss, PQNLoss
from ..networks import AbstractHead, CategoricalQHead, QValueHead
from ..policies import AbstractPolicy, EpsilonGreedy, Greedy
from .base import (
    epsilon_decay_setting,
    epsilon_setting,
    lambda_setting,
    num_atoms_setting,
    positive_int,
    setting,
    v_max_setting,
    v_min_setting,
)
from .q_values import discrete_action_count
from .torso_head import AbstractTorsoHeadConfig


@final
class PQNConfig(AbstractTorsoHeadConfig):
    """PQN (Gallici et al., "Simplifying Deep Temporal Difference Learning", 2024): Peng's
    Q(lambda) returns of each rollout, then `num_epochs` epochs of `num_minibatches`
    minibatches of single transitions; epsilon falls linearly from 1 to `epsilon` over
    `epsilon_decay_steps` environment steps. `pqn` learns Q-values (`PQNLoss`), `c51-pqn`
    a categorical return distribution of `num_atoms` atoms from `v_min` to `v_max`
    (`CategoricalPQNLoss`); evaluated greedily.

    ```python
    config = pr.configs.PQNConfig(algorithm="pqn", layer_norm=True, num_envs=4, lambda_=0.65)
    pipeline = config.pipeline(pr.envs.cartpole_v1(), jax.random.key(0))
    ```
    """

    ALGORITHMS: ClassVar[tuple[str, ...]] = ("pqn", "c51-pqn")

    algorithm: str = setting("pqn", "the loss: pqn or c51-pqn", None)
    lambda_: float = lambda_setting("the Q(lambda) trace coefficient, in [0, 1]")
    epsilon: float = epsilon_setting("the probability of a uniformly random action at the end of its decay")
    epsilon_decay_steps: int = epsilon_decay_setting()
    num_epochs: int = setting(4, "passes over each rollout", positive_int)
    num_minibatches: int = setting(4, "minibatches of single transitions per pass", positive_int)
    num_atoms: int = num_atoms_setting()
    v_min: float = v_min_setting()
    v_max: float = v_max_setting()

    @property
    def gradient_steps_per_update(self) -> int:
        return self.num_epochs * self.num_minibatches

    def loss(self) -> AbstractLoss:
        """The loss `algorithm` names."""
        if self.algorithm == "c51-pqn":
            return CategoricalPQNLoss(discount=self.discount, lambda_=self.lambda_)
        return PQNLoss(discount=self.discount, lambda_=self.lambda_)

    def head(self, action_space: Any, in_size: int, *, with_value: bool, key: PRNGKeyArray) -> AbstractHead[Any]:
        del with_value
        num_actions = discrete_action_count(self.algorithm, action_space)
        if self.algorithm == "c51-pqn":
            return CategoricalQHead(
                in_size, num_actions, num_atoms=self.num_atoms, v_min=self.v_min, v_max=self.v_max, key=key
            )
        return QValueHead(in_size, num_actions, key=key)

    def learner(self, action_space: Any, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> AbstractLearner:
        return Learner(
            self.network(action_space, observation_shape, key),
            EpsilonGreedy(optax.linear_schedule(1.0, self.epsilon, self.epsilon_decay_steps)),
            self.loss(),
            self.optimizer(),
            num_epochs=self.num_epochs,
            num_minibatches=self.num_minibatches,
            minibatches_of="transitions",
        )

    def evaluation_policy(self) -> AbstractPolicy:
        return Greedy()
