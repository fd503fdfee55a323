"""The families whose network is an MLP torso, an optional recurrent core and one head."""

import abc
from typing import Any

import jax
from jaxtyping import PRNGKeyArray

from ..compilation import compiled_once
from ..networks import (
    AbstractHead,
    AbstractNetwork,
    AbstractTorso,
    ActorCriticNetwork,
    ConvTorso,
    FeedForwardNetwork,
    GRUCore,
    LSTMCore,
    MLPTorso,
    RecurrentNetwork,
    ValueHead,
)
from .base import ACTIVATIONS, AbstractConfig, layer_norm_setting, setting


TORSOS = ("mlp", "nature")
"""The torsos by name: `mlp`, an [`podrace.networks.MLPTorso`][] of `hidden`; `nature`,
the Nature DQN convolutions (Mnih et al., Nature 2015: 32 of 8x8 with stride 4, 64 of
4x4 with stride 2, 64 of 3x3, no padding) over channels-first frames divided by 255
(EnvPool's Atari stack), then dense layers of `hidden`: a
[`podrace.networks.ConvTorso`][]."""


def torso_name(text: str) -> str:
    """One of `TORSOS`."""
    if text not in TORSOS:
        raise ValueError(f"must be one of {', '.join(TORSOS)}, got {text!r}")
    return text


class AbstractTorsoHeadConfig(AbstractConfig):
    """A family whose network is a torso (`MLPTorso(hidden, activation, layer_norm)`, or
    the Nature DQN convolutions then `hidden`), a GRU or LSTM core where the family has
    one, and the head the family's algorithm reads."""

    layer_norm: bool = layer_norm_setting()
    torso: str = setting(
        "mlp",
        "the torso: mlp (layers of hidden), or nature (the Nature DQN convolutions over channels-first frames "
        "divided by 255, such as EnvPool's Atari stack, then layers of hidden)",
        torso_name,
    )

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
    torso = _torso(config, observation_shape, torso_key)
    features = config.hidden[-1]
    if core is not None:
        core_type = {"gru": GRUCore, "lstm": LSTMCore}[core]
        recurrent = core_type(features, core_size, key=core_key)
        return RecurrentNetwork(torso, recurrent, config.head(action_space, core_size, with_value=True, key=head_key))
    if separate_critic:
        critic = _torso(config, observation_shape, critic_key)
        head = config.head(action_space, features, with_value=False, key=head_key)
        return ActorCriticNetwork(torso, head, critic, ValueHead(features, key=value_key))
    return FeedForwardNetwork(torso, config.head(action_space, features, with_value=True, key=head_key))


def _torso(config: AbstractTorsoHeadConfig, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> AbstractTorso:
    """The torso `config.torso` names."""
    activation = ACTIVATIONS[config.activation]
    if config.torso == "mlp":
        return MLPTorso(observation_shape, config.hidden, activation=activation, layer_norm=config.layer_norm, key=key)
    if len(observation_shape) != 3 or min(observation_shape[1:]) < 36:
        raise ValueError(
            "The nature torso takes frames of shape (channels, height, width), at least 36x36 (EnvPool's Atari "
            f"stack is (4, 84, 84)); the observations are of shape {observation_shape}: use the mlp torso "
            "(--torso mlp)."
        )
    return ConvTorso(
        observation_shape,
        (32, 64, 64),
        kernel_sizes=(8, 4, 3),
        strides=(4, 2, 1),
        padding="VALID",
        hidden_sizes=config.hidden,
        activation=activation,
        observation_scale=1 / 255,
        layer_norm=config.layer_norm,
        channels_first=True,
        key=key,
    )
