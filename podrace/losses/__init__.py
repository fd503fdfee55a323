"""Losses: pure, unbatched functions and the loss modules built on them."""

from ..networks.value_transforms import (
    categorical_expectation as categorical_expectation,
    signed_hyperbolic as signed_hyperbolic,
    signed_parabolic as signed_parabolic,
    two_hot as two_hot,
)
from .a2c import A2CLoss as A2CLoss
from .actor_critic_base import (
    AbstractDeterministicActorLoss as AbstractDeterministicActorLoss,
    AbstractDeterministicCriticLoss as AbstractDeterministicCriticLoss,
    AbstractSoftActorLoss as AbstractSoftActorLoss,
    AbstractSoftCriticLoss as AbstractSoftCriticLoss,
    AbstractTemperatureLoss as AbstractTemperatureLoss,
    Transitions as Transitions,
    one_step_transitions as one_step_transitions,
)
from .alphazero import AlphaZeroLoss as AlphaZeroLoss
from .base import (
    AbstractLoss as AbstractLoss,
    AbstractQLoss as AbstractQLoss,
    AbstractTrajectoryLoss as AbstractTrajectoryLoss,
    at_actions as at_actions,
    bootstrap_agent as bootstrap_agent,
    bootstrap_values as bootstrap_values,
    categorical_entropy as categorical_entropy,
    completed_episode_mask as completed_episode_mask,
    cut_lambda_at_episode_ends as cut_lambda_at_episode_ends,
    mean_over_trajectories as mean_over_trajectories,
    refuse_target_network as refuse_target_network,
    require_value as require_value,
    transition_mask as transition_mask,
)
from .c51 import CategoricalQLoss as CategoricalQLoss, categorical_projection as categorical_projection
from .deterministic_actor import DeterministicActorLoss as DeterministicActorLoss
from .discrete_sac import (
    DiscreteSACActorLoss as DiscreteSACActorLoss,
    DiscreteSACCriticLoss as DiscreteSACCriticLoss,
    categorical_log_policy as categorical_log_policy,
    policy_expectation as policy_expectation,
    stacked_q_values as stacked_q_values,
)
from .impala import VTraceLoss as VTraceLoss, vtrace as vtrace
from .muzero import MuZeroLoss as MuZeroLoss
from .n_step_q import QLearningLoss as QLearningLoss
from .policy_gradient import (
    clamped_importance_weights as clamped_importance_weights,
    policy_gradient_loss as policy_gradient_loss,
    ppo_clipped_surrogate as ppo_clipped_surrogate,
)
from .ppo import PPOLoss as PPOLoss
from .pqn import (
    CategoricalPQNLoss as CategoricalPQNLoss,
    PQNLoss as PQNLoss,
    categorical_lambda_returns as categorical_lambda_returns,
)
from .qr_dqn import QuantileQLoss as QuantileQLoss, quantile_regression_loss as quantile_regression_loss
from .reinforce import ReinforceLoss as ReinforceLoss
from .sac import (
    SACActorLoss as SACActorLoss,
    SACCriticLoss as SACCriticLoss,
    tanh_gaussian_actions as tanh_gaussian_actions,
)
from .search_policy import search_policy_cross_entropy as search_policy_cross_entropy
from .search_value import categorical_value_loss as categorical_value_loss, scalar_value_loss as scalar_value_loss
from .td3 import TD3CriticLoss as TD3CriticLoss, critic_regression_loss as critic_regression_loss
from .td_lambda_q import TDLambdaQLoss as TDLambdaQLoss
from .temperature import TemperatureLoss as TemperatureLoss
from .value_learning import (
    discounted_returns as discounted_returns,
    double_q_learning as double_q_learning,
    generalized_advantage_estimation as generalized_advantage_estimation,
    greedy_value as greedy_value,
    lambda_returns as lambda_returns,
    n_step_bootstrapped_returns as n_step_bootstrapped_returns,
    n_step_q_learning as n_step_q_learning,
    q_lambda as q_lambda,
    q_learning as q_learning,
    td_lambda as td_lambda,
    varying_like as varying_like,
)


__all__ = [
    "AbstractLoss",
    "AbstractTrajectoryLoss",
    "AbstractQLoss",
    "TDLambdaQLoss",
    "QLearningLoss",
    "A2CLoss",
    "ReinforceLoss",
    "PPOLoss",
    "PQNLoss",
    "CategoricalPQNLoss",
    "CategoricalQLoss",
    "QuantileQLoss",
    "VTraceLoss",
    "AlphaZeroLoss",
    "MuZeroLoss",
    "AbstractDeterministicCriticLoss",
    "AbstractDeterministicActorLoss",
    "AbstractSoftCriticLoss",
    "AbstractSoftActorLoss",
    "AbstractTemperatureLoss",
    "TD3CriticLoss",
    "DeterministicActorLoss",
    "SACCriticLoss",
    "SACActorLoss",
    "DiscreteSACCriticLoss",
    "DiscreteSACActorLoss",
    "TemperatureLoss",
    "Transitions",
    "one_step_transitions",
    "critic_regression_loss",
    "tanh_gaussian_actions",
    "stacked_q_values",
    "categorical_log_policy",
    "policy_expectation",
    "mean_over_trajectories",
    "bootstrap_agent",
    "bootstrap_values",
    "refuse_target_network",
    "require_value",
    "transition_mask",
    "at_actions",
    "categorical_projection",
    "quantile_regression_loss",
    "completed_episode_mask",
    "cut_lambda_at_episode_ends",
    "categorical_entropy",
    "lambda_returns",
    "categorical_lambda_returns",
    "td_lambda",
    "discounted_returns",
    "n_step_bootstrapped_returns",
    "generalized_advantage_estimation",
    "greedy_value",
    "q_learning",
    "double_q_learning",
    "n_step_q_learning",
    "q_lambda",
    "policy_gradient_loss",
    "clamped_importance_weights",
    "ppo_clipped_surrogate",
    "vtrace",
    "varying_like",
    "search_policy_cross_entropy",
    "scalar_value_loss",
    "categorical_value_loss",
    "signed_hyperbolic",
    "signed_parabolic",
    "two_hot",
    "categorical_expectation",
]
