"""Losses: pure, unbatched functions and the loss modules built on them."""

from .modules import (
    A2CLoss as A2CLoss,
    AbstractLoss as AbstractLoss,
    LossTerms as LossTerms,
    ReinforceLoss as ReinforceLoss,
    categorical_entropy as categorical_entropy,
    completed_episode_mask as completed_episode_mask,
    log_pi_and_entropy as log_pi_and_entropy,
    transition_mask as transition_mask,
)
from .policy_gradient import (
    clamped_importance_weights as clamped_importance_weights,
    policy_gradient_loss as policy_gradient_loss,
    ppo_clipped_surrogate as ppo_clipped_surrogate,
)
from .ppo import PPOLoss as PPOLoss
from .q_losses import (
    QLearningLoss as QLearningLoss,
    TDLambdaQLoss as TDLambdaQLoss,
    greedy_values as greedy_values,
)
from .value_learning import (
    discounted_returns as discounted_returns,
    double_q_learning as double_q_learning,
    generalized_advantage_estimation as generalized_advantage_estimation,
    lambda_returns as lambda_returns,
    n_step_bootstrapped_returns as n_step_bootstrapped_returns,
    n_step_q_learning as n_step_q_learning,
    q_lambda as q_lambda,
    q_learning as q_learning,
    td_lambda as td_lambda,
)


__all__ = [
    "PPOLoss",
    "QLearningLoss",
    "greedy_values",
    "A2CLoss",
    "ReinforceLoss",
    "categorical_entropy",
    "completed_episode_mask",
    "log_pi_and_entropy",
    "AbstractLoss",
    "LossTerms",
    "TDLambdaQLoss",
    "transition_mask",
    "lambda_returns",
    "td_lambda",
    "discounted_returns",
    "n_step_bootstrapped_returns",
    "generalized_advantage_estimation",
    "q_learning",
    "double_q_learning",
    "n_step_q_learning",
    "q_lambda",
    "policy_gradient_loss",
    "clamped_importance_weights",
    "ppo_clipped_surrogate",
]
