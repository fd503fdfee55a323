"""The package version (one place, read by the package, the CLI and the recipes)."""

__version__ = "0.1.0"
