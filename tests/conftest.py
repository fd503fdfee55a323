"""Strict JAX configuration for the test session.

Warnings are errors (pyproject `filterwarnings`), arrays of different ranks never
broadcast implicitly and matmuls run at full float32 precision on every backend. Shapes
and dtypes in podrace's signatures are checked by the jaxtyping import hook (pyproject
`addopts`), installed before this file is imported.
"""

import pathlib
import shutil
import tempfile
import warnings

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


def pytest_collection_finish(session: pytest.Session) -> None:
    # The multi-device runs are subprocesses that take a while: start them as soon as
    # the tests that read them are selected, so that they overlap with other tests.
    if session.config.option.collectonly:
        return
    if any("multidevice_runs" in getattr(item, "fixturenames", ()) for item in session.items):
        session.config.stash[MULTIDEVICE] = helpers.MultideviceRuns(
            pathlib.Path(tempfile.mkdtemp(prefix="podrace-multidevice-"))
        )


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


def pytest_sessionfinish(session: pytest.Session) -> None:
    runs = session.config.stash.get(MULTIDEVICE, None)
    if runs is not None:
        runs.kill()
        shutil.rmtree(runs.one_device.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def multidevice_runs(request: pytest.FixtureRequest) -> helpers.MultideviceRuns:
    """The finished multi-device runs (started at collection)."""
    runs = request.config.stash[MULTIDEVICE]
    runs.wait()
    return runs
