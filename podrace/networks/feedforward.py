from typing import Generic, TypeVar, final

import equinox as eqx
from jaxtyping import Array, PyTree

from .._types import AbstractNetworkOutput, AbstractPolicyOutput
from ._base import AbstractNetwork, apply_action_mask, split_action_mask
from .heads import AbstractHead, AbstractValueHead
from .torsos import AbstractTorso


OutputT = TypeVar("OutputT", bound=AbstractNetworkOutput)


@final
class FeedForwardNetwork(AbstractNetwork[OutputT], Generic[OutputT]):
    """A torso followed by a head, with an empty carry.

    On a [`podrace.MaskedObservation`][] the torso reads the observation and the head's
    output leaves out the actions that the mask forbids.

    **Arguments:**

    - `torso`: a [`podrace.networks.AbstractTorso`][] that maps an observation to
        features (e.g. [`podrace.networks.MLPTorso`][] or [`podrace.networks.ConvTorso`][]).
    - `head`: a [`podrace.networks.AbstractHead`][] that maps features to a network
        output (e.g. [`podrace.networks.QValueHead`][] or [`podrace.networks.GaussianHead`][]),
        with `in_size` equal to the torso's `output_size`.
    """

    torso: AbstractTorso
    head: AbstractHead[OutputT]

    def __check_init__(self):
        if self.torso.output_size != self.head.in_size:
            raise ValueError(
                f"The torso emits {self.torso.output_size} features but the head takes "
                f"{self.head.in_size}; build the head with in_size={self.torso.output_size}."
            )

    @property
    def output_type(self) -> type[AbstractNetworkOutput]:
        return self.head.output_type

    @property
    def num_actions(self) -> int:
        return self.head.num_actions

    def __call__(self, observation: PyTree[Array], carry: tuple[()]) -> tuple[OutputT, tuple[()]]:
        observation, action_mask = split_action_mask(observation)
        return apply_action_mask(self.head(self.torso(observation)), action_mask), carry


@final
class ActorCriticNetwork(AbstractNetwork[OutputT], Generic[OutputT]):
    """A policy network and a separate value network, sharing no parameters.

    Emits the policy head's output with the critic's value in it. Keeping the critic
    apart lets the value loss (whose scale follows the returns) train without pulling
    on the policy's features. On a [`podrace.MaskedObservation`][] both torsos read the
    observation and the policy leaves out the actions that the mask forbids.

    Reference: Andrychowicz et al., "What Matters In On-Policy Reinforcement Learning?
    A Large-Scale Empirical Study", ICLR 2021 (separate policy and value networks).

    **Arguments:**

    - `actor_torso`: the policy's [`podrace.networks.AbstractTorso`][].
    - `head`: a policy head without a value: an [`podrace.networks.AbstractHead`][] that
        emits a [`podrace.AbstractPolicyOutput`][] and has `emits_value` false (e.g.
        [`podrace.networks.PolicyLogitHead`][] or [`podrace.networks.GaussianHead`][]).
    - `critic_torso`: the value's [`podrace.networks.AbstractTorso`][].
    - `value_head`: the [`podrace.networks.AbstractValueHead`][] on the critic's features
        (e.g. [`podrace.networks.ValueHead`][]).
    """

    actor_torso: AbstractTorso
    head: AbstractHead[OutputT]
    critic_torso: AbstractTorso
    value_head: AbstractValueHead

    def __check_init__(self):
        if not issubclass(self.head.output_type, AbstractPolicyOutput):
            raise ValueError(
                f"ActorCriticNetwork: the head emits {self.head.output_type.__name__}, which has no value to "
                "fill in; give it a policy head (one that emits a podrace.AbstractPolicyOutput)."
            )
        if self.head.emits_value:
            raise ValueError("ActorCriticNetwork: build the policy head with with_value=False; the critic gives it.")
        for name, torso, head in (
            ("policy head", self.actor_torso, self.head),
            ("value head", self.critic_torso, self.value_head),
        ):
            if torso.output_size != head.in_size:
                raise ValueError(
                    f"ActorCriticNetwork: the torso emits {torso.output_size} features but the {name} takes "
                    f"{head.in_size}; build it with in_size={torso.output_size}."
                )

    @property
    def output_type(self) -> type[AbstractNetworkOutput]:
        return self.head.output_type

    @property
    def num_actions(self) -> int:
        return self.head.num_actions

    def __call__(self, observation: PyTree[Array], carry: tuple[()]) -> tuple[OutputT, tuple[()]]:
        observation, action_mask = split_action_mask(observation)
        output = apply_action_mask(self.head(self.actor_torso(observation)), action_mask)
        value = self.value_head(self.critic_torso(observation))
        with_value = eqx.tree_at(lambda o: o.value, output, value, is_leaf=lambda x: x is None)
        return with_value, carry  # pyright: ignore[reportReturnType]
