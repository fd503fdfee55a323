from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from .._types import PolicyStep, Trajectory
from ..losses import AbstractLoss, LossTerms
from ..networks import AbstractNetwork
from ..policies import AbstractPolicy


@final
class LearnerState(eqx.Module):
    """Everything a learner updates.

    **Arguments:**

    - `params`: the network's trainable arrays (`eqx.filter(network, eqx.is_inexact_array)`).
    - `opt_state`: the optax state.
    - `num_updates`: how many updates have been applied.
    """

    params: PyTree[Array]
    opt_state: optax.OptState
    num_updates: Int[Array, ""]


@final
class UpdateMetrics(eqx.Module):
    """What one update reports.

    **Arguments:**

    - `loss`: the minimised loss.
    - `terms`: its named terms.
    - `grad_norm`: the global norm of the (device-averaged) gradient.
    """

    loss: Float[Array, ""]
    terms: LossTerms
    grad_norm: Float[Array, ""]


@final
class Learner(eqx.Module):
    """A network, the policy that acts with it, a loss and an optax optimiser.

    The parts are checked to fit when the learner is built: the policy and the loss
    must read the kind of output the network emits. Swapping the loss is one argument.

    **Arguments:**

    - `network`: the network (its arrays are the initial parameters).
    - `policy`: the behaviour policy over the network's outputs.
    - `loss`: the objective, e.g. [`podrace.losses.TDLambdaQLoss`][].
    - `optimizer`: an optax gradient transformation.
    - `check_nans`: if set, an update whose loss terms are not finite raises an error
        naming the term (opt-in: it adds a host check to the compiled program).
    """

    network: AbstractNetwork
    policy: AbstractPolicy
    loss: AbstractLoss
    optimizer: optax.GradientTransformation
    check_nans: bool = eqx.field(static=True, default=False, kw_only=True)

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

    def init(self) -> LearnerState:
        """The initial state: the network's own parameters and a fresh optimiser state."""
        params = eqx.filter(self.network, eqx.is_inexact_array)
        return LearnerState(params, self.optimizer.init(params), jnp.asarray(0, jnp.int32))

    def act(
        self, params: PyTree[Array], observation: PyTree[Array], carry: PyTree[Array], key: PRNGKeyArray
    ) -> tuple[PolicyStep, PyTree[Array]]:
        """Chooses an action for one observation (unbatched; `vmap` it over envs).

        **Arguments:**

        - `params`: the current parameters (`LearnerState.params`).
        - `observation`: one observation.
        - `carry`: the network's recurrent state (reset by the caller where `is_first`).
        - `key`: the policy's randomness.

        **Returns:**

        The policy step and the next carry.
        """
        output, carry = self.network_with(params)(observation, carry)
        return self.policy(output, key), carry

    def update(
        self, state: LearnerState, trajectory: Trajectory, *, axis_name: str | None = None
    ) -> tuple[LearnerState, UpdateMetrics]:
        """One gradient step on a batch of trajectories.

        **Arguments:**

        - `state`: the learner state.
        - `trajectory`: a time-major batch `[T + 1, B]`.
        - `axis_name`: inside `shard_map`, the device axis to average gradients and
            metrics over; `None` outside.

        **Returns:**

        The next state and the update's metrics.
        """
        params = state.params
        if axis_name is not None:
            # Gradients of device-varying parameters stay per device; average them
            # explicitly below (replicated parameters would be summed implicitly).
            params = jax.lax.pcast(params, axis_name, to="varying")

        def objective(params):
            return self.loss(self.network_with(params), trajectory)

        (loss, terms), grads = jax.value_and_grad(objective, has_aux=True)(params)
        if axis_name is not None:
            loss, terms, grads = jax.lax.pmean((loss, terms, grads), axis_name)
        if self.check_nans:
            for name, value in terms.items():
                grads = eqx.error_if(grads, ~jnp.isfinite(value), f"podrace: loss term '{name}' is not finite")
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = eqx.apply_updates(state.params, updates)
        metrics = UpdateMetrics(loss, terms, optax.tree.norm(grads))
        return LearnerState(params, opt_state, state.num_updates + 1), metrics
