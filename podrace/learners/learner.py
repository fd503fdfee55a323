import abc
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from .._types import PolicyStep, TimeStep, Trajectory
from .._validation import check_positive_int
from ..losses import AbstractLoss, LossTerms
from ..networks import AbstractNetwork
from ..policies import AbstractPolicy


@final
class Behaviour(eqx.Module):
    """The network and policy that act: what a rollout or a host collector needs.

    **Arguments:**

    - `network`: the network with the parameters to act with.
    - `policy`: the behaviour policy over its outputs.
    """

    network: AbstractNetwork
    policy: AbstractPolicy

    def __call__(
        self, observation: PyTree[Array], carry: PyTree[Array], key: PRNGKeyArray
    ) -> tuple[PolicyStep, PyTree[Array]]:
        """Chooses an action for one observation (unbatched; `vmap` it over envs).

        **Arguments:**

        - `observation`: one observation.
        - `carry`: the network's recurrent state (reset by the caller where `is_first`).
        - `key`: the policy's randomness.

        **Returns:**

        The policy step and the next carry.
        """
        output, carry = self.network(observation, carry)
        return self.policy(output, key), carry


@final
class UpdateMetrics(eqx.Module):
    """What one update reports (averaged over its gradient steps).

    **Arguments:**

    - `loss`: the minimised loss.
    - `terms`: its named terms.
    - `grad_norm`: the global norm of the (device-averaged) gradient.
    """

    loss: Float[Array, ""]
    terms: LossTerms
    grad_norm: Float[Array, ""]


class AbstractLearner(eqx.Module):
    """What the Anakin pipeline and the host collectors need of a learner.

    A learner holds its network (whose arrays are the initial parameters), the policy
    that acts with it, a loss and an optimiser; its state is a typed pytree holding
    everything a resume needs.
    """

    network: eqx.AbstractVar[AbstractNetwork]
    policy: eqx.AbstractVar[AbstractPolicy]
    loss: eqx.AbstractVar[AbstractLoss]
    optimizer: eqx.AbstractVar[optax.GradientTransformation]

    def __check_init__(self):
        output_type = self.network.output_type
        for role, part in (("policy", self.policy), ("loss", self.loss)):
            if not issubclass(output_type, part.input_type):
                raise ValueError(
                    f"The {role} {type(part).__name__} reads {part.input_type.__name__} but the network "
                    f"emits {output_type.__name__}; give the network a head that emits "
                    f"{part.input_type.__name__} or pick a {role} for {output_type.__name__}."
                )

    def network_with(self, params: PyTree[Array]) -> AbstractNetwork:
        """The network with its trainable arrays replaced by `params`."""
        return eqx.combine(params, eqx.filter(self.network, eqx.is_inexact_array, inverse=True))

    @abc.abstractmethod
    def init(self, key: PRNGKeyArray, timestep: TimeStep) -> PyTree[Array]:
        """The initial state.

        **Arguments:**

        - `key`: the learner's own randomness (minibatch shuffling, replay sampling).
        - `timestep`: the first time steps of the environment batch it will learn
            from (leading axis: all environments, over all devices); a replay buffer
            is sized from it.
        """

    @abc.abstractmethod
    def behaviour(self, state: PyTree[Array]) -> Behaviour:
        """The network and policy that act in state `state`."""

    @abc.abstractmethod
    def update(
        self, state: PyTree[Array], trajectory: Trajectory, *, axis_name: str | None = None
    ) -> tuple[PyTree[Array], UpdateMetrics]:
        """Learns from a batch of trajectories `[T + 1, B]`.

        **Arguments:**

        - `state`: the learner state.
        - `trajectory`: a time-major batch of trajectories.
        - `axis_name`: inside `shard_map`, the device axis to average gradients and
            metrics over; `None` outside.

        **Returns:**

        The next state and the update's metrics.
        """

    def device_local(self, state: PyTree[Array]) -> PyTree[bool]:
        """Which leaves of `state` hold per-device data, split over devices along axis 0.

        A pytree prefix of `state`. Everything is replicated by default; a replay
        buffer keeps the experience of each device's own environments.
        """
        del state
        return False


def gradient_step(
    learner: AbstractLearner,
    params: PyTree[Array],
    opt_state: optax.OptState,
    objective,
    *,
    axis_name: str | None,
    check_nans: bool,
) -> tuple[PyTree[Array], optax.OptState, UpdateMetrics]:
    """One optimiser step on `objective(params) -> (loss, terms)`, gradients averaged over devices."""
    varying = params if axis_name is None else jax.lax.pcast(params, axis_name, to="varying")
    # Gradients of device-varying parameters stay per device; average them explicitly
    # (replicated parameters would be summed implicitly).
    (loss, terms), grads = jax.value_and_grad(objective, has_aux=True)(varying)
    if axis_name is not None:
        loss, terms, grads = jax.lax.pmean((loss, terms, grads), axis_name)
    if check_nans:
        for name, value in terms.items():
            grads = eqx.error_if(grads, ~jnp.isfinite(value), f"podrace: loss term '{name}' is not finite")
    updates, opt_state = learner.optimizer.update(grads, opt_state, params)
    return eqx.apply_updates(params, updates), opt_state, UpdateMetrics(loss, terms, optax.tree.norm(grads))


@final
class LearnerState(eqx.Module):
    """Everything a [`podrace.Learner`][] updates.

    **Arguments:**

    - `params`: the network's trainable arrays (`eqx.filter(network, eqx.is_inexact_array)`).
    - `opt_state`: the optax state.
    - `num_updates`: how many updates have been applied.
    - `key`: the randomness of minibatch shuffling.
    """

    params: PyTree[Array]
    opt_state: optax.OptState
    num_updates: Int[Array, ""]
    key: PRNGKeyArray


@final
class Learner(AbstractLearner):
    """An on-policy learner: a network, the policy that acts with it, a loss and an optax optimiser.

    Each update learns from the rollout just collected: `num_epochs` passes over it,
    each split into `num_minibatches` minibatches of whole trajectories (shuffled
    along the environment axis), one gradient step per minibatch. One epoch and one
    minibatch give A2C or REINFORCE; several give PPO. The parts are checked to fit
    when the learner is built: the policy and the loss must read the kind of output
    the network emits. Swapping the loss is one argument.

    Reference: Schulman et al., "Proximal Policy Optimization Algorithms", 2017
    (epochs of minibatch steps over one rollout).

    **Arguments:**

    - `network`: the network (its arrays are the initial parameters).
    - `policy`: the behaviour policy over the network's outputs.
    - `loss`: the objective, e.g. [`podrace.losses.TDLambdaQLoss`][].
    - `optimizer`: an optax gradient transformation.
    - `num_epochs`: passes over each rollout.
    - `num_minibatches`: minibatches per pass; must divide the number of environments.
    - `check_nans`: if set, an update whose loss terms are not finite raises an error
        naming the term (opt-in: it adds a host check to the compiled program).
    """

    network: AbstractNetwork
    policy: AbstractPolicy
    loss: AbstractLoss
    optimizer: optax.GradientTransformation
    num_epochs: int = eqx.field(static=True, default=1, kw_only=True)
    num_minibatches: int = eqx.field(static=True, default=1, kw_only=True)
    check_nans: bool = eqx.field(static=True, default=False, kw_only=True)

    def __check_init__(self):
        check_positive_int("Learner", "num_epochs", self.num_epochs)
        check_positive_int("Learner", "num_minibatches", self.num_minibatches)

    def init(self, key: PRNGKeyArray, timestep: TimeStep | None = None) -> LearnerState:
        """The initial state: the network's own parameters and a fresh optimiser state.

        **Arguments:**

        - `key`: the randomness of minibatch shuffling.
        - `timestep`: unused (an on-policy learner keeps no experience).
        """
        del timestep
        params = eqx.filter(self.network, eqx.is_inexact_array)
        return LearnerState(params, self.optimizer.init(params), jnp.asarray(0, jnp.int32), key)

    def behaviour(self, state: LearnerState) -> Behaviour:
        return Behaviour(self.network_with(state.params), self.policy)

    def update(
        self, state: LearnerState, trajectory: Trajectory, *, axis_name: str | None = None
    ) -> tuple[LearnerState, UpdateMetrics]:
        num_envs = trajectory.timestep.reward.shape[1]
        if num_envs % self.num_minibatches:
            raise ValueError(
                f"Learner: num_minibatches={self.num_minibatches} must divide the number of environments "
                f"per device ({num_envs})."
            )

        def step(carry, minibatch: Trajectory):
            params, opt_state = carry
            params, opt_state, metrics = gradient_step(
                self,
                params,
                opt_state,
                lambda params: self.loss(self.network_with(params), minibatch),
                axis_name=axis_name,
                check_nans=self.check_nans,
            )
            return (params, opt_state), metrics

        key, shuffle_key = jax.random.split(state.key)
        if self.num_epochs == 1 and self.num_minibatches == 1:
            (params, opt_state), metrics = step((state.params, state.opt_state), trajectory)
        else:
            minibatches = jax.vmap(lambda key: _shuffled_minibatches(trajectory, self.num_minibatches, key))(
                jax.random.split(shuffle_key, self.num_epochs)
            )
            # Epochs and minibatches in one scan: [num_epochs * num_minibatches, ...].
            minibatches = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), minibatches)
            (params, opt_state), metrics = jax.lax.scan(step, (state.params, state.opt_state), minibatches)
            metrics = jax.tree.map(lambda x: jnp.mean(x, axis=0), metrics)
        return LearnerState(params, opt_state, state.num_updates + 1, key), metrics


def _shuffled_minibatches(trajectory: Trajectory, num_minibatches: int, key: PRNGKeyArray) -> Trajectory:
    """The trajectories shuffled along the environment axis and split: `[M, T + 1, B / M]`."""
    num_envs = trajectory.timestep.reward.shape[1]
    order = jax.random.permutation(key, num_envs).reshape(num_minibatches, -1)

    def split(x, env_axis):
        return jnp.moveaxis(jnp.take(x, order, axis=env_axis), env_axis, 0)

    return Trajectory(
        jax.tree.map(lambda x: split(x, 1), trajectory.timestep),
        jax.tree.map(lambda x: split(x, 1), trajectory.policy_step),
        jax.tree.map(lambda x: split(x, 0), trajectory.carry),
    )
