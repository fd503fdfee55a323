"""Loss modules: hold coefficients and glue network outputs to the pure loss functions."""

import abc
from typing import ClassVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._types import AbstractNetworkOutput, QValues, Trajectory
from .._validation import check_in_unit_interval
from ..networks import AbstractNetwork
from .value_learning import td_lambda


LossTerms = dict[str, Float[Array, ""]]


class AbstractLoss(eqx.Module):
    """A differentiable objective for a batch of trajectories.

    Subclasses implement `trajectory_loss` for one unbatched trajectory; calling the
    module averages it over a time-major batch `[T + 1, B]`. Losses are
    interchangeable: a [`podrace.Learner`][] takes any of them as one argument.
    """

    input_type: ClassVar[type[AbstractNetworkOutput]]

    @abc.abstractmethod
    def trajectory_loss(self, network: AbstractNetwork, trajectory: Trajectory) -> tuple[Float[Array, ""], LossTerms]:
        """The loss of one trajectory `[T + 1]`.

        **Returns:**

        The scalar to minimise and its named terms (for logging and NaN checks).
        """

    def __call__(self, network: AbstractNetwork, trajectory: Trajectory) -> tuple[Float[Array, ""], LossTerms]:
        """The loss averaged over a batch of trajectories with axes `[T + 1, B]`.

        **Arguments:**

        - `network`: the network whose parameters are being learnt.
        - `trajectory`: a time-major batch of trajectories.

        **Returns:**

        The mean loss and the mean of each named term.
        """
        loss, terms = jax.vmap(
            lambda timestep, policy_step, carry: self.trajectory_loss(
                network, Trajectory(timestep, policy_step, carry)
            ),
            in_axes=(1, 1, 0),
        )(trajectory.timestep, trajectory.policy_step, trajectory.carry)
        return jnp.mean(loss), jax.tree.map(jnp.mean, terms)


def transition_mask(trajectory: Trajectory) -> Float[Array, " T"]:
    """1 for real transitions `t -> t + 1`, 0 where `t + 1` starts a new episode.

    The step after an episode's last time step only resets the environment; no loss
    should be taken on it.
    """
    return (~trajectory.timestep.is_first[1:]).astype(jnp.float32)


@final
class TDLambdaQLoss(AbstractLoss):
    """Q-learning with lambda-returns: the agent of the Podracer paper's Anakin demo.

    Regresses `Q(s_t, a_t)` towards lambda-returns bootstrapped on `max_a Q(s, a)`,
    minimising the mean squared TD(lambda) error. Bootstrapping stops on termination
    (`discount = 0`) and falls back to one step at a truncation (lambda is cut there).

    Reference: Sutton & Barto, 2nd ed., 12.10 (Peng's Q(lambda) without trace cutting);
    Hessel et al., "Podracer architectures for scalable Reinforcement Learning", 2021.

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    - `lambda_`: the trace coefficient, in [0, 1].
    """

    discount: Float[Array, ""]
    lambda_: Float[Array, ""]
    input_type = QValues

    def __init__(self, *, discount: ArrayLike, lambda_: ArrayLike):
        self.discount = jnp.asarray(discount, jnp.float32)
        self.lambda_ = jnp.asarray(lambda_, jnp.float32)

    def __check_init__(self):
        check_in_unit_interval("TDLambdaQLoss", "discount", self.discount)
        check_in_unit_interval("TDLambdaQLoss", "lambda_", self.lambda_)

    def trajectory_loss(self, network: AbstractNetwork, trajectory: Trajectory) -> tuple[Float[Array, ""], LossTerms]:
        timestep = trajectory.timestep
        outputs, _ = network.unroll(timestep.observation, trajectory.carry, timestep.is_first)
        q_values = outputs.q_values
        actions = trajectory.policy_step.action
        q_tm1 = jnp.take_along_axis(q_values[:-1], actions[:, None], axis=-1)[:, 0]
        errors = td_lambda(
            v_tm1=q_tm1,
            r_t=timestep.reward[1:],
            discount_t=self.discount * timestep.discount[1:],
            v_t=jnp.max(q_values[1:], axis=-1),
            lambda_=self.lambda_ * (1.0 - timestep.is_last[1:]),
        )
        td_loss = jnp.mean(transition_mask(trajectory) * jnp.square(errors))
        return td_loss, {"td_loss": td_loss}
