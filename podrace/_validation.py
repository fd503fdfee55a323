"""Construction-time conversions and checks that give a clear message instead of a deep XLA trace."""

import difflib
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PyTree

from ._types import (
    AbstractActionValues,
    AbstractPolicyOutput,
    AbstractSpace,
    Discrete,
    ObservationActionReward,
)
from .compilation import compiled_once


def as_float_array(value: ArrayLike) -> Float[Array, "..."]:
    """`value` as a float32 array: a hyperparameter that `vmap` can batch."""
    return jnp.asarray(value, jnp.float32)


def _concrete(value: ArrayLike) -> np.ndarray | None:
    """The value as NumPy, or `None` while it is traced (inside jit or vmap)."""
    try:
        return np.asarray(value)
    except jax.errors.TracerArrayConversionError:
        return None


def unknown_name(what: str, name: str, choices: Iterable[str]) -> str:
    """The message for a `name` that is not among `choices`: the nearest ones, then all of them."""
    choices = list(choices)
    nearest = difflib.get_close_matches(name, choices, n=3, cutoff=0.4)
    hint = f" Did you mean {' or '.join(nearest)}?" if nearest else ""
    return f"No {what} {name!r}.{hint} The {what}s: {', '.join(choices)}."


def check_in_unit_interval(owner: str, name: str, value: ArrayLike) -> None:
    """Raises `ValueError` unless every element of `value` lies in [0, 1]."""
    array = _concrete(value)
    if array is not None and not np.all((array >= 0) & (array <= 1)):
        raise ValueError(f"{owner}: {name} must lie in [0, 1], got {array}.")


def check_positive(owner: str, name: str, value: ArrayLike) -> None:
    """Raises `ValueError` unless every element of `value` is > 0."""
    array = _concrete(value)
    if array is not None and not np.all(array > 0):
        raise ValueError(f"{owner}: {name} must be positive, got {array}.")


def check_non_negative(owner: str, name: str, value: ArrayLike) -> None:
    """Raises `ValueError` unless every element of `value` is >= 0."""
    array = _concrete(value)
    if array is not None and not np.all(array >= 0):
        raise ValueError(f"{owner}: {name} must be non-negative, got {array}.")


def check_optimizer_first_step(owner: str, name: str, optimizer: Any, params: PyTree[Array]) -> None:
    """Raises `ValueError` when the optax optimiser's first step along gradients of ones is
    not finite (a learning rate of NaN or infinity, say) or goes uphill (a negative
    learning rate), before a run rather than after its first update.

    The step is taken on parameters of ones with the ranks and dtypes of `params` and one
    element each, in one small compiled program (taken eagerly, each of the optimiser's
    operations would compile a program of its own: most of a learner's construction time
    on a CPU). It
    goes uphill when, on some array, it has a positive inner product with the gradient it
    was given: every optimiser that minimises (SGD, Adam, RMSProp, with or without
    schedules, clipping or weight decay) steps against the gradient, and one of learning
    rate 0 (a frozen part, or a schedule that starts at 0) does not step at all. An
    optimiser that cannot step on those parameters is not checked, nor one that is traced
    (built from a population member's hyperparameters).

    **Arguments:**

    - `owner`: how to name the learner in messages (`"SACLearner"`).
    - `name`: the optimiser's argument (`"actor_optimizer"`).
    - `optimizer`: the optax gradient transformation.
    - `params`: the parameters it will update.
    """

    def first_step() -> PyTree[Array]:
        ones = jax.tree.map(lambda leaf: jnp.ones((1,) * jnp.ndim(leaf), jnp.result_type(leaf)), params)
        updates, _ = optimizer.update(ones, optimizer.init(ones), ones)
        return updates

    try:
        updates = compiled_once(first_step)()
    except (TypeError, ValueError):
        return
    steps = [_concrete(leaf) for leaf in jax.tree.leaves(updates)]
    concrete = [step for step in steps if step is not None]
    if len(concrete) != len(steps):
        return
    if not all(np.all(np.isfinite(step)) for step in concrete):
        raise ValueError(
            f"{owner}: the {name}'s first step is not finite: give it finite hyperparameters (its learning rate, "
            "say, or the values of its schedules)."
        )
    # The inner product of each array's step with its gradient of ones.
    if any(np.sum(np.real(step).astype(np.float64)) > 0 for step in concrete):
        raise ValueError(
            f"{owner}: the {name}'s first step goes uphill, along the gradient it was given: a learning rate "
            "must be positive; optax minimises the loss, so give it a positive learning rate (optax.adam(3e-4), "
            "not optax.adam(-3e-4)), and to maximise an objective negate the objective instead."
        )


def check_positive_int(owner: str, name: str, value: object) -> None:
    """Raises `ValueError` unless `value` is an `int` > 0 (a size or a count)."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}.")


def check_replay_holds_batch(owner: str, buffer_size: int, batch_size: int) -> None:
    """Raises `ValueError` when a replay buffer of `buffer_size` transitions holds fewer than
    one batch of `batch_size`: each gradient step would draw the same few transitions again
    and again.

    `buffer_size` counts the transitions over all environments and devices and
    `batch_size` those of one device's batch, so this is the bound for one device, the
    least that any number of devices needs (each device holds its share of the buffer).

    **Arguments:**

    - `owner`: how to name the learner in messages (`"DQNLearner"`).
    - `buffer_size`: the learner's `buffer_size` argument.
    - `batch_size`: the learner's `batch_size` argument.
    """
    if buffer_size < batch_size:
        raise ValueError(
            f"{owner}: buffer_size={buffer_size} is smaller than batch_size={batch_size}: the replay buffer "
            "holds fewer transitions than one batch draws, so every gradient step would draw the same "
            "transitions again and again. Make buffer_size (transitions over all environments and devices) at "
            "least batch_size (samples per device), usually many times it, or lower batch_size."
        )


# For a policy that cannot read a network's outputs: one that can, by the kind of output.
_POLICY_HINTS = (
    (AbstractActionValues, "podrace.policies.Greedy acts deterministically on action values"),
    (AbstractPolicyOutput, "podrace.policies.Mode acts deterministically with a policy head"),
)


def check_reads(network, part, *, role: str) -> None:
    """Raises `ValueError`, naming both parts and the fix, unless `part` reads what `network` emits.

    `part` reads the network's outputs when they are instances of its `input_type`
    (`issubclass(network.output_type, part.input_type)`).

    **Arguments:**

    - `network`: a [`podrace.networks.AbstractNetwork`][].
    - `part`: what reads its outputs: a [`podrace.policies.AbstractPolicy`][] or a
        [`podrace.losses.AbstractLoss`][].
    - `role`: how to name the part in messages (`"policy"` or `"loss"`); for a policy,
        the message also names a policy that fits the network.
    """
    output_type, input_type = network.output_type, part.input_type
    if issubclass(output_type, input_type):
        return
    message = (
        f"The {role} {type(part).__name__} reads {input_type.__name__} but the network emits "
        f"{output_type.__name__}; give the network a head that emits {input_type.__name__} or pick a "
        f"{role} for {output_type.__name__}"
    )
    if role == "policy":
        hint = next((hint for kind, hint in _POLICY_HINTS if issubclass(output_type, kind)), None)
        if hint is not None:
            message += f" ({hint})"
    raise ValueError(f"{message}.")


def network_observation_spec(
    reader, action_space: AbstractSpace, observation: jax.ShapeDtypeStruct
) -> PyTree[jax.ShapeDtypeStruct]:
    """The observations a network (or an agent) gets from an environment's `observation`:
    with the previous action and reward if it reads them (as
    [`podrace.envs.PreviousActionReward`][] adds them)."""
    if not reader.reads_previous_action_reward:
        return observation
    return jax.eval_shape(
        lambda observation: ObservationActionReward(observation, action_space.zeros(), jnp.zeros((), jnp.float32)),
        observation,
    )


def check_agent_fits(
    network, policy, action_space: AbstractSpace, observation: PyTree[jax.ShapeDtypeStruct], *, env_name: str
) -> Any:
    """Raises `ValueError`, naming both parts and the fix, when a network and policy cannot act in an env.

    Returns the shapes of the network's output for one observation (for checks that read them).

    The policy must read the network's outputs (see `check_reads`) and suit the action
    space, the network's head must have one output per action (or per dimension of a
    continuous action) and the network must accept the observations.

    **Arguments:**

    - `network`: a [`podrace.networks.AbstractNetwork`][].
    - `policy`: a [`podrace.policies.AbstractPolicy`][] over its outputs.
    - `action_space`: the environment's action space.
    - `observation`: the shape and dtype of one observation.
    - `env_name`: how to name the environment in messages.
    """
    policy.check_action_space(action_space)
    action_size = network.output_type.action_size(action_space, env_name=env_name)
    if network.num_actions != action_size:
        if isinstance(action_space, Discrete):
            raise ValueError(
                f"The network's head has {network.num_actions} outputs but {env_name} has "
                f"{action_size} actions; build the head with num_actions={action_size}."
            )
        raise ValueError(
            f"The network's head has action size {network.num_actions} but {env_name}'s actions have shape "
            f"{getattr(action_space, 'shape', None)}; build the head with action_size={action_size}."
        )
    check_reads(network, policy, role="policy")
    if network.reads_previous_action_reward and not isinstance(observation, ObservationActionReward):
        raise ValueError(
            f"The network reads the previous action and reward beside each observation, but {env_name}'s "
            "observations do not carry them; wrap a JAX environment in podrace.envs.PreviousActionReward "
            "(inside AutoReset)."
        )
    if isinstance(observation, ObservationActionReward) and not network.reads_previous_action_reward:
        raise ValueError(
            f"{env_name}'s observations carry the previous action and reward, but the network does not read "
            "them; build it with RecurrentNetwork(..., previous_action_reward=True) or drop the "
            "PreviousActionReward wrapper."
        )
    try:
        return jax.eval_shape(network, observation, network.initial_carry())[0]
    except Exception as error:
        raise ValueError(
            f"The network cannot take {env_name}'s observations (shape "
            f"{jax.tree.map(lambda x: x.shape, observation)}): {error}. Build its torso for that shape."
        ) from error


def check_parts_fit(
    network,
    policy,
    loss,
    action_space: AbstractSpace,
    observation: PyTree[jax.ShapeDtypeStruct],
    *,
    env_name: str,
) -> None:
    """Raises `ValueError`, naming the parts and the fix, when a learner's parts cannot learn in an env.

    The network and policy must act in the env (as `check_agent_fits` checks), and the
    loss must find what it needs in the network's outputs (a value head, say).

    **Arguments:**

    - `network`, `policy`, `loss`: the learner's parts.
    - `action_space`: the environment's action space.
    - `observation`: the shape and dtype of one observation.
    - `env_name`: how to name the environment in messages.
    """
    output = check_agent_fits(network, policy, action_space, observation, env_name=env_name)
    loss.check_output(output)
