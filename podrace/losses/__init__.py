"""Losses: pure, unbatched functions and the loss modules built on them."""

from .modules import (
    A2CLoss as A2CLoss,
    AbstractLoss as AbstractLoss,
    LossTerms as LossTerms,
    ReinforceLoss as ReinforceLoss,
    TDLambdaQLoss as TDLambdaQLoss,
    categorical_entropy as categorical_entropy,
    completed_episode_mask as completed_episode_mask,
    transition_mask as transition_mask,
)
from .value_learning import lambda_returns as lambda_returns, td_lambda as td_lambda


__all__ = [
    "A2CLoss",
    "ReinforceLoss",
    "categorical_entropy",
    "completed_episode_mask",
    "AbstractLoss",
    "LossTerms",
    "TDLambdaQLoss",
    "transition_mask",
    "lambda_returns",
    "td_lambda",
]
