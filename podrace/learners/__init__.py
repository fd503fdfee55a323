"""Learners: how experience turns into parameter updates."""

from .dqn import DQNLearner as DQNLearner, DQNState as DQNState
from .learner import (
    AbstractLearner as AbstractLearner,
    Learner as Learner,
    LearnerState as LearnerState,
    as_transitions as as_transitions,
    shuffled_minibatches as shuffled_minibatches,
)
from .replay import SequenceReplay as SequenceReplay


__all__ = [
    "AbstractLearner",
    "as_transitions",
    "DQNLearner",
    "DQNState",
    "Learner",
    "LearnerState",
    "SequenceReplay",
    "shuffled_minibatches",
]
