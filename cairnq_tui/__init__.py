"""cairnq-tui: a Textual console that watches and operates a live cairnq database."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cairnq-tui")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
