"""Trained policies that leave JAX: the acting network and its deterministic policy as an
ONNX model (through jax2onnx) or as serialized StableHLO (through `jax.export`).

The exported function takes a batch of observations and, for a recurrent network, its
carry, and gives the actions and the next carry:

    action, *next_carry = policy(observation, *carry)

with a batch axis of any size first on every input and output. For an environment that
marks its legal actions ([`podrace.MaskedObservation`][]) each observation's mask is an
input of its own, after the observation: `policy(observation, action_mask, *carry)`. A
recurrent network starts each episode from its initial carry, which the exported model's
description (a JSON file beside it) records with the names, shapes and dtypes of its
inputs and outputs.
"""

import dataclasses
import json
import pathlib
from collections.abc import Callable
from typing import Any, final

import jax
import numpy as np
from jaxtyping import Array

from ._types import AbstractActionValues, AbstractPolicyOutput, DeterministicAction, MaskedObservation
from .envs._packages import import_package
from .envs.normalization import NormalizeObservation
from .networks import AbstractNetwork
from .policies import AbstractDeterministicPolicy, AbstractPolicy


FORMATS = ("onnx", "stablehlo")
"""The formats [`podrace.export.export_policy`][] writes."""

BATCH = "batch"
"""The name of the batch axis of every input and output."""


@final
@dataclasses.dataclass(frozen=True)
class ExportedPolicy:
    """What [`podrace.export.export_policy`][] wrote.

    **Arguments:**

    - `path`: the model: an ONNX file, or `jax.export`'s serialized StableHLO (read it back
        with `jax.export.deserialize(path.read_bytes())`).
    - `description`: the JSON file beside it (the model's name with `.json` added):
        format, inputs and outputs (names, shapes with `"batch"` for the batch axis,
        dtypes) and the recurrent initial carry.
    """

    path: pathlib.Path
    description: pathlib.Path


def deterministic_action(policy: AbstractPolicy, output: Any) -> Array:
    """The action of a deterministic policy ([`podrace.policies.AbstractDeterministicPolicy`][])
    for one network output, without building the policy's distribution (whose
    log-probability the exported model has no use for): the mode of a
    [`podrace.policies.Mode`][], the first highest-valued action of a
    [`podrace.policies.Greedy`][], the actor's action of a [`podrace.policies.Deterministic`][].

    **Raises:**

    `ValueError` for any other policy, naming it.
    """
    if not isinstance(policy, AbstractDeterministicPolicy):
        raise _not_deterministic(policy)
    return policy.action(output)


# The deterministic policy that reads what a stochastic one reads.
_DETERMINISTIC_COUNTERPARTS = (
    (AbstractActionValues, "Greedy"),
    (AbstractPolicyOutput, "Mode"),
    (DeterministicAction, "Deterministic"),
)


def _not_deterministic(policy: AbstractPolicy) -> ValueError:
    """The refusal of a policy that samples, naming its deterministic counterpart."""
    counterpart = next(
        (name for kind, name in _DETERMINISTIC_COUNTERPARTS if issubclass(policy.input_type, kind)), None
    )
    fix = (
        f"export podrace.policies.{counterpart}(), which reads the same network outputs"
        if counterpart is not None
        else "export the deterministic counterpart of the policy the agent trained with"
    )
    return ValueError(
        f"export needs a deterministic policy (Greedy, Mode or Deterministic); {type(policy).__name__} samples its "
        f"actions (an exported model is a function of the observation alone): {fix}."
    )


def _input_specs(observation: Any) -> list[jax.ShapeDtypeStruct] | None:
    """The model's inputs for one observation of spec `observation`: the observation, and
    its legal-action mask for a masked one; `None` for any other structure."""
    specs = (
        [observation.observation, observation.action_mask]
        if isinstance(observation, MaskedObservation)
        else [observation]
    )
    return specs if all(isinstance(spec, jax.ShapeDtypeStruct) for spec in specs) else None


def _check_observation_fits(
    network: AbstractNetwork,
    observation: jax.ShapeDtypeStruct | MaskedObservation,
    normalization: NormalizeObservation | None,
) -> None:
    """Raises `ValueError`, naming the observation's shape and dtype, unless the network (after
    `normalization`) takes one observation of that spec."""

    def act(observation: Array | MaskedObservation) -> Any:
        if normalization is not None:
            observation = normalization.normalize(observation)
        return network(observation, network.initial_carry())

    try:
        jax.eval_shape(act, observation)
    except Exception as error:
        spec, *mask = jax.tree.leaves(observation)
        masked = f" with legal-action masks of shape {mask[0].shape}" if mask else ""
        normalized = " once normalised with the given statistics" if normalization is not None else ""
        raise ValueError(
            f"export_policy: the observation spec does not fit the network: it gives observations of shape "
            f"{spec.shape} and dtype {np.dtype(spec.dtype).name}{masked}, and the network fails on them"
            f"{normalized} ({str(error).rstrip('.')}). Give the shape and dtype of one observation of the environment "
            "the network was built for (jax.eval_shape(lambda: env.reset(key)[1].observation), say)."
        ) from error


def acting_function(
    network: AbstractNetwork,
    policy: AbstractPolicy,
    normalization: NormalizeObservation | None = None,
    *,
    action_mask: bool = False,
) -> tuple[Callable[..., tuple[Array, ...]], list[Array]]:
    """The function that an exported model computes, and the leaves of the initial carry.

    `function(observations, *carry_leaves)` maps a batch of observations (and of carries)
    to `(actions, *next_carry_leaves)`, normalising the observations first with
    `normalization`'s frozen statistics when given. With `action_mask`, it is
    `function(observations, action_masks, *carry_leaves)`: each observation comes with
    its legal-action mask, as a [`podrace.MaskedObservation`][] would hold them.
    """
    carry_leaves, carry_structure = jax.tree.flatten(network.initial_carry())
    num_observation_inputs = 2 if action_mask else 1

    def act_one(inputs: list[Array], carry_leaves: list[Array]) -> tuple[Array, list[Array]]:
        observation = MaskedObservation(*inputs) if action_mask else inputs[0]
        if normalization is not None:
            observation = normalization.normalize(observation)
        output, carry = network(observation, jax.tree.unflatten(carry_structure, carry_leaves))
        return deterministic_action(policy, output), jax.tree.leaves(carry)

    def function(*inputs: Array) -> tuple[Array, ...]:
        observations, carry_leaves = inputs[:num_observation_inputs], inputs[num_observation_inputs:]
        actions, next_carry = jax.vmap(act_one)(list(observations), list(carry_leaves))
        return actions, *next_carry

    return function, carry_leaves


def export_policy(
    network: AbstractNetwork,
    policy: AbstractPolicy,
    observation: jax.ShapeDtypeStruct | MaskedObservation,
    path: str | pathlib.Path,
    *,
    format: str = "onnx",
    normalization: NormalizeObservation | None = None,
) -> ExportedPolicy:
    """Writes the acting policy `network` + `policy` as an ONNX model or as StableHLO.

    **Arguments:**

    - `network`: the network, with the parameters to act with.
    - `policy`: a deterministic policy over its outputs (a
        [`podrace.policies.AbstractDeterministicPolicy`][]: [`podrace.policies.Mode`][],
        [`podrace.policies.Greedy`][], [`podrace.policies.Deterministic`][] or one of yours).
    - `observation`: the shape and dtype of one observation (one array), or a
        [`podrace.MaskedObservation`][] of those of the observation and of its mask (as
        `jax.eval_shape` gives it for an environment that marks its legal actions): the
        model then takes each observation's mask as a second input, `action_mask`.
    - `path`: where to write the model; the description goes beside it, with `.json`
        added to its name.
    - `format`: `"onnx"` (extra `podrace[onnx]`) or `"stablehlo"`.
    - `normalization`: the frozen observation statistics of a pipeline that normalised
        observations (its `evaluation_env(state)`), applied inside the model.

    **Raises:**

    `ValueError` for a policy that is not deterministic, a network that reads a structure
    of observations other than a masked one (or the previous action and reward) or cannot
    take `observation` (naming its shape and dtype), an unknown format, or a part that
    jax2onnx cannot convert (naming it); `ImportError` naming the pip command when
    jax2onnx is missing.
    """
    if format not in FORMATS:
        raise ValueError(f"Unknown export format {format!r}: choose from {', '.join(FORMATS)}.")
    observation_specs = _input_specs(observation)
    if network.reads_previous_action_reward or observation_specs is None:
        raise ValueError(
            "export_policy exports networks that read one observation array (with its legal-action mask, if any); "
            "this one reads "
            + ("the previous action and reward too." if network.reads_previous_action_reward else f"{observation}.")
        )
    if not isinstance(policy, AbstractDeterministicPolicy):
        raise _not_deterministic(policy)
    _check_observation_fits(network, observation, normalization)
    masked = isinstance(observation, MaskedObservation)
    function, carry = acting_function(network, policy, normalization, action_mask=masked)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    observation_names = ["observation", "action_mask"] if masked else ["observation"]
    input_names = [*observation_names, *(f"carry_{index}" for index in range(len(carry)))]
    output_names = ["action", *(f"next_carry_{index}" for index in range(len(carry)))]
    (batch,) = jax.export.symbolic_shape(BATCH)
    examples = [*observation_specs, *(jax.ShapeDtypeStruct(leaf.shape, leaf.dtype) for leaf in carry)]
    inputs = [jax.ShapeDtypeStruct((batch, *example.shape), example.dtype) for example in examples]
    if format == "onnx":
        _write_onnx(function, inputs, path, input_names, output_names)
    else:
        _write_stablehlo(function, inputs, path)
    outputs = jax.eval_shape(function, *inputs)
    description = {
        "format": format,
        "inputs": [_described(name, spec) for name, spec in zip(input_names, inputs, strict=True)],
        "outputs": [_described(name, spec) for name, spec in zip(output_names, outputs, strict=True)],
        "initial_carry": {
            name: np.asarray(leaf).tolist()
            for name, leaf in zip(input_names[len(observation_names) :], carry, strict=True)
        },
        "normalizes_observations": normalization is not None,
    }
    description_path = path.with_name(path.name + ".json")
    description_path.write_text(json.dumps(description, indent=2) + "\n")
    return ExportedPolicy(path, description_path)


def _described(name: str, spec: jax.ShapeDtypeStruct) -> dict[str, Any]:
    """One input or output, its symbolic batch axis first."""
    return {"name": name, "shape": [BATCH, *spec.shape[1:]], "dtype": np.dtype(spec.dtype).name}


def _write_onnx(
    function: Callable, specs: list[jax.ShapeDtypeStruct], path: pathlib.Path, inputs: list[str], outputs: list[str]
) -> None:
    jax2onnx = import_package("jax2onnx", extra="onnx", owner="export_policy(format='onnx')")
    try:
        model = jax2onnx.to_onnx(function, specs, model_name="podrace_policy", input_names=inputs, output_names=outputs)
    except (NotImplementedError, ValueError, TypeError) as error:
        raise ValueError(f"jax2onnx cannot convert this policy: {error}") from error
    path.write_bytes(model.SerializeToString())


def _write_stablehlo(function: Callable, specs: list[jax.ShapeDtypeStruct], path: pathlib.Path) -> None:
    exported = jax.export.export(jax.jit(function))(*specs)
    path.write_bytes(exported.serialize())
