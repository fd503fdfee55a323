import abc
from typing import TYPE_CHECKING, Generic, TypeVar, final

import distrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray

from .._types import (
    AbstractActionValues,
    AbstractMaskableOutput,
    AbstractNetworkOutput,
    AbstractPolicyOutput,
    AbstractSpace,
    Box,
    DeterministicAction,
    Discrete,
    GaussianParams,
    PolicyLogits,
    PolicyStep,
    TanhGaussianParams,
    entropy_or_estimate,
)
from .._validation import check_in_unit_interval, check_positive


# Equinox's documented import: type checkers read it as the `ClassVar` it stands for.
if TYPE_CHECKING:
    from typing import ClassVar as AbstractClassVar
else:
    from equinox import AbstractClassVar


OutputT = TypeVar("OutputT", bound=AbstractNetworkOutput)


class AbstractPolicy(eqx.Module, Generic[OutputT]):
    """Turns one network output into a distribution over actions and samples it.

    Where the environment marks its legal actions ([`podrace.MaskedObservation`][]), the
    network's output leaves the illegal ones out ([`podrace.AbstractMaskableOutput`][]),
    and a discrete policy chooses among the legal actions only: its distribution gives
    the others probability 0.

    Each policy reads one kind of network output (`input_type`) and supports one kind
    of action space; [`podrace.Learner`][] and [`podrace.Anakin`][] check both when
    they are built. A policy that chooses without randomness is also an
    [`podrace.policies.AbstractDeterministicPolicy`][], and one whose parameters follow
    schedules an [`podrace.policies.AbstractScheduledPolicy`][].
    """

    input_type: AbstractClassVar[type[AbstractNetworkOutput]]

    @abc.abstractmethod
    def distribution(self, output: OutputT) -> distrax.Distribution:
        """The action distribution for one network output."""

    @abc.abstractmethod
    def __call__(self, output: OutputT, key: PRNGKeyArray) -> PolicyStep:
        """Chooses an action for one network output.

        **Arguments:**

        - `output`: one (unbatched) network output of type `input_type`.
        - `key`: sampling randomness.

        **Returns:**

        The action with its log-probability and the distribution's entropy.
        """

    def at(self, step: Int[Array, ""]) -> "AbstractPolicy[OutputT]":
        """The policy that acts after `step` environment steps: the `scheduled_at(step)` of
        an [`podrace.policies.AbstractScheduledPolicy`][], this policy itself for any other.
        A learner calls this when it builds the acting agent.
        """
        if isinstance(self, AbstractScheduledPolicy):
            return self.scheduled_at(step)
        return self

    @abc.abstractmethod
    def check_action_space(self, action_space: AbstractSpace) -> None:
        """Raises `ValueError` if this policy cannot act in `action_space`."""


class AbstractDeterministicPolicy(AbstractPolicy[OutputT]):
    """A policy that chooses its action without randomness: the same network output gives
    the same action.

    A subclass implements `action` beside `distribution` and `check_action_space`;
    calling the policy takes that action, with its log-probability under `distribution`
    and the entropy. [`podrace.export.export_policy`][] exports these policies, whose
    action is a function of the observation alone.
    """

    @abc.abstractmethod
    def action(self, output: OutputT) -> Array:
        """The action it takes for one network output, without its distribution (as an
        exported policy computes it)."""

    def __call__(self, output: OutputT, key: PRNGKeyArray) -> PolicyStep:
        del key
        return choose(self.distribution(output), self.action(output))


class AbstractScheduledPolicy(AbstractPolicy[OutputT]):
    """A policy with parameters that follow schedules over environment steps (as
    [`podrace.policies.EpsilonGreedy`][]'s `epsilon` can).

    A subclass implements `scheduled_at` beside what defines every
    [`podrace.policies.AbstractPolicy`][]; [`at`][podrace.policies.AbstractPolicy.at]
    returns it.
    """

    @abc.abstractmethod
    def scheduled_at(self, step: Int[Array, ""]) -> "AbstractScheduledPolicy[OutputT]":
        """This policy with each scheduled parameter at its schedule's value after `step`
        environment steps (the policy itself where no parameter has a schedule)."""


def sample(distribution: distrax.Distribution, key: PRNGKeyArray) -> PolicyStep:
    """An action drawn from `distribution`, with its log-probability and the entropy."""
    return choose(distribution, jnp.asarray(distribution.sample(seed=key)))


def choose(distribution: distrax.Distribution, action: Array) -> PolicyStep:
    """`action`, chosen without randomness, with its log-probability under `distribution` and the entropy."""
    log_prob = jnp.asarray(distribution.log_prob(action))
    return PolicyStep(action, log_prob, entropy_or_estimate(distribution, log_prob))


def _value_or_schedule(value: ArrayLike | optax.Schedule) -> tuple[optax.Schedule | None, Float[Array, "..."]]:
    """A policy parameter given as a number or a schedule: `(schedule or None, value at step 0)`."""
    schedule = value if callable(value) else None
    return schedule, jnp.asarray(value(0) if callable(value) else value, jnp.float32)


def _value_at(schedule: optax.Schedule | None, value: Float[Array, ""], step: Int[Array, ""]) -> Float[Array, ""]:
    """A policy parameter after `step` environment steps: its schedule's value, or `value` without a schedule."""
    return value if schedule is None else jnp.asarray(schedule(step), jnp.float32)


def with_random_actions(
    distribution: distrax.Distribution, output: DeterministicAction | TanhGaussianParams, probability: Float[Array, ""]
) -> distrax.MixtureOfTwo:
    """`distribution`, or with `probability` the uniform distribution within `output`'s bounds."""
    uniform = distrax.Independent(distrax.Uniform(output.low, output.high), reinterpreted_batch_ndims=1)
    return distrax.MixtureOfTwo(probability, uniform, distribution)


def random_first_steps(num_steps: int) -> optax.Schedule:
    """The probability of a uniformly random action: 1 for the first `num_steps`
    environment steps, then 0 (none at all for `num_steps=0`). It is how TD3's paper and
    Stable-Baselines3 fill the replay buffer first: give it to `GaussianNoise` or
    `TanhGaussian` as `random_action_probability`.

    **Arguments:**

    - `num_steps`: environment steps of random actions.

    **Returns:** an optax schedule over environment steps.
    """
    return optax.piecewise_constant_schedule(float(num_steps > 0), {num_steps: 0.0})


def mix_in_random_actions(
    step: PolicyStep,
    policy: distrax.Distribution,
    output: DeterministicAction | TanhGaussianParams,
    probability: Float[Array, ""],
    key: PRNGKeyArray,
) -> PolicyStep:
    """With `probability`, a uniformly random action within `output`'s bounds instead of `step`'s.

    The log-probability is that of the mixture ([`podrace.policies.with_random_actions`][]),
    `log(p / volume + (1 - p) pi(a))`, with `pi(a)` from `step`, or from `policy` for a
    random action, and the entropy its estimate, minus the log-probability. `key`
    must differ from the one `step` was drawn with.
    """
    uniform_key, choice_key = jax.random.split(key)
    uniform = jax.random.uniform(uniform_key, output.low.shape, minval=output.low, maxval=output.high)
    is_random = jax.random.bernoulli(choice_key, probability)
    action = jnp.where(is_random, uniform, step.action)
    log_pi = jnp.where(is_random, jnp.asarray(policy.log_prob(uniform)), step.log_prob)
    log_volume = jnp.sum(jnp.log(output.high - output.low))
    from_policy = jnp.where(probability < 1, jnp.log1p(-probability) + log_pi, -jnp.inf)
    log_prob = jnp.logaddexp(jnp.log(probability) - log_volume, from_policy)
    return PolicyStep(action, log_prob, -log_prob)


def check_discrete(policy: AbstractPolicy, action_space: AbstractSpace) -> None:
    """Raises `ValueError`, naming continuous-action policies, unless `action_space` is `Discrete`."""
    if not isinstance(action_space, Discrete):
        raise ValueError(
            f"{type(policy).__name__} chooses among discrete actions, but the environment's "
            f"action space is {action_space!r}; use a continuous-action policy for it "
            f"(podrace.policies.Gaussian with a podrace.networks.GaussianHead)."
        )


@final
class Greedy(AbstractDeterministicPolicy[AbstractActionValues]):
    """Takes the action of highest value (the first one on ties).

    The reported log-probability and entropy are those of a uniform choice among the
    maximising actions (`distrax.Greedy`). With a legal-action mask, the illegal actions'
    values are the lowest float, so the chosen action is legal.
    """

    input_type = AbstractActionValues

    def distribution(self, output: AbstractActionValues) -> distrax.Greedy:
        return distrax.Greedy(output.q_values)

    def action(self, output: AbstractActionValues) -> Int[Array, ""]:
        return jnp.argmax(output.q_values).astype(jnp.int32)

    def check_action_space(self, action_space: AbstractSpace) -> None:
        check_discrete(self, action_space)


@final
class EpsilonGreedy(AbstractScheduledPolicy[AbstractActionValues]):
    """With probability `epsilon` a uniformly random action, otherwise a greedy one.

    With a legal-action mask (an output's `action_mask`), the random action is uniform
    among the legal actions and the greedy one the best legal action, so an illegal
    action has probability 0.

    Reference: Sutton & Barto, "Reinforcement Learning: An Introduction", 2nd ed., 2.2.

    **Arguments:**

    - `epsilon`: the exploration probability, in [0, 1]; an array leaf, so it can vary
        across a population without recompiling. Or a schedule over environment steps
        (e.g. `optax.linear_schedule(1.0, 0.05, 10_000)`): the policy then acts with its
        value at step 0 until a learner moves it on with [`at`][podrace.policies.AbstractPolicy.at].
    """

    epsilon: Float[Array, ""]
    epsilon_schedule: optax.Schedule | None
    input_type = AbstractActionValues

    def __init__(self, epsilon: ArrayLike | optax.Schedule):
        self.epsilon_schedule, self.epsilon = _value_or_schedule(epsilon)

    def __check_init__(self):
        check_in_unit_interval("EpsilonGreedy", "epsilon", self.epsilon)

    def scheduled_at(self, step: Int[Array, ""]) -> "EpsilonGreedy":
        if self.epsilon_schedule is None:
            return self
        epsilon = jnp.asarray(self.epsilon_schedule(step), jnp.float32)
        return eqx.tree_at(lambda policy: policy.epsilon, self, epsilon)

    def distribution(self, output: AbstractActionValues) -> distrax.Categorical:
        action_mask = output.action_mask if isinstance(output, AbstractMaskableOutput) else None
        if action_mask is None:
            return distrax.EpsilonGreedy(output.q_values, self.epsilon)  # pyright: ignore[reportArgumentType]
        greedy = distrax.Greedy(output.q_values).probs
        uniform = action_mask / jnp.sum(action_mask)
        return distrax.Categorical(probs=(1 - self.epsilon) * greedy + self.epsilon * uniform)

    def __call__(self, output: AbstractActionValues, key: PRNGKeyArray) -> PolicyStep:
        return sample(self.distribution(output), key)

    def check_action_space(self, action_space: AbstractSpace) -> None:
        check_discrete(self, action_space)


@final
class Softmax(AbstractPolicy[AbstractActionValues]):
    """Boltzmann exploration: samples actions with probability `softmax(q / temperature)`.

    With a legal-action mask, the illegal actions' values are the lowest float, so they
    have probability 0.

    Reference: Sutton & Barto, "Reinforcement Learning: An Introduction", 2nd ed., 13.1.

    **Arguments:**

    - `temperature`: positive; higher is more uniform.
    """

    temperature: Float[Array, ""]
    input_type = AbstractActionValues

    def __init__(self, temperature: ArrayLike = 1.0):
        self.temperature = jnp.asarray(temperature, jnp.float32)

    def __check_init__(self):
        check_positive("Softmax", "temperature", self.temperature)

    def distribution(self, output: AbstractActionValues) -> distrax.Softmax:
        return distrax.Softmax(output.q_values, self.temperature)  # pyright: ignore[reportArgumentType]

    def __call__(self, output: AbstractActionValues, key: PRNGKeyArray) -> PolicyStep:
        return sample(self.distribution(output), key)

    def check_action_space(self, action_space: AbstractSpace) -> None:
        check_discrete(self, action_space)


@final
class Categorical(AbstractPolicy[PolicyLogits]):
    """Samples from the categorical distribution given by a policy head's logits.

    With a legal-action mask, the illegal actions' logits are the lowest float, so they
    have probability 0 (the head's distribution is that over the legal actions).
    """

    input_type = PolicyLogits

    def distribution(self, output: PolicyLogits) -> distrax.Categorical:
        return output.distribution()

    def __call__(self, output: PolicyLogits, key: PRNGKeyArray) -> PolicyStep:
        return sample(self.distribution(output), key)

    def check_action_space(self, action_space: AbstractSpace) -> None:
        check_discrete(self, action_space)


@final
class Gaussian(AbstractPolicy[GaussianParams]):
    """Samples real action vectors from the diagonal Gaussian of a Gaussian head.

    Actions are unbounded samples: the environment clips them to its action space (as
    [`podrace.envs.Pendulum`][] does), and the log-probability is that of the unclipped
    sample, which is what the policy gradient needs. It acts in `Box` action spaces of
    one dimension, with a [`podrace.networks.GaussianHead`][] of that many outputs.
    """

    input_type = GaussianParams

    def distribution(self, output: GaussianParams) -> distrax.MultivariateNormalDiag:
        return output.distribution()

    def __call__(self, output: GaussianParams, key: PRNGKeyArray) -> PolicyStep:
        return sample(self.distribution(output), key)

    def check_action_space(self, action_space: AbstractSpace) -> None:
        _check_real_vectors(
            "Gaussian",
            "samples real action vectors",
            action_space,
            fix="use a discrete-action policy such as podrace.policies.Categorical for it",
        )


def tanh_gaussian_step(output: TanhGaussianParams, key: PRNGKeyArray) -> PolicyStep:
    """A reparameterised sample of a tanh-squashed Gaussian, its log-probability and
    minus that (the entropy's estimate).

    The log-probability comes from the Gaussian sample and the squashing's log-determinant:
    inverting tanh near the bounds would lose precision.
    """
    distribution = output.distribution()
    gaussian = distribution.distribution.sample(seed=key)
    action, log_det = distribution.bijector.forward_and_log_det(gaussian)
    log_prob = jnp.asarray(distribution.distribution.log_prob(gaussian)) - log_det
    return PolicyStep(jnp.asarray(action), log_prob, entropy_or_estimate(distribution, log_prob))


@final
class TanhGaussian(AbstractScheduledPolicy[TanhGaussianParams]):
    """Samples bounded action vectors from the tanh-squashed Gaussian of a
    [`podrace.networks.TanhGaussianHead`][].

    Every action lies inside the head's bounds. The log-probability includes the
    squashing's change of variables; the reported entropy is minus the log-probability
    of the sampled action (the squashed distribution's entropy has no closed form).

    With `random_action_probability` it takes, with that probability, a uniformly
    random action within the bounds instead (see
    [`podrace.policies.GaussianNoise`][]).

    Reference: Haarnoja et al., "Soft Actor-Critic: Off-Policy Maximum Entropy Deep
    Reinforcement Learning with a Stochastic Actor", ICML 2018.

    **Arguments:**

    - `random_action_probability`: in [0, 1], 0 by default; or a schedule over
        environment steps.
    """

    random_action_probability: Float[Array, ""]
    random_action_probability_schedule: optax.Schedule | None
    input_type = TanhGaussianParams

    def __init__(self, random_action_probability: ArrayLike | optax.Schedule = 0.0):
        self.random_action_probability_schedule, self.random_action_probability = _value_or_schedule(
            random_action_probability
        )

    def __check_init__(self):
        check_in_unit_interval("TanhGaussian", "random_action_probability", self.random_action_probability)

    def scheduled_at(self, step: Int[Array, ""]) -> "TanhGaussian":
        if self.random_action_probability_schedule is None:
            return self
        probability = jnp.asarray(self.random_action_probability_schedule(step), jnp.float32)
        return eqx.tree_at(lambda policy: policy.random_action_probability, self, probability)

    def distribution(self, output: TanhGaussianParams) -> distrax.MixtureOfTwo:
        return with_random_actions(output.distribution(), output, self.random_action_probability)

    def __call__(self, output: TanhGaussianParams, key: PRNGKeyArray) -> PolicyStep:
        step = tanh_gaussian_step(output, key)
        return mix_in_random_actions(
            step, output.distribution(), output, self.random_action_probability, jax.random.fold_in(key, 1)
        )

    def check_action_space(self, action_space: AbstractSpace) -> None:
        _check_real_vectors(
            "TanhGaussian",
            "samples real action vectors",
            action_space,
            fix="use a discrete-action policy such as podrace.policies.Categorical for it",
        )


@final
class Deterministic(AbstractDeterministicPolicy[DeterministicAction]):
    """Takes the action a deterministic actor emits (a [`podrace.DeterministicAction`][]),
    with log-probability and entropy 0: to evaluate a DDPG or TD3 actor."""

    input_type = DeterministicAction

    def distribution(self, output: DeterministicAction) -> distrax.Independent:
        return distrax.Independent(distrax.Deterministic(output.action), reinterpreted_batch_ndims=1)

    def action(self, output: DeterministicAction) -> Float[Array, " action_size"]:
        return output.action

    def check_action_space(self, action_space: AbstractSpace) -> None:
        _check_real_vectors(
            "Deterministic", "takes real action vectors", action_space, fix="use a discrete-action policy for it"
        )


@final
class GaussianNoise(AbstractScheduledPolicy[DeterministicAction]):
    """Explores around a deterministic actor's action with Gaussian noise, clipped to its bounds.

    The noise's standard deviation is `std` times half the width of the action bounds
    (TD3 and DDPG use `0.1`). The reported log-probability is the Gaussian's at the
    clipped action, and the entropy the Gaussian's.

    Reference: Fujimoto et al., "Addressing Function Approximation Error in
    Actor-Critic Methods", ICML 2018 (TD3's exploration).

    With `random_action_probability`, it takes a uniformly random action within the
    bounds with that probability instead; a schedule such as
    `optax.piecewise_constant_schedule(1.0, {10_000: 0.0})` gives the random first
    steps with which TD3 and RL Zoo fill the replay buffer. The reported
    log-probability is then the mixture's.

    Reference: Fujimoto et al., "Addressing Function Approximation Error in
    Actor-Critic Methods", ICML 2018 (TD3's exploration and random first steps).

    **Arguments:**

    - `std`: the noise scale, relative to half the action range, > 0; an array leaf. Or
        a schedule over environment steps, as for [`podrace.policies.EpsilonGreedy`][].
    - `random_action_probability`: in [0, 1], 0 by default; or a schedule over
        environment steps.
    """

    std: Float[Array, ""]
    std_schedule: optax.Schedule | None
    random_action_probability: Float[Array, ""]
    random_action_probability_schedule: optax.Schedule | None
    input_type = DeterministicAction

    def __init__(self, std: ArrayLike | optax.Schedule, random_action_probability: ArrayLike | optax.Schedule = 0.0):
        self.std_schedule, self.std = _value_or_schedule(std)
        self.random_action_probability_schedule, self.random_action_probability = _value_or_schedule(
            random_action_probability
        )

    def __check_init__(self):
        check_positive("GaussianNoise", "std", self.std)
        check_in_unit_interval("GaussianNoise", "random_action_probability", self.random_action_probability)

    def scheduled_at(self, step: Int[Array, ""]) -> "GaussianNoise":
        if self.std_schedule is None and self.random_action_probability_schedule is None:
            return self
        values = (
            _value_at(self.std_schedule, self.std, step),
            _value_at(self.random_action_probability_schedule, self.random_action_probability, step),
        )
        return eqx.tree_at(lambda policy: (policy.std, policy.random_action_probability), self, values)

    def noise(self, output: DeterministicAction) -> distrax.MultivariateNormalDiag:
        """The Gaussian around the actor's action."""
        scale = self.std * (output.high - output.low) / 2
        return distrax.MultivariateNormalDiag(output.action, scale)

    def distribution(self, output: DeterministicAction) -> distrax.MixtureOfTwo:
        return with_random_actions(self.noise(output), output, self.random_action_probability)

    def __call__(self, output: DeterministicAction, key: PRNGKeyArray) -> PolicyStep:
        noise = self.noise(output)
        step = choose(noise, jnp.clip(noise.sample(seed=key), output.low, output.high))
        return mix_in_random_actions(step, noise, output, self.random_action_probability, jax.random.fold_in(key, 1))

    def check_action_space(self, action_space: AbstractSpace) -> None:
        _check_real_vectors(
            "GaussianNoise",
            "adds noise to real action vectors",
            action_space,
            fix="use a discrete-action policy for it",
        )


@final
class Mode(AbstractDeterministicPolicy[AbstractPolicyOutput]):
    """Takes the most likely action of a policy head: the mode of its action distribution.

    The deterministic counterpart of [`podrace.policies.Categorical`][],
    [`podrace.policies.Gaussian`][] and [`podrace.policies.TanhGaussian`][], e.g. to
    evaluate a policy-gradient agent: the argmax of the logits of a
    [`podrace.PolicyLogits`][] (the first one on ties, as an `int32` index), the mean of
    a [`podrace.GaussianParams`][] and the squashed mean of a
    [`podrace.TanhGaussianParams`][]. It reads any [`podrace.AbstractPolicyOutput`][] and
    acts in `Discrete` action spaces or in `Box` action spaces of one dimension; the
    network's head decides which.

    The reported log-probability and entropy are those of the head's distribution
    (`output.distribution()`) at the chosen action, not those of the deterministic
    choice: they say how sure the head is of its mode.
    """

    input_type = AbstractPolicyOutput

    def distribution(self, output: AbstractPolicyOutput) -> distrax.Distribution:
        return output.distribution()

    def action(self, output: AbstractPolicyOutput) -> Array:
        return output.mode()

    def check_action_space(self, action_space: AbstractSpace) -> None:
        if not isinstance(action_space, Discrete):
            _check_real_vectors(
                "Mode",
                "acts among discrete actions or with real action vectors",
                action_space,
                fix="give the environment a Discrete action space or a Box of floats",
            )


def _check_real_vectors(name: str, acts: str, action_space: AbstractSpace, *, fix: str) -> None:
    """Raises `ValueError` unless `action_space` is a one-dimensional `Box` of floats.

    **Arguments:**

    - `name`: the policy, as messages name it.
    - `acts`: what it does, completing the sentence "`name` ...".
    - `action_space`: the environment's action space.
    - `fix`: what to do when the space does not hold real action vectors.
    """
    if not isinstance(action_space, Box) or not jnp.issubdtype(action_space.dtype, jnp.floating):
        raise ValueError(f"{name} {acts}, but the environment's action space is {action_space!r}; {fix}.")
    if len(action_space.shape) != 1:
        raise ValueError(
            f"{name} takes flat action vectors, but the environment's actions have shape "
            f"{action_space.shape}; flatten the action space to one dimension."
        )
