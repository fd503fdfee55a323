"""Population-based training: selection, exploration, the copies inside the program, split calls
and checkpoints equal one run, the lineage, the pipeline contract and bad input (over devices:
`test_device_matrix.py`; the command line: `test_cli.py`)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import podrace as pr
from podrace.checkpoint import Checkpointer
from podrace.executors.pbt import Perturb, Resample, Tournament, Truncation
from podrace.progress import train_with_progress

from . import helpers


SIZE = 4


def _member(hyperparameters) -> pr.Anakin:
    """A small Catch agent whose learning rate and network seed come from `hyperparameters`."""
    env = pr.envs.Catch(rows=helpers.CATCH_ROWS, columns=helpers.CATCH_COLUMNS)
    torso_key, head_key = jax.random.split(hyperparameters["key"])
    network = pr.networks.FeedForwardNetwork(
        pr.networks.MLPTorso(env.observation_space.shape, (16,), key=torso_key),
        pr.networks.QValueHead(16, 3, key=head_key),
    )
    loss = pr.losses.TDLambdaQLoss(discount=0.99, lambda_=0.9)
    learner = pr.Learner(network, pr.policies.EpsilonGreedy(0.1), loss, optax.adam(hyperparameters["learning_rate"]))
    return pr.Anakin(env, learner, num_envs=3, rollout_length=6)


def _population() -> pr.Population:
    hyperparameters = {
        "learning_rate": jnp.asarray([1e-3, 1e-2, 3e-2, 1e-1], jnp.float32),
        "key": jax.random.split(jax.random.key(0), SIZE),
    }
    return pr.Population(_member, hyperparameters)


def _pbt(interval: int = 2, selection: pr.executors.pbt.AbstractSelection | None = None) -> pr.PBT:
    explore = {"learning_rate": Perturb(), "key": None}
    return pr.PBT(_population(), explore, interval=interval, selection=selection or Truncation())


def _keys_as_data(tree):
    return jax.tree.map(lambda x: jax.random.key_data(x) if helpers._is_key(x) else x, tree)


def _assert_equal(a, b) -> None:
    for x, y in zip(jax.tree.leaves(_keys_as_data(a)), jax.tree.leaves(_keys_as_data(b)), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# --------------------------------------------------------------------------------------
# Selection and exploration
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_truncation_replaces_the_lowest_quarter_by_members_of_the_top_quarter(seed):
    fitness = jax.random.permutation(jax.random.key(seed), jnp.arange(8.0))
    parents = np.asarray(Truncation(0.25).parents(fitness, jax.random.key(seed + 100)))
    order = np.argsort(np.asarray(fitness))
    lowest, highest = set(order[:2].tolist()), set(order[6:].tolist())
    for member, parent in enumerate(parents):
        if member in lowest:
            assert parent in highest
        else:
            assert parent == member


def test_truncation_replaces_at_least_one_member():
    parents = np.asarray(Truncation(0.25).parents(jnp.asarray([3.0, 1.0]), jax.random.key(0)))
    assert parents.tolist() == [0, 0]


@pytest.mark.parametrize("seed", range(5))
def test_tournament_copies_only_a_fitter_member_and_never_the_best_one(seed):
    fitness = jax.random.normal(jax.random.key(seed), (8,))
    parents = np.asarray(Tournament().parents(fitness, jax.random.key(seed + 100)))
    fitness = np.asarray(fitness)
    for member, parent in enumerate(parents):
        assert parent == member or fitness[parent] > fitness[member]
    assert parents[np.argmax(fitness)] == np.argmax(fitness)


def test_tournament_over_many_draws_meets_every_other_member():
    fitness = jnp.arange(4.0)
    parents = jax.vmap(lambda key: Tournament().parents(fitness, key))(jax.random.split(jax.random.key(0), 200))
    assert set(np.asarray(parents[:, 0]).tolist()) == {1, 2, 3}


def test_perturb_multiplies_by_one_of_its_factors_within_its_bounds():
    values = jnp.full(1000, 2.0)
    perturbed = np.asarray(Perturb((0.5, 2.0), high=3.0)(values, jax.random.key(0)))
    assert set(perturbed.tolist()) == {1.0, 3.0}


def test_resample_draws_within_its_range_and_log_uniformly():
    draws = np.asarray(Resample(1e-4, 1e-2, log=True).sample(jax.random.key(0), (10_000,)))
    assert draws.min() >= 1e-4 and draws.max() <= 1e-2
    # Log-uniform: half of the draws below the geometric middle.
    assert abs(np.mean(draws < 1e-3) - 0.5) < 0.03
    resampled = np.asarray(Resample(-1.0, 1.0)(jnp.zeros(1000), jax.random.key(1)))
    assert resampled.min() >= -1 and resampled.max() <= 1 and abs(resampled.mean()) < 0.1


# --------------------------------------------------------------------------------------
# The schedule inside the program
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_ready_step():
    """A population trained for one update by itself, and by PBT ready after each update."""
    pbt = _pbt(interval=1)
    state = pbt.init(jax.random.key(1))
    return pbt, state, pbt.population.train(state.members, num_updates=1), pbt.train(state, num_updates=1)


def test_copies_take_their_parents_state_with_fresh_keys_and_explored_hyperparameters(one_ready_step):
    _, state, plain, result = one_ready_step
    parent = np.asarray(result.lineage.parent[:, 0])
    copied = parent != np.arange(SIZE)
    assert copied.sum() == 1  # a quarter of four members
    for after, before in zip(jax.tree.leaves(result.state.members), jax.tree.leaves(plain.state), strict=True):
        if helpers._is_key(after):
            after, before = np.asarray(jax.random.key_data(after)), np.asarray(jax.random.key_data(before))
            np.testing.assert_array_equal(after[~copied], before[~copied])
            assert not np.any(np.all(after[copied] == before[parent[copied]], axis=-1))
        else:
            np.testing.assert_array_equal(np.asarray(after), np.asarray(before)[parent])
    learning_rate = np.asarray(state.hyperparameters["learning_rate"])
    new = np.asarray(result.state.hyperparameters["learning_rate"])
    np.testing.assert_array_equal(new[~copied], learning_rate[~copied])
    ratio = new[copied] / learning_rate[parent[copied]]
    assert np.all(np.isclose(ratio, 0.8) | np.isclose(ratio, 1.2))
    _assert_equal(result.state.hyperparameters["key"], state.hyperparameters["key"][parent])


def test_fitness_is_the_mean_return_since_the_last_ready_step(one_ready_step):
    _, _, plain, result = one_ready_step
    sums, counts = (
        np.asarray(plain.metrics.episode_return_sum[:, 0]),
        np.asarray(plain.metrics.episodes_completed[:, 0]),
    )
    fitness = np.where(counts > 0, sums / np.maximum(counts, 1), -np.inf)
    parent = np.asarray(result.lineage.parent[:, 0])
    np.testing.assert_allclose(np.asarray(result.state.fitness), fitness[parent], rtol=1e-6)
    # The lowest member copied a member of the top quarter.
    copied = int(np.flatnonzero(parent != np.arange(SIZE))[0])
    assert copied == int(np.argmin(fitness)) and parent[copied] == int(np.argmax(fitness))
    assert int(result.state.episodes.sum()) == 0 and float(result.state.return_sum.sum()) == 0.0


def test_metrics_and_lineage_have_the_population_axes():
    pbt = _pbt(interval=2)
    # The episodes are the members' fitness: computed, though not reported, when not asked for.
    result = pbt.train(pbt.init(jax.random.key(0)), num_updates=5, metrics="grad_norm")
    assert result.metrics.update.loss.shape == result.metrics.update.grad_norm.shape == (SIZE, 5)
    assert not result.metrics.has_episodes and np.all(np.isfinite(np.asarray(result.state.fitness)))
    assert result.lineage.parent.shape == (SIZE, 5)
    assert result.lineage.hyperparameters["learning_rate"].shape == (SIZE, 5)
    assert np.asarray(result.lineage.ready[0]).tolist() == [False, True, False, True, False]
    assert np.asarray(result.lineage.update[0]).tolist() == [1, 2, 3, 4, 5]
    events = result.lineage.events()
    assert {event["update"] for event in events} <= {2, 4} and len(events) == 2
    for event in events:
        assert event["member"] != event["parent"] and set(event["hyperparameters"]) == {"learning_rate"}
    summary = result.summary()
    assert summary["hyperparameters/learning_rate/member_0"] == pytest.approx(
        float(result.state.hyperparameters["learning_rate"][0])
    )
    assert sum(summary[f"copies/member_{i}"] for i in range(SIZE)) == 2
    assert "grad_norm/member_0" in summary and "episodes/member_0" not in summary  # as asked


def test_calls_of_any_size_equal_one_call():
    # Ready steps every 3 updates fall inside the calls of 2 and 4 updates.
    pbt = _pbt(interval=3)
    state = pbt.init(jax.random.key(2))
    whole = pbt.train(state, num_updates=6)
    first = pbt.train(state, num_updates=2)
    second = pbt.train(first.state, num_updates=4)
    _assert_equal(second.state, whole.state)
    assert first.lineage.events() + second.lineage.events() == whole.lineage.events()


def test_resuming_from_a_checkpoint_equals_the_uninterrupted_run(tmp_path):
    pbt = _pbt(interval=2)
    state = pbt.init(jax.random.key(3))
    whole = pbt.train(state, num_updates=4)
    halfway = pbt.train(state, num_updates=2).state
    with Checkpointer(tmp_path) as checkpointer:
        checkpointer.save(2, halfway)
        checkpointer.wait()
        restored = checkpointer.restore(pbt.init(jax.random.key(99)))
    _assert_equal(pbt.train(restored, num_updates=2).state, whole.state)


def test_tournament_runs_in_the_program():
    pbt = _pbt(interval=1, selection=Tournament())
    result = pbt.train(pbt.init(jax.random.key(0)), num_updates=3)
    fitness = np.asarray(result.lineage.fitness)
    parent = np.asarray(result.lineage.parent)
    assert np.all(parent[:, -1] >= 0) and fitness.shape == (SIZE, 3)


def test_pbt_keeps_the_pipeline_contract():
    pbt = _pbt()
    member = pbt.population.member(0)
    assert pbt.frames_per_update == member.num_envs * member.rollout_length
    assert pbt.num_members == SIZE and pbt.num_devices == 1
    state, log = train_with_progress(pbt, pbt.init(jax.random.key(0)), num_updates=4, updates_per_call=2, show=False)
    assert log.mean_episode_return.shape == (2, SIZE) and int(state.update) == 4


def test_pbt_evaluates_each_member_with_the_hyperparameters_it_reached():
    pbt = _pbt(interval=1)
    state = pbt.train(pbt.init(jax.random.key(0)), num_updates=3).state
    reached = pbt.population_at(state)
    assert not np.allclose(reached.hyperparameters["learning_rate"], pbt.population.hyperparameters["learning_rate"])
    evaluation = pr.Evaluation(pr.policies.Greedy(), num_episodes=3, key=jax.random.key(1), max_steps=20)
    _assert_equal(pbt.evaluate(state, evaluation), reached.evaluate(state.members, evaluation))
    assert pbt.observation_spec == pbt.population.observation_spec
    for member in range(SIZE):
        _assert_equal(pbt.network_at(state, member), reached.network_at(state.members, member))
        _assert_equal(pbt.agent_at(state, member), reached.agent_at(state.members, member))
        assert pbt.evaluation_env(state, member) is not None
    with pytest.raises(ValueError, match=f"PBT: there is no member {SIZE}"):
        pbt.network_at(state, SIZE)
    with pytest.raises(ValueError, match=f"PBT: there is no member {SIZE}"):
        pbt.agent_at(state, SIZE)


# --------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("explore", "interval", "error", "message"),
    [
        ({"learning_rate": Perturb()}, 2, ValueError, "structure of the population's hyperparameters"),
        ({"learning_rate": None, "key": None}, 2, ValueError, "no hyperparameter to explore"),
        ({"learning_rate": Perturb(), "key": Perturb()}, 2, TypeError, "only floating-point hyperparameters"),
        ({"learning_rate": Perturb(), "key": None}, 0, ValueError, "interval"),
    ],
)
def test_pbt_rejects_bad_settings(explore, interval, error, message):
    with pytest.raises(error, match=message):
        pr.PBT(_population(), explore, interval=interval)


def test_pbt_needs_two_members():
    population = pr.Population(
        _member, {"learning_rate": jnp.asarray([1e-2]), "key": jax.random.split(jax.random.key(0), 1)}
    )
    with pytest.raises(ValueError, match="at least two members"):
        pr.PBT(population, {"learning_rate": Perturb(), "key": None}, interval=1)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Truncation(0.0), "fraction"),
        (lambda: Truncation(0.6), "fraction"),
        (lambda: Perturb(()), "at least one factor"),
        (lambda: Perturb(low=1.0, high=0.0), "must not exceed"),
        (lambda: Resample(1.0, 1.0), "must be below"),
        (lambda: Resample(0.0, 1.0, log=True), "positive low"),
    ],
)
def test_selection_and_exploration_reject_bad_settings(make, message):
    with pytest.raises(ValueError, match=message):
        make()
