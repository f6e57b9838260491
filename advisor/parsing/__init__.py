"""Log lines read: their facts, and the runs they make."""

__all__ = [
    "facts",
    "lines",
    "parsed",
    "patterns",
    "phases",
    "runfold",
    "sequence",
    "tracebacks",
    "values",
]
