"""Strict JAX configuration for the test session.

Warnings are errors (pyproject `filterwarnings`), arrays of different ranks never
broadcast implicitly and matmuls run at full float32 precision on every backend. Shapes
and dtypes in podrace's signatures are checked by the jaxtyping import hook (pyproject
`addopts`), installed before this file is imported.
"""

import importlib.metadata
import os
import pathlib
import shutil
import tempfile
import warnings


# Workers of `pytest -n` share one accelerator: none may take most of its memory up front.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# The command line keeps its compiled programs in the user's cache by default, a setting of
# the whole process: the tests that run it in this process must compile as every other
# test does (a test of the default runs it in a process of its own).
os.environ["PODRACE_COMPILATION_CACHE"] = ""


# Runs compared bit for bit in two processes (test_checkpoint.py) must compile alike on a
# GPU: deterministic kernels and no autotuning (which may pick other kernels in each
# process). Only where JAX has a CUDA or ROCm plugin: on a CPU the flag makes some
# programs several times slower.
if "xla_gpu_deterministic_ops" not in os.environ.get("XLA_FLAGS", "") and any(
    (distribution.metadata["Name"] or "").lower().replace("_", "-").startswith(("jax-cuda", "jax-rocm"))
    for distribution in importlib.metadata.distributions()
):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_gpu_deterministic_ops=true".strip()

import jax
import pytest


jax.config.update("jax_numpy_rank_promotion", "raise")
# Full float32 matmuls: GPUs default to TF32, which fails tolerances such as rtol=1e-6.
jax.config.update("jax_default_matmul_precision", "highest")

# distrax (imported by podrace) pulls in tensorflow_probability, whose JAX substrate
# touches an API that JAX has deprecated. That is outside podrace, so it is silenced
# for this import only; every other warning stays an error.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "jax.core.pytype_aval_mappings is deprecated", DeprecationWarning)
    import distrax  # noqa: F401

from . import helpers  # noqa: E402


MULTIDEVICE = pytest.StashKey[helpers.MultideviceRuns]()
# Whether this process is a worker of `pytest -n` (pytest-xdist sets the variable first).
IN_XDIST_WORKER = "PYTEST_XDIST_WORKER" in os.environ


def _reads_multidevice_runs(item: pytest.Item) -> bool:
    return "multidevice_runs" in getattr(item, "fixturenames", ())


def _start_multidevice_runs(config: pytest.Config) -> helpers.MultideviceRuns:
    runs = helpers.MultideviceRuns(pathlib.Path(tempfile.mkdtemp(prefix="podrace-multidevice-")))
    config.stash[MULTIDEVICE] = runs
    return runs


# The longest tests of the slow session (`--durations`), longest first.
SLOWEST = (
    "test_solves_cartpole[c51]",
    "test_solves_cartpole[sac]",
    "test_alphazero_by_self_play_never_loses_to_perfect_play_on_seeds_0_to_9",
    "test_ppo_solves_envpool_cartpole_through_sebulba_on_seeds_0_to_9",
    "test_muzero_from_replay_balances_cartpole_on_ten_seeds",
    "test_muzero_learns_catch_on_ten_seeds",
    "test_gumbel_muzero_with_two_simulations_learns_catch",
    "test_solves_cartpole[dqn]",
    "test_the_podracer_papers_td_lambda_agent_solves_catch",
    "test_solves_cartpole[c51-pqn]",
    "test_recurrent_ppo_solves_memory_chain_through_the_rlplay_actor",
    "test_off_policy_actor_critic_solves_pendulum[sac]",
    "test_ppo_solves_envpool_cartpole_on_seeds_0_to_9",
    "test_off_policy_actor_critic_solves_pendulum[td3]",
    "test_solves_cartpole[pqn]",
    "test_off_policy_actor_critic_solves_pendulum[ddpg]",
    "test_td_lambda_learner_improves_on_gymnasium_cartpole",
    "test_solves_cartpole[reinforce]",
    "test_recipe_reaches_its_published_result[cleanrl-dqn-cartpole-v1]",
    "test_gaussian_ppo_solves_pendulum",
    "test_alphazero_learns_catch_on_ten_seeds",
    "test_recurrent_ppo_solves_repeat_first_where_feed_forward_ppo_cannot",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The tests of the multi-device runs wait for their subprocesses: they come last, so
    # that the runs overlap with every other test, or first under `pytest -n N --dist
    # loadfile`, where one worker takes their module (test_device_matrix.py) and starts
    # the runs, and the other workers take the other modules meanwhile.
    # The slow session's longest tests start first, so that its workers end together.
    rank = {name: index for index, name in enumerate(SLOWEST)}
    items.sort(key=lambda item: (_reads_multidevice_runs(item) != IN_XDIST_WORKER, rank.get(item.name, len(SLOWEST))))


def pytest_collection_finish(session: pytest.Session) -> None:
    # The multi-device runs are subprocesses that take a while: start them as soon as
    # the tests that read them are selected, so that they overlap with other tests. Each
    # worker of `pytest -n` collects every test, so there the worker that runs them
    # starts them instead, when the fixture is first asked for.
    if session.config.option.collectonly or IN_XDIST_WORKER:
        return
    if any(_reads_multidevice_runs(item) for item in session.items):
        _start_multidevice_runs(session.config)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drops JAX's compiled programs after each test module.

    XLA's CPU backend maps every compiled program into memory in many pieces; the
    whole suite compiles enough of them to exceed Linux's default limit of 65,530
    mappings per process (`vm.max_map_count`), and the next compilation then crashes.
    Modules rarely share programs, so little is compiled twice.
    """
    yield
    jax.clear_caches()


@pytest.fixture(autouse=True)
def _release_compiled_programs_of_each_package_environment(request: pytest.FixtureRequest):
    """Drops JAX's compiled programs after each test of the `ecosystem` session as well:
    checking every registered environment of a package compiles each one's programs,
    and one module of them (Navix's 40) passes the limit above by itself."""
    yield
    if request.node.get_closest_marker("ecosystem") is not None:
        jax.clear_caches()


def pytest_sessionfinish(session: pytest.Session) -> None:
    runs = session.config.stash.get(MULTIDEVICE, None)
    if runs is not None:
        runs.kill()
        shutil.rmtree(runs.one_device.parent, ignore_errors=True)


@pytest.fixture
def optimized_compilation():
    """XLA's optimisations for a test whose programs run many times, such as a learning test.

    The default session compiles without most of them (`JAX_DISABLE_MOST_OPTIMIZATIONS`,
    see noxfile.py): its programs mostly run once. The Catch learning test runs its
    population's program up to 30 times: optimised, it takes 49 s alone on two cores
    instead of 74 s. The flag is read when a program compiles.
    """
    previous = jax.config.values["jax_disable_most_optimizations"]
    jax.config.update("jax_disable_most_optimizations", False)
    yield
    jax.config.update("jax_disable_most_optimizations", previous)


@pytest.fixture(scope="session")
def multidevice_runs(request: pytest.FixtureRequest) -> helpers.MultideviceRuns:
    """The finished multi-device runs (started at collection, or now in a worker of `pytest -n`)."""
    runs = request.config.stash.get(MULTIDEVICE, None) or _start_multidevice_runs(request.config)
    runs.wait()
    return runs
