"""Read models folded from events, and the reading of them."""

__all__ = [
    "actions",
    "console",
    "cutting",
    "fold",
    "foldbase",
    "gpu",
    "history",
    "hosts",
    "incidents",
    "keys",
    "labels",
    "logpages",
    "projector",
    "reading",
    "rows",
    "runrow",
    "runs",
    "skipped",
    "tallies",
]
