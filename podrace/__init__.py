"""podrace: reinforcement learning on JAX, composed from typed Equinox modules."""

from . import (
    checkpoint as checkpoint,
    configs as configs,
    distributed as distributed,
    envs as envs,
    executors as executors,
    export as export,
    learners as learners,
    loggers as loggers,
    losses as losses,
    networks as networks,
    policies as policies,
    recipes as recipes,
    search as search,
    video as video,
)
from ._types import (
    AbstractActionValues as AbstractActionValues,
    AbstractMaskableOutput as AbstractMaskableOutput,
    AbstractNetworkOutput as AbstractNetworkOutput,
    AbstractPolicyOutput as AbstractPolicyOutput,
    AbstractSpace as AbstractSpace,
    Box as Box,
    CategoricalQValues as CategoricalQValues,
    DeterministicAction as DeterministicAction,
    Discrete as Discrete,
    GaussianParams as GaussianParams,
    MaskedObservation as MaskedObservation,
    MaskedObservationSpace as MaskedObservationSpace,
    ObservationActionReward as ObservationActionReward,
    ObservationActionRewardSpace as ObservationActionRewardSpace,
    PolicyLogits as PolicyLogits,
    PolicyStep as PolicyStep,
    QuantileQValues as QuantileQValues,
    QValues as QValues,
    SearchStatistics as SearchStatistics,
    TanhGaussianParams as TanhGaussianParams,
    TimeStep as TimeStep,
    Trajectory as Trajectory,
    entropy_or_estimate as entropy_or_estimate,
    exclude_illegal as exclude_illegal,
    legal_actions as legal_actions,
)
from ._version import __version__ as __version__
from .agent import AbstractAgent as AbstractAgent, Agent as Agent, RandomAgent as RandomAgent
from .compilation import enable_compilation_cache as enable_compilation_cache
from .executors.anakin import Anakin as Anakin, AnakinState as AnakinState, TrainResult as TrainResult
from .executors.evaluation import (
    Evaluation as Evaluation,
    evaluate as evaluate,
    evaluate_agent as evaluate_agent,
    random_policy_episodes as random_policy_episodes,
)
from .executors.match import play_match as play_match
from .executors.normalization import (
    NormalizationState as NormalizationState,
    RunningNormalization as RunningNormalization,
)
from .executors.pbt import PBT as PBT
from .executors.population import Population as Population, evaluate_population as evaluate_population
from .executors.sebulba import Sebulba as Sebulba, SebulbaState as SebulbaState
from .learners import Learner as Learner, LearnerState as LearnerState
from .results import (
    EvaluationResult as EvaluationResult,
    LossTerms as LossTerms,
    MatchResult as MatchResult,
    TrainMetrics as TrainMetrics,
    UpdateMetrics as UpdateMetrics,
)
