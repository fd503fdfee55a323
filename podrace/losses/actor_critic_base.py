"""The objectives of the off-policy actor-critics (DDPG, TD3, SAC, discrete SAC): the
replayed transitions they read, and one abstract base per role they play.

An off-policy actor-critic learner takes one loss per part it learns, as a
[`podrace.Learner`][] takes one loss: a critic loss, an actor loss and, for SAC, a
temperature loss. Each is a pure function of the networks it is given and a batch of
replayed [`podrace.losses.Transitions`][]; the learner owns the parameters, the
optimisers and the target copies, and calls the losses with networks that hold the
parameters being learnt.
"""

import abc
from typing import TYPE_CHECKING, Generic, TypeVar, final

import equinox as eqx
import jax
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._types import AbstractNetworkOutput, Trajectory
from ..networks import AbstractCritic, AbstractNetwork
from ..results import LossTerms
from .base import transition_mask


# Equinox's documented import: type checkers read it as the `ClassVar` it stands for.
if TYPE_CHECKING:
    from typing import ClassVar as AbstractClassVar
else:
    from equinox import AbstractClassVar


@final
class Transitions(eqx.Module):
    """A batch of replayed one-step transitions `s -> s'`, each with its loss weight.

    **Arguments:**

    - `observation`: the observations `s` `[B, ...]`.
    - `action`: the actions taken in them `[B, ...]`.
    - `reward`: the rewards that followed `[B]`.
    - `discount`: the environment's discount at `s'` `[B]` (0 at a termination, 1 at a
        truncation, so a truncated episode bootstraps).
    - `next_observation`: the observations `s'` `[B, ...]`.
    - `mask`: 1 for a real transition, 0 where `s'` starts a new episode (the step after
        an episode's last only resets the environment) `[B]`.
    """

    observation: PyTree[Array]
    action: Array
    reward: Float[Array, " B"]
    discount: Float[Array, " B"]
    next_observation: PyTree[Array]
    mask: Float[Array, " B"]


def one_step_transitions(batch: Trajectory) -> Transitions:
    """The transitions of a replayed batch of two-step trajectories `[2, B]`."""
    timestep = batch.timestep
    # An observation may be a structure (a `MaskedObservation`), with the time axis on each leaf.
    return Transitions(
        observation=jax.tree.map(lambda x: x[0], timestep.observation),
        action=batch.policy_step.action[0],
        reward=timestep.reward[1],
        discount=timestep.discount[1],
        next_observation=jax.tree.map(lambda x: x[1], timestep.observation),
        mask=batch.map_batch(transition_mask)[:, 0],
    )


CriticT = TypeVar("CriticT", bound=AbstractCritic | AbstractNetwork)


class AbstractDeterministicCriticLoss(eqx.Module):
    """The critic objective of a deterministic actor-critic (DDPG, TD3): the critics'
    regression onto targets bootstrapped from the target actor and target critics.

    The targets are computed once per gradient step, outside the gradient (see
    `targets`); the loss then compares the critics' estimates with them.
    """

    @abc.abstractmethod
    def targets(
        self,
        transitions: Transitions,
        *,
        target_actor: AbstractNetwork,
        target_critic: AbstractCritic,
        key: PRNGKeyArray,
    ) -> Float[Array, " B"]:
        """The regression target of each transition.

        **Arguments:**

        - `transitions`: the replayed batch.
        - `target_actor`: the actor's slowly updated copy (a deterministic head).
        - `target_critic`: the critics' slowly updated copy.
        - `key`: randomness (target policy smoothing).
        """

    @abc.abstractmethod
    def __call__(
        self, critic: AbstractCritic, transitions: Transitions, targets: Float[Array, " B"]
    ) -> tuple[Float[Array, ""], LossTerms]:
        """The critics' loss and its named terms (a `critic` term at least).

        **Arguments:**

        - `critic`: the critics with the parameters being learnt.
        - `transitions`: the replayed batch.
        - `targets`: what `targets` returned for it.
        """


class AbstractDeterministicActorLoss(eqx.Module):
    """The actor objective of a deterministic actor-critic: how the actor climbs its critic."""

    @abc.abstractmethod
    def __call__(
        self, actor: AbstractNetwork, transitions: Transitions, *, critic: AbstractCritic
    ) -> tuple[Float[Array, ""], LossTerms]:
        """The actor's loss and its named terms (an `actor` term at least).

        **Arguments:**

        - `actor`: the actor with the parameters being learnt.
        - `transitions`: the replayed batch.
        - `critic`: the critics, just updated, held constant.
        """


class AbstractSoftCriticLoss(eqx.Module, Generic[CriticT]):
    """The critic objective of a soft actor-critic (SAC): the critics' regression onto
    soft targets, bootstrapped from the target critics and the current actor's
    entropy-regularised value. `CriticT` is the critics' type: an
    [`podrace.networks.AbstractCritic`][], or stacked Q-networks for discrete actions.

    **Attributes:**

    - `input_type`: the actor output it reads (a class attribute):
        [`podrace.TanhGaussianParams`][] or [`podrace.PolicyLogits`][].
    """

    input_type: AbstractClassVar[type[AbstractNetworkOutput]]

    @abc.abstractmethod
    def targets(
        self,
        transitions: Transitions,
        *,
        actor: AbstractNetwork,
        target_critic: CriticT,
        temperature: Float[Array, ""],
        key: PRNGKeyArray,
    ) -> Float[Array, " B"]:
        """The regression target of each transition.

        **Arguments:**

        - `transitions`: the replayed batch.
        - `actor`: the current actor, held constant.
        - `target_critic`: the critics' slowly updated copy.
        - `temperature`: the entropy temperature alpha.
        - `key`: randomness (the next actions of a sampled expectation).
        """

    @abc.abstractmethod
    def __call__(
        self, critic: CriticT, transitions: Transitions, targets: Float[Array, " B"]
    ) -> tuple[Float[Array, ""], LossTerms]:
        """The critics' loss and its named terms (a `critic` term at least).

        **Arguments:**

        - `critic`: the critics with the parameters being learnt.
        - `transitions`: the replayed batch.
        - `targets`: what `targets` returned for it.
        """


class AbstractSoftActorLoss(eqx.Module, Generic[CriticT]):
    """The actor objective of a soft actor-critic: the policy's improvement against the
    critics, regularised by its entropy.

    **Attributes:**

    - `input_type`: the actor output it reads (a class attribute).
    """

    input_type: AbstractClassVar[type[AbstractNetworkOutput]]

    @abc.abstractmethod
    def __call__(
        self,
        actor: AbstractNetwork,
        transitions: Transitions,
        *,
        critic: CriticT,
        temperature: Float[Array, ""],
        key: PRNGKeyArray,
    ) -> tuple[Float[Array, ""], LossTerms]:
        """The actor's loss and its named terms: an `actor` term, and an `entropy` term
        (the policy's mean entropy or its estimate) that the temperature steps on.

        **Arguments:**

        - `actor`: the actor with the parameters being learnt.
        - `transitions`: the replayed batch.
        - `critic`: the critics, just updated, held constant.
        - `temperature`: the entropy temperature alpha.
        - `key`: randomness (reparameterised actions).
        """


class AbstractTemperatureLoss(eqx.Module):
    """The objective of a soft actor-critic's entropy temperature, learnt as its logarithm."""

    @abc.abstractmethod
    def __call__(
        self, log_temperature: Float[Array, ""], entropy: Float[Array, ""]
    ) -> tuple[Float[Array, ""], LossTerms]:
        """The temperature's loss and its named terms.

        **Arguments:**

        - `log_temperature`: the log of alpha, being learnt.
        - `entropy`: the policy's entropy (or its estimate) on the batch, held constant.
        """
