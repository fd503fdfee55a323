"""DQN and its distributional heads: Q-learning from a replay buffer with a target network."""

from typing import Any, ClassVar, final

import optax
from jaxtyping import PRNGKeyArray

from ..learners import AbstractLearner, DQNLearner
from ..losses import AbstractLoss, CategoricalQLoss, QLearningLoss, QuantileQLoss
from ..networks import AbstractHead, CategoricalQHead, QuantileQHead, QValueHead
from ..policies import AbstractPolicy, Greedy
from .base import (
    double_setting,
    epsilon_decay_setting,
    epsilon_setting,
    num_atoms_setting,
    positive_int,
    setting,
    v_max_setting,
    v_min_setting,
)
from .q_values import discrete_action_count
from .replay import AbstractReplayConfig
from .torso_head import AbstractTorsoHeadConfig


@final
class DQNConfig(AbstractTorsoHeadConfig, AbstractReplayConfig):
    """DQN (Mnih et al., 2015) and its distributional relatives: epsilon-greedy acting
    (epsilon falling linearly from 1 to `epsilon` over `epsilon_decay_steps` environment
    steps), a replay buffer, a target network copied every `target_update_period`
    updates. `dqn` learns Q-values (`QLearningLoss`), `c51` a categorical return
    distribution (`CategoricalQLoss`, Bellemare et al., 2017), `qr-dqn` its quantiles
    (`QuantileQLoss`, Dabney et al., 2018); evaluated greedily.

    ```python
    config = pr.configs.DQNConfig(algorithm="c51", num_atoms=101, v_min=-100.0, v_max=100.0)
    pipeline = config.pipeline(pr.envs.cartpole_v1(), jax.random.key(0))
    ```
    """

    ALGORITHMS: ClassVar[tuple[str, ...]] = ("dqn", "c51", "qr-dqn")

    algorithm: str = setting("dqn", "the loss: dqn, c51 or qr-dqn", None)
    epsilon: float = epsilon_setting("the probability of a uniformly random action at the end of its decay")
    epsilon_decay_steps: int = epsilon_decay_setting()
    double: bool = double_setting()
    target_update_period: int = setting(100, "updates between copies of the target network", positive_int)
    num_atoms: int = num_atoms_setting()
    v_min: float = v_min_setting()
    v_max: float = v_max_setting()
    num_quantiles: int = setting(200, "qr-dqn: quantiles of each action's return", positive_int)

    def loss(self) -> AbstractLoss:
        """The loss `algorithm` names."""
        if self.algorithm == "c51":
            return CategoricalQLoss(discount=self.discount, double=self.double)
        if self.algorithm == "qr-dqn":
            return QuantileQLoss(discount=self.discount, double=self.double)
        return QLearningLoss(discount=self.discount, double=self.double)

    def head(self, action_space: Any, in_size: int, *, with_value: bool, key: PRNGKeyArray) -> AbstractHead[Any]:
        del with_value
        num_actions = discrete_action_count(self.algorithm, action_space)
        if self.algorithm == "c51":
            return CategoricalQHead(
                in_size, num_actions, num_atoms=self.num_atoms, v_min=self.v_min, v_max=self.v_max, key=key
            )
        if self.algorithm == "qr-dqn":
            return QuantileQHead(in_size, num_actions, num_quantiles=self.num_quantiles, key=key)
        return QValueHead(in_size, num_actions, key=key)

    def learner(self, action_space: Any, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> AbstractLearner:
        return DQNLearner(
            self.network(action_space, observation_shape, key),
            self.loss(),
            self.optimizer(),
            epsilon=optax.linear_schedule(1.0, self.epsilon, self.epsilon_decay_steps),
            buffer_size=self.buffer_size,
            batch_size=self.batch_size,
            min_replay_size=self.min_replay_size,
            gradient_steps=self.gradient_steps,
            target_update_period=self.target_update_period,
        )

    def evaluation_policy(self) -> AbstractPolicy:
        return Greedy()
