"""The `advisor` command line: one module per family of commands (`main` is the group)."""

__all__ = [
    "main",
]
