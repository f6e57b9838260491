"""The `advisor` command line, thin over the front door: one module per family of commands
(`main` is the group, which imports a command's module only when it runs)."""

__all__ = [
    "main",
]
