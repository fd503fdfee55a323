"""Learners: how experience turns into parameter updates."""

from .dqn import DQNLearner as DQNLearner, DQNState as DQNState
from .learner import (
    AbstractLearner as AbstractLearner,
    Learner as Learner,
    LearnerState as LearnerState,
    shuffled_minibatches as shuffled_minibatches,
)


__all__ = [
    "AbstractLearner",
    "DQNLearner",
    "DQNState",
    "Learner",
    "LearnerState",
    "shuffled_minibatches",
]
