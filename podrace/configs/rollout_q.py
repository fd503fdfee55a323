"""TD(lambda) Q-learning and one-step Q-learning from each rollout, epsilon-greedy."""

from typing import Any, ClassVar, final

from jaxtyping import PRNGKeyArray

from ..learners import AbstractLearner, Learner
from ..losses import AbstractLoss, QLearningLoss, TDLambdaQLoss
from ..networks import AbstractHead, QValueHead
from ..policies import AbstractPolicy, EpsilonGreedy, Greedy
from .base import core_setting, core_size_setting, double_setting, epsilon_setting, lambda_setting, setting
from .q_values import discrete_action_count
from .torso_head import AbstractTorsoHeadConfig


@final
class RolloutQConfig(AbstractTorsoHeadConfig):
    """Q-learning from the rollouts of an epsilon-greedy policy (greedy at `epsilon=0`),
    one gradient step per rollout: `td-lambda` (`TDLambdaQLoss`: the Podracer paper's
    Anakin experiment) or `q-learning` (`QLearningLoss`); evaluated greedily.

    ```python
    config = pr.configs.RolloutQConfig(algorithm="td-lambda", num_envs=128, rollout_length=16, lambda_=0.99)
    pipeline = config.pipeline(pr.envs.Catch(), jax.random.key(0))
    ```
    """

    ALGORITHMS: ClassVar[tuple[str, ...]] = ("td-lambda", "q-learning")

    algorithm: str = setting("td-lambda", "the loss: td-lambda or q-learning", None)
    core: str | None = core_setting()
    core_size: int = core_size_setting()
    lambda_: float = lambda_setting("td-lambda: the trace coefficient, in [0, 1]")
    epsilon: float = epsilon_setting("the probability of a uniformly random action (0: greedy)")
    double: bool = double_setting()

    def __check_init__(self) -> None:
        if self.double and self.algorithm != "q-learning":
            raise ValueError(f"double is a setting of q-learning; {self.algorithm} does not read it: leave it out.")

    @property
    def gradient_steps_per_update(self) -> int:
        return 1

    def loss(self) -> AbstractLoss:
        """The loss `algorithm` names."""
        if self.algorithm == "q-learning":
            return QLearningLoss(discount=self.discount, double=self.double)
        return TDLambdaQLoss(discount=self.discount, lambda_=self.lambda_)

    def head(self, action_space: Any, in_size: int, *, with_value: bool, key: PRNGKeyArray) -> AbstractHead[Any]:
        del with_value
        num_actions = discrete_action_count(self.algorithm, action_space)
        return QValueHead(in_size, num_actions, key=key)

    def learner(self, action_space: Any, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> AbstractLearner:
        network = self.network(action_space, observation_shape, key, core=self.core, core_size=self.core_size)
        policy = Greedy() if self.epsilon == 0 else EpsilonGreedy(self.epsilon)
        return Learner(network, policy, self.loss(), self.optimizer())

    def evaluation_policy(self) -> AbstractPolicy:
        return Greedy()
