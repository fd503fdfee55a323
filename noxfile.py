"""Sessions: tests, slow (learning tests), lint, typecheck, docs (with the examples' gallery)."""

import tempfile

import nox


nox.options.sessions = ["tests", "lint", "typecheck", "docs"]
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"
# The default session runs one pytest worker per core, each taking whole test modules
# (which share compiled programs) in the order collected: tests/conftest.py puts first
# the module that waits for the multi-device subprocesses.
PARALLEL = ("--numprocesses", "logical", "--dist", "loadfile", "--no-loadscope-reorder")
# Every pytest run prints its slowest tests, to keep an eye on the time budgets.
DURATIONS = "--durations=25"
# Most of the default session is XLA compiling small programs that run once. Its checks
# are of what a program computes, which XLA's optimisations leave alone up to float
# rounding, so it compiles without most of them: 13:42 instead of 23:36 on two cores.
# The slow session and the benchmarks run the optimised programs, as users do.
FAST_COMPILATION = {"JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit and contract tests, the Catch learning test included."""
    session.install("-e", ".[test]")
    session.run(
        "pytest", "-m", "not slow and not ecosystem", *PARALLEL, DURATIONS, *session.posargs, env=FAST_COMPILATION
    )


@nox.session(python=PYTHON)
def slow(session: nox.Session) -> None:
    """Longer learning tests (pytest marker `slow`)."""
    session.install("-e", ".[test]")
    # One worker per core, each taking the next test as it finishes one, the longest first
    # (see tests/conftest.py). Each test is a group of its own: twice, `--dist load` left
    # both workers waiting after all but two tests.
    parallel = ("--numprocesses", "logical", "--dist", "loadgroup", "--no-loadscope-reorder")
    # `-rP` shows what the passing learning tests print: every seed's return.
    session.run("pytest", "-m", "slow", *parallel, DURATIONS, "-rP", *session.posargs, success_codes=[0, 5])


@nox.session(python=PYTHON)
def ecosystem(session: nox.Session) -> None:
    """Every registered environment of the other packages (Brax, Playground, Navix, Jumanji,
    Craftax, XLand-MiniGrid) through `check_env`, PPO learning an easy task of each, and PPO
    learning CartPole through Ray actors: over an hour on two cores, so not in CI, which
    checks one or a few of each package, and Ray's actors, in the default session."""
    session.install("-e", ".[test]")
    learning = "tests/test_ecosystem_learning.py"
    ray_learning = "tests/test_ray_actors.py::test_ppo_learns_cartpole_through_ray_actors"
    checks = ("-m", "ecosystem", "--ignore", learning, "--deselect", ray_learning)
    session.run("pytest", *checks, *PARALLEL, DURATIONS, *session.posargs, env=FAST_COMPILATION)
    # The learning tests run the optimised programs, as the slow session's do.
    each_alone = ("--numprocesses", "logical", "--dist", "loadgroup")
    session.run("pytest", learning, "-m", "ecosystem", *each_alone, DURATIONS, "-rP", *session.posargs)
    # PPO through Ray actors, alone: its actors need the cores (6:21 alone on two cores,
    # 17 minutes beside another worker).
    session.run("pytest", ray_learning, "-m", "ecosystem", DURATIONS, "-rP", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """pyright over the package, examples and benchmarks."""
    suites = "brax,playground,navix,jumanji,craftax,xminigrid,pgx,search,envpool"
    extras = f"plot,bench,es,checkpoint,tensorboard,video,onnx,{suites}"
    session.install("-e", f".[{extras}]", "pyright>=1.1.380")
    session.run("pyright")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Runs every example into the gallery, builds the site strictly and checks it in Chromium."""
    session.install("-e", ".[docs,plot,video,gymnasium,es,ray,atari,brax,navix,craftax,pgx,search]")
    session.run("python", "docs/gen_inventory.py")
    session.run("python", "docs/gen_gallery.py")
    session.run("python", "docs/gen_reproductions.py")
    # mkdocs caches inventories by address for a day: an empty cache reads this build's.
    with tempfile.TemporaryDirectory() as cache:
        session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1", "XDG_CACHE_HOME": cache})
    session.run("python", "docs/check_site.py")
