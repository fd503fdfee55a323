"""Environments: the abstract interface, built-in JAX environments and wrappers."""

from ._base import (
    AbstractEnv as AbstractEnv,
    AbstractPoolEnv as AbstractPoolEnv,
    AbstractRenderableEnv as AbstractRenderableEnv,
    AbstractTurnBasedEnv as AbstractTurnBasedEnv,
    render as render,
)
from .cartpole import CartPole as CartPole, CartPoleState as CartPoleState, cartpole_v1 as cartpole_v1
from .catch import Catch as Catch, CatchState as CatchState
from .checker import EnvCheckError as EnvCheckError, EnvCheckReport as EnvCheckReport, check_env as check_env
from .deep_sea import DeepSea as DeepSea, DeepSeaState as DeepSeaState
from .from_brax import BraxEnv as BraxEnv, brax_env as brax_env
from .from_craftax import CraftaxEnv as CraftaxEnv
from .from_envpool import EnvPoolEnv as EnvPoolEnv, EnvPoolState as EnvPoolState
from .from_gymnax import GymnaxEnv as GymnaxEnv
from .from_jumanji import JumanjiEnv as JumanjiEnv
from .from_navix import NavixEnv as NavixEnv
from .from_pgx import PgxEnv as PgxEnv
from .from_playground import PlaygroundEnv as PlaygroundEnv, playground_env as playground_env
from .from_xminigrid import XMiniGridEnv as XMiniGridEnv
from .normalization import NormalizeObservation as NormalizeObservation, RunningStatistics as RunningStatistics
from .pendulum import Pendulum as Pendulum, PendulumState as PendulumState, pendulum_v1 as pendulum_v1
from .pool_checker import check_pool_env as check_pool_env
from .probes import (
    AbstractProbe as AbstractProbe,
    ActionRewardProbe as ActionRewardProbe,
    ConstantRewardProbe as ConstantRewardProbe,
    DelayedRewardProbe as DelayedRewardProbe,
    ObservationActionRewardProbe as ObservationActionRewardProbe,
    ObservationRewardProbe as ObservationRewardProbe,
    ProbeState as ProbeState,
)
from .repeat_first import RepeatFirst as RepeatFirst, RepeatFirstState as RepeatFirstState
from .wrappers import (
    AbstractWrapper as AbstractWrapper,
    AutoReset as AutoReset,
    AutoResetState as AutoResetState,
    PreviousActionReward as PreviousActionReward,
    TimeLimit as TimeLimit,
    TimeLimitState as TimeLimitState,
    TruncationAsTermination as TruncationAsTermination,
)


__all__ = [
    "AbstractEnv",
    "AbstractPoolEnv",
    "AbstractRenderableEnv",
    "AbstractTurnBasedEnv",
    "render",
    "BraxEnv",
    "brax_env",
    "check_env",
    "check_pool_env",
    "EnvCheckError",
    "EnvCheckReport",
    "CartPole",
    "CartPoleState",
    "cartpole_v1",
    "Catch",
    "CatchState",
    "DeepSea",
    "DeepSeaState",
    "GymnaxEnv",
    "CraftaxEnv",
    "EnvPoolEnv",
    "EnvPoolState",
    "JumanjiEnv",
    "NavixEnv",
    "PgxEnv",
    "PlaygroundEnv",
    "playground_env",
    "XMiniGridEnv",
    "AbstractWrapper",
    "NormalizeObservation",
    "RunningStatistics",
    "Pendulum",
    "PendulumState",
    "pendulum_v1",
    "AbstractProbe",
    "ProbeState",
    "ConstantRewardProbe",
    "ObservationRewardProbe",
    "DelayedRewardProbe",
    "ActionRewardProbe",
    "ObservationActionRewardProbe",
    "RepeatFirst",
    "RepeatFirstState",
    "AutoReset",
    "AutoResetState",
    "PreviousActionReward",
    "TimeLimit",
    "TimeLimitState",
    "TruncationAsTermination",
]


def __getattr__(name: str):
    """Names of earlier releases, each refused with what to write instead."""
    if name == "cannot_render":
        raise AttributeError(
            "podrace.envs.cannot_render is gone: an environment that does not draw leaves out render; "
            "one that draws subclasses podrace.envs.AbstractRenderableEnv, and callers draw through "
            "podrace.envs.render(env, state)."
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
