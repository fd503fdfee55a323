"""What the Q-learning families (RolloutQConfig, PQNConfig, DQNConfig) share: their actions are discrete."""

from typing import Any

from .._types import Discrete
from .on_policy import OnPolicyConfig
from .sac import SACConfig
from .td3 import TD3Config


def discrete_action_count(algorithm: str, action_space: Any) -> int:
    """The number of actions of `action_space`, which a Q-learning `algorithm` needs
    discrete; otherwise a `ValueError` that names the algorithms that take other actions."""
    if not isinstance(action_space, Discrete):
        instead = (*OnPolicyConfig.ALGORITHMS, *TD3Config.ALGORITHMS, *SACConfig.ALGORITHMS)
        raise ValueError(
            f"{algorithm} learns Q-values of discrete actions; the environment's actions are "
            f"{type(action_space).__name__} of shape {action_space.shape}. Use one of {', '.join(instead)}."
        )
    return action_space.num_values
