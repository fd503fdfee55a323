"""The loss family's base: what a loss is, how a per-trajectory loss is averaged over a
batch, and the masks and helpers its members share."""

import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int, PyTree

from .._types import AbstractActionValues, AbstractNetworkOutput, Trajectory
from ..agent import Agent
from ..networks import AbstractNetwork
from ..results import LossTerms
from .value_learning import discounted_returns


# Equinox's documented import: type checkers read it as the `ClassVar` it stands for.
if TYPE_CHECKING:
    from typing import ClassVar as AbstractClassVar
else:
    from equinox import AbstractClassVar


class AbstractLoss(eqx.Module):
    """A differentiable objective for a time-major batch of trajectories `[T + 1, B]`.

    Losses are interchangeable: a learner takes any of them as one argument and calls
    it with its [`podrace.Agent`][] (the network with the parameters being learnt and
    the policy over its outputs), a batch of trajectories and, where it keeps one, the
    network to bootstrap from (a target network). A member sets `input_type` in its
    class body and implements the three methods below; most are a mean over
    trajectories and subclass [`podrace.losses.AbstractTrajectoryLoss`][] instead.

    **Attributes:**

    - `input_type`: the [`podrace.AbstractNetworkOutput`][] subclass it reads (a class
        attribute).
    """

    input_type: AbstractClassVar[type[AbstractNetworkOutput]]

    @abc.abstractmethod
    def targets(self, agent: Agent, trajectory: Trajectory) -> PyTree[Float[Array, "T B ..."]]:
        """What the loss takes from a batch of trajectories once, before its gradient steps.

        A [`podrace.Learner`][] with several epochs or minibatches calls it once per
        update, with the parameters the update starts from (on device, those that
        collected the batch; a host collector that overlaps acting with learning acts
        one update behind), and splits the result along the environment axis with the
        trajectories: each minibatch step then reads its share instead of recomputing
        it (PPO's advantages and value targets). A loss that recomputes everything in
        every step returns `None`.

        **Arguments:**

        - `agent`: the network with the parameters the update starts from, and its policy.
        - `trajectory`: a time-major batch of trajectories `[T + 1, B]`.

        **Returns:**

        A pytree of time-major arrays `[T, B]`, one entry per transition, or `None`.
        """

    @abc.abstractmethod
    def __call__(
        self,
        agent: Agent,
        trajectory: Trajectory,
        *,
        targets: PyTree[Float[Array, "T B ..."]] = None,
        axis_name: str | None = None,
        target_network: AbstractNetwork | None = None,
    ) -> tuple[Float[Array, ""], LossTerms]:
        """The loss of a batch of trajectories.

        **Arguments:**

        - `agent`: the network whose parameters are being learnt, and its policy.
        - `trajectory`: a time-major batch of trajectories `[T + 1, B]`.
        - `targets`: this batch's share of what `targets` returned for the batch it was
            drawn from; `None` computes them here, from `agent` (the same, when `agent`
            holds the parameters the update starts from).
        - `axis_name`: inside `shard_map`, the device axis the batch is split over (for
            statistics over the whole batch); `None` outside.
        - `target_network`: a slowly updated copy of the network to bootstrap the
            targets from (DQN's target network); `None` bootstraps from `agent`'s
            network, its targets held constant.

        **Returns:**

        The scalar to minimise (a mean over the batch) and its named terms (for
        logging and NaN checks).
        """

    @abc.abstractmethod
    def check_output(self, output: AbstractNetworkOutput) -> None:
        """Raises `ValueError` if the loss cannot learn from `output` (e.g. it lacks a value).

        **Arguments:**

        - `output`: one network output, or its shapes (`jax.eval_shape`).
        """


class AbstractTrajectoryLoss(AbstractLoss):
    """A loss that is the mean of a loss of each trajectory of the batch.

    A member implements `trajectory_loss` for one trajectory `[T + 1]` (and
    `check_output`); nothing is computed ahead of the gradient steps (`targets` is
    `None`), and a mean of equal shares needs nothing from the other devices.
    """

    @abc.abstractmethod
    def trajectory_loss(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        """The loss of one unbatched trajectory `[T + 1]` and its named terms.

        **Arguments:**

        - `agent`: the network whose parameters are being learnt, and its policy.
        - `trajectory`: one trajectory.
        - `target_network`: the network to bootstrap from, or `None` for `agent`'s own
            (see [`podrace.losses.bootstrap_agent`][]).
        """

    def targets(self, agent: Agent, trajectory: Trajectory) -> None:
        del agent, trajectory
        return None

    def __call__(
        self,
        agent: Agent,
        trajectory: Trajectory,
        *,
        targets: PyTree[Float[Array, "T B ..."]] = None,
        axis_name: str | None = None,
        target_network: AbstractNetwork | None = None,
    ) -> tuple[Float[Array, ""], LossTerms]:
        del targets, axis_name
        return mean_over_trajectories(lambda one: self.trajectory_loss(agent, one, target_network), trajectory)


def bootstrap_agent(agent: Agent, target_network: AbstractNetwork | None) -> Agent:
    """The agent whose outputs a loss bootstraps its targets from: `target_network` with
    `agent`'s policy, or `agent` itself without one (its targets then held constant)."""
    return agent if target_network is None else Agent(target_network, agent.policy)


def bootstrap_values(
    loss: AbstractLoss,
    agent: Agent,
    trajectory: Trajectory,
    target_network: AbstractNetwork | None,
    values: Float[Array, " time"],
) -> Float[Array, " time"]:
    """The state values a loss bootstraps from: `values` (`agent`'s own, of time steps
    `0..T`) without a target network, else the target network's."""
    if target_network is None:
        return values
    return require_value(loss, bootstrap_agent(agent, target_network).outputs(trajectory))


def refuse_target_network(loss: AbstractLoss, target_network: AbstractNetwork | None) -> None:
    """Raises `ValueError` if a loss that bootstraps from no network (Monte Carlo
    returns) is given one."""
    if target_network is not None:
        raise ValueError(
            f"{type(loss).__name__} learns from Monte Carlo returns and bootstraps from no network; "
            "use it without a target network (e.g. in podrace.Learner), or pick a loss that bootstraps."
        )


def mean_over_trajectories(
    trajectory_loss: Callable[[Trajectory], tuple[Float[Array, ""], LossTerms]], trajectory: Trajectory
) -> tuple[Float[Array, ""], LossTerms]:
    """The mean over a batch `[T + 1, B]` of a loss of one trajectory, and of each of its terms."""
    loss, terms = trajectory.map_batch(trajectory_loss)
    return jnp.mean(loss), jax.tree.map(jnp.mean, terms)


def require_value(loss: AbstractLoss, output: AbstractNetworkOutput) -> Any:
    """The state value(s) of `output` (arrays, or shapes under `jax.eval_shape`).

    Raises `ValueError`, naming `loss` and the fix, if the output carries none.
    """
    value = getattr(output, "value", None)
    if value is None:
        raise ValueError(
            f"{type(loss).__name__} needs state values, but the network's head emits none: build the policy "
            "head with with_value=True (PolicyLogitHead(..., with_value=True) or GaussianHead(..., with_value=True)), "
            "or use an ActorCriticNetwork."
        )
    return value


def transition_mask(trajectory: Trajectory) -> Float[Array, " T"]:
    """1 for real transitions `t -> t + 1`, 0 where `t + 1` starts a new episode.

    The step after an episode's last time step only resets the environment; no loss
    should be taken on it.
    """
    return (~trajectory.timestep.is_first[1:]).astype(jnp.float32)


def at_actions(per_action: Float[Array, "T num_actions ..."], actions: Int[Array, " T"]) -> Float[Array, "T ..."]:
    """Each time step's entry of `per_action` for its action (e.g. a distribution per action)."""
    index = actions.reshape(actions.shape + (1,) * (per_action.ndim - 1))
    return jnp.take_along_axis(per_action, index, axis=1)[:, 0]


def cut_lambda_at_episode_ends(lambda_: ArrayLike, trajectory: Trajectory) -> Float[Array, " T"]:
    """The trace coefficient of each transition `t -> t + 1`, cut to 0 where `t + 1` is last.

    At a termination the discount already stops bootstrapping; at a truncation the
    target must bootstrap from the final observation's value alone, never run on into
    the next episode. Every multi-step target takes its `lambda_` from here.
    """
    return jnp.asarray(lambda_, jnp.float32) * (1.0 - trajectory.timestep.is_last[1:])


def categorical_entropy(logits: Float[Array, "*batch num_actions"]) -> Float[Array, "*batch"]:
    """The entropy of the categorical distributions with these logits.

    Reference: Shannon, "A Mathematical Theory of Communication", 1948.
    """
    log_probs = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)


def completed_episode_mask(trajectory: Trajectory) -> Float[Array, " T"]:
    """1 for transitions `t -> t + 1` whose episode ends within the trajectory, else 0.

    Monte Carlo returns are only whole for those; a transition whose episode runs past
    the end of the rollout (or the reset step after an episode) gets 0.
    """
    is_last, is_first = trajectory.timestep.is_last[1:], trajectory.timestep.is_first[1:]
    # ends_t = ~first_t & (last_t | ends_{t+1}) (a reset step starts another episode), as
    # the recurrence ends_t = [~first_t & last_t] + [~first_t & ~last_t] * ends_{t+1} in {0, 1}.
    return discounted_returns(
        (~is_first & is_last).astype(jnp.float32), (~is_first & ~is_last).astype(jnp.float32), jnp.zeros(())
    )


class AbstractQLoss(AbstractTrajectoryLoss):
    """A per-trajectory loss on action values (outputs of a [`podrace.AbstractActionValues`][]
    subclass), which a [`podrace.learners.DQNLearner`][] can learn from replay.

    Without a target network (on-policy use in a [`podrace.Learner`][]) the online
    network bootstraps, its targets held constant; a
    [`podrace.learners.DQNLearner`][] passes its target network. A member sets
    `input_type` to the kind of action values it reads.
    """

    def check_output(self, output: AbstractNetworkOutput) -> None:
        del output  # action values are all a Q loss reads

    def action_value_outputs(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None, *, double: bool = False
    ) -> tuple[Any, Any, Any]:
        """The online outputs of time steps `0..T-1`, those to bootstrap from at `1..T`,
        and, with `double` and a target network, the online outputs at `1..T` that pick
        the greedy next actions (double Q-learning; `None` otherwise).

        Each network runs only on the time steps read: without a target network, the
        online network on `0..T` (its outputs at `1..T` are those bootstrapped from);
        with one, the online network on `0..T-1` (on `0..T` with `double`) and the
        target network on `1..T`, or, if it is recurrent (its outputs are right from the
        trajectory's carry at step 0 only), on `0..T` with step 0's outputs dropped.
        On replayed pairs of time steps (DQN, C51) this halves the rows of every network
        pass, which running both networks on all of `0..T` and dropping half of the
        outputs cost.

        **Arguments:**

        - `agent`: the network whose parameters are being learnt, and its policy.
        - `trajectory`: one trajectory `[T + 1]`.
        - `target_network`: the network to bootstrap from, or `None` for `agent`'s own.
        - `double`: whether the online network picks the next actions (with a target
            network; without one, the network bootstrapped from is the online one).

        **Returns:**

        The online outputs `[T]`, the outputs to bootstrap from `[T]`, and the online
        outputs `[T]` that select the next actions, or `None`.
        """
        if target_network is None:
            outputs = agent.outputs(trajectory)
            return jax.tree.map(lambda x: x[:-1], outputs), jax.tree.map(lambda x: x[1:], outputs), None
        target = bootstrap_agent(agent, target_network)
        if jax.tree.leaves(target_network.initial_carry()):
            bootstrap = jax.tree.map(lambda x: x[1:], target.outputs(trajectory))
        else:
            bootstrap = target.outputs(_from_step_one(trajectory))
        if not double:
            return agent.outputs(trajectory.without_last_step()), bootstrap, None
        outputs = agent.outputs(trajectory)
        return jax.tree.map(lambda x: x[:-1], outputs), bootstrap, jax.tree.map(lambda x: x[1:], outputs)

    def q_values(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None, *, double: bool = False
    ) -> tuple[Float[Array, "T num_actions"], Float[Array, "T num_actions"], Float[Array, "T num_actions"] | None]:
        """The action values of `action_value_outputs`' outputs: the online network's at
        time steps `0..T-1`, those to bootstrap from at `1..T`, and, with `double` and a
        target network, the online network's at `1..T` that select the greedy next
        actions (`None` otherwise; `q_t_selector` of
        [`podrace.losses.n_step_q_learning`][])."""
        outputs, bootstrap, selector = self.action_value_outputs(agent, trajectory, target_network, double=double)
        q_selector = None if selector is None else cast(AbstractActionValues, selector).q_values
        return cast(AbstractActionValues, outputs).q_values, cast(AbstractActionValues, bootstrap).q_values, q_selector

    def greedy_next_actions(self, bootstrap: Any, selector: Any) -> Int[Array, " T"]:
        """The greedy actions at time steps `1..T`, by the action values of `selector` (the
        online outputs of double Q-learning, as `action_value_outputs` returns them) or,
        where it is `None`, of `bootstrap` (the outputs bootstrapped from)."""
        return jnp.argmax((bootstrap if selector is None else selector).q_values, axis=-1)


def _from_step_one(trajectory: Trajectory) -> Trajectory:
    """Time steps `1..T` of one trajectory and the actions between them, with its carry
    (that before step 0: right for a network without a carry only, which reads none)."""
    return Trajectory(
        jax.tree.map(lambda x: x[1:], trajectory.timestep),
        jax.tree.map(lambda x: x[1:], trajectory.policy_step),
        trajectory.carry,
    )
