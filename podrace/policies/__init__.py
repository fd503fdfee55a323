"""Policies: from a network output to an action, its log-probability and entropy."""

from ._policies import (
    AbstractDeterministicPolicy as AbstractDeterministicPolicy,
    AbstractPolicy as AbstractPolicy,
    AbstractScheduledPolicy as AbstractScheduledPolicy,
    Categorical as Categorical,
    Deterministic as Deterministic,
    EpsilonGreedy as EpsilonGreedy,
    Gaussian as Gaussian,
    GaussianNoise as GaussianNoise,
    Greedy as Greedy,
    Mode as Mode,
    Softmax as Softmax,
    TanhGaussian as TanhGaussian,
    mix_in_random_actions as mix_in_random_actions,
    random_first_steps as random_first_steps,
    tanh_gaussian_step as tanh_gaussian_step,
    with_random_actions as with_random_actions,
)


__all__ = [
    "AbstractDeterministicPolicy",
    "AbstractPolicy",
    "AbstractScheduledPolicy",
    "Categorical",
    "Deterministic",
    "EpsilonGreedy",
    "Gaussian",
    "GaussianNoise",
    "Greedy",
    "Mode",
    "Softmax",
    "TanhGaussian",
    "mix_in_random_actions",
    "random_first_steps",
    "tanh_gaussian_step",
    "with_random_actions",
]
