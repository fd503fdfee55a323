"""Running statistics of observations, and the wrapper that normalises with fixed ones.

[`podrace.RunningNormalization`][] keeps these statistics in a pipeline's state and
updates them as it trains; [`podrace.envs.NormalizeObservation`][] normalises an
environment's observations with statistics taken from there, to evaluate, record or
deploy the trained agent as it was trained.

Observations with a legal-action mask ([`podrace.MaskedObservation`][]) are normalised
inside it: the mask passes through as it is and stays out of the statistics.
"""

import functools
from collections.abc import Callable
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray, UInt8

from .._types import AbstractSpace, Box, MaskedObservation, MaskedObservationSpace, TimeStep
from ._base import AbstractEnv, AbstractRenderableEnv, render


@final
class RunningStatistics(eqx.Module):
    """The running mean and variance of a stream of batches.

    Batches are merged with Chan et al.'s parallel update ("Updating formulae and a
    pairwise algorithm for computing sample variances", 1979), as Gymnasium's and
    OpenAI Baselines' `RunningMeanStd` merge them; like theirs, the statistics start
    from mean 0 and variance 1 with a weight of `1e-4` samples.

    **Arguments:**

    - `count`: the number of samples seen (plus the starting weight).
    - `mean`: their mean, per element.
    - `var`: their variance (over the number of samples), per element.
    """

    count: Float[Array, "*batch"]
    mean: Float[Array, "*shape"]
    var: Float[Array, "*shape"]

    @classmethod
    def initial(cls, shape: tuple[int, ...]) -> "RunningStatistics":
        """Statistics of nothing seen yet, for samples of `shape`."""
        return cls(jnp.asarray(1e-4, jnp.float32), jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32))

    def update(
        self, batch: Float[Array, " samples *shape"], mask: Bool[Array, " samples"], axis_name: str | None = None
    ) -> "RunningStatistics":
        """The statistics with the samples of `batch` where `mask` is set merged in.

        **Arguments:**

        - `batch`: samples along the leading axis.
        - `mask`: which samples count.
        - `axis_name`: inside `shard_map`, the device axis whose batches are merged too
            (every device then holds the same statistics).
        """
        batch = batch.astype(jnp.float32)
        weights = mask.astype(jnp.float32).reshape(mask.shape + (1,) * (batch.ndim - 1))
        count, total = jnp.sum(mask, dtype=jnp.float32), jnp.sum(weights * batch, axis=0)
        if axis_name is not None:
            count, total = jax.lax.psum((count, total), axis_name)
        batch_mean = total / jnp.maximum(count, 1.0)
        squares = jnp.sum(weights * jnp.square(batch - batch_mean[None]), axis=0)
        if axis_name is not None:
            squares = jax.lax.psum(squares, axis_name)
        new_count = self.count + count
        delta = batch_mean - self.mean
        mean = self.mean + delta * count / new_count
        var = (self.var * self.count + squares + jnp.square(delta) * self.count * count / new_count) / new_count
        return RunningStatistics(new_count, mean, var)

    def normalize(
        self, x: Float[Array, "*batch_shape"], *, clip: float | Array, epsilon: float
    ) -> Float[Array, "*batch_shape"]:
        """`(x - mean) / sqrt(var + epsilon)`, clipped to `[-clip, clip]` (`x` may have
        leading batch axes)."""
        mean, var = jnp.broadcast_to(self.mean, x.shape), jnp.broadcast_to(self.var, x.shape)
        return jnp.clip((x - mean) / jnp.sqrt(var + epsilon), -clip, clip)


@final
class NormalizeObservation(AbstractRenderableEnv):
    """Normalises observations with fixed running statistics.

    Statistics come from a pipeline that normalised them as it trained
    ([`podrace.Anakin.evaluation_env`][] builds this wrapper from its state); the
    wrapper itself never updates them.

    **Arguments:**

    - `env`: the environment, with a `Box` observation space (or a
        [`podrace.MaskedObservationSpace`][] of one, whose masks pass through).
    - `statistics`: the observations' statistics.
    - `clip`: the normalised observations are clipped to `[-clip, clip]`.
    - `epsilon`: added to the variance.
    """

    env: AbstractEnv
    statistics: RunningStatistics
    clip: float | Array = 10.0
    epsilon: float = eqx.field(static=True, default=1e-8)

    def __check_init__(self):
        check_normalizable(self.env)

    @property
    def observation_space(self) -> Box | MaskedObservationSpace:
        space = self.env.observation_space
        if isinstance(space, MaskedObservationSpace):
            return MaskedObservationSpace(self._normalized_space(space.observation), space.action)
        return self._normalized_space(space)

    @property
    def action_space(self) -> AbstractSpace:
        return self.env.action_space

    def reset(self, key: PRNGKeyArray):
        env_state, timestep = self.env.reset(key)
        return env_state, self._normalized(timestep)

    def step(self, state, action: Array, key: PRNGKeyArray):
        env_state, timestep = self.env.step(state, action, key)
        return env_state, self._normalized(timestep)

    def render(self, state) -> UInt8[Array, "height width 3"]:
        return render(self.env, state)

    def normalize(self, observation: Array | MaskedObservation) -> Array | MaskedObservation:
        """`observation` normalised with the fixed statistics (the observation inside a
        [`podrace.MaskedObservation`][], whose mask stays as it is)."""
        normalize = functools.partial(self.statistics.normalize, clip=self.clip, epsilon=self.epsilon)
        return map_observation(normalize, observation)

    def _normalized_space(self, space: AbstractSpace) -> Box:
        assert isinstance(space, Box)
        return Box(-self.clip, self.clip, space.shape, jnp.float32)

    def _normalized(self, timestep: TimeStep) -> TimeStep:
        return eqx.tree_at(lambda t: t.observation, timestep, self.normalize(timestep.observation))


def map_observation(fn: Callable[[Array], Array], observation: Array | MaskedObservation) -> Array | MaskedObservation:
    """`fn` applied to an observation array, or to the array inside a
    [`podrace.MaskedObservation`][], whose legal-action mask passes through as it is:
    how observation normalisation changes an observation.

    **Arguments:**

    - `fn`: maps an observation array (or a batch of them) to another.
    - `observation`: an array, or a masked one (batched alike).

    **Returns:**

    `fn(observation)`, or the masked observation with `fn` of its array and its mask.
    """
    if isinstance(observation, MaskedObservation):
        return MaskedObservation(fn(observation.observation), observation.action_mask)
    return fn(observation)


def check_normalizable(env: AbstractEnv) -> None:
    """Refuses an environment whose observations are not one array (a `Box`, or a
    `MaskedObservationSpace` of one)."""
    space = env.observation_space
    inner = space.observation if isinstance(space, MaskedObservationSpace) else space
    if not isinstance(inner, Box):
        raise ValueError(
            f"Observation normalisation needs one array of observations (a Box space, with or without a legal-action "
            f"mask); {type(env).__name__} observes {type(inner).__name__}. Normalise inside the network instead, or "
            "leave observations as they are."
        )
