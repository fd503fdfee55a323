"""mctx, imported on first use: podrace imports without it (the `search` extra)."""

from types import ModuleType

from ..envs._packages import import_package


def import_mctx(owner: str) -> ModuleType:
    """The `mctx` package, or an `ImportError` naming `owner` and `pip install 'podrace[search]'`.

    **Arguments:**

    - `owner`: the podrace part that needs mctx, for the message.

    **Returns:**

    The `mctx` module.
    """
    return import_package("mctx", extra="search", owner=owner)
