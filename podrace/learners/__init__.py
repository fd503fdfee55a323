"""Learners: how experience turns into parameter updates.

A new learner subclasses [`podrace.learners.AbstractLearner`][] and builds on the parts
here: [`podrace.learners.SequenceReplay`][] for experience (and
[`podrace.learners.AbstractReplayLearner`][] for the store-then-learn update every replay
learner shares), `gradient_step` (with
`apply_gradients` and `loss_gradients`) for optimiser steps averaged over devices,
`with_params` to put learnt arrays back into a network, and `check_agent_fits` for its
fit check.
"""

from .._validation import check_agent_fits as check_agent_fits
from .actor_critic import (
    AbstractActorCriticLearner as AbstractActorCriticLearner,
    AbstractActorCriticState as AbstractActorCriticState,
)
from .alphazero import (
    AlphaZeroLearner as AlphaZeroLearner,
    MuZeroReplayLearner as MuZeroReplayLearner,
    MuZeroReplayState as MuZeroReplayState,
)
from .discrete_sac import DiscreteSACLearner as DiscreteSACLearner
from .dqn import DQNLearner as DQNLearner, DQNState as DQNState
from .learner import (
    AbstractGradientLearner as AbstractGradientLearner,
    AbstractLearner as AbstractLearner,
    Learner as Learner,
    LearnerState as LearnerState,
    apply_gradients as apply_gradients,
    as_transitions as as_transitions,
    gradient_step as gradient_step,
    loss_gradients as loss_gradients,
    shuffled_minibatches as shuffled_minibatches,
    with_params as with_params,
)
from .replay import (
    AbstractReplayLearner as AbstractReplayLearner,
    AbstractReplayState as AbstractReplayState,
    SequenceReplay as SequenceReplay,
)
from .sac import (
    AbstractSoftActorCriticLearner as AbstractSoftActorCriticLearner,
    SACLearner as SACLearner,
    SACState as SACState,
)
from .td3 import TD3Learner as TD3Learner, TD3State as TD3State, ddpg as ddpg


__all__ = [
    "AbstractActorCriticLearner",
    "AbstractActorCriticState",
    "AbstractGradientLearner",
    "AbstractLearner",
    "AbstractReplayLearner",
    "AbstractReplayState",
    "AbstractSoftActorCriticLearner",
    "AlphaZeroLearner",
    "MuZeroReplayLearner",
    "MuZeroReplayState",
    "apply_gradients",
    "as_transitions",
    "check_agent_fits",
    "DiscreteSACLearner",
    "DQNLearner",
    "ddpg",
    "DQNState",
    "gradient_step",
    "Learner",
    "LearnerState",
    "loss_gradients",
    "SACLearner",
    "SACState",
    "SequenceReplay",
    "shuffled_minibatches",
    "TD3Learner",
    "TD3State",
    "with_params",
]
