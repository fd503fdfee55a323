"""House rules that Equinox no longer enforces, checked over podrace's public namespaces,
and the home page's table of extras checked against pyproject.toml."""

import importlib
import inspect
import pathlib
import pkgutil
import re
import tomllib
import typing

import jax.numpy as jnp
import jaxtyping
import pytest

import podrace as pr


def _modules():
    names = ["podrace"] + [info.name for info in pkgutil.walk_packages(pr.__path__, "podrace.")]
    return [importlib.import_module(name) for name in sorted(set(names))]


def _classes():
    classes = {}
    for module in _modules():
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if obj.__module__.startswith("podrace"):
                classes[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return classes


CLASSES = _classes()


def test_the_namespaces_hold_classes():
    names = set(CLASSES)
    assert "podrace.executors.anakin.Anakin" in names and "podrace.envs.catch.Catch" in names
    assert len(names) > 20


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_class_is_abstract_or_final(name):
    cls = CLASSES[name]
    is_final = getattr(cls, "__final__", False)
    if cls.__name__.startswith("Abstract"):
        assert not is_final, f"{name} is named Abstract* but marked @final"
    else:
        assert is_final, f"{name} is concrete: mark it @typing.final (or name it Abstract* if it is a base)"


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_only_abstract_classes_are_subclassed(name):
    cls = CLASSES[name]
    for base in cls.__mro__[1:]:
        if base.__module__.startswith("podrace"):
            assert base.__name__.startswith("Abstract"), f"{name} subclasses the concrete {base.__qualname__}"


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_class_has_a_docstring(name):
    cls = CLASSES[name]
    assert cls.__doc__ and cls.__doc__.strip(), f"{name} has no docstring"


def test_final_is_the_typing_marker():
    # `typing.final` sets __final__ on the class (the attribute the checks above read).
    @typing.final
    class Example:
        pass

    assert Example.__final__ is True


def test_signatures_are_checked_at_test_time():
    # The jaxtyping import hook (pyproject addopts) instruments podrace: a wrongly
    # shaped argument fails at the call, not deep inside XLA.
    with pytest.raises(jaxtyping.TypeCheckError):
        pr.losses.lambda_returns(jnp.zeros(3), jnp.zeros(4), jnp.zeros(3))


def test_the_home_page_lists_every_extra():
    root = pathlib.Path(__file__).parent.parent
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    listed = re.findall(r"^\| `([\w-]+)` \|", (root / "docs" / "index.md").read_text(), re.MULTILINE)
    assert sorted(listed) == sorted(extras)
