"""One-step, n-step and double Q-learning."""

from typing import final

import equinox as eqx
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float

from .._types import QValues, Trajectory
from .._validation import check_in_unit_interval, check_positive
from ..agent import Agent
from ..networks import AbstractNetwork
from ..results import LossTerms
from .base import AbstractQLoss, cut_lambda_at_episode_ends, transition_mask
from .value_learning import n_step_q_learning


@final
class QLearningLoss(AbstractQLoss):
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

    input_type = QValues
    discount: Float[Array, ""]
    huber_delta: Float[Array, ""] | None
    n_step: int = eqx.field(static=True)
    double: bool = eqx.field(static=True)

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
        self, agent: Agent, trajectory: Trajectory, target_network: AbstractNetwork | None = None
    ) -> tuple[Float[Array, ""], LossTerms]:
        timestep = trajectory.timestep
        q_tm1, q_t, q_t_selector = self.q_values(agent, trajectory, target_network, double=self.double)
        errors = n_step_q_learning(
            q_tm1=q_tm1,
            a_tm1=trajectory.policy_step.action,
            r_t=timestep.reward[1:],
            discount_t=self.discount * timestep.discount[1:],
            q_t=q_t,
            n=self.n_step,
            lambda_=cut_lambda_at_episode_ends(1.0, trajectory),
            q_t_selector=q_t_selector,
        )
        if self.huber_delta is None:
            per_step = 0.5 * jnp.square(errors)
        else:
            per_step = optax.huber_loss(errors, delta=self.huber_delta)  # pyright: ignore[reportArgumentType]
        td_loss = jnp.mean(transition_mask(trajectory) * per_step)
        return td_loss, {"td_loss": td_loss}
