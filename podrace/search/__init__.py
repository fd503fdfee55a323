"""Search agents: acting by planning with a model, through mctx's policy-improvement
operators (the `search` extra, `pip install 'podrace[search]'`).

[`podrace.search.AlphaZeroAgent`][] plans with the environment's own `step`,
[`podrace.search.MuZeroAgent`][] with a learnt model,
[`podrace.search.RolloutSearchAgent`][] (plain Monte-Carlo tree search, a baseline) with
the environment and random rollouts; what a search finds travels in the
trajectory as [`podrace.SearchStatistics`][], for [`podrace.losses.AlphaZeroLoss`][] and
[`podrace.losses.MuZeroLoss`][], both learnt by [`podrace.learners.AlphaZeroLearner`][].
"""

from ._base import AbstractEnvModelAgent as AbstractEnvModelAgent
from .alphazero import (
    AlphaZeroAgent as AlphaZeroAgent,
    ModelNode as ModelNode,
    check_players_visible as check_players_visible,
)
from .muzero import MuZeroAgent as MuZeroAgent
from .operators import (
    AbstractSearchOperator as AbstractSearchOperator,
    GumbelMuZeroSearch as GumbelMuZeroSearch,
    MuZeroSearch as MuZeroSearch,
    UCTSearch as UCTSearch,
)
from .rollout import RolloutSearchAgent as RolloutSearchAgent


__all__ = [
    "AbstractEnvModelAgent",
    "AbstractSearchOperator",
    "AlphaZeroAgent",
    "check_players_visible",
    "GumbelMuZeroSearch",
    "ModelNode",
    "MuZeroAgent",
    "MuZeroSearch",
    "RolloutSearchAgent",
    "UCTSearch",
]
