"""The families whose network is an MLP torso, an optional recurrent core and one head."""

import abc
from typing import Any

import jax
from jaxtyping import PRNGKeyArray

from ..compilation import compiled_once
from ..networks import (
    AbstractHead,
    AbstractNetwork,
    ActorCriticNetwork,
    FeedForwardNetwork,
    GRUCore,
    LSTMCore,
    MLPTorso,
    RecurrentNetwork,
    ValueHead,
)
from .base import ACTIVATIONS, AbstractConfig, layer_norm_setting


class AbstractTorsoHeadConfig(AbstractConfig):
    """A family whose network is `MLPTorso(hidden, activation, layer_norm)`, a GRU or LSTM
    core where the family has one, and the head the family's algorithm reads."""

    layer_norm: bool = layer_norm_setting()

    @abc.abstractmethod
    def head(self, action_space: Any, in_size: int, *, with_value: bool, key: PRNGKeyArray) -> AbstractHead[Any]:
        """The head on `in_size` features for `action_space` (with a value output when
        `with_value` and the head has one)."""

    def network(
        self,
        action_space: Any,
        observation_shape: tuple[int, ...],
        key: PRNGKeyArray,
        *,
        core: str | None = None,
        core_size: int = 32,
        separate_critic: bool = False,
    ) -> AbstractNetwork:
        """The network: torso, `core` (`"gru"`, `"lstm"` or `None`) of `core_size`, and head;
        with `separate_critic`, a second torso and a value head instead of the head's value.

        Built in one compiled program: eagerly, each part's random draw would be compiled
        as a program of its own. The values are the same bit for bit.
        """
        return network_in_one_program(
            self, action_space, observation_shape, key, core=core, core_size=core_size, separate_critic=separate_critic
        )


@compiled_once
def network_in_one_program(
    config: AbstractTorsoHeadConfig,
    action_space: Any,
    observation_shape: tuple[int, ...],
    key: PRNGKeyArray,
    *,
    core: str | None,
    core_size: int,
    separate_critic: bool,
) -> AbstractNetwork:
    """`AbstractTorsoHeadConfig.network`, compiled (its `__wrapped__` is the eager one)."""
    torso_key, core_key, head_key, critic_key, value_key = jax.random.split(key, 5)
    activation = ACTIVATIONS[config.activation]
    torso = MLPTorso(
        observation_shape, config.hidden, activation=activation, layer_norm=config.layer_norm, key=torso_key
    )
    features = config.hidden[-1]
    if core is not None:
        core_type = {"gru": GRUCore, "lstm": LSTMCore}[core]
        recurrent = core_type(features, core_size, key=core_key)
        return RecurrentNetwork(torso, recurrent, config.head(action_space, core_size, with_value=True, key=head_key))
    if separate_critic:
        critic = MLPTorso(
            observation_shape, config.hidden, activation=activation, layer_norm=config.layer_norm, key=critic_key
        )
        head = config.head(action_space, features, with_value=False, key=head_key)
        return ActorCriticNetwork(torso, head, critic, ValueHead(features, key=value_key))
    return FeedForwardNetwork(torso, config.head(action_space, features, with_value=True, key=head_key))
