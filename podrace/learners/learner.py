import abc
import re
from collections.abc import Callable
from typing import Generic, Literal, TypeVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray, PyTree

from .._types import AbstractSpace, TimeStep, Trajectory
from .._validation import check_optimizer_first_step, check_parts_fit, check_positive_int, check_reads
from ..agent import AbstractAgent, Agent
from ..losses import AbstractLoss, AbstractTrajectoryLoss
from ..networks import AbstractNetwork
from ..policies import AbstractPolicy
from ..results import LossTerms, UpdateMetrics


StateT = TypeVar("StateT")
OperandT = TypeVar("OperandT")
OutputT = TypeVar("OutputT")
MetricsT = TypeVar("MetricsT")


class AbstractLearner(eqx.Module, Generic[StateT]):
    """What every executor uses of a learner.

    A learner's parts (its networks, policies, losses and optimisers, as many as its
    algorithm needs) are fields of the final learner, typed as it needs them; an
    executor sees only the methods below. Its state (of type `StateT`) is a typed
    pytree holding everything a resume needs.
    """

    check_nans: eqx.AbstractVar[bool]

    @abc.abstractmethod
    def init(self, key: PRNGKeyArray, timestep: TimeStep) -> StateT:
        """The initial state.

        **Arguments:**

        - `key`: the learner's own randomness (minibatch shuffling, replay sampling).
        - `timestep`: the first time steps of the environment batch it will learn
            from (leading axis: all environments, over all devices); a replay buffer
            is sized from it.
        """

    @abc.abstractmethod
    def initial_agent(self) -> AbstractAgent:
        """The agent before any learning: what executors build their buffers and
        recurrent carries from."""

    @abc.abstractmethod
    def agent(self, state: StateT) -> AbstractAgent:
        """The network and policy that act in state `state` (a policy on a schedule at
        the state's step count; see [`podrace.policies.AbstractPolicy.at`][])."""

    @abc.abstractmethod
    def network_at(self, state: StateT) -> AbstractNetwork:
        """The network with the parameters learnt in state `state`."""

    @abc.abstractmethod
    def check_fits(
        self, action_space: AbstractSpace, observation: PyTree[jax.ShapeDtypeStruct], *, num_envs: int, env_name: str
    ) -> None:
        """Raises `ValueError`, naming the parts and the fix, if the learner cannot learn
        in an environment; executors call it when they are built.

        **Arguments:**

        - `action_space`: the environment's action space.
        - `observation`: the shape and dtype of one observation the network gets.
        - `num_envs`: the environments per device it will learn from.
        - `env_name`: how to name the environment in messages.
        """

    @abc.abstractmethod
    def update(
        self, state: StateT, trajectory: Trajectory, *, axis_name: str | None = None
    ) -> tuple[StateT, UpdateMetrics]:
        """Learns from a batch of trajectories `[T + 1, B]`.

        **Arguments:**

        - `state`: the learner state.
        - `trajectory`: a time-major batch of trajectories.
        - `axis_name`: inside `shard_map`, the device axis to average gradients and
            metrics over; `None` outside.

        **Returns:**

        The next state and the update's metrics.
        """

    @abc.abstractmethod
    def device_local(self, state: StateT) -> PyTree[bool]:
        """Which leaves of `state` hold per-device data, split over devices along axis 0.

        A pytree prefix of `state`: `False` where everything is replicated; a replay
        buffer keeps the experience of each device's own environments.
        """


ModuleT = TypeVar("ModuleT", bound=eqx.Module)


def with_params(module: ModuleT, params: PyTree[Array]) -> ModuleT:
    """`module` (a network, a critic) with its trainable arrays replaced by `params`
    (a pytree as `eqx.filter(module, eqx.is_inexact_array)` gives)."""
    return eqx.combine(params, eqx.filter(module, eqx.is_inexact_array, inverse=True))


_NON_FINITE = "podrace: loss term"


def cond_or_zero_metrics(
    pred: Bool[Array, ""],
    step: Callable[[OperandT], tuple[OutputT, MetricsT]],
    skip: Callable[[OperandT], OutputT],
    operand: OperandT,
) -> tuple[OutputT, MetricsT]:
    """`step(operand)` where `pred`, else `skip(operand)` with metrics of zeros, in one
    `lax.cond` (a replay learner's learning before its buffer is ready, TD3's delayed
    actor step).

    `step` is traced once: wrapped in `jax.jit`, the trace that gives its metrics'
    shapes to the other branch is reused by the `lax.cond` (tracing it twice would
    double the tracing of a learner's whole update).
    """
    step = jax.jit(step)
    metrics = jax.eval_shape(step, operand)[1]

    def skip_with_zeros(operand: OperandT) -> tuple[OutputT, MetricsT]:
        return skip(operand), jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metrics)

    return jax.lax.cond(pred, step, skip_with_zeros, operand)


def raise_non_finite_loss(error: Exception) -> None:
    """Re-raises a `check_nans` failure as a `FloatingPointError` whose first line names the term.

    The error raised inside the compiled program carries its message after a long
    description of both stacks; this keeps the message alone. Other errors pass.
    """
    match = re.search(rf"{_NON_FINITE} '[^']*' is not finite", str(error))
    if match is not None:
        raise FloatingPointError(
            f"{match.group(0)} (found by check_nans=True): look at the learning rate, the loss's "
            "hyperparameters and the rewards and observations it learnt from."
        ) from None


def loss_gradients(
    objective, params: PyTree[Array], *, axis_name: str | None
) -> tuple[Float[Array, ""], LossTerms, PyTree[Array]]:
    """The loss, its terms and the gradient of `objective(params) -> (loss, terms)`, averaged over devices.

    `gradient_step` takes its gradients from here, and so do executors that compute
    gradients away from the optimiser (the Ray gradient workers).
    """
    varying = params if axis_name is None else jax.lax.pcast(params, axis_name, to="varying")
    # Gradients of device-varying parameters stay per device; average them explicitly
    # (replicated parameters would be summed implicitly).
    (loss, terms), grads = jax.value_and_grad(objective, has_aux=True)(varying)
    if axis_name is not None:
        loss, terms, grads = jax.lax.pmean((loss, terms, grads), axis_name)
    return loss, terms, grads


def apply_gradients(
    optimizer: optax.GradientTransformation,
    params: PyTree[Array],
    opt_state: optax.OptState,
    grads: PyTree[Array],
    loss: Float[Array, ""],
    terms: LossTerms,
    *,
    check_nans: bool,
) -> tuple[PyTree[Array], optax.OptState, UpdateMetrics]:
    """One step of `optimizer` along `grads`, with the metrics of the loss they came from."""
    if check_nans:
        for name, value in terms.items():
            grads = eqx.error_if(grads, ~jnp.isfinite(value), f"{_NON_FINITE} '{name}' is not finite")
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return eqx.apply_updates(params, updates), opt_state, UpdateMetrics(loss, terms, optax.tree.norm(grads))


def gradient_step(
    optimizer: optax.GradientTransformation,
    params: PyTree[Array],
    opt_state: optax.OptState,
    objective,
    *,
    axis_name: str | None,
    check_nans: bool,
) -> tuple[PyTree[Array], optax.OptState, UpdateMetrics]:
    """One step of `optimizer` on `objective(params) -> (loss, terms)`, gradients averaged over devices."""
    loss, terms, grads = loss_gradients(objective, params, axis_name=axis_name)
    return apply_gradients(optimizer, params, opt_state, grads, loss, terms, check_nans=check_nans)


class AbstractGradientLearner(AbstractLearner[StateT]):
    """A learner whose update is one gradient step of one loss, which an executor may
    take in two halves apart: the gradient where the experience is (a Ray gradient
    worker), the optimiser's step where the state is
    ([`podrace.executors.ray_actors.train_with_ray_gradients`][])."""

    @abc.abstractmethod
    def check_one_gradient_step(self, owner: str) -> None:
        """Raises `ValueError`, naming `owner` and the fix, unless each update is one gradient step."""

    @abc.abstractmethod
    def gradients(
        self, agent: AbstractAgent, trajectory: Trajectory
    ) -> tuple[Float[Array, ""], LossTerms, PyTree[Array]]:
        """The loss on `trajectory`, its named terms and its gradient at the trainable
        arrays of `agent`'s network.

        **Arguments:**

        - `agent`: the acting agent, `agent(state)`.
        - `trajectory`: a batch of trajectories it collected `[T + 1, B]`.
        """

    @abc.abstractmethod
    def step_with_gradients(
        self,
        state: StateT,
        gradients: PyTree[Array],
        loss: Float[Array, ""],
        terms: LossTerms,
        *,
        new_transitions: Int[Array, ""],
    ) -> tuple[StateT, UpdateMetrics]:
        """The update `update` takes with these gradients: one optimiser step along
        `gradients` (reduced over workers), with `new_transitions` more learnt from.

        **Arguments:**

        - `state`: the learner state.
        - `gradients`: shaped as the trainable arrays of `network_at(state)`.
        - `loss`, `terms`: the loss and its terms that the gradients are of (for the metrics).
        - `new_transitions`: the environment transitions the gradients were computed on.
        """


@final
class LearnerState(eqx.Module):
    """Everything a [`podrace.Learner`][] updates.

    **Arguments:**

    - `params`: the network's trainable arrays (`eqx.filter(network, eqx.is_inexact_array)`).
    - `opt_state`: the optax state.
    - `num_updates`: how many updates have been applied.
    - `num_transitions`: how many environment transitions have been learnt from, over
        all devices (the clock of a policy's schedule).
    - `key`: the randomness of minibatch shuffling.
    """

    params: PyTree[Array]
    opt_state: optax.OptState
    num_updates: Int[Array, ""]
    num_transitions: Int[Array, ""]
    key: PRNGKeyArray


@final
class Learner(AbstractGradientLearner[LearnerState]):
    """An on-policy learner: a network, the policy that acts with it, a loss and an optax optimiser.

    Each update learns from the rollout just collected: `num_epochs` passes over it,
    each split into `num_minibatches` minibatches, one gradient step per minibatch.
    A minibatch holds whole trajectories (shuffled along the environment axis), as a
    recurrent network needs, or, with `minibatches_of="transitions"`, single
    transitions shuffled over the whole rollout, as the published feed-forward PPOs
    draw them. What the loss takes
    from the rollout ahead of its steps (its [`targets`][podrace.losses.AbstractLoss.targets],
    e.g. PPO's advantages) is computed once per update, before the first step, and
    split with the trajectories. One epoch and one
    minibatch give A2C or REINFORCE; several give PPO. The parts are checked to fit
    when the learner is built: the policy and the loss must read the kind of output
    the network emits. Swapping the loss is one argument.

    Reference: Schulman et al., "Proximal Policy Optimization Algorithms", 2017
    (epochs of minibatch steps over one rollout).

    **Arguments:**

    - `network`: the network (its arrays are the initial parameters).
    - `policy`: the behaviour policy over the network's outputs.
    - `loss`: the objective, e.g. [`podrace.losses.TDLambdaQLoss`][].
    - `optimizer`: an optax gradient transformation that minimises (a positive learning rate).
    - `num_epochs`: passes over each rollout.
    - `num_minibatches`: minibatches per pass; must divide the number of environments
        per device (of transitions per device, `num_envs * rollout_length`, for
        `minibatches_of="transitions"`). Each minibatch takes the same share of every
        device's environments, drawn so that the minibatches do not depend on how many
        devices there are.
    - `minibatches_of`: `"trajectories"` (whole trajectories, the default) or
        `"transitions"` (single transitions, for a feed-forward network and a loss
        that computes its [`targets`][podrace.losses.AbstractLoss.targets] ahead, such
        as PPO's; each transition's targets come from its whole trajectory).
    - `check_nans`: if set, an update whose loss terms are not finite raises an error
        naming the term (opt-in: it adds a host check to the compiled program).
    """

    network: AbstractNetwork
    policy: AbstractPolicy
    loss: AbstractLoss
    optimizer: optax.GradientTransformation
    num_epochs: int = eqx.field(static=True, default=1, kw_only=True)
    num_minibatches: int = eqx.field(static=True, default=1, kw_only=True)
    minibatches_of: Literal["trajectories", "transitions"] = eqx.field(
        static=True, default="trajectories", kw_only=True
    )
    check_nans: bool = eqx.field(static=True, default=False, kw_only=True)

    def __check_init__(self):
        check_reads(self.network, self.policy, role="policy")
        check_reads(self.network, self.loss, role="loss")
        check_positive_int("Learner", "num_epochs", self.num_epochs)
        check_positive_int("Learner", "num_minibatches", self.num_minibatches)
        params = eqx.filter(self.network, eqx.is_inexact_array)
        check_optimizer_first_step("Learner", "optimizer", self.optimizer, params)
        if self.minibatches_of not in ("trajectories", "transitions"):
            raise ValueError(
                f"Learner: minibatches_of must be 'trajectories' or 'transitions', got {self.minibatches_of!r}."
            )
        if self.minibatches_of == "transitions":
            if jax.tree.leaves(self.network.initial_carry()):
                raise ValueError(
                    "Learner: minibatches_of='transitions' needs a feed-forward network; a recurrent network "
                    "unrolls over whole trajectories: use minibatches_of='trajectories'."
                )
            if isinstance(self.loss, AbstractTrajectoryLoss):
                raise ValueError(
                    f"Learner: minibatches_of='transitions' needs a loss that computes its targets once per update "
                    f"(such as PPOLoss); {type(self.loss).__name__} computes them from whole trajectories: use "
                    "minibatches_of='trajectories'."
                )

    def init(self, key: PRNGKeyArray, timestep: TimeStep | None = None) -> LearnerState:
        """The initial state: the network's own parameters and a fresh optimiser state.

        **Arguments:**

        - `key`: the randomness of minibatch shuffling.
        - `timestep`: unused (an on-policy learner keeps no experience).
        """
        del timestep
        params = eqx.filter(self.network, eqx.is_inexact_array)
        zero = jnp.asarray(0, jnp.int32)
        return LearnerState(params, self.optimizer.init(params), zero, zero, key)

    def initial_agent(self) -> Agent:
        return Agent(self.network, self.policy)

    def network_with(self, params: PyTree[Array]) -> AbstractNetwork:
        """The network with its trainable arrays replaced by `params`."""
        return with_params(self.network, params)

    def check_fits(
        self, action_space: AbstractSpace, observation: PyTree[jax.ShapeDtypeStruct], *, num_envs: int, env_name: str
    ) -> None:
        check_parts_fit(self.network, self.policy, self.loss, action_space, observation, env_name=env_name)
        self._check_minibatches_divide(num_envs)

    def device_local(self, state: LearnerState) -> PyTree[bool]:
        del state
        return False

    def _check_minibatches_divide(self, num_envs: int) -> None:
        if self.minibatches_of == "transitions":
            return  # checked against the rollout's transitions in `update`
        if num_envs % self.num_minibatches:
            raise ValueError(
                f"Learner: num_minibatches={self.num_minibatches} must divide the number of environments "
                f"per device ({num_envs}); pick num_envs as a multiple of num_minibatches."
            )

    def network_at(self, state: LearnerState) -> AbstractNetwork:
        return self.network_with(state.params)

    def check_one_gradient_step(self, owner: str) -> None:
        if self.num_epochs != 1 or self.num_minibatches != 1:
            raise ValueError(
                f"{owner} takes one gradient step per update: build the Learner with "
                f"num_epochs=1 and num_minibatches=1 (got {self.num_epochs} and {self.num_minibatches})."
            )

    def gradients(
        self, agent: AbstractAgent, trajectory: Trajectory
    ) -> tuple[Float[Array, ""], LossTerms, PyTree[Array]]:
        if not isinstance(agent, Agent):
            raise TypeError(f"Learner.gradients takes the Agent of agent(state), got {type(agent).__name__}.")
        policy = agent.policy
        params = eqx.filter(agent.network, eqx.is_inexact_array)
        return loss_gradients(
            lambda params: self.loss(Agent(self.network_with(params), policy), trajectory), params, axis_name=None
        )

    def step_with_gradients(
        self,
        state: LearnerState,
        gradients: PyTree[Array],
        loss: Float[Array, ""],
        terms: LossTerms,
        *,
        new_transitions: Int[Array, ""],
    ) -> tuple[LearnerState, UpdateMetrics]:
        params, opt_state, metrics = apply_gradients(
            self.optimizer, state.params, state.opt_state, gradients, loss, terms, check_nans=self.check_nans
        )
        num_transitions = state.num_transitions + new_transitions
        return LearnerState(params, opt_state, state.num_updates + 1, num_transitions, state.key), metrics

    def agent(self, state: LearnerState) -> Agent:
        return Agent(self.network_at(state), self.policy.at(state.num_transitions))

    def update(
        self, state: LearnerState, trajectory: Trajectory, *, axis_name: str | None = None
    ) -> tuple[LearnerState, UpdateMetrics]:
        num_steps, num_envs = trajectory.policy_step.action.shape[:2]
        self._check_minibatches_divide(num_envs)
        if self.minibatches_of == "transitions" and (num_steps * num_envs) % self.num_minibatches:
            raise ValueError(
                f"Learner: num_minibatches={self.num_minibatches} must divide the transitions per device "
                f"({num_envs} environments x {num_steps} steps); pick num_envs or rollout_length accordingly."
            )

        return on_policy_update(
            self.optimizer,
            state,
            trajectory,
            lambda params, batch, targets: self.loss(
                Agent(self.network_with(params), self.policy), batch, targets=targets, axis_name=axis_name
            ),
            lambda: self.loss.targets(self.agent(state), trajectory),
            num_epochs=self.num_epochs,
            num_minibatches=self.num_minibatches,
            minibatches_of=self.minibatches_of,
            axis_name=axis_name,
            check_nans=self.check_nans,
        )


def on_policy_update(
    optimizer: optax.GradientTransformation,
    state: LearnerState,
    trajectory: Trajectory,
    objective: Callable[[PyTree[Array], Trajectory, PyTree[Array]], tuple[Float[Array, ""], LossTerms]],
    targets: Callable[[], PyTree[Array]],
    *,
    num_epochs: int,
    num_minibatches: int,
    minibatches_of: Literal["trajectories", "transitions"] = "trajectories",
    axis_name: str | None,
    check_nans: bool,
) -> tuple[LearnerState, UpdateMetrics]:
    """One on-policy update: `num_epochs` passes over the rollout `trajectory`, each split
    into `num_minibatches` shuffled minibatches, one gradient step of `objective` per
    minibatch (as [`podrace.Learner`][] takes them).

    **Arguments:**

    - `optimizer`: the optax optimiser of `state`.
    - `state`: the learner state the update starts from.
    - `trajectory`: the rollout `[T + 1, B]` (this device's share).
    - `objective`: `objective(params, minibatch, targets) -> (loss, terms)`.
    - `targets`: computes the loss's targets on the whole rollout, with the parameters the
        update starts from (called only with several minibatches or epochs; with one, the
        loss computes them itself from `None`).
    - `num_epochs`, `num_minibatches`, `minibatches_of`: as [`podrace.Learner`][]'s.
    - `axis_name`: the device axis the batch is split over, if any.
    - `check_nans`: whether a non-finite loss term raises an error naming it.

    **Returns:**

    The next state and the update's metrics (means over its gradient steps).
    """
    num_steps, num_envs = trajectory.policy_step.action.shape[:2]

    def step(carry, minibatch: tuple[Trajectory, PyTree[Array]]):
        params, opt_state = carry
        batch, batch_targets = minibatch
        params, opt_state, metrics = gradient_step(
            optimizer,
            params,
            opt_state,
            lambda params: objective(params, batch, batch_targets),
            axis_name=axis_name,
            check_nans=check_nans,
        )
        return (params, opt_state), metrics

    if num_epochs == 1 and num_minibatches == 1:
        # The one step has the parameters the update starts from: the loss computes its targets itself.
        key = state.key
        (params, opt_state), metrics = step((state.params, state.opt_state), (trajectory, None))
    else:
        key, shuffle_key = jax.random.split(state.key)
        rollout_targets = targets()
        if minibatches_of == "transitions":
            trajectory, rollout_targets = as_transitions(trajectory, rollout_targets)
        minibatches = jax.vmap(
            lambda key: shuffled_minibatches(
                trajectory, num_minibatches, key, axis_name=axis_name, targets=rollout_targets
            )
        )(jax.random.split(shuffle_key, num_epochs))
        # Epochs and minibatches in one scan: [num_epochs * num_minibatches, ...].
        minibatches = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), minibatches)
        (params, opt_state), metrics = jax.lax.scan(step, (state.params, state.opt_state), minibatches)
        metrics = jax.tree.map(lambda x: jnp.mean(x, axis=0), metrics)
    num_devices = 1 if axis_name is None else jax.lax.psum(1, axis_name)
    num_transitions = state.num_transitions + num_steps * num_envs * num_devices
    return LearnerState(params, opt_state, state.num_updates + 1, num_transitions, key), metrics


def as_transitions(
    trajectory: Trajectory, targets: PyTree[Float[Array, "T B ..."]]
) -> tuple[Trajectory, PyTree[Float[Array, "1 B*T ..."]]]:
    """A batch of feed-forward trajectories `[T + 1, B]` as `B * T` one-step trajectories `[2, B * T]`.

    One-step trajectory `b * T + t` holds time steps `t` and `t + 1` of trajectory `b`,
    action `t` and the targets of transition `t`: shuffling these along the batch
    axis shuffles single transitions. The numbering keeps each environment's
    transitions together, so that a device's transitions stay consecutive in the
    numbering over all devices.
    """

    def pairs(x: Array) -> Array:  # [T + 1, B, ...] -> [2, B * T, ...]
        both = jnp.stack([x[:-1], x[1:]])
        return jnp.swapaxes(both, 1, 2).reshape(2, -1, *x.shape[2:])

    def singles(x: Array) -> Array:  # [T, B, ...] -> [1, B * T, ...]
        return jnp.swapaxes(x, 0, 1).reshape(1, -1, *x.shape[2:])

    transitions = Trajectory(
        jax.tree.map(pairs, trajectory.timestep), jax.tree.map(singles, trajectory.policy_step), trajectory.carry
    )
    return transitions, jax.tree.map(singles, targets)


def shuffled_minibatches(
    trajectory: Trajectory,
    num_minibatches: int,
    key: PRNGKeyArray,
    *,
    axis_name: str | None,
    targets: PyTree[Float[Array, "T B ..."]] = None,
) -> tuple[Trajectory, PyTree[Array]]:
    """A batch of trajectories `[T + 1, B]` split at random along the environment axis: `[M, T + 1, B / M]`.

    The environments, numbered over all devices, form groups of `M` consecutive ones,
    and each group sends one environment to each minibatch. The orders of all the
    groups are drawn at once, by sorting random bits (as `jax.random.permutation`
    does, in one random call rather than one per group). A device holds whole groups
    and keeps their rows, so every minibatch takes the same share of each device's
    environments, and which environments share a minibatch does not depend on the
    number of devices.

    **Arguments:**

    - `trajectory`: a time-major batch of trajectories (this device's share under `shard_map`).
    - `num_minibatches`: `M`, which must divide `B`.
    - `key`: the randomness of the split, the same on every device.
    - `axis_name`: inside `shard_map`, the device axis the batch is split over; `None` outside.
    - `targets`: time-major arrays `[T, B]` of the same trajectories (a loss's
        [`targets`][podrace.losses.AbstractLoss.targets]), split with them; or `None`.

    **Returns:**

    The `M` minibatches of trajectories and of `targets`, each stacked along a leading axis.
    """
    num_envs = trajectory.timestep.reward.shape[1]
    num_groups = num_envs // num_minibatches
    num_devices = 1 if axis_name is None else jax.lax.axis_size(axis_name)
    # orders[g]: a random order of the M environments of group g, for every group of every device.
    orders = jnp.argsort(jax.random.bits(key, (num_devices * num_groups, num_minibatches)), axis=-1)
    if axis_name is not None:
        orders = jax.lax.dynamic_slice_in_dim(orders, jax.lax.axis_index(axis_name) * num_groups, num_groups)
    # order[m, g]: the environment of group g in minibatch m.
    order = (num_minibatches * jnp.arange(num_groups)[None, :] + orders.T).astype(jnp.int32)

    minibatches = jax.vmap(trajectory.take)(order)
    return minibatches, jax.tree.map(lambda x: jnp.moveaxis(jnp.take(x, order, axis=1), 1, 0), targets)
