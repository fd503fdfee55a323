"""The base of every configuration, and the settings that several families share.

A configuration is a typed Equinox module that builds a run's parts: its fields are
the settings (each with its help text and the parser of its command-line flag), its
methods build the learner, the evaluation policy and `pipeline(env, key)`. Float
hyperparameters are array leaves and sizes are static, so a population maps over a
configuration as over any pytree (`eqx.tree_at(lambda c: c.learning_rate, config, rates)`).
"""

import abc
import dataclasses
import math
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import PRNGKeyArray

from .._validation import unknown_name
from ..envs import AbstractEnv, AutoReset
from ..executors.anakin import Anakin, observation_shape
from ..executors.normalization import RunningNormalization
from ..learners import AbstractLearner
from ..policies import AbstractPolicy


# --------------------------------------------------------------------------------------
# Parsers of the settings' text (the command line's flags): each raises `ValueError`
# with what the value must be.
# --------------------------------------------------------------------------------------


def number(text: str) -> float:
    """A float."""
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"must be a number, got {text!r}") from None


def whole_number(text: str) -> int:
    """An integer, written as one (`1000`) or as a float with no fractional part (`1e3`)."""
    try:
        return int(text)
    except ValueError:
        value = number(text)
    if not value.is_integer():  # NaN and infinities too
        raise ValueError(f"must be a whole number, got {text!r}")
    return int(value)


def positive_int(text: str) -> int:
    """A whole number above 0."""
    value = whole_number(text)
    if value <= 0:
        raise ValueError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number, 0 or above."""
    value = whole_number(text)
    if value < 0:
        raise ValueError(f"must be a non-negative integer, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0."""
    value = number(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"must be a positive finite number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number, 0 or above."""
    value = number(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"must be a non-negative finite number, got {text}")
    return value


def finite_float(text: str) -> float:
    """A finite number."""
    value = number(text)
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {text}")
    return value


def unit_interval(text: str) -> float:
    """A number in [0, 1]."""
    value = number(text)
    if not 0 <= value <= 1:  # NaN fails too
        raise ValueError(f"must lie in [0, 1], got {text}")
    return value


def sizes(text: str) -> tuple[int, ...]:
    """Comma-separated positive integers, such as `64,64`."""
    try:
        values = tuple(int(size) for size in text.split(","))
    except ValueError:
        raise ValueError(f"must be comma-separated positive integers, got {text!r}") from None
    if not values or min(values) <= 0:
        raise ValueError(f"must be comma-separated positive integers, got {text!r}")
    return values


def gradient_clip(text: str) -> float | None:
    """A positive norm, or `none`."""
    return None if text == "none" else positive_float(text)


def optional_positive_int(text: str) -> int | None:
    """A positive integer, or `none`."""
    return None if text == "none" else positive_int(text)


def reset_count(text: str) -> int | None:
    """A positive count, or `all`."""
    return None if text == "all" else positive_int(text)


ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {"relu": jax.nn.relu, "tanh": jnp.tanh}
"""The torsos' activations by name."""


def activation_name(text: str) -> str:
    """One of `ACTIVATIONS`."""
    if text not in ACTIVATIONS:
        raise ValueError(f"must be one of {', '.join(ACTIVATIONS)}, got {text!r}")
    return text


# --------------------------------------------------------------------------------------
# Fields
# --------------------------------------------------------------------------------------


def setting(default: Any, help: str, parse: Callable[[str], Any] | None, *, static: bool = True) -> Any:
    """A configuration field: its default, its help text and the parser of its flag's text
    (`None` for a switch, `--flag` / `--no-flag`). Float hyperparameters are array leaves
    (`static=False`); sizes, switches and names are static."""
    return eqx.field(default=default, static=static, metadata={"help": help, "parse": parse})


def flag_name(field_name: str) -> str:
    """The command-line flag of a field: `num_envs` is `--num-envs`, `lambda_` is `--lambda`."""
    return "--" + field_name.rstrip("_").replace("_", "-")


def lambda_setting(help: str) -> Any:
    """The trace coefficient of TD(lambda), GAE, V-trace or Peng's Q(lambda)."""
    return setting(0.95, help, unit_interval, static=False)


def epsilon_setting(help: str) -> Any:
    """The probability of a uniformly random action, of the epsilon-greedy families."""
    return setting(0.05, help, unit_interval, static=False)


def double_setting() -> Any:
    """Double Q-learning targets, of the Q-learning families."""
    return setting(False, "double Q-learning targets: the online network picks the next action", None)


def epsilon_decay_setting() -> Any:
    """The schedule length of epsilon, of DQN and PQN."""
    return setting(50_000, "environment steps over which epsilon falls linearly from 1 to --epsilon", positive_int)


def layer_norm_setting() -> Any:
    """Layer normalisation in the torso, of the families built on `MLPTorso` alone."""
    return setting(False, "normalise every torso layer before its activation (as PQN does)", None)


def core_setting() -> Any:
    """A recurrent core between torso and head, of the families that unroll rollouts."""
    return setting(None, "a recurrent core between torso and head: gru, lstm or none", core_name)


def core_size_setting() -> Any:
    """The recurrent core's hidden size."""
    return setting(32, "the recurrent core's hidden size (with --core)", positive_int)


def num_atoms_setting() -> Any:
    """The atoms of a categorical return distribution (C51)."""
    return setting(51, "returns each action's distribution sits on (at least 2)", positive_int)


def v_min_setting() -> Any:
    """The smallest atom of a categorical return distribution."""
    return setting(-10.0, "the smallest of them", finite_float)


def v_max_setting() -> Any:
    """The largest atom of a categorical return distribution."""
    return setting(10.0, "the largest of them", finite_float)


CORES = ("gru", "lstm")
"""The recurrent cores by name."""


def core_name(text: str) -> str | None:
    """One of `CORES`, or `none`."""
    if text == "none":
        return None
    if text not in CORES:
        raise ValueError(f"must be one of {', '.join(CORES)} or none, got {text!r}")
    return text


# --------------------------------------------------------------------------------------
# The base
# --------------------------------------------------------------------------------------


class AbstractConfig(eqx.Module):
    """One algorithm family's configuration: every setting of a run of it, and the parts they build.

    A family lists its algorithms in `ALGORITHMS` and holds the chosen one in
    `algorithm`; its fields are its settings, with their help text and defaults
    (`podrace train ENV ALGO --help` lists them). A subclass builds its learner and names its
    evaluation policy; this base builds the optimiser, the running normalisation and
    the pipeline. Configurations are built by name with `podrace.configs.config`, and the
    named ones (tuned defaults, published settings) are `podrace.configs.TUNED`.
    """

    ALGORITHMS: ClassVar[tuple[str, ...]]
    algorithm: eqx.AbstractVar[str]

    num_updates: int = setting(1_000, "total learner updates (the last call trains the rest)", positive_int)
    updates_per_call: int = setting(100, "updates compiled into one call", positive_int)
    num_envs: int = setting(16, "environments per device (a gymnasium:ID run acts and learns on one)", positive_int)
    rollout_length: int = setting(128, "environment steps per update", positive_int)
    resets_per_step: int | None = setting(
        None,
        "at most this many environments of a device's batch reset on one step, the others that end then starting "
        "from copies of those resets (for costly resets, as Craftax's; 'all': no limit)",
        reset_count,
    )
    normalize_observations: bool = setting(False, "normalise observations by their running mean and variance", None)
    normalize_rewards: bool = setting(
        False, "divide rewards by the running standard deviation of discounted returns", None
    )
    hidden: tuple[int, ...] = setting((64, 64), "sizes of the MLP torso's layers, e.g. 64,64", sizes)
    activation: str = setting("tanh", f"the torso's activation: {', '.join(ACTIVATIONS)}", activation_name)
    learning_rate: float | jax.Array = setting(1e-3, "Adam's step size", positive_float, static=False)
    anneal_learning_rate: bool = setting(False, "decay the step size linearly to 0 over the run", None)
    max_grad_norm: float | None = setting(
        0.5, "clip the gradients' global norm to this ('none': no clipping)", gradient_clip, static=False
    )
    discount: float = setting(0.99, "the agent's discount, in [0, 1]", unit_interval, static=False)

    def __check_init__(self) -> None:
        if self.algorithm not in self.ALGORITHMS:
            raise ValueError(unknown_name(f"{type(self).__name__} algorithm", self.algorithm, self.ALGORITHMS))

    @abc.abstractmethod
    def learner(self, action_space: Any, observation_shape: tuple[int, ...], key: PRNGKeyArray) -> AbstractLearner:
        """The learner, for environments of `action_space` and observations of
        `observation_shape`, its networks drawn from `key`."""

    @abc.abstractmethod
    def evaluation_policy(self) -> AbstractPolicy:
        """The deterministic policy a trained agent is evaluated with."""

    @property
    @abc.abstractmethod
    def gradient_steps_per_update(self) -> int:
        """Gradient steps of one update (what `anneal_learning_rate` counts)."""

    def optimizer(self) -> optax.GradientTransformation:
        """Adam at `learning_rate` (annealed linearly to 0 over the run with
        `anneal_learning_rate`), after clipping the gradients' global norm to `max_grad_norm`."""
        learning_rate: float | jax.Array | optax.Schedule = self.learning_rate
        if self.anneal_learning_rate:
            gradient_steps = self.num_updates * self.gradient_steps_per_update
            learning_rate = optax.linear_schedule(self.learning_rate, 0.0, gradient_steps)
        adam = optax.adam(learning_rate)
        if self.max_grad_norm is None:
            return adam
        return optax.chain(optax.clip_by_global_norm(self.max_grad_norm), adam)

    def normalization(self) -> RunningNormalization | None:
        """The running normalisation that `normalize_observations` and `normalize_rewards` ask for."""
        if not (self.normalize_observations or self.normalize_rewards):
            return None
        return RunningNormalization(
            observations=self.normalize_observations, rewards=self.normalize_rewards, discount=self.discount
        )

    def pipeline(self, env: AbstractEnv, key: PRNGKeyArray) -> Anakin:
        """One seed's Anakin pipeline on `env` (reset automatically), its networks drawn from `key`.

        **Arguments:**

        - `env`: a JAX environment.
        - `key`: the key of the learner's networks.

        **Returns:** the pipeline; `pipeline.init(run_key)` starts its state.
        """
        # Built eagerly even inside a traced function (a population builds its members under
        # `vmap`): a bounded head takes the action space's bounds as constants.
        with jax.ensure_compile_time_eval():
            action_space, shape = env.action_space, observation_shape(env)
        return Anakin(
            AutoReset(env, resets_per_step=self.resets_per_step),
            self.learner(action_space, shape, key),
            num_envs=self.num_envs,
            rollout_length=self.rollout_length,
            normalization=self.normalization(),
        )


def settings_of(config: AbstractConfig) -> dict[str, Any]:
    """The settings of `config` by field name, in the order of its fields."""
    return {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}
