"""The version of tpubench (pyproject.toml says the same), importable from any layer."""

__version__ = "0.1.0"
