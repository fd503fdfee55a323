"""AlphaZero: mctx's search with the environment as the model, learnt from its own rollouts."""

from typing import Any, ClassVar, final

from jaxtyping import PRNGKeyArray

from ..learners import AbstractLearner, AlphaZeroLearner
from ..losses import AlphaZeroLoss
from ..networks import AbstractHead, PolicyLogitHead
from ..search import AlphaZeroAgent
from .base import positive_int, setting, unit_interval
from .muzero import AbstractSearchConfig, rescale_values_setting
from .torso_head import AbstractTorsoHeadConfig


def step_count(text: str) -> int | None:
    """A positive number of steps, or `none`."""
    return None if text == "none" else positive_int(text)


@final
class AlphaZeroConfig(AbstractTorsoHeadConfig, AbstractSearchConfig):
    """AlphaZero: a search agent ([`podrace.search.AlphaZeroAgent`][]) that plans with the
    environment's own `step`, an MLP torso and a policy head with a value, trained on its
    own rollouts by [`podrace.learners.AlphaZeroLearner`][] with
    [`podrace.losses.AlphaZeroLoss`][]. `podrace evaluate` plays the agent with
    `evaluation_search()` (its search without noise); `evaluation_policy()`, the mode of
    the network's policy without a search, draws its videos and exports. It needs
    discrete actions.

    Reference: Silver et al., "A general reinforcement learning algorithm that masters
    chess, shogi, and Go through self-play", Science 2018; Danihelka et al., "Policy
    improvement by planning with Gumbel", ICLR 2022.

    ```python
    config = pr.configs.AlphaZeroConfig(algorithm="alphazero", num_simulations=8)
    pipeline = config.pipeline(pr.envs.Catch(), jax.random.key(0))
    ```
    """

    ALGORITHMS: ClassVar[tuple[str, ...]] = ("alphazero",)

    algorithm: str = setting("alphazero", "the algorithm: alphazero", None)
    rescale_values: bool = rescale_values_setting(True)
    n_step: int | None = setting(
        None, "value targets: rewards summed before bootstrapping ('none': to the end of the rollout)", step_count
    )
    lambda_: float = setting(1.0, "the TD(lambda) mixing of the value targets, in [0, 1]", unit_interval, static=False)

    @property
    def gradient_steps_per_update(self) -> int:
        return self.num_epochs * self.num_minibatches

    def head(self, action_space: Any, in_size: int, *, with_value: bool, key: PRNGKeyArray) -> AbstractHead[Any]:
        return PolicyLogitHead(in_size, self.num_actions(action_space), with_value=with_value, key=key)

    def learner(self, action_space: Any, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> AbstractLearner:
        network = self.network(action_space, observation_shape, key)
        agent = AlphaZeroAgent(network, self.operator(), discount=self.discount)
        loss = AlphaZeroLoss(n_step=self.n_step, lambda_=self.lambda_, value_coefficient=self.value_coefficient)
        return AlphaZeroLearner(
            agent, loss, self.optimizer(), num_epochs=self.num_epochs, num_minibatches=self.num_minibatches
        )
