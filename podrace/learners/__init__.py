"""Learners: a network, a policy, a loss and an optimiser with explicit state."""

from .learner import Learner as Learner, LearnerState as LearnerState, UpdateMetrics as UpdateMetrics


__all__ = ["Learner", "LearnerState", "UpdateMetrics"]
