"""The package's version, in a module that imports nothing (the storage layer names it in an error)."""

__version__ = "0.1.0"
