"""DQN: Q-learning from an on-device replay buffer, with a target network and a schedule for epsilon."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray, PyTree

from .._types import AbstractSpace, TimeStep
from .._validation import (
    check_in_unit_interval,
    check_optimizer_first_step,
    check_parts_fit,
    check_positive_int,
    check_reads,
    check_replay_holds_batch,
)
from ..agent import Agent
from ..losses import AbstractLoss, AbstractQLoss
from ..networks import AbstractNetwork
from ..policies import EpsilonGreedy
from ..results import UpdateMetrics
from .learner import gradient_step, with_params
from .replay import AbstractReplayLearner, AbstractReplayState, SequenceReplay


@final
class DQNState(AbstractReplayState):
    """Everything a [`podrace.learners.DQNLearner`][] updates.

    **Arguments:**

    - `params`: the online network's trainable arrays.
    - `target_params`: the target network's.
    - `opt_state`: the optax state.
    - `replay`: the replay buffer's state (see [`podrace.learners.SequenceReplay`][]).
    - `num_updates`: how many rollouts have been learnt from.
    - `num_gradient_steps`: how many gradient steps have been taken.
    - `num_transitions`: how many environment transitions were added, over all devices
        (the clock of the epsilon schedule).
    - `key`: the randomness of replay sampling.
    """

    params: PyTree[Array]
    target_params: PyTree[Array]
    opt_state: optax.OptState
    replay: PyTree[Array]
    num_updates: Int[Array, ""]
    num_gradient_steps: Int[Array, ""]
    num_transitions: Int[Array, ""]
    key: PRNGKeyArray


@final
class DQNLearner(AbstractReplayLearner[DQNState]):
    """Deep Q-learning: acts epsilon-greedily, stores experience, learns from replayed sequences.

    Each update adds the rollout to a [`podrace.learners.SequenceReplay`][] held in the
    learner state (on the device, each device keeping its own environments'
    experience), then, once `min_replay_size` transitions have been added, takes
    `gradient_steps` steps on minibatches of `batch_size` sequences of
    `sequence_length` time steps sampled uniformly. The loss is any Q-value loss that
    bootstraps from a target network, e.g. [`podrace.losses.QLearningLoss`][] (one
    step, n steps or double Q), [`podrace.losses.TDLambdaQLoss`][], or a distributional
    one ([`podrace.losses.CategoricalQLoss`][], [`podrace.losses.QuantileQLoss`][]). The target
    network follows the online one by `target_params <- (1 - tau) target_params +
    tau params` every `target_update_period` gradient steps: `tau = 1` gives the
    periodic copy of the original DQN, `target_update_period = 1` with a small `tau`
    Polyak averaging.

    Reference: Mnih et al., "Human-level control through deep reinforcement learning",
    Nature 518, 2015; van Hasselt et al., "Deep Reinforcement Learning with Double
    Q-learning", AAAI 2016; Lillicrap et al., "Continuous control with deep
    reinforcement learning", ICLR 2016 (Polyak-averaged targets).

    **Arguments:**

    - `network`: a feed-forward network emitting action values of the kind `loss` reads
        ([`podrace.QValues`][], or a distribution for C51 and QR-DQN).
    - `loss`: a Q-value loss.
    - `optimizer`: an optax gradient transformation that minimises (a positive learning rate).
    - `epsilon`: the exploration probability: a number, or a schedule over the
        number of environment transitions (e.g. `optax.linear_schedule(1.0, 0.05, 10_000)`);
        the learner's `policy` is [`podrace.policies.EpsilonGreedy`][] with it.
    - `buffer_size`: how many transitions the replay buffer holds, over all
        environments and devices; at least `batch_size`.
    - `batch_size`: sequences per gradient step, per device.
    - `sequence_length`: time steps per sampled sequence (2 for one-step targets,
        `n + 1` for n-step targets).

    The replay part is the field `replay`, built from `buffer_size` and `sequence_length`.
    - `min_replay_size`: transitions to collect before learning starts.
    - `gradient_steps`: gradient steps per update (per rollout).
    - `target_update_period`: gradient steps between target updates.
    - `tau`: the step size of each target update, in (0, 1].
    - `check_nans`: as in [`podrace.Learner`][].
    """

    network: AbstractNetwork
    loss: AbstractQLoss
    optimizer: optax.GradientTransformation
    policy: EpsilonGreedy
    replay: SequenceReplay
    batch_size: int = eqx.field(static=True)
    min_replay_size: int = eqx.field(static=True)
    gradient_steps: int = eqx.field(static=True)
    target_update_period: int = eqx.field(static=True)
    tau: Float[Array, ""]
    check_nans: bool = eqx.field(static=True)

    def __init__(
        self,
        network: AbstractNetwork,
        loss: AbstractLoss,
        optimizer: optax.GradientTransformation,
        *,
        epsilon: optax.Schedule | ArrayLike,
        buffer_size: int,
        batch_size: int,
        sequence_length: int = 2,
        min_replay_size: int = 1_000,
        gradient_steps: int = 1,
        target_update_period: int = 500,
        tau: ArrayLike = 1.0,
        check_nans: bool = False,
    ):
        if not isinstance(loss, AbstractQLoss):
            raise ValueError(
                f"DQNLearner learns action values from replay with a target network; {type(loss).__name__} is "
                "not a Q-value loss. Use podrace.losses.QLearningLoss, TDLambdaQLoss, CategoricalQLoss or "
                "QuantileQLoss, or podrace.Learner for on-policy losses."
            )
        self.network = network
        self.loss = loss
        self.optimizer = optimizer
        self.policy = EpsilonGreedy(epsilon)
        self.replay = SequenceReplay(buffer_size, sequence_length)
        self.batch_size = batch_size
        self.min_replay_size = min_replay_size
        self.gradient_steps = gradient_steps
        self.target_update_period = target_update_period
        self.tau = jnp.asarray(tau, jnp.float32)
        self.check_nans = check_nans

    def __check_init__(self):
        check_reads(self.network, self.policy, role="policy")
        check_reads(self.network, self.loss, role="loss")
        for name in ("batch_size", "min_replay_size", "gradient_steps", "target_update_period"):
            check_positive_int("DQNLearner", name, getattr(self, name))
        check_replay_holds_batch("DQNLearner", self.replay.buffer_size, self.batch_size)
        check_in_unit_interval("DQNLearner", "tau", self.tau)
        if jax.tree.leaves(self.network.initial_carry()):
            raise ValueError("DQNLearner replays feed-forward networks only; this network has a recurrent carry.")
        params = eqx.filter(self.network, eqx.is_inexact_array)
        check_optimizer_first_step("DQNLearner", "optimizer", self.optimizer, params)

    def init(self, key: PRNGKeyArray, timestep: TimeStep) -> DQNState:
        """The initial state, with an empty replay buffer sized for the environments of `timestep`.

        **Arguments:**

        - `key`: the randomness of replay sampling.
        - `timestep`: the first time steps of all environments (leading axis `B`).
        """
        replay = self.replay.init_for(self.initial_agent(), timestep)
        params = eqx.filter(self.network, eqx.is_inexact_array)
        zero = jnp.asarray(0, jnp.int32)
        return DQNState(
            params=params,
            target_params=params,
            opt_state=self.optimizer.init(params),
            replay=replay,
            num_updates=zero,
            num_gradient_steps=zero,
            num_transitions=zero,
            key=key,
        )

    def network_at(self, state: DQNState) -> AbstractNetwork:
        return self.network_with(state.params)

    def network_with(self, params: PyTree[Array]) -> AbstractNetwork:
        """The network with its trainable arrays replaced by `params`."""
        return with_params(self.network, params)

    def initial_agent(self) -> Agent:
        return Agent(self.network, self.policy)

    def check_fits(
        self, action_space: AbstractSpace, observation: PyTree[jax.ShapeDtypeStruct], *, num_envs: int, env_name: str
    ) -> None:
        del num_envs  # any number: each environment has its own row of the replay buffer
        check_parts_fit(self.network, self.policy, self.loss, action_space, observation, env_name=env_name)

    def agent(self, state: DQNState) -> Agent:
        """Epsilon-greedy acting, with the epsilon of the schedule at `state`'s transition count."""
        return Agent(self.network_at(state), self.policy.at(state.num_transitions))

    def learn_step(self, state: DQNState, key: PRNGKeyArray, axis_name: str | None) -> tuple[DQNState, UpdateMetrics]:
        sequences = self.replay.sample(state.replay, key, self.batch_size)
        target_network = self.network_with(state.target_params)

        def objective(params):
            agent = Agent(self.network_with(params), self.policy)
            return self.loss(agent, sequences, axis_name=axis_name, target_network=target_network)

        params, opt_state, metrics = gradient_step(
            self.optimizer, state.params, state.opt_state, objective, axis_name=axis_name, check_nans=self.check_nans
        )
        num_gradient_steps = state.num_gradient_steps + 1
        target_params = jax.lax.cond(
            num_gradient_steps % self.target_update_period == 0,
            lambda: optax.incremental_update(params, state.target_params, self.tau),
            lambda: state.target_params,
        )
        return eqx.tree_at(
            lambda s: (s.params, s.target_params, s.opt_state, s.num_gradient_steps),
            state,
            (params, target_params, opt_state, num_gradient_steps),
        ), metrics
