"""TD(lambda) Q-learning: the agent of the Podracer paper's Anakin demo."""

from typing import final

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._types import QValues, Trajectory
from .._validation import check_in_unit_interval
from ..agent import Agent
from ..networks import AbstractNetwork
from ..results import LossTerms
from .base import AbstractQLoss, cut_lambda_at_episode_ends, transition_mask
from .value_learning import q_lambda


@final
class TDLambdaQLoss(AbstractQLoss):
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

    input_type = QValues
    discount: Float[Array, ""]
    lambda_: Float[Array, ""]

    def __init__(self, *, discount: ArrayLike, lambda_: ArrayLike):
        self.discount = jnp.asarray(discount, jnp.float32)
        self.lambda_ = jnp.asarray(lambda_, jnp.float32)

    def __check_init__(self):
        check_in_unit_interval("TDLambdaQLoss", "discount", self.discount)
        check_in_unit_interval("TDLambdaQLoss", "lambda_", self.lambda_)

    def trajectory_loss(
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        timestep = trajectory.timestep
        q_tm1, q_t, _ = self.q_values(agent, trajectory, target_network)
        errors = q_lambda(
            q_tm1=q_tm1,
            a_tm1=trajectory.policy_step.action,
            r_t=timestep.reward[1:],
            discount_t=self.discount * timestep.discount[1:],
            q_t=q_t,
            lambda_=cut_lambda_at_episode_ends(self.lambda_, trajectory),
        )
        td_loss = jnp.mean(transition_mask(trajectory) * jnp.square(errors))
        return td_loss, {"td_loss": td_loss}
