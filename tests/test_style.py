"""House rules that Equinox no longer enforces, checked over podrace's public namespaces,
and the home page's table of extras checked against pyproject.toml."""

import ast
import graphlib
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


def _is_method(value) -> bool:
    return inspect.isfunction(value) or isinstance(value, property | classmethod | staticmethod)


def _is_abstract_method(value) -> bool:
    function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
    return getattr(function, "__isabstractmethod__", False)


def _is_declaration(annotation) -> bool:
    """An abstract attribute: `eqx.AbstractVar`, `eqx.AbstractClassVar`, or a `ClassVar`
    annotation without a value."""
    text = str(annotation)
    return any(kind in text for kind in ("AbstractVar", "AbstractClassVar", "ClassVar"))


def _concrete_overrides(cls) -> list[str]:
    """The members `cls` defines that a podrace base already defines concretely."""
    own = vars(cls)
    names = {name for name in own if not name.startswith(("__", "_abc_")) or name == "__call__"}
    names |= set(own.get("__annotations__", {}))
    offences = []
    for name in sorted(names):
        for base in cls.__mro__[1:]:
            if not base.__module__.startswith("podrace"):
                continue
            inherited = vars(base)
            if name in inherited:
                value = inherited[name]
                if not (_is_method(value) and _is_abstract_method(value)):
                    offences.append(f"{cls.__qualname__}.{name} overrides {base.__qualname__}.{name}")
                break
            if name in inherited.get("__annotations__", {}):
                if not _is_declaration(inherited["__annotations__"][name]):
                    offences.append(f"{cls.__qualname__}.{name} redeclares the field {base.__qualname__}.{name}")
                break
    return offences


def test_only_abstract_methods_and_attributes_are_overridden():
    # Equinox's abstract-or-final pattern: a concrete member, once written, is final.
    offences = [offence for cls in CLASSES.values() for offence in _concrete_overrides(cls)]
    assert not offences, offences


def test_the_override_rule_finds_an_override():
    class AbstractBase(pr.envs.AbstractEnv):
        def helper(self):
            return 1

    class Concrete(AbstractBase):
        def helper(self):
            return 2

    Concrete.__module__ = AbstractBase.__module__ = "podrace.example"
    (offence,) = _concrete_overrides(Concrete)
    assert offence.endswith(
        "Concrete.helper overrides test_the_override_rule_finds_an_override.<locals>.AbstractBase.helper"
    )
    assert _concrete_overrides(AbstractBase) == []  # a new method is no override


# The rule must not tax the user: the base a user writes a part against asks for what
# defines the part; a capability (drawing, a carry, a faster unroll) is a base of its own.
@pytest.mark.parametrize(
    ("base", "defining"),
    [
        (pr.envs.AbstractEnv, {"reset", "step", "observation_space", "action_space"}),
        (pr.envs.AbstractRenderableEnv, {"reset", "step", "observation_space", "action_space", "render"}),
        (pr.networks.AbstractNetwork, {"output_type", "num_actions", "__call__"}),
        (pr.networks.AbstractRecurrentNetwork, {"output_type", "num_actions", "__call__", "initial_state"}),
    ],
    ids=lambda x: x.__name__ if isinstance(x, type) else "",
)
def test_a_family_base_asks_only_for_what_defines_its_members(base, defining):
    assert set(base.__abstractmethods__) == defining


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


PACKAGE_ROOT = pathlib.Path(pr.__file__).parent


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    target = PACKAGE_ROOT.parent.joinpath(*name.split("."))
    return target.with_suffix(".py").exists() or (target / "__init__.py").exists()


def _podrace_imports(path: pathlib.Path) -> list[tuple[str, str | None, str | None]]:
    """`(module, name, bound_as)` for each podrace module (`name` None) or name from one
    that the file at `path` imports; relative imports resolved."""
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    package = list(parts[:-1])  # a module's package; an __init__'s, its own
    imports = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imports += [(alias.name, None, alias.asname) for alias in node.names if alias.name.startswith("podrace")]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if module.startswith("podrace"):
                for alias in node.names:
                    submodule = f"{module}.{alias.name}"
                    if _is_module(submodule):
                        imports.append((submodule, None, alias.asname or alias.name))
                    else:
                        imports.append((module, alias.name, alias.asname or alias.name))
    return imports


def _import_graph() -> dict[str, set[str]]:
    """Each podrace module and the podrace modules it names in its imports."""
    return {
        _module_name(path): {module for module, _, _ in _podrace_imports(path)}
        for path in sorted(PACKAGE_ROOT.rglob("*.py"))
    }


def test_no_module_imports_a_private_name_of_another():
    offences = {}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        imports = _podrace_imports(path)
        names = [f"{module}.{name}" for module, name, _ in imports if name and re.match(r"_(?!_)", name)]
        modules = {bound for _, name, bound in imports if name is None and bound}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                names += [f"{node.value.id}.{node.attr}"] if re.match(r"_(?!_)", node.attr) else []
        if names:
            offences[_module_name(path)] = names
    assert not offences, offences


def test_the_on_device_executors_do_not_import_the_host_ones():
    graph = _import_graph()
    for start in ["podrace.executors.anakin", "podrace.executors.population", "podrace.executors.evaluation"]:
        reached, frontier = set(), [start]
        while frontier:
            module = frontier.pop()
            if module not in reached:
                reached.add(module)
                frontier += graph.get(module, set())
        assert not reached & {"podrace.executors.host", "podrace.envs.gymnasium"}, start


def test_the_import_graph_has_no_circle():
    graphlib.TopologicalSorter(_import_graph()).prepare()  # raises CycleError naming one


def test_no_package_exports_a_name_of_one_of_its_modules():
    # `podrace.losses.vtrace` must name one thing for readers and for the docs' references.
    clashes = []
    for init in sorted(PACKAGE_ROOT.rglob("__init__.py")):
        submodules = {info.name for info in pkgutil.iter_modules([str(init.parent)])}
        package = _module_name(init)
        clashes += [
            f"{package}.{bound}"
            for module, name, bound in _podrace_imports(init)
            if name is not None and bound in submodules
        ]
    assert not clashes, clashes
