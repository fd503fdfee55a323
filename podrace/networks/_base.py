import abc
from typing import Generic, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, PyTree

from .._types import AbstractMaskableOutput, AbstractNetworkOutput, MaskedObservation, ObservationActionReward


OutputT = TypeVar("OutputT", bound=AbstractNetworkOutput)


class AbstractNetwork(eqx.Module, Generic[OutputT]):
    """Maps one observation and a recurrent carry to an output and the next carry.

    A network is defined by its `output_type`, its `num_actions` and its `__call__`: a
    subclass implements those three and has the rest. Such a network has no memory (its
    carry is `()`), reads plain observations, and unrolls a sequence as a `vmap` of
    `__call__`. A network that does more opts into it by also subclassing a base of its
    own:

    - [`podrace.networks.AbstractRecurrentNetwork`][]: a carry kept from step to step,
        which starts each episode as its `initial_state()`.
    - [`podrace.networks.AbstractSequenceNetwork`][]: its own `unroll_sequence`, faster
        over a whole sequence than one step at a time.
    - [`podrace.networks.AbstractActionRewardNetwork`][]: reads the previous action and
        reward beside the observation when its `previous_action_reward` is set.

    A network for an environment that marks its legal actions
    ([`podrace.MaskedObservation`][]) reads the observation without the mask and applies
    the mask to its output: [`podrace.networks.split_action_mask`][] and
    [`podrace.networks.apply_action_mask`][], as podrace's networks do.

    Callers use `initial_carry`, `reset_carry`, `unroll` and
    `reads_previous_action_reward`, which follow from these. A recurrent network's carry
    is reset to `initial_carry()` wherever a time step has `is_first` set (by `unroll` and
    by the rollout), so rollouts, learners and losses are the same for every network.
    """

    @property
    @abc.abstractmethod
    def output_type(self) -> type[AbstractNetworkOutput]:
        """The type of output the network emits (read by policies and losses)."""

    @property
    @abc.abstractmethod
    def num_actions(self) -> int:
        """The head's size per action: the number of discrete actions it scores, or the
        dimension of the continuous action vector it parameterises."""

    @abc.abstractmethod
    def __call__(self, observation: PyTree[Array], carry: PyTree[Array]) -> tuple[OutputT, PyTree[Array]]:
        """Applies the network to one (unbatched) observation.

        **Arguments:**

        - `observation`: one observation.
        - `carry`: the recurrent state (`()` for a network without one).

        **Returns:**

        The output and the next carry.
        """

    @property
    def reads_previous_action_reward(self) -> bool:
        """Whether the network reads [`podrace.ObservationActionReward`][] observations (the
        previous action and reward beside the observation; see
        [`podrace.envs.PreviousActionReward`][]): the `previous_action_reward` of an
        [`podrace.networks.AbstractActionRewardNetwork`][], false for any other network."""
        return isinstance(self, AbstractActionRewardNetwork) and self.previous_action_reward

    def initial_carry(self) -> PyTree[Array]:
        """The recurrent state at the start of an episode: the `initial_state()` of an
        [`podrace.networks.AbstractRecurrentNetwork`][], `()` for any other network."""
        if isinstance(self, AbstractRecurrentNetwork):
            return self.initial_state()
        return ()

    def reset_carry(self, carry: PyTree[Array], is_first: Bool[Array, ""]) -> PyTree[Array]:
        """The carry of one environment, reset to `initial_carry()` if `is_first`.

        The one place where a carry is reset: unrolls, rollouts and host collectors
        all call it before applying the network to a time step.
        """
        return jax.tree.map(lambda initial, c: jnp.where(is_first, initial, c), self.initial_carry(), carry)

    def unroll(
        self, observations: PyTree[Array], carry: PyTree[Array], is_first: Bool[Array, " T"]
    ) -> tuple[OutputT, PyTree[Array]]:
        """Applies the network along a sequence, resetting the carry where `is_first`.

        The losses learn through it and the rollout acts through `__call__`, which give
        the same outputs from the same carry: the `unroll_sequence` of an
        [`podrace.networks.AbstractSequenceNetwork`][];
        [`podrace.networks.unroll_step_by_step`][] for any other
        [`podrace.networks.AbstractRecurrentNetwork`][]; a `vmap` of `__call__` over time
        for a network without a carry.

        **Arguments:**

        - `observations`: observations with a leading time axis `T`.
        - `carry`: the carry before the first observation.
        - `is_first`: where episodes start.

        **Returns:**

        Outputs with a leading time axis, and the carry after the last observation.
        """
        if isinstance(self, AbstractSequenceNetwork):
            return self.unroll_sequence(observations, carry, is_first)
        if isinstance(self, AbstractRecurrentNetwork):
            return unroll_step_by_step(self, observations, carry, is_first)
        return jax.vmap(lambda observation: self(observation, carry)[0])(observations), carry


class AbstractRecurrentNetwork(AbstractNetwork[OutputT], Generic[OutputT]):
    """A network with memory: a carry kept from one step to the next.

    A subclass implements `initial_state` beside what defines every
    [`podrace.networks.AbstractNetwork`][]; `initial_carry()` returns it, and the carry is
    reset to it where an episode starts. It unrolls step by step
    ([`podrace.networks.unroll_step_by_step`][]) unless it is also an
    [`podrace.networks.AbstractSequenceNetwork`][].
    """

    @abc.abstractmethod
    def initial_state(self) -> PyTree[Array]:
        """The carry at the start of an episode (any pytree of arrays)."""


class AbstractSequenceNetwork(AbstractNetwork[OutputT], Generic[OutputT]):
    """A network with a faster way over a whole sequence than one step at a time
    (attention over the time axis, a parallel scan of a linear recurrence, a torso and
    a head applied to every time step at once).

    A subclass implements `unroll_sequence`, which `unroll` calls.
    """

    @abc.abstractmethod
    def unroll_sequence(
        self, observations: PyTree[Array], carry: PyTree[Array], is_first: Bool[Array, " T"]
    ) -> tuple[OutputT, PyTree[Array]]:
        """[`podrace.networks.AbstractNetwork.unroll`][] computed over the whole sequence.

        It applies the resets at `is_first` itself (`reset_carry`), and gives the outputs
        that `__call__` gives one step at a time from the same carry (otherwise PPO's and
        A2C's importance ratios are off before any update).

        **Arguments:**

        - `observations`: observations with a leading time axis `T`.
        - `carry`: the carry before the first observation.
        - `is_first`: where episodes start.

        **Returns:**

        Outputs with a leading time axis, and the carry after the last observation.
        """


class AbstractActionRewardNetwork(AbstractNetwork[OutputT], Generic[OutputT]):
    """A network that may read the previous action and reward beside the observation
    ([`podrace.ObservationActionReward`][], from [`podrace.envs.PreviousActionReward`][]).

    **Attributes:**

    - `previous_action_reward`: whether it reads them (`reads_previous_action_reward`).
    """

    previous_action_reward: eqx.AbstractVar[bool]


def unroll_step_by_step(
    network: AbstractNetwork[OutputT], observations: PyTree[Array], carry: PyTree[Array], is_first: Bool[Array, " T"]
) -> tuple[OutputT, PyTree[Array]]:
    """`network.unroll` as a `lax.scan` of `network(...)`, with `reset_carry` before each step.

    What a recurrent network without an `unroll_sequence` of its own unrolls by.

    **Arguments:**

    - `network`: the network.
    - `observations`: observations with a leading time axis `T`.
    - `carry`: the carry before the first observation.
    - `is_first`: where episodes start.

    **Returns:**

    Outputs with a leading time axis, and the carry after the last observation.
    """

    def step(carry, inputs):
        observation, first = inputs
        output, carry = network(observation, network.reset_carry(carry, first))
        return carry, output

    carry, outputs = jax.lax.scan(step, carry, (observations, is_first))
    return outputs, carry


def split_action_mask(observation: PyTree[Array]) -> tuple[PyTree[Array], Bool[Array, "*batch num_actions"] | None]:
    """An observation without its legal-action mask, and the mask: what a network reads
    first, so that its torso sees the observation alone.

    The mask is that of a [`podrace.MaskedObservation`][], also one inside an
    [`podrace.ObservationActionReward`][] (a masked environment in
    [`podrace.envs.PreviousActionReward`][]). Batches of observations split alike.

    **Arguments:**

    - `observation`: one observation, or a batch of them.

    **Returns:**

    The observation without the mask (of the same type otherwise), and the mask, or
    `None` for an observation without one.
    """
    if isinstance(observation, MaskedObservation):
        return observation.observation, observation.action_mask
    if isinstance(observation, ObservationActionReward) and isinstance(observation.observation, MaskedObservation):
        inner = observation.observation
        return ObservationActionReward(inner.observation, observation.action, observation.reward), inner.action_mask
    return observation, None


def apply_action_mask(output: OutputT, action_mask: Bool[Array, " num_actions"] | None) -> OutputT:
    """A network's output for one observation with the observation's legal-action mask
    applied (`output.with_action_mask`), or `output` itself without a mask.

    **Arguments:**

    - `output`: the network's (unbatched) output.
    - `action_mask`: the mask that [`podrace.networks.split_action_mask`][] gave, or `None`.

    **Returns:**

    The output, leaving the illegal actions out.

    **Raises:**

    `ValueError` if the observation has a mask but the output cannot apply it (it is not a
    [`podrace.AbstractMaskableOutput`][]).
    """
    if action_mask is None:
        return output
    if not isinstance(output, AbstractMaskableOutput):
        raise ValueError(
            f"The environment marks its legal actions, but the network's head emits {type(output).__name__}, "
            "which cannot leave illegal actions out; give the network a discrete-action head (QValueHead, "
            "CategoricalQHead, QuantileQHead or PolicyLogitHead)."
        )
    return output.with_action_mask(action_mask)  # pyright: ignore[reportReturnType]
