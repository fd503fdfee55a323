"""What `podrace train ENV ALGO` builds: the settings of a run and the pipeline they make.

A run is described by [`Settings`][podrace._cli_tasks.Settings], plain values that
a checkpoint stores as JSON, so that `podrace evaluate` and `--resume` rebuild the
same pipeline. Every (environment, algorithm) pair trains; the pairs of `TUNED` have
defaults that solve the task (the learning tests train each of them on seeds 0-9),
the others start from the generic defaults.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from ._types import Box, CategoricalQValues, Discrete, QuantileQValues
from .envs import AbstractEnv, AutoReset
from .envs.names import make_env
from .executors.anakin import Anakin
from .executors.normalization import RunningNormalization
from .executors.pbt import PBT, Perturb, Resample
from .executors.population import Population
from .learners import AbstractLearner, DiscreteSACLearner, DQNLearner, Learner, SACLearner, TD3Learner, ddpg
from .losses import (
    A2CLoss,
    AbstractLoss,
    CategoricalPQNLoss,
    CategoricalQLoss,
    PPOLoss,
    PQNLoss,
    QLearningLoss,
    QuantileQLoss,
    ReinforceLoss,
    TDLambdaQLoss,
    VTraceLoss,
)
from .networks import (
    AbstractHead,
    AbstractNetwork,
    ActorCriticNetwork,
    CategoricalQHead,
    DeterministicHead,
    FeedForwardNetwork,
    GaussianHead,
    GRUCore,
    LSTMCore,
    MLPCritic,
    MLPTorso,
    PolicyLogitHead,
    QuantileQHead,
    QValueHead,
    RecurrentNetwork,
    TanhGaussianHead,
    ValueHead,
)
from .policies import (
    AbstractPolicy,
    Categorical,
    Deterministic,
    EpsilonGreedy,
    Gaussian,
    GaussianNoise,
    Greedy,
    Mode,
    TanhGaussian,
)


CORES = ("gru", "lstm")
ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {"relu": jax.nn.relu, "tanh": jnp.tanh}


@final
@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting of a run; the defaults are the generic ones (see `TUNED`)."""

    env: str
    algo: str
    seed: int = 0
    seeds: int = 1
    pbt: bool = False
    pbt_interval: int = 10
    pbt_learning_rates: tuple[float, float] | None = None
    num_updates: int = 1_000
    updates_per_call: int = 100
    num_envs: int = 16
    rollout_length: int = 128
    resets_per_step: int | None = None
    normalize_observations: bool = False
    normalize_rewards: bool = False
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    core: str | None = None
    core_size: int = 32
    separate_critic: bool = False
    layer_norm: bool = False
    learning_rate: float | jax.Array = 1e-3  # an array in the members of a --pbt population
    anneal_learning_rate: bool = False
    max_grad_norm: float | None = 0.5
    discount: float = 0.99
    lambda_: float = 0.95
    value_coefficient: float = 0.5
    entropy_coefficient: float = 0.01
    normalize_advantages: bool = True
    baseline: bool = True
    num_epochs: int = 4
    num_minibatches: int = 4
    epsilon: float = 0.05
    double: bool = False
    epsilon_decay_steps: int = 50_000
    buffer_size: int = 10_000
    batch_size: int = 128
    min_replay_size: int = 1_000
    target_update_period: int = 100
    gradient_steps: int = 1
    tau: float = 0.005
    exploration_noise: float = 0.1
    target_noise: float = 0.2
    policy_delay: int = 2
    random_steps: int = 0
    target_entropy: float | None = None
    num_atoms: int = 51
    v_min: float = -10.0
    v_max: float = 10.0
    num_quantiles: int = 200

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON values (tuples as lists)."""
        return {name: list(value) if isinstance(value, tuple) else value for name, value in vars(self).items()}

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> "Settings":
        """The settings saved by `to_json`."""
        values = dict(values)
        values["hidden"] = tuple(values["hidden"])
        if values.get("pbt_learning_rates") is not None:
            values["pbt_learning_rates"] = tuple(values["pbt_learning_rates"])
        return cls(**values)


# Defaults that solve the task, by (environment, algorithm): the learning tests train
# each on seeds 0-9 and require 9 of them to reach `THRESHOLDS[env]` under the
# deterministic evaluation policy (greedy over Q-values, the mode of a policy head).
_CATCH = dict(hidden=(256,), activation="relu", num_envs=64, rollout_length=16, num_updates=500, updates_per_call=50)
_CATCH_POLICY_GRADIENT = _CATCH | dict(max_grad_norm=None, lambda_=1.0, entropy_coefficient=0.01)
_CARTPOLE_SEPARATE = dict(separate_critic=True, anneal_learning_rate=True, num_envs=16)
# CleanRL's classic-control DQN: 10 environments of one step per update for its one
# environment and gradient step every 10 steps (500k steps), a target copied every 500.
_CLEANRL_CARTPOLE_DQN = dict(
    hidden=(120, 84),
    activation="relu",
    num_envs=10,
    rollout_length=1,
    num_updates=50_000,
    updates_per_call=2_500,
    learning_rate=2.5e-4,
    max_grad_norm=None,
    epsilon_decay_steps=250_000,
    buffer_size=10_000,
    batch_size=128,
    min_replay_size=10_000,
    target_update_period=50,
)
_CLEANRL_CARTPOLE_PQN = dict(
    hidden=(120, 84),
    activation="relu",
    layer_norm=True,
    num_envs=4,
    rollout_length=128,
    num_updates=976,
    updates_per_call=122,
    learning_rate=5e-4,
    anneal_learning_rate=True,
    max_grad_norm=10.0,
    lambda_=0.65,
    epsilon=0.05,
    epsilon_decay_steps=250_000,
    num_epochs=4,
    num_minibatches=4,
)

TUNED: dict[tuple[str, str], dict[str, Any]] = {
    # The Podracer paper's Anakin experiment.
    ("catch", "td-lambda"): _CATCH
    | dict(
        num_envs=128,
        num_updates=3_000,
        updates_per_call=100,
        learning_rate=1e-4,
        max_grad_norm=None,
        discount=1.0,
        lambda_=0.99,
        epsilon=0.0,
    ),
    ("catch", "q-learning"): _CATCH | dict(max_grad_norm=None),
    ("catch", "reinforce"): _CATCH_POLICY_GRADIENT | dict(entropy_coefficient=0.0),
    ("catch", "a2c"): _CATCH_POLICY_GRADIENT,
    ("catch", "ppo"): _CATCH_POLICY_GRADIENT
    | dict(lambda_=0.95, value_coefficient=0.5, num_epochs=1, num_minibatches=1),
    ("catch", "vtrace"): _CATCH_POLICY_GRADIENT,
    ("catch", "dqn"): dict(
        hidden=(64,),
        activation="relu",
        num_envs=16,
        rollout_length=4,
        num_updates=1_500,
        updates_per_call=150,
        max_grad_norm=None,
        double=True,
        epsilon_decay_steps=20_000,
        buffer_size=20_000,
        batch_size=64,
        min_replay_size=1_000,
        target_update_period=100,
    ),
    # A2C and REINFORCE with separate actor and critic torsos.
    ("cartpole", "ppo"): dict(
        num_envs=8,
        rollout_length=128,
        num_updates=400,
        updates_per_call=50,
        value_coefficient=0.02,
        entropy_coefficient=0.01,
    ),
    ("cartpole", "a2c"): _CARTPOLE_SEPARATE
    | dict(
        rollout_length=32, num_updates=2_000, updates_per_call=200, learning_rate=3e-3, max_grad_norm=5.0, lambda_=1.0
    ),
    ("cartpole", "reinforce"): _CARTPOLE_SEPARATE
    | dict(
        rollout_length=500,
        num_updates=300,
        updates_per_call=20,
        learning_rate=1e-2,
        max_grad_norm=None,
        entropy_coefficient=0.0,
    ),
    # CleanRL's DQN for CartPole, the learning rate annealed to 0.
    ("cartpole", "dqn"): _CLEANRL_CARTPOLE_DQN | dict(anneal_learning_rate=True),
    # CleanRL's PQN for CartPole (pqn.py) with Adam for its RAdam and twice its learning
    # rate: at 2.5e-4, 7 of seeds 0-9 solved (two reached 208 and 351), at 5e-4 all ten.
    ("cartpole", "pqn"): _CLEANRL_CARTPOLE_PQN,
    # PQN's CartPole settings with the support of CleanRL's C51 for CartPole.
    ("cartpole", "c51-pqn"): _CLEANRL_CARTPOLE_PQN | dict(num_atoms=101, v_min=-100.0, v_max=100.0),
    # CleanRL's C51 for CartPole: its DQN's settings, 101 atoms from -100 to 100.
    ("cartpole", "c51"): _CLEANRL_CARTPOLE_DQN | dict(num_atoms=101, v_min=-100.0, v_max=100.0),
    ("pendulum", "ppo"): dict(
        num_envs=16,
        rollout_length=200,
        num_updates=160,
        updates_per_call=20,
        discount=0.95,
        value_coefficient=0.05,
        entropy_coefficient=0.0,
        num_epochs=10,
        num_minibatches=8,
    ),
    # Fujimoto et al.'s DDPG and TD3 settings (2018: Adam at 1e-3, tau 0.005, exploration
    # noise 0.1), SAC's own (a learnt temperature), with (64, 64) ReLU networks, batches of
    # 128 and one gradient step per environment step, as in the papers and RL Zoo. TD3
    # takes uniformly random actions for its first 1000 steps, as its paper does. With one
    # gradient step per two environment steps, TD3 solved 16 of seeds 0-19 and DDPG 19.
    **{
        ("pendulum", algo): dict(
            hidden=(64, 64),
            activation="relu",
            num_envs=4,
            rollout_length=1,
            num_updates=5_000,
            updates_per_call=500,
            max_grad_norm=None,
            buffer_size=20_000,
            batch_size=128,
            min_replay_size=1_000,
            gradient_steps=4,
        )
        | (dict(random_steps=1_000) if algo == "td3" else {})
        for algo in ("ddpg", "td3", "sac")
    },
    # Discrete SAC (Christodoulou 2019) with the Pendulum rows' replay settings, Adam at
    # 3e-4, 100k steps. The paper's target entropy, 0.98 log 2 for two actions, keeps the
    # policy near uniform: on seeds 0-3 training returns rose to about 140, then fell to 33.
    # At 0.3 nats (about 0.43 log 2) all four reached 500.
    ("cartpole", "sac"): dict(
        hidden=(64, 64),
        activation="relu",
        num_envs=4,
        rollout_length=1,
        num_updates=25_000,
        updates_per_call=2_500,
        learning_rate=3e-4,
        max_grad_norm=None,
        buffer_size=50_000,
        batch_size=128,
        min_replay_size=1_000,
        gradient_steps=4,
        target_entropy=0.3,
    ),
    # A GRU between torso and head: the answer depends on the first observation.
    ("repeat-first", "ppo"): dict(
        hidden=(32,),
        activation="relu",
        core="gru",
        core_size=32,
        num_envs=16,
        rollout_length=24,
        num_updates=400,
        updates_per_call=50,
        learning_rate=3e-3,
        max_grad_norm=None,
        normalize_advantages=False,
        num_epochs=2,
        num_minibatches=2,
    ),
}

DEFAULT_ALGORITHMS = {
    "catch": "td-lambda",
    "cartpole": "ppo",
    "pendulum": "ppo",
    "deep-sea": "dqn",
    "repeat-first": "ppo",
}
"""The algorithm `podrace train ENV` runs when none is named."""

THRESHOLDS = {"catch": 0.9, "cartpole": 450.0, "pendulum": -300.0, "repeat-first": 0.9}
"""The mean evaluation return that counts as solved, for the environments with tuned defaults."""

SOLVED_BY_ALGORITHM = {("pendulum", algo): -200.0 for algo in ("ddpg", "td3", "sac")} | {
    ("cartpole", algo): 475.0 for algo in ("c51", "pqn", "c51-pqn", "sac")
}
"""Higher bars where the published results are higher: RL Zoo's off-policy rows reach
about -150 on Pendulum in 20k steps, CleanRL's C51 498.51 and PQN 495.13 on CartPole in
500k; discrete SAC, which has no published CartPole row, is held to theirs."""


def solved_threshold(env: str, algo: str) -> float:
    """The mean evaluation return that counts as solved for `env` with `algo`."""
    return SOLVED_BY_ALGORITHM.get((env, algo), THRESHOLDS[env])


def used_settings(settings: Settings) -> dict[str, Any]:
    """The settings that the run's algorithm and network read, by name: the generic ones
    and the algorithm's own (see `Algorithm.reads`)."""
    own = ALGORITHMS[settings.algo].reads
    claimed = {name for algorithm in ALGORITHMS.values() for name in algorithm.reads}
    return {
        name: value
        for name, value in vars(settings).items()
        if name not in ("env", "algo")
        and (name not in claimed or name in own)
        and (name != "core_size" or settings.core is not None)
        and (not name.startswith("pbt_") or settings.pbt)
    }


def default_settings(env: str, algo: str) -> Settings:
    """The settings `podrace train ENV ALGO` starts from."""
    return Settings(env=env, algo=algo, **TUNED.get((env, algo), {}))


def _optimizer(settings: Settings) -> optax.GradientTransformation:
    learning_rate: float | jax.Array | optax.Schedule = settings.learning_rate
    if settings.anneal_learning_rate:  # linearly to 0 over the run's gradient steps
        num_epochs, num_minibatches = ALGORITHMS[settings.algo].passes(settings)
        gradient_steps = settings.num_updates * num_epochs * num_minibatches
        learning_rate = optax.linear_schedule(settings.learning_rate, 0.0, gradient_steps)
    adam = optax.adam(learning_rate)
    if settings.max_grad_norm is None:
        return adam
    return optax.chain(optax.clip_by_global_norm(settings.max_grad_norm), adam)


def _one_pass(settings: Settings) -> tuple[int, int]:
    del settings
    return 1, 1


def _loss(settings: Settings) -> AbstractLoss:
    loss = ALGORITHMS[settings.algo].loss
    if loss is None:
        raise ValueError(f"{settings.algo} writes its own objectives; it has no loss to build.")
    return loss(settings)


def _on_policy_learner(settings: Settings, env_spaces: tuple[Any, tuple[int, ...]], key: jax.Array) -> AbstractLearner:
    action_space = env_spaces[0]
    network = make_network(settings, env_spaces, key)
    num_epochs, num_minibatches = ALGORITHMS[settings.algo].passes(settings)
    return Learner(
        network,
        training_policy(settings, action_space),
        _loss(settings),
        _optimizer(settings),
        num_epochs=num_epochs,
        num_minibatches=num_minibatches,
    )


def _dqn_learner(settings: Settings, env_spaces: tuple[Any, tuple[int, ...]], key: jax.Array) -> AbstractLearner:
    return DQNLearner(
        make_network(settings, env_spaces, key),
        _loss(settings),
        _optimizer(settings),
        epsilon=optax.linear_schedule(1.0, settings.epsilon, settings.epsilon_decay_steps),
        buffer_size=settings.buffer_size,
        batch_size=settings.batch_size,
        min_replay_size=settings.min_replay_size,
        gradient_steps=settings.gradient_steps,
        target_update_period=settings.target_update_period,
    )


def _pqn_learner(settings: Settings, env_spaces: tuple[Any, tuple[int, ...]], key: jax.Array) -> AbstractLearner:
    """PQN: epsilon-greedy on a schedule, epochs of minibatches of single transitions."""
    return Learner(
        make_network(settings, env_spaces, key),
        EpsilonGreedy(optax.linear_schedule(1.0, settings.epsilon, settings.epsilon_decay_steps)),
        _loss(settings),
        _optimizer(settings),
        num_epochs=settings.num_epochs,
        num_minibatches=settings.num_minibatches,
        minibatches_of="transitions",
    )


def _discrete_sac_learner(
    settings: Settings, num_actions: int, observation_shape: tuple[int, ...], key: jax.Array
) -> AbstractLearner:
    """Discrete SAC: an MLP categorical actor and twin MLP Q-networks of the same hidden sizes."""
    if settings.core is not None:
        raise ValueError("sac replays feed-forward networks only; leave out --core.")
    if settings.random_steps > 0:
        raise ValueError(
            "--random-steps takes uniformly random actions of continuous control; leave it out for sac "
            "on discrete actions, whose categorical actor starts near uniform."
        )
    activation = ACTIVATIONS[settings.activation]
    features = settings.hidden[-1]

    def network(head: Callable[[jax.Array], AbstractHead[Any]], network_key: jax.Array) -> AbstractNetwork:
        torso_key, head_key = jax.random.split(network_key)
        torso = MLPTorso(observation_shape, settings.hidden, activation=activation, key=torso_key)
        return FeedForwardNetwork(torso, head(head_key))

    actor_key, *critic_keys = jax.random.split(key, 3)
    actor = network(lambda k: PolicyLogitHead(features, num_actions, key=k), actor_key)
    critics = [network(lambda k: QValueHead(features, num_actions, key=k), k) for k in critic_keys]
    optimizer = _optimizer(settings)
    return DiscreteSACLearner(
        actor, critics, optimizer, optimizer, optimizer, target_entropy=settings.target_entropy, **_replay(settings)
    )


def _replay(settings: Settings) -> dict[str, Any]:
    """The replay and target settings every off-policy actor-critic learner takes."""
    return dict(
        buffer_size=settings.buffer_size,
        batch_size=settings.batch_size,
        discount=settings.discount,
        tau=settings.tau,
        min_replay_size=settings.min_replay_size,
        gradient_steps=settings.gradient_steps,
    )


def _actor_critic_learner(
    settings: Settings, env_spaces: tuple[Any, tuple[int, ...]], key: jax.Array
) -> AbstractLearner:
    """DDPG, TD3 or SAC: an MLP actor with a bounded head and twin MLP critics (one for DDPG);
    SAC of discrete actions: a categorical actor and twin MLP Q-networks."""
    action_space, observation_shape = env_spaces
    if settings.algo == "sac" and isinstance(action_space, Discrete):
        return _discrete_sac_learner(settings, action_space.num_values, observation_shape, key)
    if not isinstance(action_space, Box) or len(action_space.shape) != 1:
        raise ValueError(
            f"{settings.algo} learns continuous actions; {settings.env}'s actions are "
            f"{type(action_space).__name__}. Use it on an environment with a flat Box action space, such as pendulum."
        )
    if settings.core is not None:
        raise ValueError(f"{settings.algo} replays feed-forward networks only; leave out --core.")
    torso_key, head_key, critic_key = jax.random.split(key, 3)
    activation = ACTIVATIONS[settings.activation]
    features, action_size = settings.hidden[-1], action_space.shape[0]
    low, high = action_space.low.tolist(), action_space.high.tolist()
    torso = MLPTorso(observation_shape, settings.hidden, activation=activation, key=torso_key)
    actor: AbstractNetwork
    if settings.algo == "sac":
        actor = FeedForwardNetwork(torso, TanhGaussianHead(features, action_size, low=low, high=high, key=head_key))
    else:
        actor = FeedForwardNetwork(torso, DeterministicHead(features, action_size, low=low, high=high, key=head_key))
    critic = MLPCritic(
        observation_shape,
        action_size,
        settings.hidden,
        num_critics=1 if settings.algo == "ddpg" else 2,
        activation=activation,
        key=critic_key,
    )
    optimizer = _optimizer(settings)
    replay = _replay(settings)
    # Uniformly random actions for the first `random_steps` environment steps.
    random_actions = optax.piecewise_constant_schedule(float(settings.random_steps > 0), {settings.random_steps: 0.0})
    if settings.algo == "sac":
        exploration = TanhGaussian(random_actions)
        return SACLearner(
            actor,
            critic,
            optimizer,
            optimizer,
            optimizer,
            exploration=exploration,
            target_entropy=settings.target_entropy,
            **replay,
        )
    exploration = GaussianNoise(settings.exploration_noise, random_actions)
    if settings.algo == "ddpg":
        return ddpg(actor, critic, optimizer, optimizer, exploration=exploration, **replay)
    return TD3Learner(
        actor,
        critic,
        optimizer,
        optimizer,
        exploration=exploration,
        target_noise=settings.target_noise,
        policy_delay=settings.policy_delay,
        **replay,
    )


@final
@dataclasses.dataclass(frozen=True)
class Algorithm:
    """One algorithm of `podrace train ENV ALGO`: all that the command line knows of it.

    - `learns_q_values`: a Q-value head (discrete actions), acting greedily when
        evaluated; otherwise a policy head with a value output, evaluated at its mode.
    - `reads`: the settings of its own (the others are the network's and the optimiser's).
    - `loss`: its loss, from the settings (`None` for a learner that writes its own
        objectives, as the actor-critic learners do).
    - `passes`: epochs and minibatches per update.
    - `learner`: its learner, from the settings, the environment's action space and
        observation shape, and the key its networks are drawn from.
    - `evaluation_policy`: the deterministic policy its trained agent is evaluated with.
    """

    learns_q_values: bool
    reads: tuple[str, ...]
    loss: Callable[[Settings], AbstractLoss] | None
    passes: Callable[[Settings], tuple[int, int]] = _one_pass
    learner: Callable[[Settings, tuple[Any, tuple[int, ...]], jax.Array], AbstractLearner] = _on_policy_learner
    evaluation_policy: Callable[[], AbstractPolicy] | None = None


_POLICY_GRADIENT = ("separate_critic", "value_coefficient", "entropy_coefficient")
_REPLAY = ("buffer_size", "batch_size", "min_replay_size", "gradient_steps")
_DQN = ("epsilon", "double", "epsilon_decay_steps", *_REPLAY, "target_update_period")
_ACTOR_CRITIC = (*_REPLAY, "tau", "random_steps")
ALGORITHMS: dict[str, Algorithm] = {
    "td-lambda": Algorithm(
        True, ("lambda_", "epsilon"), lambda s: TDLambdaQLoss(discount=s.discount, lambda_=s.lambda_)
    ),
    "q-learning": Algorithm(True, ("epsilon", "double"), lambda s: QLearningLoss(discount=s.discount, double=s.double)),
    "dqn": Algorithm(
        True,
        _DQN,
        lambda s: QLearningLoss(discount=s.discount, double=s.double),
        learner=_dqn_learner,
    ),
    "c51": Algorithm(
        True,
        (*_DQN, "num_atoms", "v_min", "v_max"),
        lambda s: CategoricalQLoss(discount=s.discount, double=s.double),
        learner=_dqn_learner,
    ),
    "qr-dqn": Algorithm(
        True,
        (*_DQN, "num_quantiles"),
        lambda s: QuantileQLoss(discount=s.discount, double=s.double),
        learner=_dqn_learner,
    ),
    "pqn": Algorithm(
        True,
        ("lambda_", "epsilon", "epsilon_decay_steps", "num_epochs", "num_minibatches"),
        lambda s: PQNLoss(discount=s.discount, lambda_=s.lambda_),
        passes=lambda s: (s.num_epochs, s.num_minibatches),
        learner=_pqn_learner,
    ),
    "c51-pqn": Algorithm(
        True,
        ("lambda_", "epsilon", "epsilon_decay_steps", "num_epochs", "num_minibatches", "num_atoms", "v_min", "v_max"),
        lambda s: CategoricalPQNLoss(discount=s.discount, lambda_=s.lambda_),
        passes=lambda s: (s.num_epochs, s.num_minibatches),
        learner=_pqn_learner,
    ),
    "reinforce": Algorithm(
        False,
        (*_POLICY_GRADIENT, "baseline"),
        lambda s: ReinforceLoss(
            discount=s.discount,
            baseline=s.baseline,
            value_coefficient=s.value_coefficient,
            entropy_coefficient=s.entropy_coefficient,
        ),
    ),
    "a2c": Algorithm(
        False,
        (*_POLICY_GRADIENT, "lambda_"),
        lambda s: A2CLoss(
            discount=s.discount,
            lambda_=s.lambda_,
            value_coefficient=s.value_coefficient,
            entropy_coefficient=s.entropy_coefficient,
        ),
    ),
    "ppo": Algorithm(
        False,
        (*_POLICY_GRADIENT, "lambda_", "normalize_advantages", "num_epochs", "num_minibatches"),
        lambda s: PPOLoss(
            discount=s.discount,
            lambda_=s.lambda_,
            value_coefficient=s.value_coefficient,
            entropy_coefficient=s.entropy_coefficient,
            normalize_advantages=s.normalize_advantages,
        ),
        passes=lambda s: (s.num_epochs, s.num_minibatches),
    ),
    "vtrace": Algorithm(
        False,
        (*_POLICY_GRADIENT, "lambda_"),
        lambda s: VTraceLoss(
            discount=s.discount,
            lambda_=s.lambda_,
            value_coefficient=s.value_coefficient,
            entropy_coefficient=s.entropy_coefficient,
        ),
    ),
    "ddpg": Algorithm(
        False,
        (*_ACTOR_CRITIC, "exploration_noise"),
        None,
        learner=_actor_critic_learner,
        evaluation_policy=Deterministic,
    ),
    "td3": Algorithm(
        False,
        (*_ACTOR_CRITIC, "exploration_noise", "target_noise", "policy_delay"),
        None,
        learner=_actor_critic_learner,
        evaluation_policy=Deterministic,
    ),
    "sac": Algorithm(False, (*_ACTOR_CRITIC, "target_entropy"), None, learner=_actor_critic_learner),
}
"""The algorithms by name: adding one is adding a row."""


def _head(settings: Settings, action_space, in_size: int, *, with_value: bool, key) -> AbstractHead[Any]:
    if ALGORITHMS[settings.algo].learns_q_values:
        if not isinstance(action_space, Discrete):
            policy_gradient = [name for name, algorithm in ALGORITHMS.items() if not algorithm.learns_q_values]
            raise ValueError(
                f"{settings.algo} learns Q-values of discrete actions; {settings.env}'s actions are "
                f"{type(action_space).__name__} of shape {action_space.shape}. Use one of "
                f"{', '.join(policy_gradient)}."
            )
        num_actions, values = action_space.num_values, _loss(settings).input_type
        if values is CategoricalQValues:
            return CategoricalQHead(
                in_size, num_actions, num_atoms=settings.num_atoms, v_min=settings.v_min, v_max=settings.v_max, key=key
            )
        if values is QuantileQValues:
            return QuantileQHead(in_size, num_actions, num_quantiles=settings.num_quantiles, key=key)
        return QValueHead(in_size, num_actions, key=key)
    if isinstance(action_space, Discrete):
        return PolicyLogitHead(in_size, action_space.num_values, with_value=with_value, key=key)
    if isinstance(action_space, Box) and len(action_space.shape) == 1:
        return GaussianHead(in_size, action_space.shape[0], with_value=with_value, key=key)
    raise ValueError(
        f"{settings.env}'s actions are {type(action_space).__name__} of shape {action_space.shape}: podrace's "
        "policy heads take discrete actions or a flat Box."
    )


def make_network(settings: Settings, env_spaces: tuple[Any, tuple[int, ...]], key: jax.Array) -> AbstractNetwork:
    """The network of a run: an MLP torso, a GRU or LSTM core if asked, and the head the algorithm reads.

    Built in one compiled program: eagerly, each part's random draw would be compiled as a
    program of its own. The values are the same bit for bit.
    """
    # The settings are the compiled program's static argument; the network does not read
    # the learning rate, which is an array in a population trained with --pbt.
    return _network(dataclasses.replace(settings, learning_rate=0.0), env_spaces, key)


@eqx.filter_jit
def _network(settings: Settings, env_spaces: tuple[Any, tuple[int, ...]], key: jax.Array) -> AbstractNetwork:
    action_space, observation_shape = env_spaces
    torso_key, core_key, head_key, critic_key, value_key = jax.random.split(key, 5)
    activation = ACTIVATIONS[settings.activation]
    torso = MLPTorso(
        observation_shape, settings.hidden, activation=activation, layer_norm=settings.layer_norm, key=torso_key
    )
    features = settings.hidden[-1]
    if settings.core is not None:
        core_type = {"gru": GRUCore, "lstm": LSTMCore}[settings.core]
        core = core_type(features, settings.core_size, key=core_key)
        head = _head(settings, action_space, settings.core_size, with_value=True, key=head_key)
        return RecurrentNetwork(torso, core, head)
    if settings.separate_critic and not ALGORITHMS[settings.algo].learns_q_values:
        critic = MLPTorso(
            observation_shape, settings.hidden, activation=activation, layer_norm=settings.layer_norm, key=critic_key
        )
        head = _head(settings, action_space, features, with_value=False, key=head_key)
        return ActorCriticNetwork(torso, head, critic, ValueHead(features, key=value_key))
    return FeedForwardNetwork(torso, _head(settings, action_space, features, with_value=True, key=head_key))


def training_policy(settings: Settings, action_space) -> AbstractPolicy:
    """The behaviour policy: epsilon-greedy over Q-values, sampling from a policy head."""
    if ALGORITHMS[settings.algo].learns_q_values:
        return Greedy() if settings.epsilon == 0 else EpsilonGreedy(settings.epsilon)
    return Categorical() if isinstance(action_space, Discrete) else Gaussian()


def evaluation_policy(settings: Settings) -> AbstractPolicy:
    """The deterministic policy a trained agent is evaluated with."""
    algorithm = ALGORITHMS[settings.algo]
    if algorithm.evaluation_policy is not None:
        return algorithm.evaluation_policy()
    return Greedy() if algorithm.learns_q_values else Mode()


def make_learner(settings: Settings, env_spaces: tuple[Any, tuple[int, ...]], key: jax.Array) -> AbstractLearner:
    """The learner of a run, its networks drawn from `key`."""
    return ALGORITHMS[settings.algo].learner(settings, env_spaces, key)


def env_spaces(env: AbstractEnv) -> tuple[Any, tuple[int, ...]]:
    """The action space and the observation shape of a JAX environment."""
    observation = jax.eval_shape(lambda: env.reset(jax.random.key(0))[1].observation)
    return env.action_space, observation.shape


def make_pipeline(settings: Settings, network_key: jax.Array) -> Anakin:
    """One seed's Anakin pipeline, its network drawn from `network_key`."""
    # Built eagerly even inside a traced function (a population builds its members under
    # `vmap`): a bounded head takes the action space's bounds as constants.
    with jax.ensure_compile_time_eval():
        env = make_env(settings.env)
        spaces = env_spaces(env)
    learner = make_learner(settings, spaces, network_key)
    return Anakin(
        AutoReset(env, resets_per_step=settings.resets_per_step),
        learner,
        num_envs=settings.num_envs,
        rollout_length=settings.rollout_length,
        normalization=normalization(settings),
    )


def normalization(settings: Settings) -> RunningNormalization | None:
    """The running normalisation that `--normalize-observations` and `--normalize-rewards` ask for."""
    if not (settings.normalize_observations or settings.normalize_rewards):
        return None
    return RunningNormalization(
        observations=settings.normalize_observations, rewards=settings.normalize_rewards, discount=settings.discount
    )


def member_keys(settings: Settings) -> jax.Array:
    """The keys of the seeds `seed, ..., seed + seeds - 1` (one member each)."""
    return jax.vmap(jax.random.key)(settings.seed + jnp.arange(settings.seeds))


def make_run(settings: Settings) -> tuple[Anakin | Population, jax.Array]:
    """The pipeline (a population for several seeds) and the key its state starts from.

    Seed `s` draws its network from `split(key(s))[0]`; a single run starts from
    `split(key(s))[1]`, a population from `key(seed)`.
    """
    if settings.pbt:
        raise ValueError("make_run builds the runs without --pbt; pbt_population builds the PBT runs.")
    if settings.seeds == 1:
        network_key, run_key = jax.random.split(jax.random.key(settings.seed))
        return make_pipeline(settings, network_key), run_key
    population = Population(lambda key: make_pipeline(settings, jax.random.split(key)[0]), member_keys(settings))
    return population, jax.random.key(settings.seed)


def pbt_learning_rates(settings: Settings) -> Resample:
    """The log-uniform range the members' learning rates start in (by default a tenth to ten times the setting)."""
    rate = float(settings.learning_rate)
    low, high = settings.pbt_learning_rates or (rate / 10, rate * 10)
    return Resample(low, high, log=True)


def pbt_population(settings: Settings) -> PBT:
    """`--seeds` members trained with population-based training of the learning rate; its state
    starts from `key(seed)`, as a population's.

    Seed `s` draws its network as without PBT, from `split(key(s))[0]`, and its starting
    learning rate from `pbt_learning_rates` with `split(key(s))[1]`; every `pbt_interval` updates, the quarter of the
    members with the lowest return copy the top quarter and perturb their learning rate
    by 0.8 or 1.2 (Jaderberg et al., 2017).
    """
    if settings.seeds < 4:
        raise ValueError(f"--pbt selects among the members: give --seeds 4 or more (got {settings.seeds}).")
    keys = member_keys(settings)
    draws = jax.vmap(lambda key: pbt_learning_rates(settings).sample(jax.random.split(key)[1], ()))(keys)

    def make_member(hyperparameters: dict[str, jax.Array]) -> Anakin:
        member_settings = dataclasses.replace(settings, learning_rate=hyperparameters["learning_rate"])
        return make_pipeline(member_settings, jax.random.split(hyperparameters["key"])[0])

    population = Population(make_member, {"key": keys, "learning_rate": draws})
    return PBT(population, {"key": None, "learning_rate": Perturb()}, interval=settings.pbt_interval)
