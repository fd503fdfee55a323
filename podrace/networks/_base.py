import abc
from typing import Generic, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, PyTree

from .._types import AbstractNetworkOutput


OutputT = TypeVar("OutputT", bound=AbstractNetworkOutput)


class AbstractNetwork(eqx.Module, Generic[OutputT]):
    """Maps one observation and a recurrent carry to an output and the next carry.

    Feed-forward networks have an empty carry; recurrent ones reset theirs to
    `initial_carry()` wherever a time step has `is_first` set (done by `unroll` and
    by the rollout), so rollouts, learners and losses are the same for both.
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

    @property
    @abc.abstractmethod
    def reads_previous_action_reward(self) -> bool:
        """Whether the network reads [`podrace.ObservationActionReward`][] observations (the
        previous action and reward beside the observation; see
        [`podrace.envs.PreviousActionReward`][])."""

    @abc.abstractmethod
    def __call__(self, observation: PyTree[Array], carry: PyTree[Array]) -> tuple[OutputT, PyTree[Array]]:
        """Applies the network to one (unbatched) observation.

        **Arguments:**

        - `observation`: one observation.
        - `carry`: the recurrent state (`()` for feed-forward networks).

        **Returns:**

        The output and the next carry.
        """

    @abc.abstractmethod
    def initial_carry(self) -> PyTree[Array]:
        """The recurrent state at the start of an episode (`()` if there is none)."""

    def reset_carry(self, carry: PyTree[Array], is_first: Bool[Array, ""]) -> PyTree[Array]:
        """The carry of one environment, reset to `initial_carry()` if `is_first`.

        The one place where a carry is reset: unrolls, rollouts and host collectors
        all call it before applying the network to a time step.
        """
        return jax.tree.map(lambda initial, c: jnp.where(is_first, initial, c), self.initial_carry(), carry)

    @abc.abstractmethod
    def unroll(
        self, observations: PyTree[Array], carry: PyTree[Array], is_first: Bool[Array, " T"]
    ) -> tuple[OutputT, PyTree[Array]]:
        """Applies the network along a sequence, resetting the carry where `is_first`.

        The losses learn through it and the rollout acts through `__call__`: both must
        give the same outputs from the same carry. [`podrace.networks.unroll_step_by_step`][]
        is this for any network; a network with a faster way over a whole sequence
        implements that instead.

        **Arguments:**

        - `observations`: observations with a leading time axis `T`.
        - `carry`: the carry before the first observation.
        - `is_first`: where episodes start.

        **Returns:**

        Outputs with a leading time axis, and the carry after the last observation.
        """


def unroll_step_by_step(
    network: AbstractNetwork[OutputT], observations: PyTree[Array], carry: PyTree[Array], is_first: Bool[Array, " T"]
) -> tuple[OutputT, PyTree[Array]]:
    """`network.unroll` as a `lax.scan` of `network(...)`, with `reset_carry` before each step.

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
