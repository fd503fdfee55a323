"""Networks: an abstract interface with a recurrent carry, torsos and heads, and their initialisations."""

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
from .initializations import (
    AbstractInitialization as AbstractInitialization,
    FanInUniform as FanInUniform,
    LecunNormal as LecunNormal,
    Orthogonal as Orthogonal,
    ParameterSpec as ParameterSpec,
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
    "AbstractInitialization",
    "AbstractNetwork",
    "AbstractTorso",
    "AbstractValueHead",
    "ActorCriticNetwork",
    "ConvTorso",
    "FanInUniform",
    "FeedForwardNetwork",
    "GaussianHead",
    "GRUCore",
    "LecunNormal",
    "LSTMCore",
    "MLPTorso",
    "Orthogonal",
    "ParameterSpec",
    "PolicyLogitHead",
    "QValueHead",
    "RecurrentNetwork",
    "ValueHead",
]
