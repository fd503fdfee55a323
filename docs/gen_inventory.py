"""Writes build/external.inv: where the external types in podrace's signatures are documented.

The docs build is offline, so mkdocstrings cannot download the inventories of Python,
JAX, Equinox and the others. This script writes one Sphinx inventory (version 2) of the
external names that podrace's signatures use, with the addresses of their documentation;
`mkdocs.yml` loads it, and the API pages link those names. A name missing here is shown
without a link. `nox -s docs` runs this before building the site.

    python docs/gen_inventory.py
"""

import pathlib
import zlib


ROOT = pathlib.Path(__file__).parent.parent
INVENTORY = ROOT / "build" / "external.inv"

PYTHON = "https://docs.python.org/3/library/"
JAX = "https://docs.jax.dev/en/latest/"
JAXTYPING = "https://docs.kidger.site/jaxtyping/api/"
GYMNASIUM = "https://gymnasium.farama.org/api/"

# name, Sphinx role, address of its documentation.
ENTRIES = [
    ("bool", "py:class", PYTHON + "functions.html#bool"),
    ("dict", "py:class", PYTHON + "stdtypes.html#dict"),
    ("float", "py:class", PYTHON + "functions.html#float"),
    ("int", "py:class", PYTHON + "functions.html#int"),
    ("list", "py:class", PYTHON + "stdtypes.html#list"),
    ("str", "py:class", PYTHON + "stdtypes.html#str"),
    ("tuple", "py:class", PYTHON + "stdtypes.html#tuple"),
    ("type", "py:class", PYTHON + "functions.html#type"),
    ("AssertionError", "py:exception", PYTHON + "exceptions.html#AssertionError"),
    ("abc.ABC", "py:class", PYTHON + "abc.html#abc.ABC"),
    ("collections.abc.Callable", "py:class", PYTHON + "collections.abc.html#collections.abc.Callable"),
    ("collections.abc.Mapping", "py:class", PYTHON + "collections.abc.html#collections.abc.Mapping"),
    ("collections.abc.Sequence", "py:class", PYTHON + "collections.abc.html#collections.abc.Sequence"),
    ("io.TextIOBase", "py:class", PYTHON + "io.html#io.TextIOBase"),
    ("os.PathLike", "py:class", PYTHON + "os.html#os.PathLike"),
    ("pathlib.Path", "py:class", PYTHON + "pathlib.html#pathlib.Path"),
    ("typing.Any", "py:data", PYTHON + "typing.html#typing.Any"),
    ("typing.Generic", "py:class", PYTHON + "typing.html#typing.Generic"),
    ("typing.Literal", "py:data", PYTHON + "typing.html#typing.Literal"),
    ("numpy.ndarray", "py:class", "https://numpy.org/doc/stable/reference/generated/numpy.ndarray.html"),
    ("jax.Array", "py:class", JAX + "_autosummary/jax.Array.html"),
    ("jax.nn.relu", "py:function", JAX + "_autosummary/jax.nn.relu.html"),
    ("jax.sharding.Mesh", "py:class", JAX + "jax.sharding.html#jax.sharding.Mesh"),
    # jaxtyping's Array is jax.Array; its dtype annotations are documented on one page.
    ("jaxtyping.Array", "py:class", JAX + "_autosummary/jax.Array.html"),
    ("jaxtyping.ArrayLike", "py:data", JAXTYPING + "array/"),
    ("jaxtyping.Bool", "py:class", JAXTYPING + "array/"),
    ("jaxtyping.Float", "py:class", JAXTYPING + "array/"),
    ("jaxtyping.Int", "py:class", JAXTYPING + "array/"),
    ("jaxtyping.PRNGKeyArray", "py:data", JAXTYPING + "array/"),
    ("jaxtyping.Shaped", "py:class", JAXTYPING + "array/"),
    ("jaxtyping.UInt8", "py:class", JAXTYPING + "array/"),
    ("jaxtyping.PyTree", "py:class", JAXTYPING + "pytree/"),
    ("equinox.Module", "py:class", "https://docs.kidger.site/equinox/api/module/module/#equinox.Module"),
    (
        "optax.GradientTransformation",
        "py:class",
        "https://optax.readthedocs.io/en/latest/api/transformations.html#optax.GradientTransformation",
    ),
    ("optax.Schedule", "py:data", "https://optax.readthedocs.io/en/latest/api/optimizer_schedules.html#optax.Schedule"),
    ("gymnasium.Env", "py:class", GYMNASIUM + "env/#gymnasium.Env"),
    ("gymnasium.ActionWrapper", "py:class", GYMNASIUM + "wrappers/action_wrappers/#gymnasium.ActionWrapper"),
    (
        "gymnasium.ObservationWrapper",
        "py:class",
        GYMNASIUM + "wrappers/observation_wrappers/#gymnasium.ObservationWrapper",
    ),
]


def main() -> None:
    header = "# Sphinx inventory version 2\n# Project: external\n# Version: 0\n"
    header += "# The remainder of this file is compressed using zlib.\n"
    # Each line: name, role, priority, address, display name ("-": the name itself).
    body = "".join(f"{name} {role} 1 {address} -\n" for name, role, address in ENTRIES)
    INVENTORY.parent.mkdir(exist_ok=True)
    INVENTORY.write_bytes(header.encode() + zlib.compress(body.encode()))


if __name__ == "__main__":
    main()
