"""Networks: an abstract interface with a recurrent carry, torsos and heads, and their initialisations."""

from ._base import (
    AbstractActionRewardNetwork as AbstractActionRewardNetwork,
    AbstractNetwork as AbstractNetwork,
    AbstractRecurrentNetwork as AbstractRecurrentNetwork,
    AbstractSequenceNetwork as AbstractSequenceNetwork,
    apply_action_mask as apply_action_mask,
    split_action_mask as split_action_mask,
    unroll_step_by_step as unroll_step_by_step,
)
from .critics import AbstractCritic as AbstractCritic, MLPCritic as MLPCritic
from .feedforward import ActorCriticNetwork as ActorCriticNetwork, FeedForwardNetwork as FeedForwardNetwork
from .heads import (
    AbstractHead as AbstractHead,
    AbstractValueHead as AbstractValueHead,
    CategoricalQHead as CategoricalQHead,
    DeterministicHead as DeterministicHead,
    GaussianHead as GaussianHead,
    PolicyLogitHead as PolicyLogitHead,
    QuantileQHead as QuantileQHead,
    QValueHead as QValueHead,
    TanhGaussianHead as TanhGaussianHead,
    ValueHead as ValueHead,
)
from .initializations import (
    AbstractInitialization as AbstractInitialization,
    FanInUniform as FanInUniform,
    HeNormal as HeNormal,
    LecunNormal as LecunNormal,
    Orthogonal as Orthogonal,
    ParameterSpec as ParameterSpec,
)
from .muzero import MuZeroNetwork as MuZeroNetwork, scale_to_unit_interval as scale_to_unit_interval
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
    "AbstractActionRewardNetwork",
    "AbstractCore",
    "AbstractCritic",
    "AbstractHead",
    "AbstractInitialization",
    "AbstractNetwork",
    "AbstractRecurrentNetwork",
    "AbstractSequenceNetwork",
    "AbstractTorso",
    "AbstractValueHead",
    "ActorCriticNetwork",
    "apply_action_mask",
    "CategoricalQHead",
    "ConvTorso",
    "DeterministicHead",
    "FanInUniform",
    "FeedForwardNetwork",
    "GaussianHead",
    "GRUCore",
    "HeNormal",
    "LecunNormal",
    "LSTMCore",
    "MLPCritic",
    "MLPTorso",
    "MuZeroNetwork",
    "Orthogonal",
    "ParameterSpec",
    "PolicyLogitHead",
    "QValueHead",
    "QuantileQHead",
    "RecurrentNetwork",
    "scale_to_unit_interval",
    "split_action_mask",
    "TanhGaussianHead",
    "unroll_step_by_step",
    "ValueHead",
]


def __getattr__(name: str):
    """Names of earlier releases, each refused with what to write instead."""
    if name == "AbstractFeedForwardNetwork":
        raise AttributeError(
            "podrace.networks.AbstractFeedForwardNetwork is gone: subclass podrace.networks.AbstractNetwork, "
            "which now supplies the empty carry, plain observations and a vmapped unroll itself."
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
