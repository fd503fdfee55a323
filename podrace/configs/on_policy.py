"""REINFORCE, A2C, PPO and V-trace: a policy head learnt from each rollout."""

from typing import Any, ClassVar, final

from jaxtyping import PRNGKeyArray

from .._types import Box, Discrete
from ..learners import AbstractLearner, Learner
from ..losses import A2CLoss, AbstractLoss, PPOLoss, ReinforceLoss, VTraceLoss
from ..networks import AbstractHead, GaussianHead, PolicyLogitHead
from ..policies import AbstractPolicy, Categorical, Gaussian, Mode
from .base import (
    core_setting,
    core_size_setting,
    lambda_setting,
    non_negative_float,
    positive_int,
    setting,
)
from .torso_head import AbstractTorsoHeadConfig


@final
class OnPolicyConfig(AbstractTorsoHeadConfig):
    """A policy-gradient agent learning from its own rollouts: `algorithm` picks the loss
    (`ReinforceLoss`, `A2CLoss`, `PPOLoss`, `VTraceLoss`); a categorical policy for
    discrete actions, a Gaussian for a flat Box, evaluated at its mode.

    ```python
    config = pr.configs.OnPolicyConfig(algorithm="ppo", num_envs=8, value_coefficient=0.02)
    pipeline = config.pipeline(pr.envs.cartpole_v1(), jax.random.key(0))
    ```
    """

    ALGORITHMS: ClassVar[tuple[str, ...]] = ("reinforce", "a2c", "ppo", "vtrace")

    algorithm: str = setting("ppo", "the loss: reinforce, a2c, ppo or vtrace", None)
    core: str | None = core_setting()
    core_size: int = core_size_setting()
    separate_critic: bool = setting(False, "a separate torso for the value", None)
    lambda_: float = lambda_setting("the GAE / V-trace trace coefficient, in [0, 1] (not reinforce's)")
    value_coefficient: float = setting(0.5, "weight of the value loss", non_negative_float, static=False)
    entropy_coefficient: float = setting(0.01, "weight of the entropy bonus", non_negative_float, static=False)
    normalize_advantages: bool = setting(True, "ppo: standardise the advantages per minibatch", None)
    baseline: bool = setting(True, "reinforce: a learnt value baseline", None)
    num_epochs: int | None = setting(
        None, "passes over each rollout (by default 4 for ppo, 1 for the others)", positive_int
    )
    num_minibatches: int | None = setting(
        None, "minibatches per pass, dividing the environments (by default 4 for ppo, 1 for the others)", positive_int
    )

    def __check_init__(self) -> None:
        for name, owner in (("normalize_advantages", "ppo"), ("baseline", "reinforce")):
            if getattr(self, name) is not True and self.algorithm != owner:
                raise ValueError(f"{name} is a setting of {owner}; {self.algorithm} does not read it: leave it out.")

    @property
    def passes(self) -> tuple[int, int]:
        """Epochs and minibatches per update."""
        default = 4 if self.algorithm == "ppo" else 1
        return self.num_epochs or default, self.num_minibatches or default

    @property
    def gradient_steps_per_update(self) -> int:
        num_epochs, num_minibatches = self.passes
        return num_epochs * num_minibatches

    def loss(self) -> AbstractLoss:
        """The loss `algorithm` names, with this configuration's coefficients."""
        value, entropy = self.value_coefficient, self.entropy_coefficient
        if self.algorithm == "reinforce":
            return ReinforceLoss(
                discount=self.discount, baseline=self.baseline, value_coefficient=value, entropy_coefficient=entropy
            )
        if self.algorithm == "a2c":
            return A2CLoss(
                discount=self.discount, lambda_=self.lambda_, value_coefficient=value, entropy_coefficient=entropy
            )
        if self.algorithm == "vtrace":
            return VTraceLoss(
                discount=self.discount, lambda_=self.lambda_, value_coefficient=value, entropy_coefficient=entropy
            )
        return PPOLoss(
            discount=self.discount,
            lambda_=self.lambda_,
            value_coefficient=value,
            entropy_coefficient=entropy,
            normalize_advantages=self.normalize_advantages,
        )

    def head(self, action_space: Any, in_size: int, *, with_value: bool, key: PRNGKeyArray) -> AbstractHead[Any]:
        if isinstance(action_space, Discrete):
            return PolicyLogitHead(in_size, action_space.num_values, with_value=with_value, key=key)
        if isinstance(action_space, Box) and len(action_space.shape) == 1:
            return GaussianHead(in_size, action_space.shape[0], with_value=with_value, key=key)
        raise ValueError(
            f"The environment's actions are {type(action_space).__name__} of shape {action_space.shape}: "
            "podrace's policy heads take discrete actions or a flat Box."
        )

    def training_policy(self, action_space: Any) -> AbstractPolicy:
        """Sampling from the policy head: categorical for discrete actions, Gaussian otherwise."""
        return Categorical() if isinstance(action_space, Discrete) else Gaussian()

    def learner(self, action_space: Any, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> AbstractLearner:
        network = self.network(
            action_space,
            observation_shape,
            key,
            core=self.core,
            core_size=self.core_size,
            separate_critic=self.separate_critic,
        )
        num_epochs, num_minibatches = self.passes
        return Learner(
            network,
            self.training_policy(action_space),
            self.loss(),
            self.optimizer(),
            num_epochs=num_epochs,
            num_minibatches=num_minibatches,
        )

    def evaluation_policy(self) -> AbstractPolicy:
        return Mode()
