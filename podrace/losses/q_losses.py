"""Q-value losses: TD(lambda) Q-learning and one-step, n-step and double Q-learning."""

from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float

from .._types import QValues, Trajectory
from .._validation import check_in_unit_interval, check_positive
from ..networks import AbstractNetwork
from .modules import AbstractLoss, LossTerms, transition_mask
from .value_learning import n_step_bootstrapped_returns, td_lambda


@final
class TDLambdaQLoss(AbstractLoss):
    """Q-learning with lambda-returns: the agent of the Podracer paper's Anakin demo.

    Regresses `Q(s_t, a_t)` towards lambda-returns bootstrapped on `max_a Q(s, a)`
    (of the target network when there is one), minimising the mean squared TD(lambda)
    error. Bootstrapping stops on termination (`discount = 0`) and falls back to one
    step at a truncation (lambda is cut there).

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

    def trajectory_loss(
        self, network: AbstractNetwork, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        timestep = trajectory.timestep
        q_values, q_tm1 = _q_values_and_taken(network, trajectory)
        errors = td_lambda(
            v_tm1=q_tm1,
            r_t=timestep.reward[1:],
            discount_t=self.discount * timestep.discount[1:],
            v_t=greedy_values(q_values, trajectory, target_network),
            lambda_=self.lambda_ * (1.0 - timestep.is_last[1:]),
        )
        td_loss = jnp.mean(transition_mask(trajectory) * jnp.square(errors))
        return td_loss, {"td_loss": td_loss}


@final
class QLearningLoss(AbstractLoss):
    """Regresses `Q(s_t, a_t)` towards n-step targets bootstrapped on a greedy value.

    The target of each transition is `r_{t+1} + ... + discount^n * v(s_{t+n})`, with
    `v(s) = max_a Q_target(s, a)`, or, with `double`, the target network's value of
    the online network's greedy action. Bootstrapping stops on termination and falls
    back to the truncated state's value at a truncation. Without a target network
    (on-policy use in a [`podrace.Learner`][]) the online network bootstraps, its
    targets held constant. Errors are squared, or Huber-smoothed with `huber_delta`.

    Reference: Watkins, "Learning from Delayed Rewards", PhD thesis, 1989 (Q-learning);
    Mnih et al., "Human-level control through deep reinforcement learning", Nature
    518, 2015; van Hasselt et al., "Deep Reinforcement Learning with Double
    Q-learning", AAAI 2016; Sutton & Barto, 2nd ed., 7.1 (n-step returns).

    **Arguments:**

    - `discount`: the agent's discount factor, in [0, 1].
    - `n_step`: steps before bootstrapping (static; a replayed sequence needs `n_step + 1`
        time steps).
    - `double`: whether to evaluate the online network's greedy action with the target network.
    - `huber_delta`: if given (> 0), the Huber loss with this threshold instead of the squared error.
    """

    discount: Float[Array, ""]
    huber_delta: Float[Array, ""] | None
    n_step: int = eqx.field(static=True)
    double: bool = eqx.field(static=True)
    input_type = QValues

    def __init__(
        self, *, discount: ArrayLike, n_step: int = 1, double: bool = False, huber_delta: ArrayLike | None = None
    ):
        if not isinstance(n_step, int) or n_step < 1:
            raise ValueError(f"QLearningLoss: n_step must be an integer >= 1, got {n_step!r}.")
        self.discount = jnp.asarray(discount, jnp.float32)
        self.huber_delta = None if huber_delta is None else jnp.asarray(huber_delta, jnp.float32)
        self.n_step = n_step
        self.double = double

    def __check_init__(self):
        check_in_unit_interval("QLearningLoss", "discount", self.discount)
        if self.huber_delta is not None:
            check_positive("QLearningLoss", "huber_delta", self.huber_delta)

    def trajectory_loss(
        self, network: AbstractNetwork, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        timestep = trajectory.timestep
        q_values, q_tm1 = _q_values_and_taken(network, trajectory)
        v_t = greedy_values(q_values, trajectory, target_network, double=self.double)
        targets = n_step_bootstrapped_returns(
            r_t=timestep.reward[1:],
            discount_t=self.discount * timestep.discount[1:],
            v_t=v_t,
            n=self.n_step,
            lambda_=1.0 - timestep.is_last[1:],
        )
        errors = jax.lax.stop_gradient(targets) - q_tm1
        if self.huber_delta is None:
            per_step = 0.5 * jnp.square(errors)
        else:
            per_step = optax.huber_loss(errors, delta=self.huber_delta)  # pyright: ignore[reportArgumentType]
        td_loss = jnp.mean(transition_mask(trajectory) * per_step)
        return td_loss, {"td_loss": td_loss}


def _q_values_and_taken(
    network: AbstractNetwork, trajectory: Trajectory
) -> tuple[Float[Array, "time num_actions"], Float[Array, " time-1"]]:
    """The action values of time steps `0..T` and those of the actions taken at `0..T-1`."""
    timestep = trajectory.timestep
    q_values = network.unroll(timestep.observation, trajectory.carry, timestep.is_first)[0].q_values
    q_tm1 = jnp.take_along_axis(q_values[:-1], trajectory.policy_step.action[:, None], axis=-1)[:, 0]
    return q_values, q_tm1


def greedy_values(
    q_values: Float[Array, "time num_actions"],
    trajectory: Trajectory,
    target_network: AbstractNetwork | None,
    *,
    double: bool = False,
) -> Float[Array, " time-1"]:
    """The bootstrap values of time steps `1..T`: `max_a Q`, from the target network if there is one.

    With `double`, the target network's value of the online network's greedy action
    (van Hasselt et al., 2016). Without a target network, the online `q_values` bootstrap.
    """
    if target_network is None:
        return jnp.max(q_values[1:], axis=-1)
    timestep = trajectory.timestep
    target_q = target_network.unroll(timestep.observation, trajectory.carry, timestep.is_first)[0].q_values[1:]
    if not double:
        return jnp.max(target_q, axis=-1)
    greedy = jnp.argmax(q_values[1:], axis=-1)
    return jnp.take_along_axis(target_q, greedy[:, None], axis=-1)[:, 0]
