"""Log lines read: their facts, and the runs they make."""

__all__ = [
    "catalog",
    "facts",
    "lines",
    "parsed",
    "patterns",
    "phases",
    "runfold",
    "sequence",
    "templates",
    "tracebacks",
    "values",
]
