"""Exported policies act as podrace's agents do: ONNX models run in onnxruntime and
StableHLO read back by `jax.export`, on 1,000 observations (and carries) for a
feed-forward discrete, a Gaussian and a GRU policy, with observations normalised inside,
and discrete policies that take legal-action masks;
`podrace export` writes them from a checkpoint; what cannot be exported is refused."""

import dataclasses
import json
import re
from typing import Any, cast, final

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrace as pr
from podrace import cli, configs, export
from podrace.envs.names import make_env
from podrace.export import export_policy

from . import helpers


onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("jax2onnx")

NUM_OBSERVATIONS = 1_000
# Continuous actions and carries are float32 computations that onnxruntime orders its own
# way: the largest difference measured was 4.8e-7. Discrete actions must be equal.
TOLERANCE = 1e-5

AGENTS = {
    "feed-forward discrete": ("cartpole", "ppo", {}),
    "gaussian": ("pendulum", "ppo", {}),
    "gru": ("cartpole", "ppo", {"core": "gru"}),
}


def _agent(env: str, algo: str, changes: dict) -> tuple[Any, pr.policies.AbstractPolicy, tuple[int, ...]]:
    """A network drawn for the command line's settings, its evaluation policy and one observation's spec."""
    config = dataclasses.replace(configs.default_config(env, algo), hidden=(16, 16), **changes)
    environment = make_env(env)
    observation_shape = configs.observation_shape(environment)
    learner = config.learner(environment.action_space, observation_shape, jax.random.key(3))
    return learner.initial_agent().network, config.evaluation_policy(), observation_shape


def _inputs(observation_shape: tuple[int, ...], initial_carry: list, key: jax.Array) -> list[np.ndarray]:
    """Observations and carries, both far from the initial ones."""
    keys = jax.random.split(key, 1 + len(initial_carry))
    observations = 2 * jax.random.normal(keys[0], (NUM_OBSERVATIONS, *observation_shape))
    carries = [
        jax.random.normal(k, (NUM_OBSERVATIONS, *np.shape(leaf)))
        for k, leaf in zip(keys[1:], initial_carry, strict=True)
    ]
    return [np.asarray(x, np.float32) for x in (observations, *carries)]


def _podrace_outputs(network, policy, inputs: list[Any], normalization=None) -> list[np.ndarray]:
    """What podrace's agent does: its action (and next carry) for each observation."""
    agent = pr.Agent(network, policy)
    structure = jax.tree.structure(network.initial_carry())

    def act(observation, carry_leaves):
        if normalization is not None:
            observation = normalization.normalize(observation)
        step, carry = agent(observation, jax.tree.unflatten(structure, carry_leaves), jax.random.key(0))
        return [step.action, *jax.tree.leaves(carry)]

    return [np.asarray(x) for x in jax.jit(jax.vmap(act))(inputs[0], inputs[1:])]


def _run(exported: export.ExportedPolicy, inputs: list[np.ndarray]) -> list[np.ndarray]:
    description = json.loads(exported.description.read_text())
    names = [spec["name"] for spec in description["inputs"]]
    if description["format"] == "onnx":
        session = onnxruntime.InferenceSession(str(exported.path))
        return session.run(None, dict(zip(names, inputs, strict=True)))
    return [np.asarray(x) for x in jax.export.deserialize(exported.path.read_bytes()).call(*inputs)]


def _assert_same(got: list[np.ndarray], expected: list[np.ndarray]) -> float:
    """Equal discrete actions, close floats; returns the largest difference."""
    assert len(got) == len(expected)
    for value, reference in zip(got, expected, strict=True):
        assert value.shape == reference.shape and value.dtype == reference.dtype, (value.dtype, reference.dtype)
        if np.issubdtype(reference.dtype, np.integer):
            np.testing.assert_array_equal(value, reference)
        else:
            np.testing.assert_allclose(value, reference, rtol=0, atol=TOLERANCE)
    return max(float(np.max(np.abs(v.astype(np.float64) - r))) for v, r in zip(got, expected, strict=True))


@pytest.mark.parametrize("format", export.FORMATS)
@pytest.mark.parametrize("kind", list(AGENTS))
def test_the_exported_policy_acts_as_podrace_s_agent(kind, format, tmp_path):
    network, policy, observation_shape = _agent(*AGENTS[kind])
    spec = jax.ShapeDtypeStruct(observation_shape, np.float32)
    exported = export_policy(network, policy, spec, tmp_path / f"policy.{format}", format=format)
    initial_carry = jax.tree.leaves(network.initial_carry())
    inputs = _inputs(observation_shape, initial_carry, jax.random.key(5))
    largest = _assert_same(_run(exported, inputs), _podrace_outputs(network, policy, inputs))
    print(f"{kind} {format}: largest difference {largest:.3g}")  # shown by pytest -rP
    description = json.loads(exported.description.read_text())
    assert [spec["name"] for spec in description["inputs"]] == ["observation", *(["carry_0"] if initial_carry else [])]
    assert description["inputs"][0] == {
        "name": "observation",
        "shape": ["batch", *observation_shape],
        "dtype": "float32",
    }
    assert description["outputs"][0]["name"] == "action"
    for leaf, stored in zip(initial_carry, description["initial_carry"].values(), strict=True):
        np.testing.assert_array_equal(np.asarray(stored, np.float32), leaf)


def test_observations_are_normalised_inside_the_model(tmp_path):
    network, policy, observation_shape = _agent(*AGENTS["gaussian"])
    statistics = pr.envs.RunningStatistics(
        count=jnp.asarray(100.0), mean=jnp.asarray([0.5, -1.0, 3.0]), var=jnp.asarray([4.0, 0.25, 9.0])
    )
    normalization = pr.envs.NormalizeObservation(make_env("pendulum"), statistics, clip=5.0)
    spec = jax.ShapeDtypeStruct(observation_shape, np.float32)
    exported = export_policy(network, policy, spec, tmp_path / "policy.onnx", normalization=normalization)
    inputs = _inputs(observation_shape, [], jax.random.key(6))
    _assert_same(_run(exported, inputs), _podrace_outputs(network, policy, inputs, normalization))
    assert json.loads(exported.description.read_text())["normalizes_observations"]


def test_what_cannot_be_exported_is_refused_with_the_reason(tmp_path):
    network, _, observation_shape = _agent(*AGENTS["feed-forward discrete"])
    spec = jax.ShapeDtypeStruct(observation_shape, np.float32)
    with pytest.raises(ValueError, match=r"Unknown export format 'tflite': choose from onnx, stablehlo"):
        export_policy(network, pr.policies.Mode(), spec, tmp_path / "p.tflite", format="tflite")
    gru, _, _ = _agent(*AGENTS["gru"])
    core = pr.networks.GRUCore(
        gru.torso.output_size + gru.head.num_actions + 1, gru.head.in_size, key=jax.random.key(0)
    )
    reader = pr.networks.RecurrentNetwork(gru.torso, core, gru.head, previous_action_reward=True)
    with pytest.raises(ValueError, match="reads the previous action and reward too"):
        export_policy(reader, pr.policies.Mode(), spec, tmp_path / "p.onnx")


@pytest.mark.parametrize("format", export.FORMATS)
@pytest.mark.parametrize(
    ("policy", "counterpart"),
    [
        (pr.policies.Categorical(), "Mode"),
        (pr.policies.Gaussian(), "Mode"),
        (pr.policies.EpsilonGreedy(0.1), "Greedy"),
        (pr.policies.GaussianNoise(0.1), "Deterministic"),
    ],
)
def test_a_stochastic_policy_is_refused_as_podrace_s_own_rule(policy, counterpart, format, tmp_path):
    network, _, observation_shape = _agent(*AGENTS["feed-forward discrete"])
    spec = jax.ShapeDtypeStruct(observation_shape, np.float32)
    with pytest.raises(ValueError) as error:
        export_policy(network, policy, spec, tmp_path / f"p.{format}", format=format)
    message = str(error.value)
    assert message.startswith(
        f"export needs a deterministic policy (Greedy, Mode or Deterministic); {type(policy).__name__} samples"
    ), message
    assert f"export podrace.policies.{counterpart}()" in message and "jax2onnx" not in message, message


@final
class _LeastLikely(pr.policies.AbstractDeterministicPolicy[pr.PolicyLogits]):
    """A deterministic policy written outside podrace: the action of lowest logit."""

    input_type = pr.PolicyLogits

    def distribution(self, output):
        return output.distribution()

    def action(self, output):
        return jnp.argmin(output.logits).astype(jnp.int32)

    def check_action_space(self, action_space):
        pr.policies.Mode().check_action_space(action_space)


def test_any_deterministic_policy_is_exported(tmp_path):
    network, _, observation_shape = _agent(*AGENTS["feed-forward discrete"])
    spec = jax.ShapeDtypeStruct(observation_shape, np.float32)
    exported = export_policy(network, _LeastLikely(), spec, tmp_path / "p.stablehlo", format="stablehlo")
    inputs = _inputs(observation_shape, [], jax.random.key(8))
    expected = _podrace_outputs(network, _LeastLikely(), inputs)
    _assert_same(_run(exported, inputs), expected)
    assert np.any(expected[0] != _podrace_outputs(network, pr.policies.Mode(), inputs)[0])


@pytest.mark.parametrize("format", export.FORMATS)
def test_an_observation_spec_the_network_cannot_take_is_named(format, tmp_path):
    network, policy, _ = _agent(*AGENTS["feed-forward discrete"])  # CartPole: observations of shape (4,)
    spec = jax.ShapeDtypeStruct((3,), np.int32)
    with pytest.raises(ValueError) as error:
        export_policy(network, policy, spec, tmp_path / f"p.{format}", format=format)
    message = str(error.value)
    assert message.startswith(
        "export_policy: the observation spec does not fit the network: it gives observations of shape (3,) and "
        "dtype int32, and the network fails on them"
    ), message
    assert "Give the shape and dtype of one observation" in message and "jax2onnx" not in message, message


def test_a_member_of_a_checkpoint_of_one_agent_is_refused(tmp_path, capsys):
    directory = tmp_path / "run"
    run = ["train", "catch", "a2c", "--num-updates", "1", "--updates-per-call", "1", "--hidden", "8"]
    run += ["--num-envs", "2", "--rollout-length", "4", "--checkpoint-dir", str(directory)]
    assert cli.main([*run, "--output", str(tmp_path / "c.png")]) == 0
    capsys.readouterr()
    out = tmp_path / "catch.stablehlo"
    assert cli.main(["export", str(directory), "--format", "stablehlo", "--member", "3", "--out", str(out)]) == 2
    assert "--member 3: the checkpoint holds one agent, not a population" in capsys.readouterr().err
    assert not out.exists()
    assert cli.main(["export", str(directory), "--format", "stablehlo", "--out", str(out)]) == 0
    assert out.exists()


def test_missing_jax2onnx_raises_an_install_hint(monkeypatch, tmp_path):
    fresh = helpers.fresh_module_without(export.__name__, ("jax2onnx",), monkeypatch)
    network, policy, observation_shape = _agent(*AGENTS["feed-forward discrete"])
    with pytest.raises(ImportError, match=re.escape("pip install 'podrace[onnx]'")):
        fresh.export_policy(network, policy, jax.ShapeDtypeStruct(observation_shape, np.float32), tmp_path / "p.onnx")


def test_the_command_line_exports_a_checkpoint(tmp_path, capsys):
    directory = tmp_path / "run"
    run = ["train", "pendulum", "ppo", "--num-updates", "2", "--updates-per-call", "1", "--hidden", "8"]
    run += ["--num-envs", "4", "--rollout-length", "4", "--num-minibatches", "2", "--seeds", "2"]
    run += ["--normalize-observations", "--checkpoint-dir", str(directory), "--output", str(tmp_path / "c.png")]
    assert cli.main(run) == 0
    for format in export.FORMATS:
        out = tmp_path / f"pendulum.{format}"
        assert cli.main(["export", str(directory), "--format", format, "--member", "1", "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        assert "pendulum ppo, checkpoint 2 of" in printed and "Mode policy" in printed and f"model: {out}" in printed
        assert out.exists() and json.loads(out.with_name(out.name + ".json").read_text())["normalizes_observations"]
    # The member's own network and statistics: the model acts as `podrace evaluate` would.
    run, pipeline, state, _ = cli._restore(directory, None)
    env, network = cli._acting_parts(run, pipeline, state, 1)
    inputs = _inputs((3,), [], jax.random.key(7))
    exported = export.ExportedPolicy(tmp_path / "pendulum.onnx", tmp_path / "pendulum.onnx.json")
    _assert_same(_run(exported, inputs), _podrace_outputs(network, run.config.evaluation_policy(), inputs, env))
    assert cli.main(["export", str(directory), "--member", "2"]) == 2
    assert "--member 2: the population has 2 members." in capsys.readouterr().err


@pytest.mark.parametrize("format", export.FORMATS)
@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_a_masked_env_s_policy_takes_each_observation_s_mask(algo, format, tmp_path):
    env = helpers.Picks()
    config = dataclasses.replace(configs.config(algo), hidden=(16, 16))
    learner = config.learner(env.action_space, configs.observation_shape(env), jax.random.key(9))
    network = cast(pr.Agent, learner.initial_agent()).network
    policy = config.evaluation_policy()
    statistics = pr.envs.RunningStatistics(
        count=jnp.asarray(100.0), mean=jnp.asarray([0.5, 0.2, 0.7]), var=jnp.asarray([0.25, 0.16, 0.2])
    )
    normalization = pr.envs.NormalizeObservation(env, statistics, clip=5.0)
    spec = jax.eval_shape(lambda: env.reset(jax.random.key(0))[1].observation)
    exported = export_policy(
        network, policy, spec, tmp_path / f"p.{format}", format=format, normalization=normalization
    )
    observations = _inputs((helpers.NUM_ACTIONS,), [], jax.random.key(10))[0]
    masks = np.random.default_rng(11).random((NUM_OBSERVATIONS, helpers.NUM_ACTIONS)) < 0.5
    masks[:10] = False  # no legal action: every action is
    (actions,) = _run(exported, [observations, masks])
    masked = pr.MaskedObservation(jnp.asarray(observations), jnp.asarray(masks))
    _assert_same([actions], _podrace_outputs(network, policy, [masked], normalization))
    assert np.all(np.asarray(pr.legal_actions(masked.action_mask))[np.arange(NUM_OBSERVATIONS), actions])
    inputs = json.loads(exported.description.read_text())["inputs"]
    assert inputs == [
        {"name": "observation", "shape": ["batch", helpers.NUM_ACTIONS], "dtype": "float32"},
        {"name": "action_mask", "shape": ["batch", helpers.NUM_ACTIONS], "dtype": "bool"},
    ]
