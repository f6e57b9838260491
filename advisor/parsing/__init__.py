"""Log lines read: their facts, and the runs they make."""

__all__ = [
    "catalog",
    "lines",
    "parsed",
    "runfold",
    "sequence",
    "templates",
    "tracebacks",
    "values",
]
