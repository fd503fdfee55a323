"""Networks: an abstract interface with a recurrent carry, torsos and heads."""

from ._base import AbstractNetwork as AbstractNetwork
from .feedforward import (
    AbstractFeedForwardNetwork as AbstractFeedForwardNetwork,
    ActorCriticNetwork as ActorCriticNetwork,
    FeedForwardNetwork as FeedForwardNetwork,
    GaussianHead as GaussianHead,
    MLPTorso as MLPTorso,
    PolicyLogitHead as PolicyLogitHead,
    QValueHead as QValueHead,
    ValueHead as ValueHead,
)


__all__ = [
    "ActorCriticNetwork",
    "AbstractFeedForwardNetwork",
    "AbstractNetwork",
    "FeedForwardNetwork",
    "GaussianHead",
    "MLPTorso",
    "PolicyLogitHead",
    "QValueHead",
    "ValueHead",
]
