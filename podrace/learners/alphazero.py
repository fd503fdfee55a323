"""The learners of AlphaZero and MuZero: on-policy updates of a search agent's network,
and MuZero's updates from replayed sequences."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Int, PRNGKeyArray, PyTree

from .._types import AbstractSpace, TimeStep, Trajectory
from .._validation import (
    check_optimizer_first_step,
    check_parts_fit,
    check_positive_int,
    check_reads,
    check_replay_holds_batch,
)
from ..agent import Agent
from ..losses import AbstractLoss, MuZeroLoss
from ..networks import AbstractNetwork
from ..policies import Categorical
from ..results import UpdateMetrics
from ..search import AlphaZeroAgent, MuZeroAgent
from .learner import AbstractLearner, LearnerState, gradient_step, on_policy_update, with_params
from .replay import AbstractReplayLearner, AbstractReplayState, SequenceReplay


@final
class AlphaZeroLearner(AbstractLearner[LearnerState]):
    """An on-policy learner of a search agent: the agent searches in its rollouts, and each
    update trains its network on them with a loss of what the search found
    ([`podrace.losses.AlphaZeroLoss`][]).

    Each update makes `num_epochs` passes over the rollout just collected, each split into
    `num_minibatches` minibatches of whole trajectories, one gradient step per
    minibatch, as [`podrace.Learner`][] does. It is a learner of its own because what acts
    is not a network and a policy over its outputs: the search needs the network itself
    (and, for AlphaZero, the environment's state: [`podrace.search.AbstractEnvModelAgent`][]),
    so `agent` returns the [`podrace.search.AlphaZeroAgent`][] or
    [`podrace.search.MuZeroAgent`][] with the learnt parameters. The loss differentiates
    the network with its categorical prior policy (`agent.prior()`).

    Reference: Silver et al., "A general reinforcement learning algorithm that masters
    chess, shogi, and Go through self-play", Science 2018; Schrittwieser et al.,
    "Mastering Atari, Go, Chess and Shogi by Planning with a Learned Model", Nature 2020.

    **Arguments:**

    - `search_agent`: the agent that acts (its network's arrays are the initial
        parameters; its search and discount stay).
    - `loss`: the objective, [`podrace.losses.AlphaZeroLoss`][] for an AlphaZero agent,
        [`podrace.losses.MuZeroLoss`][] for a MuZero agent.
    - `optimizer`: an optax gradient transformation that minimises.
    - `num_epochs`: passes over each rollout.
    - `num_minibatches`: minibatches per pass; must divide the environments per device.
    - `check_nans`: if set, an update whose loss terms are not finite raises an error
        naming the term.
    """

    search_agent: AlphaZeroAgent | MuZeroAgent
    loss: AbstractLoss
    optimizer: optax.GradientTransformation
    num_epochs: int = eqx.field(static=True, default=1, kw_only=True)
    num_minibatches: int = eqx.field(static=True, default=1, kw_only=True)
    check_nans: bool = eqx.field(static=True, default=False, kw_only=True)

    def __check_init__(self):
        check_reads(self.search_agent.network, self.loss, role="loss")
        check_positive_int("AlphaZeroLearner", "num_epochs", self.num_epochs)
        check_positive_int("AlphaZeroLearner", "num_minibatches", self.num_minibatches)
        params = eqx.filter(self.search_agent.network, eqx.is_inexact_array)
        check_optimizer_first_step("AlphaZeroLearner", "optimizer", self.optimizer, params)

    def init(self, key: PRNGKeyArray, timestep: TimeStep | None = None) -> LearnerState:
        """The initial state: the network's own parameters and a fresh optimiser state.

        **Arguments:**

        - `key`: the randomness of minibatch shuffling.
        - `timestep`: unused (an on-policy learner keeps no experience).

        **Returns:**

        The learner state.
        """
        del timestep
        params = eqx.filter(self.search_agent.network, eqx.is_inexact_array)
        zero = jnp.asarray(0, jnp.int32)
        return LearnerState(params, self.optimizer.init(params), zero, zero, key)

    def initial_agent(self) -> AlphaZeroAgent | MuZeroAgent:
        return self.search_agent

    def agent(self, state: LearnerState) -> AlphaZeroAgent | MuZeroAgent:
        return eqx.tree_at(lambda agent: agent.network, self.search_agent, self.network_at(state))

    def network_at(self, state: LearnerState) -> AbstractNetwork:
        return with_params(self.search_agent.network, state.params)

    def check_fits(
        self, action_space: AbstractSpace, observation: PyTree[jax.ShapeDtypeStruct], *, num_envs: int, env_name: str
    ) -> None:
        check_parts_fit(
            self.search_agent.network, Categorical(), self.loss, action_space, observation, env_name=env_name
        )
        if num_envs % self.num_minibatches:
            raise ValueError(
                f"AlphaZeroLearner: num_minibatches={self.num_minibatches} must divide the number of environments "
                f"per device ({num_envs}); pick num_envs as a multiple of num_minibatches."
            )

    def device_local(self, state: LearnerState) -> PyTree[bool]:
        del state
        return False

    def update(
        self, state: LearnerState, trajectory: Trajectory, *, axis_name: str | None = None
    ) -> tuple[LearnerState, UpdateMetrics]:
        policy = Categorical()

        def objective(params: PyTree[Array], batch: Trajectory, targets: PyTree[Array]):
            prior = Agent(with_params(self.search_agent.network, params), policy)
            return self.loss(prior, batch, targets=targets, axis_name=axis_name)

        return on_policy_update(
            self.optimizer,
            state,
            trajectory,
            objective,
            lambda: self.loss.targets(self.agent(state).prior(), trajectory),
            num_epochs=self.num_epochs,
            num_minibatches=self.num_minibatches,
            axis_name=axis_name,
            check_nans=self.check_nans,
        )


@final
class MuZeroReplayState(AbstractReplayState):
    """Everything a [`podrace.learners.MuZeroReplayLearner`][] updates.

    **Arguments:**

    - `params`: the network's trainable arrays.
    - `opt_state`: the optax state.
    - `replay`: the replay buffer's state (see [`podrace.learners.SequenceReplay`][]).
    - `num_updates`: how many rollouts have been learnt from.
    - `num_transitions`: how many environment transitions were added, over all devices.
    - `key`: the randomness of replay sampling.
    """

    params: PyTree[Array]
    opt_state: optax.OptState
    replay: PyTree[Array]
    num_updates: Int[Array, ""]
    num_transitions: Int[Array, ""]
    key: PRNGKeyArray


@final
class MuZeroReplayLearner(AbstractReplayLearner[MuZeroReplayState]):
    """MuZero learnt from replay, as in the paper: each update stores the rollout, with
    what the search found at every step, in a [`podrace.learners.SequenceReplay`][], then
    takes `gradient_steps` steps of [`podrace.losses.MuZeroLoss`][], each on `batch_size`
    sequences drawn uniformly from it.

    A sequence holds `num_unroll_steps + n_step + 1` time steps by default: enough for
    its first start to be unrolled `K` steps with full n-step targets at each (the
    loss learns from every start of a sequence, the later ones with the targets that
    fit in it). The targets bootstrap from the root values the search found when it
    acted, as the paper's do without reanalysis.

    Reference: Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning with
    a Learned Model", Nature 2020 (Appendix G: training from a replay buffer of the
    agent's own play).

    **Arguments:**

    - `search_agent`: the [`podrace.search.MuZeroAgent`][] that acts (its network's
        arrays are the initial parameters; its search and discount stay).
    - `loss`: a [`podrace.losses.MuZeroLoss`][].
    - `optimizer`: an optax gradient transformation that minimises.
    - `buffer_size`: time steps the buffer holds, over all environments and devices.
    - `batch_size`: sequences per gradient step.
    - `sequence_length`: time steps per sequence (`None`: `K + n + 1` of the loss).
    - `min_replay_size`: transitions to collect before learning starts.
    - `gradient_steps`: gradient steps per update (per rollout).
    - `check_nans`: if set, a gradient step whose loss terms are not finite raises an
        error naming the term.
    """

    search_agent: MuZeroAgent
    loss: MuZeroLoss
    optimizer: optax.GradientTransformation
    replay: SequenceReplay
    batch_size: int = eqx.field(static=True)
    min_replay_size: int = eqx.field(static=True)
    gradient_steps: int = eqx.field(static=True)
    check_nans: bool = eqx.field(static=True)

    def __init__(
        self,
        search_agent: MuZeroAgent,
        loss: MuZeroLoss,
        optimizer: optax.GradientTransformation,
        *,
        buffer_size: int,
        batch_size: int,
        sequence_length: int | None = None,
        min_replay_size: int = 1_000,
        gradient_steps: int = 1,
        check_nans: bool = False,
    ):
        if not isinstance(search_agent, MuZeroAgent) or not isinstance(loss, MuZeroLoss):
            raise ValueError(
                "MuZeroReplayLearner learns a podrace.search.MuZeroAgent with podrace.losses.MuZeroLoss, got a "
                f"{type(search_agent).__name__} and a {type(loss).__name__}; learn an AlphaZero agent (which "
                "searches in the environment's state) on-policy with podrace.learners.AlphaZeroLearner."
            )
        if sequence_length is None:
            sequence_length = loss.num_unroll_steps + loss.n_step + 1
        self.search_agent = search_agent
        self.loss = loss
        self.optimizer = optimizer
        self.replay = SequenceReplay(buffer_size, sequence_length)
        self.batch_size = batch_size
        self.min_replay_size = min_replay_size
        self.gradient_steps = gradient_steps
        self.check_nans = check_nans

    def __check_init__(self):
        check_reads(self.search_agent.network, self.loss, role="loss")
        for name in ("batch_size", "min_replay_size", "gradient_steps"):
            check_positive_int("MuZeroReplayLearner", name, getattr(self, name))
        check_replay_holds_batch("MuZeroReplayLearner", self.replay.buffer_size, self.batch_size)
        params = eqx.filter(self.search_agent.network, eqx.is_inexact_array)
        check_optimizer_first_step("MuZeroReplayLearner", "optimizer", self.optimizer, params)

    def init(self, key: PRNGKeyArray, timestep: TimeStep) -> MuZeroReplayState:
        """The initial state, with an empty replay buffer sized for the environments of `timestep`.

        **Arguments:**

        - `key`: the randomness of replay sampling.
        - `timestep`: the first time steps of all environments (leading axis `B`).
        """
        params = eqx.filter(self.search_agent.network, eqx.is_inexact_array)
        zero = jnp.asarray(0, jnp.int32)
        replay = self.replay.init_for(self.search_agent, timestep)
        return MuZeroReplayState(
            params=params,
            opt_state=self.optimizer.init(params),
            replay=replay,
            num_updates=zero,
            num_transitions=zero,
            key=key,
        )

    def initial_agent(self) -> MuZeroAgent:
        return self.search_agent

    def agent(self, state: MuZeroReplayState) -> MuZeroAgent:
        return eqx.tree_at(lambda agent: agent.network, self.search_agent, self.network_at(state))

    def network_at(self, state: MuZeroReplayState) -> AbstractNetwork:
        return with_params(self.search_agent.network, state.params)

    def check_fits(
        self, action_space: AbstractSpace, observation: PyTree[jax.ShapeDtypeStruct], *, num_envs: int, env_name: str
    ) -> None:
        del num_envs  # any number: each environment has its own row of the replay buffer
        check_parts_fit(
            self.search_agent.network, Categorical(), self.loss, action_space, observation, env_name=env_name
        )

    def learn_step(
        self, state: MuZeroReplayState, key: PRNGKeyArray, axis_name: str | None
    ) -> tuple[MuZeroReplayState, UpdateMetrics]:
        sequences = self.replay.sample(state.replay, key, self.batch_size)
        policy = Categorical()

        def objective(params: PyTree[Array]):
            return self.loss(Agent(with_params(self.search_agent.network, params), policy), sequences)

        params, opt_state, metrics = gradient_step(
            self.optimizer, state.params, state.opt_state, objective, axis_name=axis_name, check_nans=self.check_nans
        )
        return eqx.tree_at(lambda s: (s.params, s.opt_state), state, (params, opt_state)), metrics
