"""Log lines read: a line's prefix peeled off, its facts and catalogued messages, tracebacks,
and the runs the lines make (one fold shared by the projector and `classify`)."""

__all__ = [
    "catalog",
    "lines",
    "parsed",
    "pasted",
    "runfold",
    "sequence",
    "templates",
    "tracebacks",
    "values",
]
