"""Recurrent networks: a torso, a recurrent core and a head (torso -> core -> head)."""

import abc
import functools
from typing import Generic, TypeVar, final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray, PyTree

from .._types import AbstractNetworkOutput, ObservationActionReward
from .._validation import check_positive_int
from ._base import (
    AbstractActionRewardNetwork,
    AbstractRecurrentNetwork,
    AbstractSequenceNetwork,
    apply_action_mask,
    split_action_mask,
)
from ._layers import init_layers
from .heads import AbstractHead
from .torsos import AbstractTorso


OutputT = TypeVar("OutputT", bound=AbstractNetworkOutput)


class AbstractCore(eqx.Module):
    """A recurrent cell: maps a feature vector and a carry to features and the next carry.

    [`podrace.networks.RecurrentNetwork`][] takes any core and checks only `input_size`
    and `output_size`. To add one, subclass this, set both sizes at construction and
    implement `initial_carry` and `__call__`.

    **Attributes:**

    - `input_size`: the number of features it takes.
    - `output_size`: the number of features it emits (the head's `in_size`).
    """

    input_size: eqx.AbstractVar[int]
    output_size: eqx.AbstractVar[int]

    @abc.abstractmethod
    def initial_carry(self) -> PyTree[Array]:
        """The carry at the start of an episode."""

    @abc.abstractmethod
    def __call__(
        self, features: Float[Array, " input_size"], carry: PyTree[Array]
    ) -> tuple[Float[Array, " output_size"], PyTree[Array]]:
        """Applies the cell to one time step.

        **Arguments:**

        - `features`: the input features of one (unbatched) time step.
        - `carry`: the carry before this step.

        **Returns:**

        The output features and the carry after this step.
        """


def _matmul_rows(x: Array, weight: Array) -> Array:
    # `x @ weight.T`: under `vmap` one row-major matmul (see `_layers.apply_linear`).
    return x @ weight.T


def _bias(bias: Array | None) -> Array | float:
    return 0.0 if bias is None else bias


@final
class GRUCore(AbstractCore):
    """A gated recurrent unit, as `equinox.nn.GRUCell`; its carry is the hidden state.

    Reference: Cho et al., "Learning Phrase Representations using RNN Encoder-Decoder
    for Statistical Machine Translation", EMNLP 2014.

    **Arguments:**

    - `input_size`: the number of input features.
    - `hidden_size`: the size of the hidden state (and of the output).
    - `key`: initialisation randomness.
    """

    cell: eqx.nn.GRUCell
    input_size: int = eqx.field(static=True)
    output_size: int = eqx.field(static=True)

    def __init__(self, input_size: int, hidden_size: int, *, key: PRNGKeyArray):
        check_positive_int("GRUCore", "input_size", input_size)
        check_positive_int("GRUCore", "hidden_size", hidden_size)
        (self.cell,) = init_layers(key, functools.partial(eqx.nn.GRUCell, input_size, hidden_size))
        self.input_size = input_size
        self.output_size = hidden_size

    def initial_carry(self) -> Float[Array, " hidden_size"]:
        return jnp.zeros(self.output_size, self.cell.weight_hh.dtype)

    def __call__(
        self, features: Float[Array, " input_size"], carry: Float[Array, " hidden_size"]
    ) -> tuple[Float[Array, " hidden_size"], Float[Array, " hidden_size"]]:
        cell = self.cell
        input_gates = jnp.split(_matmul_rows(features, cell.weight_ih) + _bias(cell.bias), 3)
        hidden_gates = jnp.split(_matmul_rows(carry, cell.weight_hh), 3)
        reset = jax.nn.sigmoid(input_gates[0] + hidden_gates[0])
        update = jax.nn.sigmoid(input_gates[1] + hidden_gates[1])
        candidate = jnp.tanh(input_gates[2] + reset * (hidden_gates[2] + _bias(cell.bias_n)))
        hidden = candidate + update * (carry - candidate)
        return hidden, hidden


@final
class LSTMCore(AbstractCore):
    """A long short-term memory cell, as `equinox.nn.LSTMCell`; its carry is `(h, c)` and its
    output `h`.

    Reference: Hochreiter and Schmidhuber, "Long Short-Term Memory", Neural Computation 1997.

    **Arguments:**

    - `input_size`: the number of input features.
    - `hidden_size`: the size of the hidden and cell states (and of the output).
    - `key`: initialisation randomness.
    """

    cell: eqx.nn.LSTMCell
    input_size: int = eqx.field(static=True)
    output_size: int = eqx.field(static=True)

    def __init__(self, input_size: int, hidden_size: int, *, key: PRNGKeyArray):
        check_positive_int("LSTMCore", "input_size", input_size)
        check_positive_int("LSTMCore", "hidden_size", hidden_size)
        (self.cell,) = init_layers(key, functools.partial(eqx.nn.LSTMCell, input_size, hidden_size))
        self.input_size = input_size
        self.output_size = hidden_size

    def initial_carry(self) -> tuple[Float[Array, " hidden_size"], Float[Array, " hidden_size"]]:
        zeros = jnp.zeros(self.output_size, self.cell.weight_hh.dtype)
        return zeros, zeros

    def __call__(
        self,
        features: Float[Array, " input_size"],
        carry: tuple[Float[Array, " hidden_size"], Float[Array, " hidden_size"]],
    ) -> tuple[Float[Array, " hidden_size"], tuple[Float[Array, " hidden_size"], Float[Array, " hidden_size"]]]:
        hidden, cell_state = carry
        gates = _matmul_rows(features, self.cell.weight_ih) + _matmul_rows(hidden, self.cell.weight_hh)
        input_gate, forget_gate, candidate, output_gate = jnp.split(gates + _bias(self.cell.bias), 4)
        cell_state = jax.nn.sigmoid(forget_gate) * cell_state + jax.nn.sigmoid(input_gate) * jnp.tanh(candidate)
        hidden = jax.nn.sigmoid(output_gate) * jnp.tanh(cell_state)
        return hidden, (hidden, cell_state)


@final
class RecurrentNetwork(
    AbstractRecurrentNetwork[OutputT],
    AbstractSequenceNetwork[OutputT],
    AbstractActionRewardNetwork[OutputT],
    Generic[OutputT],
):
    """A torso, a recurrent core and a head: `head(core(torso(observation), carry))`.

    The carry is the core's; [`podrace.networks.AbstractNetwork.unroll`][] and every
    rollout reset it to `initial_carry()` where a time step is first of its episode, and
    each trajectory keeps the carry it started from, so losses unroll the network from it
    (truncated backpropagation through the rollout).

    With `previous_action_reward`, the network reads observations of type
    [`podrace.ObservationActionReward`][] (wrap the environment in
    [`podrace.envs.PreviousActionReward`][]) and feeds the core the torso's features of
    the observation, the previous action (one-hot for discrete actions) and the previous
    reward, as IMPALA's and R2D2's agents do.

    On a [`podrace.MaskedObservation`][] (also inside an
    [`podrace.ObservationActionReward`][]) the torso reads the observation and the
    head's output leaves out the actions that the mask forbids.

    References: Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance
    Weighted Actor-Learner Architectures", ICML 2018; Kapturowski et al., "Recurrent
    Experience Replay in Distributed Reinforcement Learning", ICLR 2019.

    **Arguments:**

    - `torso`: a [`podrace.networks.AbstractTorso`][] on the observation.
    - `core`: an [`podrace.networks.AbstractCore`][] (e.g. [`podrace.networks.GRUCore`][]),
        taking the torso's `output_size` features, plus `head.num_actions + 1` with
        `previous_action_reward`.
    - `head`: an [`podrace.networks.AbstractHead`][] with `in_size` the core's `output_size`.
    - `previous_action_reward`: whether the core also reads the previous action and reward.
    """

    torso: AbstractTorso
    core: AbstractCore
    head: AbstractHead[OutputT]
    previous_action_reward: bool = eqx.field(static=True)

    def __init__(
        self,
        torso: AbstractTorso,
        core: AbstractCore,
        head: AbstractHead[OutputT],
        previous_action_reward: bool = False,
    ):
        self.torso = torso
        self.core = core
        self.head = head
        self.previous_action_reward = previous_action_reward

    def __check_init__(self):
        extra = self.head.num_actions + 1 if self.previous_action_reward else 0
        if self.core.input_size != self.torso.output_size + extra:
            with_extra = f" plus {extra} for the previous action and reward" if extra else ""
            raise ValueError(
                f"RecurrentNetwork: the torso emits {self.torso.output_size} features{with_extra}, but the core "
                f"takes {self.core.input_size}; build the core with input_size={self.torso.output_size + extra}."
            )
        if self.core.output_size != self.head.in_size:
            raise ValueError(
                f"RecurrentNetwork: the core emits {self.core.output_size} features but the head takes "
                f"{self.head.in_size}; build the head with in_size={self.core.output_size}."
            )

    @property
    def output_type(self) -> type[AbstractNetworkOutput]:
        return self.head.output_type

    @property
    def num_actions(self) -> int:
        return self.head.num_actions

    def initial_state(self) -> PyTree[Array]:
        return self.core.initial_carry()

    def _core_input(self, observation: PyTree[Array]) -> Float[Array, " core_input"]:
        is_structured = isinstance(observation, ObservationActionReward)
        if is_structured != self.previous_action_reward:
            fix = (
                "wrap the environment in podrace.envs.PreviousActionReward"
                if self.previous_action_reward
                else "build the network with previous_action_reward=True"
            )
            given = (
                "an ObservationActionReward"
                if is_structured
                else "an observation without the previous action and reward"
            )
            raise TypeError(
                f"RecurrentNetwork(previous_action_reward={self.previous_action_reward}) got {given}; {fix}."
            )
        if not is_structured:
            return self.torso(observation)
        features = self.torso(observation.observation)
        action = observation.action
        if jnp.issubdtype(action.dtype, jnp.integer):
            action = jax.nn.one_hot(action, self.num_actions, dtype=features.dtype)
        action = jnp.reshape(action, (-1,)).astype(features.dtype)
        reward = jnp.reshape(observation.reward, (1,)).astype(features.dtype)
        return jnp.concatenate([features, action, reward])

    def __call__(self, observation: PyTree[Array], carry: PyTree[Array]) -> tuple[OutputT, PyTree[Array]]:
        observation, action_mask = split_action_mask(observation)
        features, carry = self.core(self._core_input(observation), carry)
        return apply_action_mask(self.head(features), action_mask), carry

    def unroll_sequence(
        self, observations: PyTree[Array], carry: PyTree[Array], is_first: Bool[Array, " T"]
    ) -> tuple[OutputT, PyTree[Array]]:
        """As [`podrace.networks.AbstractNetwork.unroll`][], with only the core inside the
        `lax.scan`: the torso and the head run on all time steps at once, as batched
        matmuls, rather than one step at a time."""
        observations, action_masks = split_action_mask(observations)
        features = jax.vmap(self._core_input)(observations)

        def step(carry, inputs):
            features, first = inputs
            core_output, carry = self.core(features, self.reset_carry(carry, first))
            return carry, core_output

        carry, core_outputs = jax.lax.scan(step, carry, (features, is_first))
        outputs = jax.vmap(lambda core_output, mask: apply_action_mask(self.head(core_output), mask))
        return outputs(core_outputs, action_masks), carry
