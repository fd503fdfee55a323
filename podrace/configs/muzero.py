"""MuZero: mctx's search over a learnt model, learnt from its own rollouts; and the search
settings it shares with AlphaZero (the operators' names, one of which is `muzero`, live in
this family's module, the only one that may name the algorithm)."""

from typing import Any, ClassVar, final

import equinox as eqx
from jaxtyping import PRNGKeyArray

from .._types import Discrete
from ..learners import AbstractLearner, AlphaZeroLearner, MuZeroReplayLearner
from ..losses import MuZeroLoss
from ..networks import MuZeroNetwork
from ..policies import AbstractPolicy, Mode
from ..search import AbstractSearchOperator, GumbelMuZeroSearch, MuZeroAgent, MuZeroSearch
from .base import (
    ACTIVATIONS,
    AbstractConfig,
    non_negative_float,
    optional_positive_int,
    positive_float,
    positive_int,
    setting,
    unit_interval,
)


SEARCHES = ("gumbel", "muzero")
"""mctx's policy-improvement operators by name."""


def search_name(text: str) -> str:
    """One of `SEARCHES`."""
    if text not in SEARCHES:
        raise ValueError(f"must be one of {', '.join(SEARCHES)}, got {text!r}")
    return text


def rescale_values_setting(default: bool) -> Any:
    """Gumbel MuZero's rescaling of the completed Q-values, on by default for AlphaZero
    (the environment's own Q-values) and off for MuZero (a learnt model's)."""
    return setting(
        default,
        "gumbel: rescale the completed Q-values into [0, 1] before sigma (off for a learnt model's early noise)",
        None,
    )


class AbstractSearchConfig(AbstractConfig):
    """The settings of a search agent's families (AlphaZero, MuZero): mctx's operator and
    its budget, and the on-policy passes of [`podrace.learners.AlphaZeroLearner`][] over
    each rollout.

    **Attributes:**

    - `rescale_values`: [`podrace.search.GumbelMuZeroSearch`][]'s `rescale_values`, whose
        default each family sets.
    """

    # Not a dataclass field (Equinox drops abstract variables), whatever the type checker reads.
    rescale_values: eqx.AbstractVar[bool]  # pyright: ignore[reportGeneralTypeIssues]

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
    value_coefficient: float = setting(1.0, "weight of the value loss", non_negative_float, static=False)
    num_epochs: int = setting(1, "passes over each rollout", positive_int)
    num_minibatches: int = setting(1, "minibatches per pass, dividing the environments", positive_int)

    def operator(self) -> AbstractSearchOperator:
        """mctx's policy-improvement operator that `search` names, with its settings."""
        return self._operator(self.gumbel_scale, self.dirichlet_fraction, temperature=1.0)

    def evaluation_search(self) -> AbstractSearchOperator:
        """`operator()` without its noise, as `podrace evaluate` plays the agent: Gumbel
        MuZero without Gumbel noise; PUCT without Dirichlet noise, acting on the most
        visited action (a temperature of 1e-3)."""
        return self._operator(0.0, 0.0, temperature=1e-3)

    def _operator(self, gumbel_scale: Any, dirichlet_fraction: Any, *, temperature: float) -> AbstractSearchOperator:
        """The operator that `search` names with these amounts of noise (the temperature of
        PUCT's choice among the visit counts; Gumbel's choice has none)."""
        if self.search == "muzero":
            return MuZeroSearch(
                self.num_simulations,
                dirichlet_fraction=dirichlet_fraction,
                dirichlet_alpha=self.dirichlet_alpha,
                temperature=temperature,
            )
        return GumbelMuZeroSearch(
            self.num_simulations,
            max_num_considered_actions=self.max_num_considered_actions,
            gumbel_scale=gumbel_scale,
            rescale_values=self.rescale_values,
        )

    def num_actions(self, action_space: Any) -> int:
        """The number of actions a search chooses from.

        **Arguments:**

        - `action_space`: the environment's action space.

        **Returns:**

        Its number of discrete actions; `ValueError`, naming the fix, for other spaces.
        """
        if not isinstance(action_space, Discrete):
            raise ValueError(
                f"{self.algorithm} searches over discrete actions; the environment's actions are "
                f"{type(action_space).__name__} of shape {action_space.shape}. Use an environment with "
                "discrete actions, or a policy-gradient algorithm (ppo) for these."
            )
        return action_space.num_values

    def evaluation_policy(self) -> AbstractPolicy:
        return Mode()


@final
class MuZeroConfig(AbstractSearchConfig):
    """MuZero: a search agent ([`podrace.search.MuZeroAgent`][]) that plans with a learnt
    model ([`podrace.networks.MuZeroNetwork`][]: representation, dynamics and prediction
    MLPs of the `hidden` sizes), trained on its own rollouts by
    [`podrace.learners.AlphaZeroLearner`][] with [`podrace.losses.MuZeroLoss`][], or,
    with `replay`, by [`podrace.learners.MuZeroReplayLearner`][] from sequences replayed
    from a buffer of `buffer_size` time steps (`batch_size` sequences per gradient step,
    `gradient_steps` per update, once `min_replay_size` are stored). `podrace evaluate`
    plays the agent with `evaluation_search()` (its search without noise);
    `evaluation_policy()`, the mode of the prediction at the observation's latent state
    without a search, draws its videos and exports. It needs discrete actions.

    Reference: Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning with
    a Learned Model", Nature 2020; Danihelka et al., "Policy improvement by planning with
    Gumbel", ICLR 2022.

    ```python
    config = pr.configs.MuZeroConfig(algorithm="muzero", num_simulations=4)
    pipeline = config.pipeline(pr.envs.Catch(), jax.random.key(0))
    ```
    """

    ALGORITHMS: ClassVar[tuple[str, ...]] = ("muzero",)

    algorithm: str = setting("muzero", "the algorithm: muzero", None)
    rescale_values: bool = rescale_values_setting(False)
    latent_size: int = setting(32, "the size of the model's latent state", positive_int)
    num_unroll_steps: int = setting(5, "dynamics steps unrolled from each start in training (K)", positive_int)
    n_step: int = setting(10, "value targets: rewards summed before bootstrapping from a root value", positive_int)
    replay: bool = setting(
        False, "learn from replayed sequences (buffer, batch size, gradient steps) instead of each rollout", None
    )
    buffer_size: int = setting(100_000, "replay capacity, in time steps", positive_int)
    batch_size: int = setting(128, "replay: sequences per gradient step", positive_int)
    min_replay_size: int = setting(1_000, "replay: time steps stored before learning starts", positive_int)
    gradient_steps: int = setting(8, "replay: gradient steps per update", positive_int)
    support_size: int | None = setting(
        None,
        "categorical values and rewards over the atoms -N..N of the transformed scale ('none': scalars)",
        optional_positive_int,
    )

    @property
    def gradient_steps_per_update(self) -> int:
        return self.gradient_steps if self.replay else self.num_epochs * self.num_minibatches

    def learner(self, action_space: Any, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> AbstractLearner:
        network = MuZeroNetwork(
            observation_shape,
            self.num_actions(action_space),
            latent_size=self.latent_size,
            hidden_sizes=self.hidden,
            activation=ACTIVATIONS[self.activation],
            support_size=self.support_size,
            key=key,
        )
        agent = MuZeroAgent(network, self.operator(), discount=self.discount)
        loss = MuZeroLoss(
            num_unroll_steps=self.num_unroll_steps, n_step=self.n_step, value_coefficient=self.value_coefficient
        )
        if self.replay:
            return MuZeroReplayLearner(
                agent,
                loss,
                self.optimizer(),
                buffer_size=self.buffer_size,
                batch_size=self.batch_size,
                min_replay_size=self.min_replay_size,
                gradient_steps=self.gradient_steps,
            )
        return AlphaZeroLearner(
            agent, loss, self.optimizer(), num_epochs=self.num_epochs, num_minibatches=self.num_minibatches
        )
