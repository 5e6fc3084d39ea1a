"""trysquare's version, in a module of its own: what needs it (``--version``, ``trysquare
plugins``) reads it here rather than from the package root, which imports nothing."""

__version__ = "0.1.0"
