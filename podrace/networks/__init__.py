"""Networks: an abstract interface with a recurrent carry, torsos and heads."""

from ._base import AbstractNetwork as AbstractNetwork
from .feedforward import (
    FeedForwardNetwork as FeedForwardNetwork,
    MLPTorso as MLPTorso,
    PolicyLogitHead as PolicyLogitHead,
    QValueHead as QValueHead,
    ValueHead as ValueHead,
)


__all__ = ["AbstractNetwork", "FeedForwardNetwork", "MLPTorso", "PolicyLogitHead", "QValueHead", "ValueHead"]
