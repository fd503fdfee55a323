"""Networks: an abstract interface with a recurrent carry, torsos and heads."""

from ._base import AbstractNetwork as AbstractNetwork
from .feedforward import (
    AbstractFeedForwardNetwork as AbstractFeedForwardNetwork,
    ActorCriticNetwork as ActorCriticNetwork,
    FeedForwardNetwork as FeedForwardNetwork,
)
from .heads import (
    AbstractHead as AbstractHead,
    AbstractValueHead as AbstractValueHead,
    GaussianHead as GaussianHead,
    PolicyLogitHead as PolicyLogitHead,
    QValueHead as QValueHead,
    ValueHead as ValueHead,
)
from .recurrent import (
    AbstractCore as AbstractCore,
    GRUCore as GRUCore,
    LSTMCore as LSTMCore,
    RecurrentNetwork as RecurrentNetwork,
)
from .torsos import (
    AbstractTorso as AbstractTorso,
    ConvTorso as ConvTorso,
    MLPTorso as MLPTorso,
)


__all__ = [
    "AbstractFeedForwardNetwork",
    "AbstractCore",
    "AbstractHead",
    "AbstractNetwork",
    "AbstractTorso",
    "AbstractValueHead",
    "ActorCriticNetwork",
    "ConvTorso",
    "FeedForwardNetwork",
    "GaussianHead",
    "GRUCore",
    "LSTMCore",
    "MLPTorso",
    "PolicyLogitHead",
    "QValueHead",
    "RecurrentNetwork",
    "ValueHead",
]
