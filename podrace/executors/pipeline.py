"""The executors' contract: what drives training, whatever runs the environments.

[`podrace.progress.train_with_progress`][], the command line and the checkpoints use a
pipeline only through [`podrace.executors.pipeline.AbstractPipeline`][]: `init`, `train` and
the sizes that turn updates into environment steps.
"""

import abc
from typing import Generic, TypeVar

import equinox as eqx
from jaxtyping import PRNGKeyArray

from ..results import TrainMetrics


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
    """A learner with what feeds it experience, trained in calls of many updates."""

    @abc.abstractmethod
    def init(self, key: PRNGKeyArray) -> StateT:
        """The initial state: the learner's, and the environments' where the pipeline keeps them."""

    @abc.abstractmethod
    def train(self, state: StateT, *, num_updates: int) -> AbstractTrainResult[StateT]:
        """`num_updates` rollouts and updates from `state`."""

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
