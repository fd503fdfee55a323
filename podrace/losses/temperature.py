"""The entropy temperature's objective of Soft Actor-Critic."""

from typing import Literal, final

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ..results import LossTerms
from .actor_critic_base import AbstractTemperatureLoss


@final
class TemperatureLoss(AbstractTemperatureLoss):
    """Automatic entropy tuning: the temperature minimises
    `multiplier * (entropy - target_entropy)`, so alpha falls while the policy is more
    random than `target_entropy` and rises while it is less.

    The multiplier is log alpha (`"log_temperature"`, Stable-Baselines3's SAC) or alpha
    itself (`"temperature"`: the paper's eq. 18, as CleanRL's and rejax's SAC write it).
    Both learn log alpha and agree on the sign of its gradient; with `"temperature"`
    the gradient is alpha times as large.

    Reference: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018,
    eq. 18 (with the batch's entropy estimate).

    **Arguments:**

    - `target_entropy`: the entropy the policy is steered to (SAC's learners default it
        to minus the action size, or to `0.98 log(num_actions)` for discrete actions).
    - `multiplier`: `"log_temperature"` or `"temperature"`, the factor on the entropy's
        distance to its target.
    """

    target_entropy: Float[Array, ""]
    multiplier: Literal["log_temperature", "temperature"] = eqx.field(static=True)

    def __init__(
        self, *, target_entropy: ArrayLike, multiplier: Literal["log_temperature", "temperature"] = "log_temperature"
    ):
        if multiplier not in ("log_temperature", "temperature"):
            raise ValueError(
                f"TemperatureLoss: multiplier must be 'log_temperature' or 'temperature', got {multiplier!r}."
            )
        self.target_entropy = jnp.asarray(target_entropy, jnp.float32)
        self.multiplier = multiplier

    def __call__(
        self, log_temperature: Float[Array, ""], entropy: Float[Array, ""]
    ) -> tuple[Float[Array, ""], LossTerms]:
        temperature = jnp.exp(log_temperature)
        factor = temperature if self.multiplier == "temperature" else log_temperature
        loss = factor * (entropy - self.target_entropy)
        return loss, {"temperature": loss, "alpha": temperature}
