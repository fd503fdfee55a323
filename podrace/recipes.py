"""Published experiments, reproduced: each recipe is a published result and podrace's faithful configuration.

A recipe names a published number (its source, spread and how it was measured), the
published hyperparameters as the source spells them, and builds podrace's pipeline
from those values and nothing else. [`podrace.reproduction.reproduce`][] trains a recipe
for several seeds and judges it (the verdict rule is in [`podrace.reproduction`][]).

The settings classes hold the hyperparameters under the sources' own names: each
builds its pipeline from them alone, so a recipe cannot be tuned away from its
source. A tuned variant is a recipe of its own, with its own name.

Reference: Lange, gymnax-blines (`agents/<env>/ppo.yaml`, `utils/ppo.py`,
`utils/models.py`), 2022; Huang et al., "CleanRL: High-quality Single-file
Implementations of Deep Reinforcement Learning Algorithms", JMLR 2022 (`ppo.py`,
`dqn_jax.py` and their documented results); Raffin, RL Baselines3 Zoo
(`hyperparams/*.yml`, `benchmark.md`) and Stable-Baselines3 (the algorithms' defaults).
"""

import abc
import dataclasses
import math
from collections.abc import Callable
from typing import Any, Literal, final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, PRNGKeyArray

from ._types import AbstractActionValues, Box, DeterministicAction, Discrete
from ._validation import unknown_name
from .envs import AbstractEnv, EnvPoolEnv, GymnaxEnv, TruncationAsTermination
from .executors.anakin import Anakin, observation_shape
from .learners import DQNLearner, Learner, SACLearner, TD3Learner
from .losses import CategoricalQLoss, PPOLoss, PQNLoss, QLearningLoss
from .networks import (
    AbstractHead,
    AbstractNetwork,
    ActorCriticNetwork,
    CategoricalQHead,
    ConvTorso,
    DeterministicHead,
    FeedForwardNetwork,
    GaussianHead,
    HeNormal,
    LecunNormal,
    MLPCritic,
    MLPTorso,
    Orthogonal,
    PolicyLogitHead,
    QValueHead,
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
    random_first_steps,
)


@final
@dataclasses.dataclass(frozen=True)
class Published:
    """A published result.

    **Arguments:**

    - `value`: the published return, or `None` where the source publishes its settings
        but no result (the recipe then records podrace's figures with no verdict).
    - `spread`: its published standard deviation over runs, or `None` if none is given.
    - `num_runs`: the runs (seeds) behind it.
    - `source`: where it is published (repository and file, or paper and table).
    - `measure`: `"evaluation"` (the final policy plays `evaluation_episodes` episodes,
        sampling its actions) or `"training"` (the mean return of the last
        `training_episodes` episodes played while training, per run).
    - `episodes`: the episodes behind each run's number.
    - `deterministic`: whether the evaluation acts on the policy's most probable action
        (as RL Zoo's `rl_zoo3.benchmark` does; for a Q-network, the greedy action) instead
        of sampling.
    """

    value: float | None
    spread: float | None
    num_runs: int
    source: str
    measure: Literal["evaluation", "training"]
    episodes: int
    deterministic: bool = False

    def evaluation_policy(self, env: AbstractEnv, output_type: type) -> AbstractPolicy:
        """The policy the evaluation acts with, on a network emitting `output_type`: with
        `deterministic`, a deterministic actor's action, the greedy action of action values or
        a distribution's mode; a sample otherwise."""
        if not self.deterministic:
            return _sampling_policy(env)
        if issubclass(output_type, DeterministicAction):
            return Deterministic()
        return Greedy() if issubclass(output_type, AbstractActionValues) else Mode()


class AbstractSettings(eqx.Module):
    """The published hyperparameters of an algorithm, under its source's names, and the pipeline they make."""

    @abc.abstractmethod
    def pipeline(self, env: AbstractEnv, key: PRNGKeyArray) -> Anakin:
        """podrace's faithful configuration: one seed's pipeline, its network drawn from `key`."""

    @property
    @abc.abstractmethod
    def num_updates(self) -> int:
        """Updates that spend the published budget of environment steps (rounded down to whole updates)."""

    @property
    @abc.abstractmethod
    def algorithm(self) -> str:
        """The algorithm's name, as the results table shows it."""


def _separate_mlps(
    env: AbstractEnv,
    hidden: tuple[int, ...],
    activation: Callable[[jax.Array], jax.Array],
    key: PRNGKeyArray,
    *,
    torso_initialization: Any,
    head: Callable[[int, Any, PRNGKeyArray], AbstractHead[Any]],
    value_initialization: Any,
) -> ActorCriticNetwork:
    """An actor MLP with `head` on top and a critic MLP with a value head, sharing no parameters."""
    actor_key, head_key, critic_key, value_key = jax.random.split(key, 4)
    shape = observation_shape(env)
    torso = MLPTorso(shape, hidden, activation=activation, initialization=torso_initialization, key=actor_key)
    critic = MLPTorso(shape, hidden, activation=activation, initialization=torso_initialization, key=critic_key)
    return ActorCriticNetwork(
        torso,
        head(hidden[-1], env.action_space, head_key),
        critic,
        ValueHead(hidden[-1], initialization=value_initialization, key=value_key),
    )


def _sampling_policy(env: AbstractEnv) -> AbstractPolicy:
    return Categorical() if isinstance(env.action_space, Discrete) else Gaussian()


@final
class GymnaxBlinesPPO(AbstractSettings):
    """gymnax-blines' PPO (`agents/<env>/ppo.yaml`, `utils/ppo.py`, `utils/models.py`).

    Separate actor and critic MLPs with ReLU (flax's default LeCun-normal weights,
    biases uniform in [0, 0.05)); a categorical policy, or a Gaussian whose standard
    deviation is `softplus(z) + 0.001` of a second output layer; value clipping with
    `clip_eps`; advantages standardised per minibatch; minibatches of single
    transitions; gradients clipped by global norm, then Adam (eps 1e-5) at a learning
    rate moving linearly from `lr_begin` to `lr_end` over the first
    `lr_warmup * num_train_steps` gradient steps (as the source counts them).

    Where podrace differs: it bootstraps at a time limit (gymnax 1.0 separates
    truncation from termination; the 2022 gymnax that gymnax-blines ran did not: a
    recipe with `truncation_as_termination` computes it as the source did), and
    it learns from every step of a rollout of `n_steps` (gymnax-blines keeps `n_steps + 1`
    steps and learns from the first `n_steps`).
    """

    num_train_steps: int
    num_train_envs: int
    n_steps: int
    n_minibatch: int
    epoch_ppo: int
    max_grad_norm: float
    gamma: float
    gae_lambda: float
    clip_eps: float
    entropy_coeff: float
    critic_coeff: float
    lr_begin: float
    lr_end: float
    lr_warmup: float
    num_hidden_units: int
    num_hidden_layers: int

    @property
    def algorithm(self) -> str:
        return "PPO (gymnax-blines)"

    def learning_rate_at(self, count: ArrayLike) -> Array:
        """The learning rate of gradient step `count`: `lr_begin` to `lr_end` over the warm-up, then `lr_end`."""
        schedule = optax.linear_schedule(self.lr_begin, self.lr_end, int(self.num_train_steps * self.lr_warmup))
        return jnp.asarray(schedule(count))

    @property
    def num_updates(self) -> int:
        return self.num_train_steps // (self.num_train_envs * self.n_steps)

    def pipeline(self, env: AbstractEnv, key: PRNGKeyArray) -> Anakin:
        initialization = LecunNormal(bias_scale=0.05)

        def head(in_size: int, action_space: Any, key: PRNGKeyArray) -> AbstractHead[Any]:
            if isinstance(action_space, Discrete):
                return PolicyLogitHead(in_size, action_space.num_values, initialization=initialization, key=key)
            return GaussianHead(
                in_size,
                _action_size(action_space),
                std="softplus",
                min_std=1e-3,
                mean_init_scale=1.0,
                initialization=initialization,
                key=key,
            )

        network = _separate_mlps(
            env,
            (self.num_hidden_units,) * self.num_hidden_layers,
            jax.nn.relu,
            key,
            torso_initialization=initialization,
            head=head,
            value_initialization=initialization,
        )
        loss = PPOLoss(
            discount=self.gamma,
            lambda_=self.gae_lambda,
            clip_epsilon=self.clip_eps,
            value_coefficient=self.critic_coeff,
            entropy_coefficient=self.entropy_coeff,
            clip_value=True,
        )
        optimizer = optax.chain(
            optax.clip_by_global_norm(self.max_grad_norm),
            optax.scale_by_adam(eps=1e-5),
            optax.scale_by_learning_rate(self.learning_rate_at),
        )
        learner = Learner(
            network,
            _sampling_policy(env),
            loss,
            optimizer,
            num_epochs=self.epoch_ppo,
            num_minibatches=self.n_minibatch,
            minibatches_of="transitions",
        )
        return Anakin(env, learner, num_envs=self.num_train_envs, rollout_length=self.n_steps)


def _action_size(action_space: Any) -> int:
    if not (isinstance(action_space, Box) and len(action_space.shape) == 1):
        raise ValueError(f"A Gaussian policy needs a flat Box of actions, got {action_space}.")
    return action_space.shape[0]


def _annealed_once_per_update(settings: "CleanRLPPO | CleanRLAtariPPO | CleanRLPQN", count: ArrayLike) -> Array:
    """CleanRL's `anneal_lr`: the learning rate times `1 - u / num_updates` in update `u`
    (of `update_epochs * num_minibatches` gradient steps), or constant without it."""
    if not settings.anneal_lr:
        return jnp.asarray(settings.learning_rate, jnp.float32)
    update = jnp.asarray(count) // (settings.update_epochs * settings.num_minibatches)
    return settings.learning_rate * (1.0 - update / settings.num_updates)


@final
class CleanRLPPO(AbstractSettings):
    """CleanRL's `ppo.py` (discrete actions, classic control).

    Separate actor and critic MLPs of two tanh layers of 64, orthogonal weights (gain
    `sqrt(2)`, 0.01 for the policy layer, 1 for the value layer) and zero biases;
    clipped values (`clip_vloss`), advantages standardised per minibatch (`norm_adv`),
    minibatches of single transitions; gradients clipped by global norm, then Adam
    (eps 1e-5) at a learning rate annealed linearly to 0 once per update (`anneal_lr`).

    Where podrace differs: it bootstraps at a time limit (CleanRL treats a truncation
    as a termination; see `Recipe.truncation_as_termination`) and steps gymnax's
    versions of the environments (the same dynamics and time limits in float32).
    """

    total_timesteps: int
    learning_rate: float
    num_envs: int
    num_steps: int
    anneal_lr: bool
    gamma: float
    gae_lambda: float
    num_minibatches: int
    update_epochs: int
    norm_adv: bool
    clip_coef: float
    clip_vloss: bool
    ent_coef: float
    vf_coef: float
    max_grad_norm: float

    @property
    def algorithm(self) -> str:
        return "PPO (CleanRL)"

    def learning_rate_at(self, count: ArrayLike) -> Array:
        """The learning rate of gradient step `count`: with `anneal_lr`, `1 - u / num_updates` of it in update `u`."""
        return _annealed_once_per_update(self, count)

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // (self.num_envs * self.num_steps)

    def pipeline(self, env: AbstractEnv, key: PRNGKeyArray) -> Anakin:
        if not isinstance(env.action_space, Discrete):
            raise ValueError(f"CleanRL's ppo.py takes discrete actions, got {env.action_space}.")

        def head(in_size: int, action_space: Any, key: PRNGKeyArray) -> AbstractHead[Any]:
            return PolicyLogitHead(in_size, action_space.num_values, initialization=Orthogonal(0.01), key=key)

        network = _separate_mlps(
            env,
            (64, 64),
            jnp.tanh,
            key,
            torso_initialization=Orthogonal(math.sqrt(2)),
            head=head,
            value_initialization=Orthogonal(1.0),
        )
        return Anakin(
            env,
            _cleanrl_ppo_learner(self, network, self.clip_vloss),
            num_envs=self.num_envs,
            rollout_length=self.num_steps,
        )


def _cleanrl_ppo_learner(
    settings: "CleanRLPPO | CleanRLAtariPPO", network: AbstractNetwork, clip_value: bool
) -> Learner:
    """CleanRL's PPO update: the clipped objective with `clip_value` (`clip_vloss`), minibatches of single
    transitions, gradients clipped by global norm, then Adam (eps 1e-5) at the settings' learning rate."""
    loss = PPOLoss(
        discount=settings.gamma,
        lambda_=settings.gae_lambda,
        clip_epsilon=settings.clip_coef,
        value_coefficient=settings.vf_coef,
        entropy_coefficient=settings.ent_coef,
        normalize_advantages=settings.norm_adv,
        clip_value=clip_value,
    )
    optimizer = optax.chain(
        optax.clip_by_global_norm(settings.max_grad_norm),
        optax.scale_by_adam(eps=1e-5),
        optax.scale_by_learning_rate(settings.learning_rate_at),
    )
    return Learner(
        network,
        Categorical(),
        loss,
        optimizer,
        num_epochs=settings.update_epochs,
        num_minibatches=settings.num_minibatches,
        minibatches_of="transitions",
    )


@final
class CleanRLAtariPPO(AbstractSettings):
    """CleanRL's `ppo_atari_envpool_xla_jax_scan.py`: PPO on Atari through EnvPool, the
    pool stepped inside the compiled program.

    The Nature DQN network (Mnih et al., Nature 2015) shared by the policy and the value:
    three convolutions without padding (32 of 8x8 with stride 4, 64 of 4x4 with stride 2,
    64 of 3x3), then a dense layer of 512, all ReLU, over EnvPool's stack of four 84x84
    grey frames divided by 255; orthogonal weights (gain `sqrt(2)`, 0.01 for the policy
    layer, 1 for the value layer) and zero biases. Advantages standardised per minibatch,
    the value loss unclipped, minibatches of single transitions; gradients clipped by
    global norm, then Adam (eps 1e-5) at a learning rate annealed linearly to 0 once per
    update. The environments are EnvPool's with `episodic_life=True, reward_clip=True`
    (the recipe's `env_options`).

    Where podrace differs: it bootstraps at EnvPool's time limit (`max_episode_steps`,
    27,000 steps), which CleanRL treats as a termination.
    """

    total_timesteps: int
    learning_rate: float
    num_envs: int
    num_steps: int
    anneal_lr: bool
    gamma: float
    gae_lambda: float
    num_minibatches: int
    update_epochs: int
    norm_adv: bool
    clip_coef: float
    ent_coef: float
    vf_coef: float
    max_grad_norm: float

    @property
    def algorithm(self) -> str:
        return "PPO (CleanRL, Atari)"

    def learning_rate_at(self, count: ArrayLike) -> Array:
        """The learning rate of gradient step `count`: with `anneal_lr`, `1 - u / num_updates` of it in update `u`."""
        return _annealed_once_per_update(self, count)

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // (self.num_envs * self.num_steps)

    def pipeline(self, env: AbstractEnv, key: PRNGKeyArray) -> Anakin:
        if not isinstance(env.action_space, Discrete):
            raise ValueError(
                f"CleanRL's ppo_atari_envpool_xla_jax_scan.py takes discrete actions, got {env.action_space}."
            )
        torso_key, head_key = jax.random.split(key)
        torso = ConvTorso(
            observation_shape(env),
            (32, 64, 64),
            kernel_sizes=(8, 4, 3),
            strides=(4, 2, 1),
            padding="VALID",
            hidden_sizes=(512,),
            activation=jax.nn.relu,
            observation_scale=1 / 255,
            initialization=Orthogonal(math.sqrt(2)),
            channels_first=True,
            key=torso_key,
        )
        head = PolicyLogitHead(
            torso.output_size,
            env.action_space.num_values,
            with_value=True,
            initialization=Orthogonal(0.01),
            value_initialization=Orthogonal(1.0),
            key=head_key,
        )
        learner = _cleanrl_ppo_learner(self, FeedForwardNetwork(torso, head), clip_value=False)
        return Anakin(env, learner, num_envs=self.num_envs, rollout_length=self.num_steps)


@final
class CleanRLDQN(AbstractSettings):
    """CleanRL's `dqn_jax.py`.

    An MLP of 120 and 84 ReLU units (flax's default LeCun-normal weights, zero
    biases), one environment, a gradient step on `batch_size` replayed transitions
    every `train_frequency` steps once `learning_starts` steps are stored, a target
    network copied every `target_network_frequency` steps, epsilon annealed linearly
    from `start_e` to `end_e` over `exploration_fraction` of the run, Adam.

    Where podrace differs: its Q-learning loss halves the squared error (Adam's steps
    do not depend on the scale, but for its epsilon), and it steps gymnax's versions
    of the environments.
    """

    total_timesteps: int
    learning_rate: float
    buffer_size: int
    gamma: float
    tau: float
    target_network_frequency: int
    batch_size: int
    start_e: float
    end_e: float
    exploration_fraction: float
    learning_starts: int
    train_frequency: int

    @property
    def algorithm(self) -> str:
        return "DQN (CleanRL)"

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.train_frequency

    def pipeline(self, env: AbstractEnv, key: PRNGKeyArray) -> Anakin:
        return _cleanrl_q_pipeline(
            self,
            env,
            key,
            lambda action_count, head_key: QValueHead(84, action_count, initialization=LecunNormal(), key=head_key),
            QLearningLoss(discount=self.gamma),
            optax.adam(self.learning_rate),
            tau=self.tau,
        )


@final
class CleanRLC51(AbstractSettings):
    """CleanRL's `c51_jax.py`: its DQN (see [`podrace.recipes.CleanRLDQN`][]) with a
    categorical return distribution of `n_atoms` atoms from `v_min` to `v_max` per action.

    The network's last layer emits the atoms' logits; the loss is the cross-entropy to
    the projected target distribution of the target network's greedy action. Adam's
    epsilon is `0.01 / batch_size`, as in the source; the target network is copied
    whole every `target_network_frequency` steps.

    Where podrace differs: the source clips the predicted probabilities into
    `[1e-5, 1 - 1e-5]` inside its cross-entropy; podrace takes the log-softmax of the
    logits, which needs no clipping. It steps gymnax's versions of the environments.
    """

    total_timesteps: int
    learning_rate: float
    n_atoms: int
    v_min: float
    v_max: float
    buffer_size: int
    gamma: float
    target_network_frequency: int
    batch_size: int
    start_e: float
    end_e: float
    exploration_fraction: float
    learning_starts: int
    train_frequency: int

    @property
    def algorithm(self) -> str:
        return "C51 (CleanRL)"

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.train_frequency

    def pipeline(self, env: AbstractEnv, key: PRNGKeyArray) -> Anakin:
        def head(action_count: int, head_key: PRNGKeyArray) -> CategoricalQHead:
            return CategoricalQHead(
                84,
                action_count,
                num_atoms=self.n_atoms,
                v_min=self.v_min,
                v_max=self.v_max,
                initialization=LecunNormal(),
                key=head_key,
            )

        optimizer = optax.adam(self.learning_rate, eps=0.01 / self.batch_size)
        return _cleanrl_q_pipeline(self, env, key, head, CategoricalQLoss(discount=self.gamma), optimizer, tau=1.0)


@final
class CleanRLPQN(AbstractSettings):
    """CleanRL's `pqn.py`.

    A Q-network of 120 and 84 units, each layer normalised before its ReLU
    (orthogonal weights of gain sqrt 2, zero biases, the output layer's too);
    `num_envs` environments of `num_steps` steps per update; Peng's Q(lambda) returns
    (`q_lambda`) from the rollout's parameters, then `update_epochs` epochs of
    `num_minibatches` minibatches of single transitions; epsilon-greedy, epsilon
    annealed linearly from `start_e` to `end_e` over `exploration_fraction` of the
    run; gradients clipped by global norm, then RAdam at a learning rate annealed
    linearly to 0 once per update (`anneal_lr`).

    Where podrace differs: it bootstraps at a time limit (CleanRL's returns treat a
    truncation as a termination); its loss halves the squared error, so it clips the
    gradient at half `max_grad_norm` (the same clipping; RAdam's steps do not depend on
    the scale, but for its epsilon); it steps gymnax's versions of the environments.
    """

    total_timesteps: int
    learning_rate: float
    num_envs: int
    num_steps: int
    num_minibatches: int
    update_epochs: int
    anneal_lr: bool
    gamma: float
    start_e: float
    end_e: float
    exploration_fraction: float
    max_grad_norm: float
    q_lambda: float

    @property
    def algorithm(self) -> str:
        return "PQN (CleanRL)"

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // (self.num_envs * self.num_steps)

    def learning_rate_at(self, count: ArrayLike) -> Array:
        """The learning rate of gradient step `count`: with `anneal_lr`, `1 - u / num_updates` of it in update `u`."""
        return _annealed_once_per_update(self, count)

    def pipeline(self, env: AbstractEnv, key: PRNGKeyArray) -> Anakin:
        if not isinstance(env.action_space, Discrete):
            raise ValueError(f"CleanRL's pqn.py takes discrete actions, got {env.action_space}.")
        torso_key, head_key = jax.random.split(key)
        initialization = Orthogonal(math.sqrt(2))
        network = FeedForwardNetwork(
            MLPTorso(observation_shape(env), (120, 84), layer_norm=True, initialization=initialization, key=torso_key),
            QValueHead(84, env.action_space.num_values, initialization=initialization, key=head_key),
        )
        epsilon = optax.linear_schedule(self.start_e, self.end_e, int(self.exploration_fraction * self.total_timesteps))
        # podrace's loss halves CleanRL's mean squared error, and so its gradient: clipped at
        # half the norm, the clipped gradient is half CleanRL's, which RAdam steps alike.
        learner = _pqn_learner(
            network,
            epsilon,
            discount=self.gamma,
            lambda_=self.q_lambda,
            max_grad_norm=self.max_grad_norm / 2,
            learning_rate=self.learning_rate_at,
            num_epochs=self.update_epochs,
            num_minibatches=self.num_minibatches,
        )
        return Anakin(env, learner, num_envs=self.num_envs, rollout_length=self.num_steps)


def _pqn_learner(
    network: FeedForwardNetwork,
    epsilon: optax.Schedule,
    *,
    discount: float,
    lambda_: float,
    max_grad_norm: float,
    learning_rate: optax.Schedule,
    num_epochs: int,
    num_minibatches: int,
) -> Learner:
    """PQN as CleanRL and purejaxql train it: epsilon-greedy over environment steps, Q(lambda)
    returns, gradients clipped by global norm, then RAdam at `learning_rate` (a schedule over
    gradient steps), in epochs of minibatches of single transitions."""
    optimizer = optax.chain(
        optax.clip_by_global_norm(max_grad_norm),
        optax.scale_by_radam(),
        optax.scale_by_learning_rate(learning_rate),
    )
    return Learner(
        network,
        EpsilonGreedy(epsilon),
        PQNLoss(discount=discount, lambda_=lambda_),
        optimizer,
        num_epochs=num_epochs,
        num_minibatches=num_minibatches,
        minibatches_of="transitions",
    )


@final
class PurejaxqlPQN(AbstractSettings):
    """purejaxql's `pqn_minatar.py` (its `config/alg/pqn_minatar.yaml`).

    A Q-network of one 3x3 convolution of 16 channels (no padding) and a dense layer of
    128 units, each normalised over its features (flax's `LayerNorm`, epsilon 1e-6)
    before its ReLU, on the observation divided by 255 (`norm_input: False`); He-normal
    weights, LeCun-normal on the output layer, zero biases. `num_envs` environments of
    `num_steps` steps per update; Peng's Q(lambda) returns from the rollout's Q-values,
    then `num_epochs` epochs of `num_minibatches` minibatches of single transitions;
    epsilon-greedy, epsilon annealed linearly per update from `eps_start` to
    `eps_finish` over `eps_decay` of the updates; gradients clipped by global norm, then
    RAdam at a learning rate annealed linearly per gradient step from `lr` towards 0
    (`lr_linear_decay`).

    Where podrace differs: it bootstraps at a time limit (purejaxql's returns treat a
    truncation as a termination).
    """

    total_timesteps: int
    num_envs: int
    num_steps: int
    eps_start: float
    eps_finish: float
    eps_decay: float
    num_minibatches: int
    num_epochs: int
    lr: float
    max_grad_norm: float
    lr_linear_decay: bool
    gamma: float
    lambda_: float

    @property
    def algorithm(self) -> str:
        return "PQN (purejaxql)"

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // (self.num_envs * self.num_steps)

    def learning_rate_at(self, count: ArrayLike) -> Array:
        """The learning rate of gradient step `count`: with `lr_linear_decay`, linear from `lr` to 1e-20."""
        if not self.lr_linear_decay:
            return jnp.asarray(self.lr)
        gradient_steps = self.num_updates * self.num_epochs * self.num_minibatches
        return jnp.asarray(optax.linear_schedule(self.lr, 1e-20, gradient_steps)(count))

    def pipeline(self, env: AbstractEnv, key: PRNGKeyArray) -> Anakin:
        if not isinstance(env.action_space, Discrete):
            raise ValueError(f"purejaxql's pqn_minatar.py takes discrete actions, got {env.action_space}.")
        torso_key, head_key = jax.random.split(key)
        network = FeedForwardNetwork(
            ConvTorso(
                observation_shape(env),
                (16,),
                kernel_sizes=3,
                padding="VALID",
                hidden_sizes=(128,),
                observation_scale=1 / 255,
                layer_norm=True,
                layer_norm_eps=1e-6,
                initialization=HeNormal(),
                key=torso_key,
            ),
            QValueHead(128, env.action_space.num_values, initialization=LecunNormal(), key=head_key),
        )
        steps_per_update = self.num_envs * self.num_steps
        decay_updates = self.eps_decay * self.num_updates  # 244.1 updates: not a whole number

        def epsilon(steps: ArrayLike) -> Array:
            """Linear over updates, as purejaxql's: constant within a rollout."""
            progress = jnp.clip((jnp.asarray(steps) // steps_per_update) / decay_updates, 0.0, 1.0)
            return self.eps_start + (self.eps_finish - self.eps_start) * progress

        learner = _pqn_learner(
            network,
            epsilon,
            discount=self.gamma,
            lambda_=self.lambda_,
            max_grad_norm=self.max_grad_norm,
            learning_rate=self.learning_rate_at,
            num_epochs=self.num_epochs,
            num_minibatches=self.num_minibatches,
        )
        return Anakin(env, learner, num_envs=self.num_envs, rollout_length=self.num_steps)


def _cleanrl_q_pipeline(
    settings: CleanRLDQN | CleanRLC51,
    env: AbstractEnv,
    key: PRNGKeyArray,
    head: Callable[[int, PRNGKeyArray], Any],
    loss: QLearningLoss | CategoricalQLoss,
    optimizer: optax.GradientTransformation,
    *,
    tau: float,
) -> Anakin:
    """The DQN of CleanRL's scripts: an MLP of 120 and 84 ReLU units (LeCun-normal weights)
    with `head(num_actions, key)` on top, one environment, a gradient step every
    `train_frequency` steps, epsilon annealed over `exploration_fraction` of the run."""
    if not isinstance(env.action_space, Discrete):
        raise ValueError(f"CleanRL's {settings.algorithm} takes discrete actions, got {env.action_space}.")
    torso_key, head_key = jax.random.split(key)
    torso = MLPTorso(observation_shape(env), (120, 84), initialization=LecunNormal(), key=torso_key)
    learner = DQNLearner(
        FeedForwardNetwork(torso, head(env.action_space.num_values, head_key)),
        loss,
        optimizer,
        epsilon=optax.linear_schedule(
            settings.start_e, settings.end_e, int(settings.exploration_fraction * settings.total_timesteps)
        ),
        buffer_size=settings.buffer_size,
        batch_size=settings.batch_size,
        min_replay_size=settings.learning_starts,
        target_update_period=settings.target_network_frequency // settings.train_frequency,
        tau=tau,
    )
    return Anakin(env, learner, num_envs=1, rollout_length=settings.train_frequency)


def _box_bounds(owner: str, env: AbstractEnv) -> tuple[int, list[float], list[float]]:
    """The size and bounds of a flat Box action space; a `ValueError` for any other.

    Evaluated eagerly, also while a population traces its members: the bounds become
    constants of a bounded head."""
    with jax.ensure_compile_time_eval():
        space = env.action_space
        if not isinstance(space, Box) or len(space.shape) != 1:
            raise ValueError(f"{owner} takes a flat Box action space, got {space}.")
        return space.shape[0], space.low.tolist(), space.high.tolist()


@final
class RLZooTD3(AbstractSettings):
    """RL Zoo's TD3 (and, with `ddpg`, its DDPG): Stable-Baselines3's `TD3` and `DDPG`
    at the zoo's hyperparameters, Stable-Baselines3's defaults for the rest.

    A ReLU MLP actor of `net_arch` with a tanh output scaled to the action bounds,
    critics of the same widths on the observation joined with the action (PyTorch's
    default initialisation for all), one environment, `gradient_steps` gradient steps
    every `train_freq` steps once `learning_starts` steps are stored, uniformly random
    actions before that and Gaussian noise of `noise_std` (in actions scaled to
    `[-1, 1]`) after. TD3 has twin critics, target policy smoothing and the actor and
    the Polyak-averaged targets updated every `policy_delay` critic steps; SB3's DDPG is
    the same algorithm with one critic, no smoothing and no delay. Adam at
    `learning_rate` for both networks.

    Where podrace differs: the critics read the action in the environment's units
    rather than scaled to `[-1, 1]`; it steps gymnax's version of the environment.
    """

    n_timesteps: int
    gamma: float
    buffer_size: int
    learning_starts: int
    noise_std: float
    gradient_steps: int
    train_freq: int
    learning_rate: float
    net_arch: tuple[int, ...]
    batch_size: int = 256
    tau: float = 0.005
    policy_delay: int = 2
    target_policy_noise: float = 0.2
    target_noise_clip: float = 0.5
    ddpg: bool = False

    @property
    def algorithm(self) -> str:
        return "DDPG (RL Zoo)" if self.ddpg else "TD3 (RL Zoo)"

    @property
    def num_updates(self) -> int:
        return self.n_timesteps // self.train_freq

    def pipeline(self, env: AbstractEnv, key: PRNGKeyArray) -> Anakin:
        action_size, low, high = _box_bounds(f"RL Zoo's {self.algorithm}", env)
        torso_key, head_key, critic_key = jax.random.split(key, 3)
        shape = observation_shape(env)
        actor = FeedForwardNetwork(
            MLPTorso(shape, self.net_arch, key=torso_key),
            DeterministicHead(self.net_arch[-1], action_size, low=low, high=high, key=head_key),
        )
        critic = MLPCritic(shape, action_size, self.net_arch, num_critics=1 if self.ddpg else 2, key=critic_key)
        optimizer = optax.adam(self.learning_rate)
        learner = TD3Learner(
            actor,
            critic,
            optimizer,
            optimizer,
            exploration=GaussianNoise(self.noise_std, random_first_steps(self.learning_starts)),
            buffer_size=self.buffer_size,
            batch_size=self.batch_size,
            discount=self.gamma,
            tau=self.tau,
            target_noise=0.0 if self.ddpg else self.target_policy_noise,
            target_noise_clip=self.target_noise_clip,
            policy_delay=1 if self.ddpg else self.policy_delay,
            min_replay_size=self.learning_starts,
            gradient_steps=self.gradient_steps,
        )
        return Anakin(env, learner, num_envs=1, rollout_length=self.train_freq)


@final
class RLZooSAC(AbstractSettings):
    """RL Zoo's SAC: Stable-Baselines3's `SAC` at the zoo's hyperparameters, its defaults for the rest.

    ReLU MLP actor and twin critics of `net_arch` (PyTorch's default initialisation),
    a tanh-squashed Gaussian policy whose log standard deviation lies in `[-20, 2]`,
    one environment, `gradient_steps` gradient steps every `train_freq` steps once
    `learning_starts` steps are stored and uniformly random actions before that, the
    temperature learnt from 1 towards an entropy of minus the action size (SB3's
    `ent_coef="auto"`, `target_entropy="auto"`), Polyak-averaged target critics, Adam
    at `learning_rate` for the actor, the critics and the temperature.

    Where podrace differs: the log standard deviation is squashed into `[-20, 2]` by a
    scaled tanh instead of clipped; the critics read the action in the environment's
    units rather than scaled to `[-1, 1]`; it steps gymnax's version of the environment.
    """

    n_timesteps: int
    learning_rate: float
    buffer_size: int = 1_000_000
    learning_starts: int = 100
    batch_size: int = 256
    tau: float = 0.005
    gamma: float = 0.99
    train_freq: int = 1
    gradient_steps: int = 1
    net_arch: tuple[int, ...] = (256, 256)

    @property
    def algorithm(self) -> str:
        return "SAC (RL Zoo)"

    @property
    def num_updates(self) -> int:
        return self.n_timesteps // self.train_freq

    def pipeline(self, env: AbstractEnv, key: PRNGKeyArray) -> Anakin:
        action_size, low, high = _box_bounds("RL Zoo's SAC", env)
        torso_key, head_key, critic_key = jax.random.split(key, 3)
        shape = observation_shape(env)
        actor = FeedForwardNetwork(
            MLPTorso(shape, self.net_arch, key=torso_key),
            TanhGaussianHead(
                self.net_arch[-1], action_size, low=low, high=high, min_log_std=-20.0, max_log_std=2.0, key=head_key
            ),
        )
        critic = MLPCritic(shape, action_size, self.net_arch, key=critic_key)
        optimizer = optax.adam(self.learning_rate)
        learner = SACLearner(
            actor,
            critic,
            optimizer,
            optimizer,
            optimizer,
            exploration=TanhGaussian(random_first_steps(self.learning_starts)),
            buffer_size=self.buffer_size,
            batch_size=self.batch_size,
            discount=self.gamma,
            tau=self.tau,
            initial_temperature=1.0,
            min_replay_size=self.learning_starts,
            gradient_steps=self.gradient_steps,
        )
        return Anakin(env, learner, num_envs=1, rollout_length=self.train_freq)


@final
@dataclasses.dataclass(frozen=True)
class Recipe:
    """A published experiment and podrace's faithful configuration of it.

    **Arguments:**

    - `name`: the recipe's name (`podrace reproduce NAME`).
    - `env_id`: the id of its environment in `suite`.
    - `settings`: the published hyperparameters; they build the pipeline.
    - `published`: the published result.
    - `notes`: what else a reader should know (e.g. a published failure).
    - `truncation_as_termination`: whether a time limit ends an episode as a
        termination ([`podrace.envs.TruncationAsTermination`][]), as the sources
        computed it, rather than with a bootstrap, as podrace does.
    - `cannot_fail`: why the recipe cannot fail its verdict (its threshold is at or
        below the lowest return of its task, as when the published value is a uniformly
        random policy's return), or empty; the published-results page shows it on the
        recipe's row.
    - `suite`: where the environment comes from: `"gymnax"` ([`podrace.envs.GymnaxEnv`][])
        or `"envpool"` ([`podrace.envs.EnvPoolEnv`][], a pool of the pipeline's batch).
    - `env_options`: the environment's options under its suite's names (EnvPool's
        `episodic_life`, `reward_clip`, ...), as `(name, value)` pairs.
    """

    name: str
    env_id: str
    settings: AbstractSettings
    published: Published
    notes: str = ""
    truncation_as_termination: bool = False
    cannot_fail: str = ""
    suite: Literal["gymnax", "envpool"] = "gymnax"
    env_options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.suite == "envpool" and self.published.measure == "evaluation":
            raise ValueError(
                f"Recipe {self.name}: a recipe on EnvPool is measured on its training episodes (each seed trains "
                "on a pool of its own, which no evaluation can share): give it measure='training'."
            )

    def env(self, seed: int = 0) -> AbstractEnv:
        """The environment (needs gymnax, `pip install "podrace[gymnax]"`, or EnvPool,
        `pip install "podrace[envpool]"`).

        **Arguments:**

        - `seed`: an EnvPool pool's seed (its environment `i` is seeded from `seed + i`);
            a gymnax environment takes its randomness from the pipeline's keys instead.
        """
        if self.suite == "envpool":
            env: AbstractEnv = EnvPoolEnv(self.env_id, seed=seed, **dict(self.env_options))
        else:
            env = GymnaxEnv.make(self.env_id, **dict(self.env_options))
        return TruncationAsTermination(env) if self.truncation_as_termination else env


def _gymnax_blines(
    num_train_steps: int,
    num_train_envs: int,
    n_steps: int,
    *,
    max_grad_norm: float,
    gamma: float = 0.99,
    num_hidden_units: int = 64,
    lr_begin: float = 5e-4,
    epoch_ppo: int = 4,
    entropy_coeff: float = 0.01,
    n_minibatch: int = 4,
) -> GymnaxBlinesPPO:
    """A gymnax-blines `ppo.yaml`: the values that all of them share, and each one's own."""
    return GymnaxBlinesPPO(
        num_train_steps=num_train_steps,
        num_train_envs=num_train_envs,
        n_steps=n_steps,
        n_minibatch=n_minibatch,
        epoch_ppo=epoch_ppo,
        max_grad_norm=max_grad_norm,
        gamma=gamma,
        gae_lambda=0.95,
        clip_eps=0.2,
        entropy_coeff=entropy_coeff,
        critic_coeff=0.5,
        lr_begin=lr_begin,
        lr_end=5e-4,
        lr_warmup=0.05,
        num_hidden_units=num_hidden_units,
        num_hidden_layers=2,
    )


_GYMNAX_SOURCE = (
    "gymnax README, PPO returns; configurations: gymnax-blines agents/{env}/ppo.yaml (3f029d6); "
    "one run (seed 0), the last evaluation of its stored checkpoint"
)


def _gymnax_published(env_id: str, value: float) -> Published:
    return Published(value, None, 1, _GYMNAX_SOURCE.format(env=env_id), "evaluation", 164)


def _gymnax_recipe(env_id: str, value: float, settings: GymnaxBlinesPPO, notes: str = "") -> Recipe:
    return Recipe("gymnax-ppo-" + env_id.lower(), env_id, settings, _gymnax_published(env_id, value), notes)


CLEANRL_PPO = CleanRLPPO(
    total_timesteps=500_000,
    learning_rate=2.5e-4,
    num_envs=4,
    num_steps=128,
    anneal_lr=True,
    gamma=0.99,
    gae_lambda=0.95,
    num_minibatches=4,
    update_epochs=4,
    norm_adv=True,
    clip_coef=0.2,
    clip_vloss=True,
    ent_coef=0.01,
    vf_coef=0.5,
    max_grad_norm=0.5,
)
"""CleanRL's `ppo.py` settings for classic control, as its benchmark runs them."""

CLEANRL_DQN = CleanRLDQN(
    total_timesteps=500_000,
    learning_rate=2.5e-4,
    buffer_size=10_000,
    gamma=0.99,
    tau=1.0,
    target_network_frequency=500,
    batch_size=128,
    start_e=1.0,
    end_e=0.05,
    exploration_fraction=0.5,
    learning_starts=10_000,
    train_frequency=10,
)
"""CleanRL's `dqn_jax.py` settings for classic control (`podrace train cartpole dqn` reads them too)."""

CLEANRL_C51 = CleanRLC51(
    total_timesteps=500_000,
    learning_rate=2.5e-4,
    n_atoms=101,
    v_min=-100.0,
    v_max=100.0,
    buffer_size=10_000,
    gamma=0.99,
    target_network_frequency=500,
    batch_size=128,
    start_e=1.0,
    end_e=0.05,
    exploration_fraction=0.5,
    learning_starts=10_000,
    train_frequency=10,
)
"""CleanRL's `c51_jax.py` settings for classic control (`podrace train cartpole c51` reads them too)."""

_CLEANRL_PPO_SOURCE = (
    "CleanRL docs/rl-algorithms/ppo.md, ppo.py (benchmark/ppo.sh: 3 seeds); each seed's mean return of its "
    "last 100 training episodes, mean and standard deviation over seeds"
)
_CLEANRL_DQN_SOURCE = "CleanRL docs/rl-algorithms/dqn.md, dqn_jax.py (3 seeds); returns of training episodes"
_CLEANRL_C51_SOURCE = (
    "CleanRL docs/rl-algorithms/c51.md, c51.py (3 seeds; c51_jax.py has the same hyperparameters); returns of "
    "training episodes"
)
CLEANRL_PQN = CleanRLPQN(
    total_timesteps=500_000,
    learning_rate=2.5e-4,
    num_envs=4,
    num_steps=128,
    num_minibatches=4,
    update_epochs=4,
    anneal_lr=True,
    gamma=0.99,
    start_e=1.0,
    end_e=0.05,
    exploration_fraction=0.5,
    max_grad_norm=10.0,
    q_lambda=0.65,
)
"""CleanRL's `pqn.py` settings for classic control (`podrace train cartpole pqn` and `c51-pqn` read them too)."""
_CLEANRL_PQN_SOURCE = (
    "CleanRL docs/rl-algorithms/pqn.md, pqn.py (benchmark/pqn.sh: 3 seeds); returns of training episodes"
)
_CLEANRL = {
    "ppo": (CLEANRL_PPO, _CLEANRL_PPO_SOURCE),
    "pqn": (CLEANRL_PQN, _CLEANRL_PQN_SOURCE),
    "dqn": (CLEANRL_DQN, _CLEANRL_DQN_SOURCE),
    "c51": (CLEANRL_C51, _CLEANRL_C51_SOURCE),
}


CLEANRL_ATARI_PPO = CleanRLAtariPPO(
    total_timesteps=10_000_000,
    learning_rate=2.5e-4,
    num_envs=8,
    num_steps=128,
    anneal_lr=True,
    gamma=0.99,
    gae_lambda=0.95,
    num_minibatches=4,
    update_epochs=4,
    norm_adv=True,
    clip_coef=0.1,
    ent_coef=0.01,
    vf_coef=0.5,
    max_grad_norm=0.5,
)
"""CleanRL's `ppo_atari_envpool_xla_jax_scan.py` settings (10M steps, 40M frames)."""


_CLEANRL_ATARI_PPO_SOURCE = (
    "CleanRL docs/rl-algorithms/ppo.md, ppo_atari_envpool_xla_jax_scan.py (3 seeds); returns of training episodes"
)


def _cleanrl_recipe(
    algorithm: Literal["ppo", "dqn", "c51", "pqn"],
    env_id: str,
    value: float,
    spread: float,
    notes: str = "",
    cannot_fail: str = "",
) -> Recipe:
    """A row of CleanRL's documented tables: 3 seeds, measured on their training episodes."""
    settings, source = _CLEANRL[algorithm]
    published = Published(value, spread, 3, source, "training", 100)
    return Recipe(f"cleanrl-{algorithm}-{env_id.lower()}", env_id, settings, published, notes, cannot_fail=cannot_fail)


# MountainCar-v0 gives -1 a step for at most 200 steps: no return is below -200.
_MOUNTAINCAR_AT_RANDOM = "the published -200 is a random policy's return and the lowest MountainCar-v0 gives"


_RL_ZOO_SOURCE = (
    "RL Baselines3 Zoo benchmark.md (one run; `python -m rl_zoo3.benchmark`: 150,000 steps of the deterministic "
    "policy), hyperparams/{algorithm}.yml; the published spread is over that run's episodes, not over runs"
)
# hyperparams/td3.yml and ddpg.yml, Pendulum-v1.
_RL_ZOO_PENDULUM_TD3 = RLZooTD3(
    n_timesteps=20_000,
    gamma=0.98,
    buffer_size=200_000,
    learning_starts=10_000,
    noise_std=0.1,
    gradient_steps=1,
    train_freq=1,
    learning_rate=1e-3,
    net_arch=(400, 300),
)


def _rl_zoo_pendulum_recipe(algorithm: Literal["td3", "ddpg", "sac"], value: float) -> Recipe:
    """An RL Zoo benchmark row on Pendulum-v1 (20k steps, 750 deterministic evaluation episodes)."""
    settings = {
        "td3": _RL_ZOO_PENDULUM_TD3,
        "ddpg": dataclasses.replace(_RL_ZOO_PENDULUM_TD3, ddpg=True),
        "sac": RLZooSAC(n_timesteps=20_000, learning_rate=1e-3),  # hyperparams/sac.yml
    }[algorithm]
    published = Published(value, None, 1, _RL_ZOO_SOURCE.format(algorithm=algorithm), "evaluation", 750, True)
    return Recipe(f"rl-zoo-{algorithm}-pendulum-v1", "Pendulum-v1", settings, published)


_PUREJAXQL_PQN_SOURCE = (
    "purejaxql (Gallici et al.), purejaxql/config/alg/pqn_minatar.yaml and pqn_minatar.py (47af6d7): "
    "the settings only: purejaxql publishes no MinAtar returns"
)
_PUREJAXQL_PQN_MINATAR = PurejaxqlPQN(
    total_timesteps=10_000_000,
    num_envs=128,
    num_steps=32,
    eps_start=1.0,
    eps_finish=0.05,
    eps_decay=0.1,
    num_minibatches=32,
    num_epochs=2,
    lr=5e-4,
    max_grad_norm=10.0,
    lr_linear_decay=True,
    gamma=0.99,
    lambda_=0.65,
)


def _purejaxql_pqn_recipe(env_id: str) -> Recipe:
    """PQN on a MinAtar game at purejaxql's settings: the greedy policy's return after 10M steps, no verdict.

    purejaxql tests its greedy policy (`EPS_TEST: 0`) on 128 environments;
    `benchmarks/purejaxql_baseline.py` runs purejaxql's own code side by side.
    """
    published = Published(None, None, 0, _PUREJAXQL_PQN_SOURCE, "evaluation", 128, deterministic=True)
    notes = (
        "No published number: the row records podrace's figure, and benchmarks/purejaxql_baseline.py measures "
        "purejaxql's own pqn_minatar.py at the same settings."
    )
    return Recipe(f"purejaxql-pqn-{env_id.lower()}", env_id, _PUREJAXQL_PQN_MINATAR, published, notes)


_MINATAR = _gymnax_blines(10_000_000, 64, 128, max_grad_norm=0.5, gamma=0.999, num_hidden_units=256, n_minibatch=8)
_BSUITE = _gymnax_blines(150_000, 8, 32, max_grad_norm=0.5)
_MOUNTAINCAR = _gymnax_blines(250_000, 16, 32, max_grad_norm=1.0, lr_begin=5e-3, epoch_ppo=64, entropy_coeff=0.003)

RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (
        _gymnax_recipe("CartPole-v1", 500.0, _gymnax_blines(150_000, 8, 32, max_grad_norm=0.5)),
        _gymnax_recipe("Acrobot-v1", -80.0, _gymnax_blines(500_000, 16, 32, max_grad_norm=1.0)),
        _gymnax_recipe(
            "MountainCar-v0",
            -118.0,
            _MOUNTAINCAR,
            "The learning rate moves from 5e-3 to 5e-4, as in the published run (gymnax-blines' train.py "
            "later overrides both with --lrate).",
        ),
        dataclasses.replace(
            _gymnax_recipe("MountainCar-v0", -118.0, _MOUNTAINCAR),
            name="gymnax-ppo-mountaincar-v0-truncation-as-termination",
            notes="The recipe above, its 200-step time limit ending episodes as the 2022 gymnax that gymnax-blines "
            "ran ended them: as terminations, with no bootstrap.",
            truncation_as_termination=True,
        ),
        _gymnax_recipe(
            "Pendulum-v1",
            -130.0,
            _gymnax_blines(1_000_000, 32, 16, max_grad_norm=1.0),
            "The README's -130 is the evolution-strategy run's; gymnax-blines' stored PPO run ends at -200.6.",
        ),
        _gymnax_recipe(
            "MountainCarContinuous-v0",
            92.0,
            _gymnax_blines(1_000_000, 32, 16, max_grad_norm=1.0),
            "The README's 92 is near the evolution-strategy run's 95.3; gymnax-blines' stored PPO run ends at -0.1.",
        ),
        _gymnax_recipe("Catch-bsuite", 1.0, _gymnax_blines(100_000, 16, 32, max_grad_norm=1.0)),
        _gymnax_recipe(
            "DeepSea-bsuite",
            0.0,
            _BSUITE,
            "Published as a failure: gymnax-blines' PPO run ends at 0, never having found the treasure.",
        ),
        _gymnax_recipe(
            "MemoryChain-bsuite",
            0.1,
            _BSUITE,
            "No stored gymnax-blines run ends at 0.1 (its PPO run ends at -0.11, at most 0.16); a feed-forward "
            "policy cannot remember the context, and 164 episodes of +-1 put 0.1 within noise of 0.",
        ),
        _gymnax_recipe("UmbrellaChain-bsuite", 1.0, _BSUITE),
        _gymnax_recipe("DiscountingChain-bsuite", 1.1, _BSUITE),
        _gymnax_recipe(
            "Asterix-MinAtar",
            15.0,
            _MINATAR,
            "15 is one run's last evaluation, still rising: gymnax-blines' stored run evaluates 1.8 at 1M steps, "
            "3.4 at 2.5M, 8.1 at 5M and 15.0 at 10M.",
        ),
        _gymnax_recipe(
            "Breakout-MinAtar",
            28.0,
            _MINATAR,
            "28 is an earlier checkpoint's last evaluation; gymnax-blines' current one ends at 22.9.",
        ),
        _gymnax_recipe("Freeway-MinAtar", 58.0, _MINATAR),
        _gymnax_recipe("SpaceInvaders-MinAtar", 131.0, _MINATAR),
        _cleanrl_recipe("ppo", "CartPole-v1", 490.04, 6.12),
        _cleanrl_recipe("ppo", "Acrobot-v1", -86.36, 1.32),
        _cleanrl_recipe(
            "ppo",
            "MountainCar-v0",
            -200.0,
            0.0,
            "A published failure: no seed reaches the flag in 500k steps.",
            _MOUNTAINCAR_AT_RANDOM,
        ),
        Recipe(
            "cleanrl-ppo-atari-pong-v5",
            "Pong-v5",
            CLEANRL_ATARI_PPO,
            Published(20.52, 0.32, 3, _CLEANRL_ATARI_PPO_SOURCE, "training", 100),
            "CleanRL scores whole games with their unclipped rewards; Pong has no lives and rewards of +-1, so its "
            "training episodes under episodic_life and reward_clip are those games.",
            suite="envpool",
            env_options=(("episodic_life", True), ("reward_clip", True)),
        ),
        _cleanrl_recipe("dqn", "CartPole-v1", 498.38, 2.29),
        _cleanrl_recipe("dqn", "Acrobot-v1", -88.89, 1.56),
        _cleanrl_recipe(
            "dqn",
            "MountainCar-v0",
            -188.90,
            11.78,
            cannot_fail="the published spread puts the threshold at -200.68, below -200, the lowest return "
            "MountainCar-v0 gives",
        ),
        _cleanrl_recipe("c51", "CartPole-v1", 498.51, 1.77),
        _cleanrl_recipe("c51", "Acrobot-v1", -88.81, 8.86),
        _cleanrl_recipe("c51", "MountainCar-v0", -167.71, 26.85),
        _cleanrl_recipe("pqn", "CartPole-v1", 495.13, 6.89),
        _cleanrl_recipe("pqn", "Acrobot-v1", -95.63, 5.73),
        _cleanrl_recipe(
            "pqn",
            "MountainCar-v0",
            -200.0,
            0.0,
            "A published failure: no seed reaches the flag in 500k steps.",
            _MOUNTAINCAR_AT_RANDOM,
        ),
        _rl_zoo_pendulum_recipe("td3", -151.855),
        _rl_zoo_pendulum_recipe("ddpg", -152.099),
        _rl_zoo_pendulum_recipe("sac", -156.995),
        *(
            _purejaxql_pqn_recipe(env_id)
            for env_id in ("Asterix-MinAtar", "Breakout-MinAtar", "Freeway-MinAtar", "SpaceInvaders-MinAtar")
        ),
    )
}
"""Every recipe by name."""


def find_recipe(name: str) -> Recipe:
    """The recipe called `name`; a `KeyError` naming the nearest ones and listing all otherwise."""
    if name in RECIPES:
        return RECIPES[name]
    raise KeyError(unknown_name("recipe", name, RECIPES))
