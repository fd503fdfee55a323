"""AlphaZero: mctx's search with the environment as the model, learnt from its own rollouts."""

from typing import Any, ClassVar, final

from jaxtyping import PRNGKeyArray

from .._types import Discrete
from ..learners import AbstractLearner, AlphaZeroLearner
from ..losses import AlphaZeroLoss
from ..networks import AbstractHead, PolicyLogitHead
from ..policies import AbstractPolicy, Mode
from ..search import AbstractSearchOperator, AlphaZeroAgent, GumbelMuZeroSearch, MuZeroSearch
from .base import non_negative_float, positive_float, positive_int, setting, unit_interval
from .torso_head import AbstractTorsoHeadConfig


SEARCHES = ("gumbel", "muzero")
"""mctx's policy-improvement operators by name."""


def search_name(text: str) -> str:
    """One of `SEARCHES`."""
    if text not in SEARCHES:
        raise ValueError(f"must be one of {', '.join(SEARCHES)}, got {text!r}")
    return text


def step_count(text: str) -> int | None:
    """A positive number of steps, or `none`."""
    return None if text == "none" else positive_int(text)


@final
class AlphaZeroConfig(AbstractTorsoHeadConfig):
    """AlphaZero: a search agent ([`podrace.search.AlphaZeroAgent`][]) that plans with the
    environment's own `step`, an MLP torso and a policy head with a value, trained on its
    own rollouts by [`podrace.learners.AlphaZeroLearner`][] with
    [`podrace.losses.AlphaZeroLoss`][]; evaluated by the mode of the network's policy,
    without a search. It needs discrete actions.

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
    search: str = setting(
        "gumbel",
        "mctx's policy improvement: gumbel (Gumbel MuZero, for small budgets) or muzero (PUCT, Dirichlet noise)",
        search_name,
    )
    num_simulations: int = setting(16, "simulations of each search", positive_int)
    max_num_considered_actions: int = setting(
        16, "gumbel: the most root actions sequential halving starts from", positive_int
    )
    gumbel_scale: float = setting(1.0, "gumbel: the scale of the root's Gumbel noise", non_negative_float, static=False)
    dirichlet_fraction: float = setting(
        0.25, "muzero: the share of Dirichlet noise in the root's prior", unit_interval, static=False
    )
    dirichlet_alpha: float = setting(0.3, "muzero: the concentration of that noise", positive_float, static=False)
    n_step: int | None = setting(
        None, "value targets: rewards summed before bootstrapping ('none': to the end of the rollout)", step_count
    )
    lambda_: float = setting(1.0, "the TD(lambda) mixing of the value targets, in [0, 1]", unit_interval, static=False)
    value_coefficient: float = setting(1.0, "weight of the value loss", non_negative_float, static=False)
    num_epochs: int = setting(1, "passes over each rollout", positive_int)
    num_minibatches: int = setting(1, "minibatches per pass, dividing the environments", positive_int)

    @property
    def gradient_steps_per_update(self) -> int:
        return self.num_epochs * self.num_minibatches

    def operator(self) -> AbstractSearchOperator:
        """mctx's policy-improvement operator that `search` names, with its settings."""
        if self.search == "muzero":
            return MuZeroSearch(
                self.num_simulations, dirichlet_fraction=self.dirichlet_fraction, dirichlet_alpha=self.dirichlet_alpha
            )
        return GumbelMuZeroSearch(
            self.num_simulations,
            max_num_considered_actions=self.max_num_considered_actions,
            gumbel_scale=self.gumbel_scale,
        )

    def head(self, action_space: Any, in_size: int, *, with_value: bool, key: PRNGKeyArray) -> AbstractHead[Any]:
        if not isinstance(action_space, Discrete):
            raise ValueError(
                f"{self.algorithm} searches over discrete actions; the environment's actions are "
                f"{type(action_space).__name__} of shape {action_space.shape}. Use an environment with "
                "discrete actions, or a policy-gradient algorithm (ppo) for these."
            )
        return PolicyLogitHead(in_size, action_space.num_values, with_value=with_value, key=key)

    def learner(self, action_space: Any, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> AbstractLearner:
        network = self.network(action_space, observation_shape, key)
        agent = AlphaZeroAgent(network, self.operator(), discount=self.discount)
        loss = AlphaZeroLoss(n_step=self.n_step, lambda_=self.lambda_, value_coefficient=self.value_coefficient)
        return AlphaZeroLearner(
            agent, loss, self.optimizer(), num_epochs=self.num_epochs, num_minibatches=self.num_minibatches
        )

    def evaluation_policy(self) -> AbstractPolicy:
        return Mode()
