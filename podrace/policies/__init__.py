"""Policies: from a network output to an action, its log-probability and entropy."""

from ._policies import (
    AbstractPolicy as AbstractPolicy,
    Categorical as Categorical,
    EpsilonGreedy as EpsilonGreedy,
    Gaussian as Gaussian,
    Greedy as Greedy,
    Mode as Mode,
    Softmax as Softmax,
)


__all__ = ["AbstractPolicy", "Categorical", "EpsilonGreedy", "Gaussian", "Greedy", "Mode", "Softmax"]
