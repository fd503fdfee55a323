from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, UInt8

from .._types import Box, TimeStep
from .._validation import as_float_array
from ._base import AbstractRenderableEnv
from .wrappers import TimeLimit


# Colours of `Pendulum.render`: background, rod, axle (Gymnasium's).
_PALETTE = np.array([[255, 255, 255], [204, 77, 77], [0, 0, 0]], np.uint8)


@final
class PendulumState(eqx.Module):
    """The pendulum's angle (0 is upright) and angular velocity.

    **Arguments:**

    - `theta`: angle, rad.
    - `theta_dot`: angular velocity, rad/s.
    """

    theta: Float[Array, ""]
    theta_dot: Float[Array, ""]


@final
class Pendulum(AbstractRenderableEnv[PendulumState]):
    """Swing a pendulum up and hold it upright with a bounded torque.

    The action is a torque in `[-max_torque, max_torque]` (shape `(1,)`; values outside
    are clipped), the observation `(cos theta, sin theta, theta_dot)` and the reward
    `-(theta^2 + 0.1 theta_dot^2 + 0.001 torque^2)` with `theta` normalised to
    `[-pi, pi)`, evaluated before the step. The dynamics, the clipping of the angular
    velocity and the initial state (uniform in `[-pi, pi] x [-1, 1]`) are those of
    Gymnasium's `Pendulum-v1`. The episode never terminates;
    [`podrace.envs.pendulum_v1`][] truncates it after 200 steps.

    The physical constants are array leaves (batch them with `eqx.filter_vmap`).

    `render` draws the rod from the frame's centre as Gymnasium does (upright at
    `theta = 0`, turning anticlockwise as `theta` grows), in `frame_shape` pixels that
    span 4.4 m.

    **Arguments:**

    - `gravity`: m/s^2.
    - `mass`: kg.
    - `length`: m.
    - `dt`: seconds per step.
    - `max_speed`: bound on `|theta_dot|`, rad/s.
    - `max_torque`: bound on the action.
    - `frame_shape`: height and width of `render`'s pictures, in pixels.
    """

    gravity: Float[Array, ""] = eqx.field(default=10.0, converter=as_float_array)
    mass: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array)
    length: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array)
    dt: Float[Array, ""] = eqx.field(default=0.05, converter=as_float_array)
    max_speed: Float[Array, ""] = eqx.field(default=8.0, converter=as_float_array)
    max_torque: Float[Array, ""] = eqx.field(default=2.0, converter=as_float_array)
    frame_shape: tuple[int, int] = eqx.field(static=True, default=(160, 160))

    @property
    def observation_space(self) -> Box:
        high = jnp.stack([jnp.ones(()), jnp.ones(()), self.max_speed])
        return Box(-high, high, (3,))

    @property
    def action_space(self) -> Box:
        return Box(-self.max_torque, self.max_torque, (1,))

    def reset(self, key: PRNGKeyArray) -> tuple[PendulumState, TimeStep]:
        high = jnp.array([jnp.pi, 1.0], jnp.float32)
        state = PendulumState(*jax.random.uniform(key, (2,), jnp.float32, -high, high))
        return state, TimeStep.first(_observation(state))

    def step(
        self, state: PendulumState, action: Float[Array, "1"], key: PRNGKeyArray
    ) -> tuple[PendulumState, TimeStep]:
        del key
        torque = jnp.clip(action[0], -self.max_torque, self.max_torque)
        angle = (state.theta + jnp.pi) % (2 * jnp.pi) - jnp.pi
        cost = angle**2 + 0.1 * state.theta_dot**2 + 0.001 * torque**2
        angular_acc = (
            3 * self.gravity / (2 * self.length) * jnp.sin(state.theta) + 3.0 / (self.mass * self.length**2) * torque
        )
        theta_dot = jnp.clip(state.theta_dot + angular_acc * self.dt, -self.max_speed, self.max_speed)
        state = PendulumState(state.theta + theta_dot * self.dt, theta_dot)
        return state, TimeStep.transition(_observation(state), -cost, False)

    def render(self, state: PendulumState) -> UInt8[Array, "height width 3"]:
        height, width = self.frame_shape
        scale = min(height, width) / 4.4  # pixels per metre
        # Pixel offsets from the axle at the centre; the rod points along (ux, uy).
        dx = jnp.arange(width)[None, :] + 0.5 - width / 2
        dy = jnp.arange(height)[:, None] + 0.5 - height / 2
        ux, uy = -jnp.sin(state.theta), -jnp.cos(state.theta)
        along = jnp.clip(dx * ux + dy * uy, 0, self.length * scale)
        rod = (dx - along * ux) ** 2 + (dy - along * uy) ** 2 <= (0.1 * scale) ** 2
        axle = dx**2 + dy**2 <= (0.05 * scale) ** 2
        colour = jnp.select([axle, rod], [2, 1], 0)  # an index into _PALETTE
        return jnp.asarray(_PALETTE)[colour]


def _observation(state: PendulumState) -> Float[Array, "3"]:
    return jnp.stack([jnp.cos(state.theta), jnp.sin(state.theta), state.theta_dot])


def pendulum_v1(**kwargs: Any) -> TimeLimit[PendulumState]:
    """Gymnasium's `Pendulum-v1`: [`podrace.envs.Pendulum`][] truncated after 200 steps.

    **Arguments:**

    - `kwargs`: keyword arguments of [`podrace.envs.Pendulum`][] (physics, `frame_shape`).

    **Returns:**

    `TimeLimit(Pendulum(**kwargs), max_episode_steps=200)`.
    """
    return TimeLimit(Pendulum(**kwargs), max_episode_steps=200)
