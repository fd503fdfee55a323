"""Craftax and Craftax-Classic (open-ended survival and crafting) as podrace environments."""

import functools
import importlib
from typing import Any, final

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray, UInt8

from .._types import AbstractSpace, TimeStep
from .._validation import unknown_name
from ._base import AbstractRenderableEnv
from ._packages import default_numpy_rules, import_package
from .from_gymnax import GymnaxEnv


CRAFTAX_IDS = ("Craftax-Classic-Pixels-v1", "Craftax-Classic-Symbolic-v1", "Craftax-Pixels-v1", "Craftax-Symbolic-v1")
"""Craftax's environments (without automatic reset: podrace's resets)."""

# Pixels of one block in `render`: Craftax's size for images.
_BLOCK_PIXELS = 16


def _import_craftax_env() -> Any:
    return import_package("craftax.craftax_env", extra="craftax", owner="CraftaxEnv")


def craftax_ids() -> list[str]:
    """Craftax's environments (an `ImportError` naming the pip command if it is missing)."""
    _import_craftax_env()
    return list(CRAFTAX_IDS)


@functools.cache
def _renderer(classic: bool) -> Any:
    """Craftax's JAX renderer of states as pictures; its textures load once, as arrays
    even when first asked for inside a traced function."""
    with jax.ensure_compile_time_eval():
        module = importlib.import_module(f"craftax.{'craftax_classic' if classic else 'craftax'}.renderer")
        return module.make_craftax_pixel_renderer(_BLOCK_PIXELS)


@functools.cache
def _gymnax_env(env_id: str) -> GymnaxEnv:
    """One adapter per id: the Craftax environment inside is static and hashed by
    identity, so sharing it shares compiled programs."""
    return GymnaxEnv(_import_craftax_env().make_craftax_env_from_name(env_id, auto_reset=False))


@final
class CraftaxEnv(AbstractRenderableEnv[Any]):
    """A Craftax environment as a podrace environment.

    Craftax's environments are gymnax environments of the old API (one `done` from
    `step_env`), stepped here through [`podrace.envs.GymnaxEnv`][], which makes their
    parameters array leaves (`max_timesteps`, `day_length`, ...), so a batch of
    differently parameterised environments is one `eqx.filter_vmap`.

    **Terminated or truncated.** Craftax's `done` joins the natural ends (death, lava
    in Classic, the final boss beaten in Craftax) with the time limit
    (`state.timestep >= params.max_timesteps`: 10,000 steps in Classic, 100,000 in
    Craftax). The adapter asks Craftax's own `is_terminal` again with the time limit
    lifted: a `done` that it confirms is a termination (discount 0), the others are
    truncations (discount 1).

    **Resets.** A reset generates a world (13 times a step's time); under `vmap` every
    environment computes one on every step unless the batch is wrapped in
    `AutoReset(env, resets_per_step=K)`, which computes `K`.

    **Observations and rendering.** Symbolic environments observe a `float32` vector in
    `[0, 1]`, Pixels ones an image; `render` draws the agent's view with Craftax's
    textures, in JAX.

    Reference: Matthews et al., "Craftax: A Lightning-Fast Benchmark for Open-Ended
    Reinforcement Learning", 2024, https://github.com/MichaelTMatthews/Craftax.

    **Arguments:**

    - `env_id`: one of `CRAFTAX_IDS`, e.g. `"Craftax-Classic-Symbolic-v1"`.
    """

    gymnax: GymnaxEnv
    classic: bool = eqx.field(static=True)

    def __init__(self, env_id: str):
        if env_id not in craftax_ids():
            raise ValueError(unknown_name("craftax environment", env_id, CRAFTAX_IDS))
        self.gymnax = _gymnax_env(env_id)
        self.classic = "Classic" in env_id

    @property
    def observation_space(self) -> AbstractSpace:
        return self.gymnax.observation_space

    @property
    def action_space(self) -> AbstractSpace:
        return self.gymnax.action_space

    def reset(self, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        return self.gymnax.reset(key)

    def step(self, state: Any, action: Array, key: PRNGKeyArray) -> tuple[Any, TimeStep]:
        state, timestep = self.gymnax.step(state, action, key)
        unlimited = self.gymnax.env_params.replace(max_timesteps=np.iinfo(np.int32).max)
        with default_numpy_rules():
            natural = jnp.asarray(self.gymnax.env.is_terminal(state, unlimited), bool)
        done = timestep.terminated
        return state, TimeStep.transition(timestep.observation, timestep.reward, done & natural, done & ~natural)

    def render(self, state: Any) -> UInt8[Array, "height width 3"]:
        with default_numpy_rules():
            pixels = _renderer(self.classic)(state)
        return jnp.clip(jnp.round(pixels), 0, 255).astype(jnp.uint8)
