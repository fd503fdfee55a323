"""Learners: how experience turns into parameter updates."""

from .dqn import DQNLearner as DQNLearner, DQNState as DQNState
from .learner import (
    AbstractLearner as AbstractLearner,
    Behaviour as Behaviour,
    Learner as Learner,
    LearnerState as LearnerState,
    UpdateMetrics as UpdateMetrics,
)


__all__ = ["AbstractLearner", "Behaviour", "DQNLearner", "DQNState", "Learner", "LearnerState", "UpdateMetrics"]
