"""Sessions: tests, slow (learning tests), lint, typecheck, docs, gallery."""

import pathlib

import nox


nox.options.sessions = ["tests", "lint", "typecheck", "docs", "gallery"]
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"
ROOT = pathlib.Path(__file__).parent


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit and contract tests, the Catch learning test included."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "not slow", *session.posargs)


@nox.session(python=PYTHON)
def slow(session: nox.Session) -> None:
    """Longer learning tests (pytest marker `slow`)."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "slow", *session.posargs, success_codes=[0, 5])


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """pyright over the package, examples and benchmarks."""
    session.install("-e", ".[plot,bench,es,checkpoint,tensorboard,video]", "pyright>=1.1.380")
    session.run("pyright")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Strict mkdocs build, API pages from docstrings."""
    session.install("-e", ".[docs]")
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(python=PYTHON)
def gallery(session: nox.Session) -> None:
    """Runs every example in examples/ at a small budget."""
    session.install("-e", ".[plot,gymnasium,es,ray,atari]")
    for script in sorted((ROOT / "examples").glob("*.py")):
        session.run("python", str(script), "--num-updates", "200", env={"MPLBACKEND": "Agg"})
