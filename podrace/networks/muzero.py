"""MuZero's learnt model: representation, dynamics and prediction networks in one module."""

import functools
from collections.abc import Callable, Sequence
from typing import final

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from .._types import PolicyLogits
from ._base import AbstractNetwork, apply_action_mask, split_action_mask
from ._layers import apply_linear, init_layers
from .heads import PolicyLogitHead, ValueHead
from .torsos import MLPTorso
from .value_transforms import categorical_expectation, signed_parabolic


def scale_to_unit_interval(latent: Float[Array, " latent_size"]) -> Float[Array, " latent_size"]:
    """A latent state min-max scaled into [0, 1] over its elements, as MuZero scales the
    outputs of its representation and dynamics functions.

    Reference: Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning with
    a Learned Model", Nature 2020, Appendix G ("we scale the hidden state to the same
    range as the action input ([0, 1])").

    **Arguments:**

    - `latent`: one latent state.

    **Returns:**

    `(latent - min) / (max - min)`, with the range floored at `1e-5` (a constant latent
    maps to 0).
    """
    low, high = jnp.min(latent), jnp.max(latent)
    return (latent - low) / jnp.maximum(high - low, 1e-5)


@final
class MuZeroNetwork(AbstractNetwork[PolicyLogits]):
    """MuZero's three functions on MLPs: the representation `h` (observation to latent
    state), the dynamics `g` (latent state and action to the next latent state and the
    reward) and the prediction `f` (latent state to policy logits and value).

    Called as a podrace network, it is `f(h(observation))`: [`podrace.PolicyLogits`][]
    with a value, the observation's legal-action mask applied; a policy over it acts
    without a search (as evaluation does). [`podrace.search.MuZeroAgent`][] searches with
    `represent`, `transition` and `predict`, and [`podrace.losses.MuZeroLoss`][] unrolls
    them. Latent states are min-max scaled into [0, 1]
    ([`podrace.networks.scale_to_unit_interval`][]); the action enters the dynamics one-hot.

    Values and rewards are scalars, or, with `support_size`, categorical distributions
    over the integers `-support_size..support_size` of the transformed scale
    ([`podrace.losses.signed_hyperbolic`][]), as MuZero predicts them for Atari (with a
    `support_size` of 300): `prediction_outputs` and `transition_outputs` give the atoms'
    logits, which [`podrace.losses.MuZeroLoss`][] learns by
    [`podrace.losses.categorical_value_loss`][], and `predict` and `transition` their
    scalars, `signed_parabolic(categorical_expectation(logits, support))`.

    Reference: Schrittwieser et al., "Mastering Atari, Go, Chess and Shogi by Planning with
    a Learned Model", Nature 2020 (Appendix F for the categorical values).

    **Arguments:**

    - `observation_shape`: the shape of one observation (without a mask).
    - `num_actions`: the number of discrete actions.
    - `latent_size`: the size of a latent state.
    - `hidden_sizes`: the hidden layers of each of the three MLPs.
    - `activation`: the MLPs' activation.
    - `support_size`: `None` for scalar values and rewards, or the largest atom of their
        categorical supports, in transformed units (>= 1).
    - `key`: initialisation randomness.
    """

    representation: MLPTorso
    encoder: eqx.nn.Linear
    dynamics: MLPTorso
    next_latent: eqx.nn.Linear
    reward: ValueHead | eqx.nn.Linear
    prediction: MLPTorso
    head: PolicyLogitHead
    value_atoms: eqx.nn.Linear | None
    latent_size: int = eqx.field(static=True)
    support_size: int | None = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: Sequence[int],
        num_actions: int,
        *,
        latent_size: int = 32,
        hidden_sizes: Sequence[int] = (64,),
        activation: Callable[[Array], Array] = jax.nn.relu,
        support_size: int | None = None,
        key: PRNGKeyArray,
    ):
        if num_actions < 1 or latent_size < 1:
            raise ValueError(
                f"MuZeroNetwork needs num_actions >= 1 and latent_size >= 1, got {num_actions} and {latent_size}."
            )
        if support_size is not None and (not isinstance(support_size, int) or support_size < 1):
            raise ValueError(
                f"MuZeroNetwork: support_size must be None (scalar values and rewards) or an integer >= 1 (the "
                f"largest atom of their categorical supports, e.g. 300 as for Atari), got {support_size!r}."
            )
        keys = jax.random.split(key, 6)
        mlp = functools.partial(MLPTorso, hidden_sizes=hidden_sizes, activation=activation)
        self.representation = mlp(observation_shape, key=keys[0])
        self.dynamics = mlp((latent_size + num_actions,), key=keys[1])
        self.prediction = mlp((latent_size,), key=keys[2])
        features = self.representation.output_size
        self.encoder, self.next_latent = init_layers(
            keys[3], *[functools.partial(eqx.nn.Linear, features, latent_size)] * 2
        )
        self.head = PolicyLogitHead(features, num_actions, with_value=support_size is None, key=keys[5])
        if support_size is None:
            self.reward, self.value_atoms = ValueHead(features, key=keys[4]), None
        else:
            atoms = functools.partial(eqx.nn.Linear, features, 2 * support_size + 1)
            self.reward, self.value_atoms = init_layers(keys[4], atoms, atoms)
        self.latent_size = latent_size
        self.support_size = support_size

    @property
    def output_type(self) -> type[PolicyLogits]:
        return PolicyLogits

    @property
    def num_actions(self) -> int:
        return self.head.num_actions

    def __call__(self, observation: PyTree[Array], carry: tuple[()]) -> tuple[PolicyLogits, tuple[()]]:
        observation, action_mask = split_action_mask(observation)
        return apply_action_mask(self.predict(self.represent(observation)), action_mask), carry

    def represent(self, observation: PyTree[Array]) -> Float[Array, " latent_size"]:
        """The representation `h`: one observation (without a mask) as a latent state.

        **Arguments:**

        - `observation`: one observation.

        **Returns:**

        Its latent state, in [0, 1].
        """
        return scale_to_unit_interval(apply_linear(self.encoder, self.representation(observation)))

    @property
    def support(self) -> Float[Array, " num_atoms"] | None:
        """The atoms of the categorical values and rewards (transformed units), or `None`."""
        if self.support_size is None:
            return None
        return jnp.arange(-self.support_size, self.support_size + 1, dtype=jnp.float32)

    def to_scalar(self, outputs: Float[Array, "*outputs"]) -> Float[Array, "*scalars"]:
        """The scalar values (or rewards) of the value or reward outputs: themselves, or
        the untransformed means of the categorical distributions whose logits they are."""
        support = self.support
        if support is None:
            return outputs
        return signed_parabolic(categorical_expectation(outputs, support))

    def transition_outputs(
        self, latent: Float[Array, " latent_size"], action: Int[Array, ""]
    ) -> tuple[Float[Array, " latent_size"], Float[Array, ""] | Float[Array, " num_atoms"]]:
        """The dynamics `g` as it is learnt: the next latent state, and the reward as a
        scalar or as the logits of its categorical support's atoms."""
        inputs = jnp.concatenate([latent, jax.nn.one_hot(action, self.num_actions, dtype=latent.dtype)])
        features = self.dynamics(inputs)
        reward = self.reward(features) if isinstance(self.reward, ValueHead) else apply_linear(self.reward, features)
        return scale_to_unit_interval(apply_linear(self.next_latent, features)), reward

    def transition(
        self, latent: Float[Array, " latent_size"], action: Int[Array, ""]
    ) -> tuple[Float[Array, " latent_size"], Float[Array, ""]]:
        """The dynamics `g`: the latent state after `action`, and the reward of the step.

        **Arguments:**

        - `latent`: one latent state.
        - `action`: a discrete action.

        **Returns:**

        The next latent state (in [0, 1]) and the predicted reward.
        """
        next_latent, reward = self.transition_outputs(latent, action)
        return next_latent, self.to_scalar(reward)

    def prediction_outputs(
        self, latent: Float[Array, " latent_size"]
    ) -> tuple[Float[Array, " num_actions"], Float[Array, ""] | Float[Array, " num_atoms"]]:
        """The prediction `f` as it is learnt: the prior policy's logits, and the value as
        a scalar or as the logits of its categorical support's atoms."""
        features = self.prediction(latent)
        output = self.head(features)
        if self.value_atoms is None:
            assert output.value is not None  # the head has a value layer
            return output.logits, output.value
        return output.logits, apply_linear(self.value_atoms, features)

    def predict(self, latent: Float[Array, " latent_size"]) -> PolicyLogits:
        """The prediction `f`: policy logits and a value of a latent state.

        **Arguments:**

        - `latent`: one latent state.

        **Returns:**

        The prior policy's logits and the value, as [`podrace.PolicyLogits`][].
        """
        logits, value = self.prediction_outputs(latent)
        return PolicyLogits(logits, self.to_scalar(value))
