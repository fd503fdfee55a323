"""Configurations: every family builds its parts, round-trips through JSON, refuses bad
input with what to write, and the algorithms are named only where a family is defined."""

import ast
import dataclasses
import json
import pathlib
import re

import equinox as eqx
import jax
import numpy as np
import pytest

import podrace as pr
from podrace import configs

from . import helpers


PACKAGE = pathlib.Path(pr.__file__).parent


@pytest.mark.parametrize("row", list(configs.TUNED), ids=" ".join)
def test_every_tuned_configuration_survives_json(row):
    config = configs.TUNED[row].config
    assert configs.from_json(json.loads(json.dumps(configs.to_json(config)))) == config


@pytest.mark.parametrize("algorithm", configs.ALGORITHMS)
def test_every_algorithm_builds_by_name_into_its_family(algorithm):
    config = configs.config(algorithm)
    assert type(config) is configs.ALGORITHMS[algorithm] and config.algorithm == algorithm
    assert type(config) in configs.FAMILIES
    for field in dataclasses.fields(config):
        if field.name != "algorithm":
            assert field.metadata["help"], f"{type(config).__name__}.{field.name} has no help text"


@pytest.mark.parametrize("family", configs.FAMILIES, ids=lambda family: family.__name__)
def test_float_hyperparameters_are_leaves_and_sizes_are_static(family):
    config = configs.config(family.ALGORITHMS[0])
    leaves = {field.name for field in dataclasses.fields(config) if not field.metadata.get("static", False)}
    assert {"learning_rate", "discount"} <= leaves
    static = {field.name for field in dataclasses.fields(config) if field.metadata.get("static", False)}
    assert {"num_envs", "rollout_length", "hidden", "num_updates"} <= static


@pytest.mark.parametrize("algorithm", ["ddpg", "sac"])
def test_a_population_of_bounded_actors_builds_its_members_under_vmap(algorithm):
    """Pendulum's action bounds are computed from its parameters: the members' heads,
    built inside the population's `vmap`, take them as constants."""
    population, key = helpers.cli_run("pendulum", algorithm, seeds=2, hidden=(8,), num_envs=2).make()
    state = population.init(key)
    assert jax.tree.leaves(state.learner)[0].shape[0] == 2


def test_a_population_maps_over_a_configurations_learning_rate():
    config = configs.config("a2c", num_envs=4, rollout_length=4, hidden=(8,))
    env = pr.envs.Catch()

    def make_pipeline(learning_rate):
        return eqx.tree_at(lambda c: c.learning_rate, config, learning_rate).pipeline(env, jax.random.key(0))

    population = pr.Population(make_pipeline, jax.numpy.array([1e-3, 0.0]))
    state = population.train(population.init(jax.random.key(1)), num_updates=1).state
    start = population.init(jax.random.key(1))
    pairs = zip(jax.tree.leaves(state.learner.params), jax.tree.leaves(start.learner.params), strict=True)
    changed = np.array([[not np.allclose(after[m], before[m]) for m in range(2)] for after, before in pairs])
    assert changed[:, 0].any() and not changed[:, 1].any()  # the member at learning rate 0 stays


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: configs.config("ppp"), r"No algorithm 'ppp'\. Did you mean ppo.* The algorithms: reinforce, "),
        (lambda: configs.config("td3", core="gru"), r"td3 \(TD3Config\) has no setting core; its settings: "),
        (lambda: configs.config("a2c", baseline=False), "baseline is a setting of reinforce; a2c does not read it"),
        (lambda: configs.OnPolicyConfig(algorithm="dqn"), r"No OnPolicyConfig algorithm 'dqn'\."),
        (lambda: configs.from_json({"family": "PPOConfig", "settings": {}}), "Did you mean PQNConfig"),
    ],
)
def test_bad_input_is_refused_with_what_to_write(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_checkpoint_of_the_flat_settings_record_loads_as_its_configuration():
    """The record `podrace train` stored before configurations (every algorithm's settings
    in one flat record): the family reads its own, and a2c keeps one pass per rollout."""
    record = {"env": "catch", "algo": "a2c", "seed": 3, "seeds": 2, "pbt": False, "pbt_interval": 10}
    record |= {"pbt_learning_rates": None, "hidden": [16], "num_epochs": 4, "num_minibatches": 4, "tau": 0.005}
    record |= {"learning_rate": 0.01, "core": None, "epsilon": 0.05, "normalize_advantages": True}
    run = configs.Run.from_json(record)
    assert run == configs.Run("catch", configs.config("a2c", hidden=(16,), learning_rate=0.01), seed=3, seeds=2)
    assert run.config.passes == (1, 1)


def _named_strings(path: pathlib.Path) -> set[str]:
    """The string constants of a module, but for its `__all__`."""
    tree = ast.parse(path.read_text())
    exported = {
        id(node)
        for statement in ast.walk(tree)
        if isinstance(statement, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in statement.targets)
        for node in ast.walk(statement.value)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in exported
    }


def test_an_algorithm_is_named_only_by_its_family_the_registry_and_the_published_recipes():
    """A new family costs its learner and loss files, one configuration and its registry
    rows: no other module (the command line included) names an algorithm."""
    allowed = {"configs/registry.py", "recipes.py"}
    named = {path: _named_strings(path) for path in PACKAGE.rglob("*.py")}
    for algorithm, family in configs.ALGORITHMS.items():
        home = pathlib.Path(family.__module__.replace("podrace.", "").replace(".", "/") + ".py").as_posix()
        naming = {path.relative_to(PACKAGE).as_posix() for path, strings in named.items() if algorithm in strings}
        assert home in naming, (algorithm, home)
        assert naming <= allowed | {home}, f"{algorithm} is named in {sorted(naming - allowed - {home})}"


def test_the_family_of_the_docs_written_outside_the_library_trains():
    """`docs/configs.md`'s last code block writes a configuration family of its own
    (Q-learning of a Boltzmann policy) on the library's bases: it builds and trains."""
    page = (PACKAGE.parent / "docs" / "configs.md").read_text()
    namespace: dict = {}
    exec(re.findall(r"```python\n(.*?)```", page, re.DOTALL)[-1], namespace)
    pipeline = namespace["pipeline"]
    result = pipeline.train(pipeline.init(jax.random.key(1)), num_updates=1)
    assert np.isfinite(float(result.metrics.update.loss[-1]))


def test_the_nature_torso_reads_channels_first_frames_and_refuses_other_observations():
    config = configs.config("ppo", torso="nature", hidden=(512,), activation="relu")
    network = config.network(pr.Discrete(6), (4, 84, 84), jax.random.key(0))
    assert isinstance(network, pr.networks.FeedForwardNetwork)
    torso = network.torso
    assert isinstance(torso, pr.networks.ConvTorso) and torso.channels_first and torso.output_size == 512
    assert [conv.weight.shape for conv in torso.convs] == [(32, 4, 8, 8), (64, 32, 4, 4), (64, 64, 3, 3)]
    output, _ = network(jax.numpy.zeros((4, 84, 84), jax.numpy.uint8), network.initial_carry())
    assert output.logits.shape == (6,)
    with pytest.raises(ValueError, match=r"frames of shape \(channels, height, width\).*\(4,\): use the mlp torso"):
        config.network(pr.Discrete(2), (4,), jax.random.key(0))
    with pytest.raises(ValueError, match="must be one of mlp, nature"):
        configs.torso_head.torso_name("cnn")
