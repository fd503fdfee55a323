"""The executors' contract: what drives training, whatever runs the environments.

[`podrace.progress.train_with_progress`][], the command line and the checkpoints use a
pipeline only through [`podrace.executors.pipeline.AbstractPipeline`][]: `init`, `train`,
the sizes that turn updates into environment steps, and what the command's `evaluate`
and `export` take from a trained run (the members' evaluation, each member's network,
its evaluation environment and the observations' spec).
"""

import abc
from collections.abc import Iterable
from typing import Generic, TypeVar

import equinox as eqx
import jax
from jaxtyping import PRNGKeyArray, PyTree

from ..agent import AbstractAgent
from ..envs import AbstractEnv
from ..networks import AbstractNetwork
from ..results import DEFAULT_METRICS, EvaluationResult, TrainMetrics
from .evaluation import Evaluation


StateT = TypeVar("StateT")


class AbstractTrainResult(eqx.Module, Generic[StateT]):
    """What a pipeline's `train` returns: at least the next state and the metrics of each update.

    **Arguments:**

    - `state`: the state after the last update, to pass to the next call.
    - `metrics`: one entry per update (leading axis `num_updates`; then the members',
        for a population).
    """

    state: eqx.AbstractVar[StateT]
    metrics: eqx.AbstractVar[TrainMetrics]

    @abc.abstractmethod
    def summary(self) -> dict[str, float]:
        """The call's values to log, on the host: at least [`podrace.loggers.summarize`][] of `metrics`."""


class AbstractPipeline(eqx.Module, Generic[StateT]):
    """A learner with what feeds it experience, trained in calls of many updates.

    A population trains several members side by side, numbered from 0; a single run is
    member 0.
    """

    @abc.abstractmethod
    def init(self, key: PRNGKeyArray) -> StateT:
        """The initial state: the learner's, and the environments' where the pipeline keeps them."""

    @abc.abstractmethod
    def train(
        self, state: StateT, *, num_updates: int, metrics: str | Iterable[str] = DEFAULT_METRICS
    ) -> AbstractTrainResult[StateT]:
        """`num_updates` rollouts and updates from `state`, each reporting its loss and
        `metrics` (names from [`podrace.results.METRICS`][]; the others are not computed)."""

    @property
    @abc.abstractmethod
    def frames_per_update(self) -> int:
        """Environment steps per update of one member, over all devices."""

    @property
    @abc.abstractmethod
    def num_members(self) -> int:
        """Runs trained side by side (1 but for a population)."""

    @property
    @abc.abstractmethod
    def num_devices(self) -> int:
        """Devices the pipeline's arrays are split over."""

    @property
    @abc.abstractmethod
    def observation_spec(self) -> PyTree[jax.ShapeDtypeStruct]:
        """The shape and dtype of one observation as the environments give it (before any
        normalisation): what an exported policy takes."""

    @abc.abstractmethod
    def evaluate(self, state: StateT, evaluation: Evaluation) -> EvaluationResult:
        """Every member's trained network plays `evaluation`'s episodes in its evaluation
        environment, every member with the same key.

        **Arguments:**

        - `state`: from `init` or `train`.
        - `evaluation`: the episodes and the policy to play them with.

        **Returns:**

        The episodes, with axes `[num_episodes]` after a leading members axis for a
        population (as `train`'s metrics have it).
        """

    @abc.abstractmethod
    def network_at(self, state: StateT, member: int = 0) -> AbstractNetwork:
        """The network of member `member` with the parameters learnt in `state`.

        **Raises:**

        `ValueError` if the pipeline has no member `member`.
        """

    @abc.abstractmethod
    def agent_at(self, state: StateT, member: int = 0) -> AbstractAgent:
        """The agent of member `member` with the parameters learnt in `state`, as it acts in
        training (a search agent with its search, say; [`podrace.evaluate_agent`][] plays it).

        **Raises:**

        `ValueError` if the pipeline has no member `member`.
        """

    @abc.abstractmethod
    def evaluation_env(self, state: StateT, member: int = 0) -> AbstractEnv | None:
        """The JAX environment where member `member` plays evaluations: the environment
        without its auto-reset, its observations normalised with the member's statistics in
        `state` where the pipeline normalises them. `None` where the environments are not
        JAX ones (a host pipeline's Gymnasium environments).

        **Raises:**

        `ValueError` if the pipeline has no member `member`.
        """


def check_member(pipeline: AbstractPipeline, member: int) -> None:
    """Raises `ValueError`, naming the members there are, unless `pipeline` has member `member`."""
    if not 0 <= member < pipeline.num_members:
        raise ValueError(
            f"{type(pipeline).__name__}: there is no member {member}; its members are numbered 0 to "
            f"{pipeline.num_members - 1}."
        )
