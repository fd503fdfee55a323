"""Configurations: one typed module per algorithm family, holding every setting of a run
with its help text, and building the run's learner, evaluation policy and pipeline; the
registry of them by algorithm and podrace's tuned defaults."""

from .actor_critic import AbstractActorCriticConfig as AbstractActorCriticConfig
from .alphazero import AlphaZeroConfig as AlphaZeroConfig
from .base import AbstractConfig as AbstractConfig, observation_shape as observation_shape, settings_of as settings_of
from .dqn import DQNConfig as DQNConfig
from .muzero import AbstractSearchConfig as AbstractSearchConfig, MuZeroConfig as MuZeroConfig
from .on_policy import OnPolicyConfig as OnPolicyConfig
from .pqn import PQNConfig as PQNConfig
from .registry import (
    ALGORITHMS as ALGORITHMS,
    DEFAULT_ALGORITHMS as DEFAULT_ALGORITHMS,
    FAMILIES as FAMILIES,
    TUNED as TUNED,
    Tuned as Tuned,
    config as config,
    default_algorithm as default_algorithm,
    default_config as default_config,
    from_json as from_json,
    to_json as to_json,
)
from .replay import AbstractReplayConfig as AbstractReplayConfig
from .rollout_q import RolloutQConfig as RolloutQConfig
from .run import EXECUTORS as EXECUTORS, Run as Run
from .sac import SACConfig as SACConfig
from .td3 import TD3Config as TD3Config
from .torso_head import AbstractTorsoHeadConfig as AbstractTorsoHeadConfig
