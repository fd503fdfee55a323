"""The learner of AlphaZero and MuZero: on-policy updates of a search agent's network."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, PRNGKeyArray, PyTree

from .._types import AbstractSpace, TimeStep, Trajectory
from .._validation import check_optimizer_first_step, check_parts_fit, check_positive_int, check_reads
from ..agent import Agent
from ..losses import AbstractLoss
from ..networks import AbstractNetwork
from ..policies import Categorical
from ..results import UpdateMetrics
from ..search import AlphaZeroAgent, MuZeroAgent
from .learner import AbstractLearner, LearnerState, on_policy_update, with_params


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
