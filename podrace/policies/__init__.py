"""Policies: from a network output to an action, its log-probability and entropy."""

from ._policies import (
    AbstractPolicy as AbstractPolicy,
    Categorical as Categorical,
    Deterministic as Deterministic,
    EpsilonGreedy as EpsilonGreedy,
    Gaussian as Gaussian,
    GaussianNoise as GaussianNoise,
    Greedy as Greedy,
    Mode as Mode,
    Softmax as Softmax,
    TanhGaussian as TanhGaussian,
)


__all__ = [
    "AbstractPolicy",
    "Categorical",
    "Deterministic",
    "EpsilonGreedy",
    "Gaussian",
    "GaussianNoise",
    "Greedy",
    "Mode",
    "Softmax",
    "TanhGaussian",
]
