import math
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, UInt8

from .._types import Box, Discrete, TimeStep
from .._validation import as_float_array
from ._base import AbstractRenderableEnv
from .wrappers import TimeLimit


# Colours of `CartPole.render`: background, track and cart, pole, axle (Gymnasium's).
_PALETTE = np.array([[255, 255, 255], [0, 0, 0], [202, 152, 101], [129, 132, 203]], np.uint8)


@final
class CartPoleState(eqx.Module):
    """The cart's position and velocity and the pole's angle and angular velocity.

    **Arguments:**

    - `x`, `x_dot`: cart position (m) and velocity (m/s).
    - `theta`, `theta_dot`: pole angle from upright (rad) and angular velocity (rad/s).
    """

    x: Float[Array, ""]
    x_dot: Float[Array, ""]
    theta: Float[Array, ""]
    theta_dot: Float[Array, ""]


@final
class CartPole(AbstractRenderableEnv[CartPoleState]):
    """Balance a pole on a cart by pushing the cart left or right (actions 0 and 1).

    The dynamics, the explicit Euler integration, the termination thresholds, the
    reward of 1 on every step (the terminating one included) and the uniform
    `[-0.05, 0.05]` initial state are those of Gymnasium's `CartPole-v1`; the time
    limit is not part of the dynamics: [`podrace.envs.cartpole_v1`][] adds the
    500-step truncation. The observation is `(x, x_dot, theta, theta_dot)`.

    The physical constants are array leaves, so a batch of carts with, say,
    different pole lengths is one `eqx.filter_vmap` over the constructor.

    `render` draws the cart on its track and the pole as Gymnasium does, in
    `frame_shape` pixels whose width spans `[-max_position - 0.5, max_position + 0.5]`.

    Reference: Barto, Sutton & Anderson, "Neuronlike adaptive elements that can solve
    difficult learning control problems", IEEE SMC 1983.

    **Arguments:**

    - `gravity`: m/s^2.
    - `cart_mass`, `pole_mass`: kg.
    - `pole_half_length`: half the pole's length, m.
    - `force`: magnitude of a push, N.
    - `dt`: seconds per step.
    - `max_angle`: the episode terminates when `|theta|` exceeds it (rad).
    - `max_position`: the episode terminates when `|x|` exceeds it (m).
    - `frame_shape`: height and width of `render`'s pictures, in pixels.
    """

    gravity: Float[Array, ""] = eqx.field(default=9.8, converter=as_float_array)
    cart_mass: Float[Array, ""] = eqx.field(default=1.0, converter=as_float_array)
    pole_mass: Float[Array, ""] = eqx.field(default=0.1, converter=as_float_array)
    pole_half_length: Float[Array, ""] = eqx.field(default=0.5, converter=as_float_array)
    force: Float[Array, ""] = eqx.field(default=10.0, converter=as_float_array)
    dt: Float[Array, ""] = eqx.field(default=0.02, converter=as_float_array)
    max_angle: Float[Array, ""] = eqx.field(default=12 * 2 * math.pi / 360, converter=as_float_array)
    max_position: Float[Array, ""] = eqx.field(default=2.4, converter=as_float_array)
    frame_shape: tuple[int, int] = eqx.field(static=True, default=(160, 240))

    @property
    def observation_space(self) -> Box:
        inf = jnp.inf
        return Box(
            jnp.stack([-2 * self.max_position, -inf, -2 * self.max_angle, -inf]),
            jnp.stack([2 * self.max_position, inf, 2 * self.max_angle, inf]),
            (4,),
        )

    @property
    def action_space(self) -> Discrete:
        return Discrete(2)

    def reset(self, key: PRNGKeyArray) -> tuple[CartPoleState, TimeStep]:
        state = CartPoleState(*jax.random.uniform(key, (4,), jnp.float32, -0.05, 0.05))
        return state, TimeStep.first(_observation(state))

    def step(self, state: CartPoleState, action: Array, key: PRNGKeyArray) -> tuple[CartPoleState, TimeStep]:
        del key
        force = jnp.where(action == 1, self.force, -self.force)
        cos, sin = jnp.cos(state.theta), jnp.sin(state.theta)
        total_mass = self.cart_mass + self.pole_mass
        pole_mass_length = self.pole_mass * self.pole_half_length
        temp = (force + pole_mass_length * state.theta_dot**2 * sin) / total_mass
        theta_acc = (self.gravity * sin - cos * temp) / (
            self.pole_half_length * (4.0 / 3.0 - self.pole_mass * cos**2 / total_mass)
        )
        x_acc = temp - pole_mass_length * theta_acc * cos / total_mass
        state = CartPoleState(
            x=state.x + self.dt * state.x_dot,
            x_dot=state.x_dot + self.dt * x_acc,
            theta=state.theta + self.dt * state.theta_dot,
            theta_dot=state.theta_dot + self.dt * theta_acc,
        )
        terminated = (jnp.abs(state.x) > self.max_position) | (jnp.abs(state.theta) > self.max_angle)
        return state, TimeStep.transition(_observation(state), 1.0, terminated)

    def render(self, state: CartPoleState) -> UInt8[Array, "height width 3"]:
        height, width = self.frame_shape
        scale = width / (2 * self.max_position + 1.0)  # pixels per metre
        rows = jnp.arange(height)[:, None] + 0.5
        columns = jnp.arange(width)[None, :] + 0.5
        track_row = 0.75 * height
        cart_column = width / 2 + state.x * scale
        rail = jnp.abs(rows - track_row) <= 0.5
        cart = (jnp.abs(columns - cart_column) <= 0.2 * scale) & (jnp.abs(rows - track_row) <= 0.12 * scale)
        # Pixel offsets from the axle, along the pole (upright at theta = 0) and across it.
        dx, dy = columns - cart_column, rows - (track_row - 0.06 * scale)
        along = dx * jnp.sin(state.theta) - dy * jnp.cos(state.theta)
        across = dx * jnp.cos(state.theta) + dy * jnp.sin(state.theta)
        pole = (along >= 0) & (along <= 2 * self.pole_half_length * scale) & (jnp.abs(across) <= 0.04 * scale)
        axle = dx**2 + dy**2 <= (0.04 * scale) ** 2
        colour = jnp.select([axle, pole, cart | rail], [3, 2, 1], 0)  # an index into _PALETTE
        return jnp.asarray(_PALETTE)[colour]


def _observation(state: CartPoleState) -> Float[Array, "4"]:
    return jnp.stack([state.x, state.x_dot, state.theta, state.theta_dot])


def cartpole_v1(**kwargs: Any) -> TimeLimit[CartPoleState]:
    """Gymnasium's `CartPole-v1`: [`podrace.envs.CartPole`][] truncated after 500 steps.

    **Arguments:**

    - `kwargs`: keyword arguments of [`podrace.envs.CartPole`][] (physics, `frame_shape`).

    **Returns:**

    `TimeLimit(CartPole(**kwargs), max_episode_steps=500)`.
    """
    return TimeLimit(CartPole(**kwargs), max_episode_steps=500)
