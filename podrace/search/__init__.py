"""Search agents: acting by planning with a model, through mctx's policy-improvement
operators (the `search` extra, `pip install 'podrace[search]'`).

[`podrace.search.AlphaZeroAgent`][] plans with the environment's own `step`; what a
search finds travels in the trajectory as [`podrace.SearchStatistics`][], for
[`podrace.losses.AlphaZeroLoss`][] and [`podrace.learners.AlphaZeroLearner`][].
"""

from ._base import AbstractEnvModelAgent as AbstractEnvModelAgent
from .alphazero import (
    AlphaZeroAgent as AlphaZeroAgent,
    ModelNode as ModelNode,
    check_players_visible as check_players_visible,
)
from .operators import (
    AbstractSearchOperator as AbstractSearchOperator,
    GumbelMuZeroSearch as GumbelMuZeroSearch,
    MuZeroSearch as MuZeroSearch,
)


__all__ = [
    "AbstractEnvModelAgent",
    "AbstractSearchOperator",
    "AlphaZeroAgent",
    "check_players_visible",
    "GumbelMuZeroSearch",
    "ModelNode",
    "MuZeroSearch",
]
