"""podrace: reinforcement learning on JAX, composed from typed Equinox modules."""

from . import (
    anakin as anakin,
    envs as envs,
    host as host,
    losses as losses,
    networks as networks,
    policies as policies,
)
from ._types import (
    AbstractNetworkOutput as AbstractNetworkOutput,
    AbstractPolicyOutput as AbstractPolicyOutput,
    AbstractSpace as AbstractSpace,
    Box as Box,
    Discrete as Discrete,
    GaussianParams as GaussianParams,
    PolicyLogits as PolicyLogits,
    PolicyStep as PolicyStep,
    QValues as QValues,
    TimeStep as TimeStep,
    Trajectory as Trajectory,
)
from .anakin import (
    Anakin as Anakin,
    AnakinState as AnakinState,
    TrainMetrics as TrainMetrics,
    TrainResult as TrainResult,
)
from .evaluation import EvaluationResult as EvaluationResult, evaluate as evaluate
from .learners import Learner as Learner, LearnerState as LearnerState, UpdateMetrics as UpdateMetrics
from .population import Population as Population, evaluate_population as evaluate_population


__version__ = "0.1.0"
