"""Running normalisation of observations and rewards, with its statistics in the pipeline's state.

Continuous control is commonly trained on normalised observations and rewards: Brax's
PPO normalises observations, and CleanRL's continuous PPO (after OpenAI Baselines'
`VecNormalize`) normalises both. An environment alone cannot: its statistics are those
of the whole batch, on every device. So the pipeline keeps them, beside its
environments: they are checkpointed and resumed with them, every device merges the
same batch statistics, and evaluations normalise with them, frozen.
"""

import functools
from typing import Literal, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._types import TimeStep
from ..envs import AbstractEnv
from ..envs.normalization import NormalizeObservation, RunningStatistics, check_normalizable, map_observation
from ..networks import split_action_mask


REPLAYED_OBSERVATIONS = ("raw", "normalized")


@final
class NormalizationState(eqx.Module):
    """The statistics of one environment's copy (the same in every environment of a batch).

    **Arguments:**

    - `observations`: of every observation seen (`None` when they are not normalised).
    - `returns`: of the discounted returns, the rewards' scale (`None` when rewards are
        not normalised).
    - `discounted_return`: this environment's discounted sum of rewards so far in its
        episode.
    """

    observations: RunningStatistics | None
    returns: RunningStatistics | None
    discounted_return: Float[Array, "*batch"]


@final
class RunningNormalization(eqx.Module):
    """Normalises a pipeline's observations and rewards with running statistics.

    At every step the batch's observations (of every device) join the running mean and
    variance, and each observation becomes `(o - mean) / sqrt(var + epsilon)`, clipped
    to `[-clip, clip]`. Each environment's discounted return `G = discount * G + r` (0
    again after an episode ends) joins the statistics of returns, and each reward becomes
    `r / sqrt(var_G + epsilon)`, clipped likewise. This is Gymnasium's
    `NormalizeObservation` and OpenAI Baselines' `VecNormalize`, as CleanRL's continuous
    PPO uses them, with the batch and devices merged. A reset's time step joins the
    observations' statistics but not the returns' (it has no reward). A legal-action mask
    ([`podrace.MaskedObservation`][]) passes through as it is, outside the statistics.

    The learner sees the normalised time steps; the pipeline's episode returns stay those
    of the environment's own rewards, and evaluations play with observations normalised
    by the statistics reached, frozen ([`podrace.envs.NormalizeObservation`][]).

    A replay learner ([`podrace.learners.AbstractReplayLearner`][]: DQN, TD3, SAC) keeps
    raw observations in its buffer by default and normalises each sampled batch with the
    statistics of the moment, as Stable-Baselines3's `VecNormalize` and rejax do: a
    buffer of observations normalised as they were collected mixes the coordinates of
    every moment of the statistics' drift. At rejax's SAC settings on Pendulum-v1, SAC
    reached a mean return of -200 after 2,000 to 3,000 environment steps this way
    (median 2,000), and after 2,000 to 19,000 (median 13,000) with observations
    normalised as collected (seeds 0-9, `benchmarks/sac_candidates.py`).

    **Arguments:**

    - `observations`: whether to normalise observations (one array, a `Box` space, or a
        [`podrace.MaskedObservationSpace`][] of one).
    - `rewards`: whether to normalise rewards.
    - `discount`: the discount of the returns whose scale normalises rewards (use the
        learner's).
    - `clip`: normalised values are clipped to `[-clip, clip]`.
    - `epsilon`: added to variances.
    - `replayed_observations`: what a replay learner's buffer keeps: `"raw"`
        observations, each sampled batch normalised with the current statistics, or
        observations `"normalized"` as they were collected.
    """

    observations: bool = eqx.field(static=True, default=True)
    rewards: bool = eqx.field(static=True, default=True)
    discount: float | Array = 0.99
    clip: float | Array = 10.0
    epsilon: float = eqx.field(static=True, default=1e-8)
    replayed_observations: Literal["raw", "normalized"] = eqx.field(static=True, default="raw")

    def __check_init__(self):
        if not (self.observations or self.rewards):
            raise ValueError("RunningNormalization: normalise observations, rewards or both (both are False).")
        if self.replayed_observations not in REPLAYED_OBSERVATIONS:
            raise ValueError(
                f"RunningNormalization: replayed_observations must be one of {', '.join(REPLAYED_OBSERVATIONS)}, "
                f"got {self.replayed_observations!r}."
            )

    def check_fits(self, env: AbstractEnv) -> None:
        """Refuses an environment whose observations cannot be normalised."""
        if self.observations:
            check_normalizable(env)

    def init(self, timestep: TimeStep) -> tuple[NormalizationState, TimeStep]:
        """The statistics of a batch's first time steps, and those time steps normalised.

        **Arguments:**

        - `timestep`: the first time steps of the whole batch (every device's).

        **Returns:**

        One copy of the statistics per environment (leading batch axis) and the
        normalised time steps.
        """
        batch_size = timestep.reward.shape[0]
        observations = returns = None
        if self.observations:
            observations = RunningStatistics.initial(split_action_mask(timestep.observation)[0].shape[1:])
        if self.rewards:
            returns = RunningStatistics.initial(())
        state = NormalizationState(observations, returns, jnp.zeros((), jnp.float32))
        state = jax.tree.map(lambda x: jnp.broadcast_to(x, (batch_size, *x.shape)), state)
        return self.step(state, timestep)

    def step(
        self, state: NormalizationState, timestep: TimeStep, axis_name: str | None = None
    ) -> tuple[NormalizationState, TimeStep]:
        """Merges a batch's new time steps into the statistics and normalises them.

        **Arguments:**

        - `state`: the batch's copies of the statistics.
        - `timestep`: the batch's new time steps.
        - `axis_name`: inside `shard_map`, the device axis the batch is split over.

        **Returns:**

        The updated copies and the normalised time steps.
        """
        batch_size = timestep.reward.shape[0]
        shared = jax.tree.map(lambda x: x[0], (state.observations, state.returns))
        observations, returns = shared
        discounted_return = state.discounted_return
        if observations is not None:
            batch = split_action_mask(timestep.observation)[0]
            observations = observations.update(batch, jnp.ones(batch_size, bool), axis_name)
            normalize = functools.partial(observations.normalize, clip=self.clip, epsilon=self.epsilon)
            observation = map_observation(normalize, timestep.observation)
            timestep = eqx.tree_at(lambda t: t.observation, timestep, observation)
        if returns is not None:
            discounted_return = self.discount * discounted_return + timestep.reward
            returns = returns.update(discounted_return, ~timestep.is_first, axis_name)
            reward = jnp.clip(timestep.reward / jnp.sqrt(returns.var + self.epsilon), -self.clip, self.clip)
            timestep = eqx.tree_at(lambda t: t.reward, timestep, reward.astype(timestep.reward.dtype))
            discounted_return = jnp.where(timestep.is_last, 0.0, discounted_return)
        observations, returns = jax.tree.map(
            lambda x: jnp.broadcast_to(x, (batch_size, *x.shape)), (observations, returns)
        )
        return NormalizationState(observations, returns, discounted_return), timestep

    def frozen(self, env: AbstractEnv, state: NormalizationState) -> NormalizeObservation:
        """`env` with its observations normalised by the observations' statistics of `state`,
        frozen: where evaluations play, and whose `normalize` a replay learner applies to
        each batch of raw observations it samples.

        **Arguments:**

        - `env`: the environment, without the pipeline's auto-reset.
        - `state`: the batch's copies of the statistics (of a normalisation of observations).
        """
        statistics = self.observation_statistics(state)
        if statistics is None:
            raise ValueError("RunningNormalization.frozen: this normalisation leaves observations as they are.")
        return NormalizeObservation(env, statistics, clip=self.clip, epsilon=self.epsilon)

    def observation_statistics(self, state: NormalizationState) -> RunningStatistics | None:
        """The observations' statistics of a batch's copies (`None` when not normalised)."""
        return None if state.observations is None else jax.tree.map(lambda x: x[0], state.observations)
