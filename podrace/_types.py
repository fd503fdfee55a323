"""Data types shared by every family: spaces, time steps, network outputs, trajectories."""

import abc
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, final

import distrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int, PRNGKeyArray, PyTree


class AbstractSpace(eqx.Module):
    """A set of valid observations or actions."""

    @abc.abstractmethod
    def sample(self, key: PRNGKeyArray) -> Array:
        """Draws a uniformly random element of the space."""

    @abc.abstractmethod
    def contains(self, x: ArrayLike) -> Bool[Array, ""]:
        """Whether `x` has the space's shape and lies inside it."""

    def zeros(self) -> PyTree[Array]:
        """Zeros of the shape and dtype of the space's elements (e.g. the "previous action"
        of an episode's first step)."""
        element = jax.eval_shape(self.sample, jax.random.key(0))
        return jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), element)


@final
class Discrete(AbstractSpace):
    """The integers `0, ..., num_values - 1` (a scalar `int32`).

    **Arguments:**

    - `num_values`: how many values there are.
    """

    num_values: int = eqx.field(static=True)

    def __check_init__(self):
        if self.num_values <= 0:
            raise ValueError(f"Discrete needs num_values > 0, got {self.num_values}.")

    def sample(self, key: PRNGKeyArray) -> Int[Array, ""]:
        return jax.random.randint(key, (), 0, self.num_values, dtype=jnp.int32)

    def contains(self, x: ArrayLike) -> Bool[Array, ""]:
        x = jnp.asarray(x)
        if x.shape != () or not jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.asarray(False)
        return (x >= 0) & (x < self.num_values)


@final
class Box(AbstractSpace):
    """A box `low <= x <= high` of a fixed shape and dtype.

    **Arguments:**

    - `low`, `high`: the bounds, broadcastable to `shape`.
    - `shape`: the shape of each element.
    - `dtype`: the dtype of each element.
    """

    low: Array
    high: Array
    shape: tuple[int, ...] = eqx.field(static=True)
    dtype: jnp.dtype = eqx.field(static=True)

    def __init__(self, low: ArrayLike, high: ArrayLike, shape: tuple[int, ...], dtype=jnp.float32):
        self.shape = tuple(shape)
        self.dtype = jnp.dtype(dtype)
        self.low = jnp.broadcast_to(jnp.asarray(low, self.dtype), self.shape)
        self.high = jnp.broadcast_to(jnp.asarray(high, self.dtype), self.shape)

    def sample(self, key: PRNGKeyArray) -> Array:
        if jnp.issubdtype(self.dtype, jnp.integer):
            return jax.random.randint(key, self.shape, self.low, self.high + 1, dtype=self.dtype)
        return jax.random.uniform(key, self.shape, self.dtype, self.low, self.high)

    def contains(self, x: ArrayLike) -> Bool[Array, ""]:
        x = jnp.asarray(x)
        if x.shape != self.shape or x.dtype != self.dtype:
            return jnp.asarray(False)
        return jnp.all((x >= self.low) & (x <= self.high))


@final
class ObservationActionReward(eqx.Module):
    """An observation with the action and reward that led to it, for agents that read both.

    On the first step of an episode the action is zeros and the reward 0. A batch of
    them is the same module with a leading axis on every leaf.

    **Arguments:**

    - `observation`: the environment's observation.
    - `action`: the previous action (an element of the action space).
    - `reward`: the previous reward.
    """

    observation: PyTree[Array]
    action: Array
    reward: Float[Array, "*batch"]


@final
class ObservationActionRewardSpace(AbstractSpace):
    """The space of [`podrace.ObservationActionReward`][] observations.

    **Arguments:**

    - `observation`: the space of the observations.
    - `action`: the action space.
    """

    observation: AbstractSpace
    action: AbstractSpace

    def sample(self, key: PRNGKeyArray) -> ObservationActionReward:  # pyright: ignore[reportIncompatibleMethodOverride]
        observation_key, action_key, reward_key = jax.random.split(key, 3)
        reward = jax.random.normal(reward_key, (), jnp.float32)
        return ObservationActionReward(self.observation.sample(observation_key), self.action.sample(action_key), reward)

    def contains(self, x: Any) -> Bool[Array, ""]:
        if not isinstance(x, ObservationActionReward):
            return jnp.asarray(False)
        reward = jnp.asarray(x.reward)
        if reward.shape != () or reward.dtype != jnp.float32:
            return jnp.asarray(False)
        action, zero = jnp.asarray(x.action), self.action.zeros()
        if action.shape != zero.shape or action.dtype != zero.dtype:
            return jnp.asarray(False)
        action_ok = self.action.contains(action) | jnp.all(action == zero)
        return self.observation.contains(x.observation) & action_ok & jnp.isfinite(reward)


def legal_actions(action_mask: Bool[Array, "*batch num_actions"]) -> Bool[Array, "*batch num_actions"]:
    """The actions an agent may choose under `action_mask`: the mask itself, or every
    action where it allows none (as on the last time step of an episode, where no one
    acts and some environments allow nothing).

    **Arguments:**

    - `action_mask`: which actions are legal, one flag per action.

    **Returns:**

    The mask, with every action legal where no action was.
    """
    return action_mask | ~jnp.any(action_mask, axis=-1, keepdims=True)


@final
class MaskedObservation(eqx.Module):
    """An observation with the legal actions of its time step: how an environment with
    discrete actions says which of them may be taken now (the moves of a board game).

    Networks read the observation and apply the mask to their outputs (see
    [`podrace.AbstractMaskableOutput`][]), so that every discrete policy chooses among
    the legal actions only and reports the probabilities of that choice. The mask comes
    in the observation because it changes from step to step, as Pgx's, Jumanji's and
    OpenSpiel's do; the environment's observation space, a
    [`podrace.MaskedObservationSpace`][], says that it comes. A batch of them is the
    same module with a leading axis on every leaf.

    **Arguments:**

    - `observation`: the environment's observation.
    - `action_mask`: which actions are legal now, one `bool` per action of the
        environment's [`podrace.Discrete`][] action space.
    """

    observation: PyTree[Array]
    action_mask: Bool[Array, "*batch num_actions"]

    def random_legal_action(self, key: PRNGKeyArray) -> Int[Array, ""]:
        """A uniformly random legal action of this (unbatched) observation (any action where
        none is legal, see [`podrace.legal_actions`][]).

        **Arguments:**

        - `key`: the randomness of the choice.

        **Returns:**

        The action, an `int32` index.
        """
        logits = jnp.where(legal_actions(self.action_mask), 0.0, -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32)


@final
class MaskedObservationSpace(AbstractSpace):
    """The space of [`podrace.MaskedObservation`][] observations: the observation space of
    an environment that says, at every time step, which of its discrete actions are legal.

    An element lies in it when its observation lies in `observation` and its mask is a
    `bool` vector with one flag per action. A mask may allow no action on the last time
    step of an episode; [`podrace.envs.check_env`][] checks that every other step allows
    one.

    **Arguments:**

    - `observation`: the space of the observations.
    - `action`: the environment's action space.
    """

    observation: AbstractSpace
    action: Discrete

    def sample(self, key: PRNGKeyArray) -> MaskedObservation:  # pyright: ignore[reportIncompatibleMethodOverride]
        observation_key, mask_key, legal_key = jax.random.split(key, 3)
        num_actions = self.action.num_values
        # Each action legal with probability 1/2, and one of them surely.
        mask = jax.random.bernoulli(mask_key, 0.5, (num_actions,))
        mask = mask.at[jax.random.randint(legal_key, (), 0, num_actions)].set(True)
        return MaskedObservation(self.observation.sample(observation_key), mask)

    def contains(self, x: Any) -> Bool[Array, ""]:
        if not isinstance(x, MaskedObservation):
            return jnp.asarray(False)
        mask = jnp.asarray(x.action_mask)
        if mask.shape != (self.action.num_values,) or mask.dtype != jnp.bool_:
            return jnp.asarray(False)
        return self.observation.contains(x.observation)


@final
class TimeStep(eqx.Module):
    """What an environment emits after a reset or a step.

    `discount` is 0 only when the episode *terminated* (the environment reached an
    absorbing state); on *truncation* (a time limit) it stays 1, so that learners
    bootstrap from `observation`. Both flags are kept apart; `is_last` is their union.

    **Arguments:**

    - `observation`: the observation after the transition (the final one on the last
        step of an episode).
    - `reward`: the reward of the transition (0 on the first step).
    - `discount`: 0 on termination, 1 otherwise.
    - `is_first`: whether this is the first step of an episode (after a reset).
    - `terminated`: whether the episode ended in an absorbing state.
    - `truncated`: whether the episode was cut short (time limit) without terminating.
    """

    observation: PyTree[Array]
    reward: Float[Array, "*batch"]
    discount: Float[Array, "*batch"]
    is_first: Bool[Array, "*batch"]
    terminated: Bool[Array, "*batch"]
    truncated: Bool[Array, "*batch"]

    @property
    def is_last(self) -> Bool[Array, "*batch"]:
        """Whether the episode ended here, by termination or truncation."""
        return self.terminated | self.truncated

    @classmethod
    def first(cls, observation: PyTree[Array]) -> "TimeStep":
        """The time step of a reset: no reward, discount 1, `is_first` set."""
        false = jnp.asarray(False)
        zero, one = jnp.zeros((), jnp.float32), jnp.ones((), jnp.float32)
        return cls(observation, zero, one, jnp.asarray(True), false, false)

    @classmethod
    def transition(
        cls,
        observation: PyTree[Array],
        reward: ArrayLike,
        terminated: ArrayLike,
        truncated: ArrayLike = False,
    ) -> "TimeStep":
        """The time step of a step: discount 0 exactly when `terminated`."""
        terminated = jnp.asarray(terminated, bool)
        truncated = jnp.asarray(truncated, bool) & ~terminated
        discount = jnp.where(terminated, 0.0, 1.0).astype(jnp.float32)
        reward = jnp.asarray(reward, jnp.float32)
        return cls(observation, reward, discount, jnp.asarray(False), terminated, truncated)


class AbstractNetworkOutput(eqx.Module):
    """What a network emits for one observation; policies and losses read it.

    Each output type says which action spaces it acts in through `action_size`: the
    checks that a network fits an environment ask the type, never a list of types.
    """

    @classmethod
    @abc.abstractmethod
    def action_size(cls, action_space: AbstractSpace, *, env_name: str) -> int:
        """How many outputs a head of this type needs to act in `action_space`.

        **Arguments:**

        - `action_space`: the environment's action space.
        - `env_name`: how to name the environment in messages.

        **Returns:**

        The number of discrete actions, or the dimension of the real action vector.

        **Raises:**

        `ValueError`, naming the head to build, if this output cannot act in `action_space`.
        """


def discrete_action_count(output_type: type, action_space: AbstractSpace, *, env_name: str) -> int:
    """The number of actions of a `Discrete` space, for outputs that score each action.

    Raises `ValueError` naming the fix for any other space.
    """
    if isinstance(action_space, Discrete):
        return action_space.num_values
    shape = getattr(action_space, "shape", None)
    raise ValueError(
        f"The network's head emits {output_type.__name__} (discrete actions) but {env_name} has continuous "
        f"actions of shape {shape}; build the network with a continuous-action head (GaussianHead, "
        "TanhGaussianHead or DeterministicHead)."
    )


def real_action_size(output_type: type, action_space: AbstractSpace, *, env_name: str) -> int:
    """The dimension of a one-dimensional `Box` of real actions, for outputs that emit action vectors.

    Raises `ValueError` naming the fix for any other space.
    """
    if isinstance(action_space, Discrete):
        raise ValueError(
            f"The network's head emits {output_type.__name__} (continuous actions) but {env_name} has "
            f"{action_space.num_values} discrete actions; build the network with a PolicyLogitHead "
            f"or a QValueHead with num_actions={action_space.num_values}."
        )
    shape = getattr(action_space, "shape", None)
    if shape is None or len(shape) != 1:
        raise ValueError(
            f"The network's head emits flat action vectors but {env_name}'s actions have shape "
            f"{shape}; flatten the action space to one dimension."
        )
    return shape[0]


class AbstractMaskableOutput(AbstractNetworkOutput):
    """A network output over discrete actions that can leave the illegal ones out: what a
    network emits for a [`podrace.MaskedObservation`][].

    Networks call `with_action_mask` with the observation's mask (see
    [`podrace.networks.apply_action_mask`][]); every policy over the output then chooses
    legal actions only, and its log-probabilities and entropies are those of that choice.
    A subclass implements `with_action_mask` and holds the mask.

    **Attributes:**

    - `action_mask`: the legal actions, or `None` where the observation had no mask.
    """

    action_mask: eqx.AbstractVar[Bool[Array, " num_actions"] | None]

    @abc.abstractmethod
    def with_action_mask(self, action_mask: Bool[Array, " num_actions"]) -> "AbstractMaskableOutput":
        """This output with the actions that `action_mask` forbids left out.

        **Arguments:**

        - `action_mask`: which actions are legal (every action is, where none is: see
            [`podrace.legal_actions`][]).

        **Returns:**

        The output of the same type, with `action_mask` set to the legal actions.
        """


def exclude_illegal(
    values: Float[Array, "*batch num_actions"], action_mask: Bool[Array, "*batch num_actions"]
) -> Float[Array, "*batch num_actions"]:
    """`values` with the lowest finite float in place of each illegal action's, as mctx
    masks invalid actions: such an action is never an argmax, has probability 0 under a
    softmax, and adds nothing to an entropy, while every value stays finite.

    **Arguments:**

    - `values`: one value (a logit, an action value) per action.
    - `action_mask`: which actions are legal.

    **Returns:**

    The values of the legal actions, and the lowest float for the others.
    """
    return jnp.where(action_mask, values, jnp.finfo(values.dtype).min)


class AbstractActionValues(AbstractNetworkOutput):
    """A network output that values each discrete action; greedy and epsilon-greedy
    policies read its `q_values`.

    **Attributes:**

    - `q_values`: the (expected) value of each action.
    """

    q_values: eqx.AbstractVar[Float[Array, " num_actions"]]

    @classmethod
    def action_size(cls, action_space: AbstractSpace, *, env_name: str) -> int:
        return discrete_action_count(cls, action_space, env_name=env_name)


@final
class QValues(AbstractActionValues, AbstractMaskableOutput):
    """Action values, one per discrete action.

    **Arguments:**

    - `q_values`: the value of each action; with a mask, the lowest float for each
        illegal action (see [`podrace.exclude_illegal`][]).
    - `action_mask`: the legal actions, or `None` (every action legal).
    """

    q_values: Float[Array, " num_actions"]
    action_mask: Bool[Array, " num_actions"] | None

    # Written out so that the argument order (the abstract `action_mask` last) is the same
    # for type checkers as at run time.
    def __init__(self, q_values: Float[Array, " num_actions"], action_mask: Bool[Array, " num_actions"] | None = None):
        self.q_values = q_values
        self.action_mask = action_mask

    def with_action_mask(self, action_mask: Bool[Array, " num_actions"]) -> "QValues":
        legal = legal_actions(action_mask)
        return QValues(exclude_illegal(self.q_values, legal), legal)


@final
class CategoricalQValues(AbstractActionValues, AbstractMaskableOutput):
    """A categorical distribution of the return of each discrete action, on fixed atoms (C51).

    Reference: Bellemare et al., "A Distributional Perspective on Reinforcement
    Learning", ICML 2017.

    **Arguments:**

    - `logits`: unnormalised log-probabilities of each atom, per action.
    - `atoms`: the returns the probabilities sit on, evenly spaced and increasing.
    - `action_mask`: the legal actions, or `None` (every action legal).
    """

    logits: Float[Array, "num_actions num_atoms"]
    atoms: Float[Array, " num_atoms"]
    action_mask: Bool[Array, " num_actions"] | None

    def __init__(
        self,
        logits: Float[Array, "num_actions num_atoms"],
        atoms: Float[Array, " num_atoms"],
        action_mask: Bool[Array, " num_actions"] | None = None,
    ):
        self.logits = logits
        self.atoms = atoms
        self.action_mask = action_mask

    # Equinox lets a property implement an `AbstractVar`; pyright reads the var as a field.
    @property
    def q_values(self) -> Float[Array, "*batch num_actions"]:  # pyright: ignore[reportIncompatibleVariableOverride]
        """The expected return of each action (the lowest float for an illegal one)."""
        q_values = jnp.sum(jax.nn.softmax(self.logits) * self.atoms[..., None, :], axis=-1)
        return q_values if self.action_mask is None else exclude_illegal(q_values, self.action_mask)

    def with_action_mask(self, action_mask: Bool[Array, " num_actions"]) -> "CategoricalQValues":
        """This output with the mask: the return distributions stay, and `q_values` leaves
        the illegal actions out."""
        return CategoricalQValues(self.logits, self.atoms, legal_actions(action_mask))


@final
class QuantileQValues(AbstractActionValues, AbstractMaskableOutput):
    """The return of each discrete action as `N` quantiles at the midpoints
    `(2i + 1) / 2N` (QR-DQN).

    Reference: Dabney et al., "Distributional Reinforcement Learning with Quantile
    Regression", AAAI 2018.

    **Arguments:**

    - `quantiles`: the return's quantiles, per action.
    - `action_mask`: the legal actions, or `None` (every action legal).
    """

    quantiles: Float[Array, "num_actions num_quantiles"]
    action_mask: Bool[Array, " num_actions"] | None

    def __init__(
        self,
        quantiles: Float[Array, "num_actions num_quantiles"],
        action_mask: Bool[Array, " num_actions"] | None = None,
    ):
        self.quantiles = quantiles
        self.action_mask = action_mask

    @property
    def q_values(self) -> Float[Array, "*batch num_actions"]:  # pyright: ignore[reportIncompatibleVariableOverride]
        """The expected return of each action (the mean of its quantiles; the lowest float
        for an illegal one)."""
        q_values = jnp.mean(self.quantiles, axis=-1)
        return q_values if self.action_mask is None else exclude_illegal(q_values, self.action_mask)

    def with_action_mask(self, action_mask: Bool[Array, " num_actions"]) -> "QuantileQValues":
        """This output with the mask: the quantiles stay, and `q_values` leaves the illegal
        actions out."""
        return QuantileQValues(self.quantiles, legal_actions(action_mask))


class AbstractPolicyOutput(AbstractNetworkOutput):
    """A network output that defines a distribution over actions, with an optional state value.

    Policy-gradient losses read any such output through `distribution()`, so they work
    alike for discrete and continuous actions.
    """

    value: eqx.AbstractVar[Float[Array, ""] | None]

    @abc.abstractmethod
    def distribution(self) -> distrax.Distribution:
        """The action distribution of this (unbatched) output.

        **Returns:**

        A `distrax.Distribution` whose events are single actions.
        """

    @abc.abstractmethod
    def mode(self) -> Array:
        """The most likely action of the distribution (the first one on ties)."""


@final
class PolicyLogits(AbstractPolicyOutput, AbstractMaskableOutput):
    """Unnormalised log-probabilities of a categorical policy, with an optional value.

    **Arguments:**

    - `logits`: one per discrete action; with a mask, the lowest float for each illegal
        action (see [`podrace.exclude_illegal`][]), which has probability 0.
    - `value`: a state-value estimate, or `None` for a policy-only network.
    - `action_mask`: the legal actions, or `None` (every action legal).
    """

    logits: Float[Array, " num_actions"]
    value: Float[Array, ""] | None
    action_mask: Bool[Array, " num_actions"] | None

    # Written out so that the argument order (the abstract `value` after the logits) is the
    # same for type checkers as at run time.
    def __init__(
        self,
        logits: Float[Array, " num_actions"],
        value: Float[Array, ""] | None = None,
        action_mask: Bool[Array, " num_actions"] | None = None,
    ):
        self.logits = logits
        self.value = value
        self.action_mask = action_mask

    def with_action_mask(self, action_mask: Bool[Array, " num_actions"]) -> "PolicyLogits":
        legal = legal_actions(action_mask)
        return PolicyLogits(exclude_illegal(self.logits, legal), self.value, legal)

    def distribution(self) -> distrax.Categorical:
        """The categorical distribution `softmax(logits)` over action indices."""
        return distrax.Categorical(logits=self.logits)

    def mode(self) -> Int[Array, ""]:
        return jnp.argmax(self.logits).astype(jnp.int32)

    @classmethod
    def action_size(cls, action_space: AbstractSpace, *, env_name: str) -> int:
        return discrete_action_count(cls, action_space, env_name=env_name)


@final
class GaussianParams(AbstractPolicyOutput):
    """A diagonal Gaussian over real action vectors, with an optional value.

    The action dimensions are independent: a log-probability is the sum of theirs, and
    so is the entropy. Samples are unbounded; environments with bounded actions clip
    them (as [`podrace.envs.Pendulum`][] does).

    **Arguments:**

    - `mean`: the mean of each action dimension.
    - `log_std`: the log standard deviation of each action dimension.
    - `value`: a state-value estimate, or `None` for a policy-only network.
    """

    mean: Float[Array, " action_size"]
    log_std: Float[Array, " action_size"]
    value: Float[Array, ""] | None

    def __init__(
        self,
        mean: Float[Array, " action_size"],
        log_std: Float[Array, " action_size"],
        value: Float[Array, ""] | None = None,
    ):
        self.mean = mean
        self.log_std = log_std
        self.value = value

    def distribution(self) -> distrax.MultivariateNormalDiag:
        """The Gaussian with mean `mean` and standard deviations `exp(log_std)`."""
        return distrax.MultivariateNormalDiag(self.mean, jnp.exp(self.log_std))

    def mode(self) -> Float[Array, " action_size"]:
        return self.mean

    @classmethod
    def action_size(cls, action_space: AbstractSpace, *, env_name: str) -> int:
        return real_action_size(cls, action_space, env_name=env_name)


@final
class TanhGaussianParams(AbstractPolicyOutput):
    """A diagonal Gaussian squashed by `tanh` into the box `[low, high]`, with an optional value.

    An action is `low + (high - low) * (tanh(u) + 1) / 2` for a Gaussian sample `u`; its
    log-probability includes the change of variables. The distribution's entropy has
    no closed form: policies report minus the log-probability of the sampled action
    (an estimate of it with one sample).

    Reference: Haarnoja et al., "Soft Actor-Critic: Off-Policy Maximum Entropy Deep
    Reinforcement Learning with a Stochastic Actor", ICML 2018, appendix C.

    **Arguments:**

    - `mean`: the mean of the Gaussian of each action dimension, before squashing.
    - `log_std`: the log standard deviation of each, before squashing.
    - `low`, `high`: the bounds of each action dimension.
    - `value`: a state-value estimate, or `None` for a policy-only network.
    """

    mean: Float[Array, " action_size"]
    log_std: Float[Array, " action_size"]
    low: Float[Array, " action_size"]
    high: Float[Array, " action_size"]
    value: Float[Array, ""] | None

    def __init__(
        self,
        mean: Float[Array, " action_size"],
        log_std: Float[Array, " action_size"],
        low: Float[Array, " action_size"],
        high: Float[Array, " action_size"],
        value: Float[Array, ""] | None = None,
    ):
        self.mean = mean
        self.log_std = log_std
        self.low = low
        self.high = high
        self.value = value

    def distribution(self) -> distrax.Transformed:
        """The Gaussian `N(mean, exp(log_std))` pushed through `tanh` and scaled to `[low, high]`."""
        half_width = (self.high - self.low) / 2
        squash = distrax.Chain([distrax.ScalarAffine(self.low + half_width, half_width), distrax.Tanh()])
        base = distrax.MultivariateNormalDiag(self.mean, jnp.exp(self.log_std))
        return distrax.Transformed(base, distrax.Block(squash, ndims=1))

    def mode(self) -> Float[Array, " action_size"]:
        """The squashed mean (the image of the Gaussian's mode)."""
        return self.low + (self.high - self.low) * (jnp.tanh(self.mean) + 1) / 2

    @classmethod
    def action_size(cls, action_space: AbstractSpace, *, env_name: str) -> int:
        return real_action_size(cls, action_space, env_name=env_name)


def entropy_or_estimate(distribution: distrax.Distribution, log_prob: Float[Array, ""]) -> Float[Array, ""]:
    """The entropy of `distribution`, or `-log_prob` where it has no closed form.

    `log_prob` is the log-probability of an action drawn from `distribution`, so `-log_prob`
    is an estimate of the entropy with one sample (a tanh-squashed Gaussian's entropy
    has no closed form).
    """
    try:
        return jnp.asarray(distribution.entropy())
    except NotImplementedError:
        return -jnp.asarray(log_prob)


@final
class DeterministicAction(AbstractNetworkOutput):
    """One action vector chosen by the network, inside the box `[low, high]`.

    What a deterministic actor emits (DDPG, TD3); a policy such as
    [`podrace.policies.GaussianNoise`][] adds exploration around it.

    Reference: Silver et al., "Deterministic Policy Gradient Algorithms", ICML 2014.

    **Arguments:**

    - `action`: the action.
    - `low`, `high`: the bounds of each action dimension.
    """

    action: Float[Array, " action_size"]
    low: Float[Array, " action_size"]
    high: Float[Array, " action_size"]

    @classmethod
    def action_size(cls, action_space: AbstractSpace, *, env_name: str) -> int:
        return real_action_size(cls, action_space, env_name=env_name)


@final
class PolicyStep(eqx.Module):
    """An action with what losses need about the distribution it was drawn from.

    A batch of them (`[T, B]` in a trajectory) is the same module with stacked leaves.

    **Arguments:**

    - `action`: the chosen action.
    - `log_prob`: its log-probability under the behaviour policy.
    - `entropy`: the entropy of the behaviour policy.
    - `extras`: what else the agent reports about its choice, for its losses: a search
        agent's [`podrace.SearchStatistics`][]; `None` (the default) for a policy over a
        network's outputs.
    """

    action: Array
    log_prob: Float[Array, "*batch"]
    entropy: Float[Array, "*batch"]
    extras: PyTree[Array] = None


@final
class SearchStatistics(eqx.Module):
    """What a search reports about the step it chose: the targets of a search agent's
    losses, carried in the trajectory next to the action (`PolicyStep.extras`, `[T, B, ...]`).

    Reference: Silver et al., "A general reinforcement learning algorithm that masters
    chess, shogi, and Go through self-play", Science 2018; Danihelka et al., "Policy
    improvement by planning with Gumbel", ICLR 2022.

    **Arguments:**

    - `policy`: the search's policy at the root, mctx's `action_weights`: Gumbel MuZero's
        improved policy, or MuZero's and AlphaZero's normalised visit counts (0 on illegal
        actions).
    - `value`: the root's value after the search, for the player to move.
    - `visit_counts`: the root's visit count of each action.
    - `discount`: the search's discount of the action taken: the agent's discount times
        the model's (0 where the step ends the game), negated where the player to move
        changes (mctx's discount of -1 between the players of a zero-sum game).
    """

    policy: Float[Array, "*batch num_actions"]
    value: Float[Array, "*batch"]
    visit_counts: Float[Array, "*batch num_actions"]
    discount: Float[Array, "*batch"]


@final
class Trajectory(eqx.Module):
    """A rollout, time-major: `T + 1` time steps and the `T` actions between them.

    The same type comes from every producer (the on-device rollout, host collectors)
    and goes to every learner. A batch of trajectories has a second axis `[T + 1, B]`.

    **Arguments:**

    - `timestep`: time steps `0..T`; step `t + 1` follows from `policy_step.action[t]`.
    - `policy_step`: the actions taken at steps `0..T-1`, with their log-probabilities
        and entropies under the behaviour policy.
    - `carry`: the network's recurrent state before time step 0 (empty for
        feed-forward networks).
    """

    # The batch axis of each part: time steps and actions are time-major, `[T (+ 1), B]`;
    # the recurrent state has no time axis.
    _BATCH_AXES: ClassVar[tuple[int, int, int]] = (1, 1, 0)

    timestep: TimeStep
    policy_step: PolicyStep
    carry: PyTree[Array]

    def map_batch(self, fn: Callable[..., Any], *time_major: PyTree[Array], out_axes: Any = 0) -> Any:
        """`fn(trajectory, *rows)` for each trajectory of a batch `[T + 1, B]`, stacked along `out_axes`.

        Each of `time_major` is a pytree of arrays `[T, B, ...]` or `[T + 1, B, ...]`
        (e.g. a loss's targets); `fn` receives its rows of trajectory `b`.
        """

        def of_one(timestep: TimeStep, policy_step: PolicyStep, carry: PyTree[Array], *rows: PyTree[Array]) -> Any:
            return fn(Trajectory(timestep, policy_step, carry), *rows)

        in_axes = (*self._BATCH_AXES, *(1 for _ in time_major))
        return jax.vmap(of_one, in_axes=in_axes, out_axes=out_axes)(
            self.timestep, self.policy_step, self.carry, *time_major
        )

    def without_last_step(self) -> "Trajectory":
        """The first `T` time steps, with the actions taken at them and the same carry: what
        a loss runs its network on once its targets hold what the last step was needed for."""
        return Trajectory(jax.tree.map(lambda x: x[:-1], self.timestep), self.policy_step, self.carry)

    def take(self, indices: Int[Array, " n"]) -> "Trajectory":
        """The trajectories at `indices` of a batch `[T + 1, B]`, as a batch `[T + 1, n]`."""
        parts = (self.timestep, self.policy_step, self.carry)
        taken = (
            jax.tree.map(lambda x, axis=axis: jnp.take(x, indices, axis=axis), part)
            for part, axis in zip(parts, self._BATCH_AXES, strict=True)
        )
        return Trajectory(*taken)

    @classmethod
    def concatenate(cls, trajectories: "Sequence[Trajectory]") -> "Trajectory":
        """Batches `[T + 1, B_i]` side by side, as one batch `[T + 1, sum B_i]`. NumPy
        arrays are joined on the host and moved to the default device in one transfer per
        array; JAX arrays (or values inside a compiled program) are joined where they are."""

        def join(leaves: tuple[Any, ...], axis: int) -> Array:
            if all(isinstance(leaf, np.ndarray) for leaf in leaves):
                return jnp.asarray(np.concatenate(leaves, axis=axis))
            return jnp.concatenate(leaves, axis=axis)

        def side_by_side(index: int) -> PyTree[Array]:
            parts = [(t.timestep, t.policy_step, t.carry)[index] for t in trajectories]
            axis = cls._BATCH_AXES[index]
            return jax.tree.map(lambda *x: join(x, axis), *parts)

        return Trajectory(*(side_by_side(index) for index in range(3)))
