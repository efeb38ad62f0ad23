"""The package's version, in one place: `vla_client.__version__`, the wheel's metadata (pyproject
reads it from here) and the reference server's OpenAPI document all take it from this line."""

__version__ = "0.3.0"
