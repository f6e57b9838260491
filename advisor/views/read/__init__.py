"""The read side of the views: the projections' rows handed out typed and frozen (`rows`) —
runs and their own log lines, incidents, actions, the console's lists, a host's history, the
hosts a store holds lines of, and counts done by the database (`tallies`). A reader that must
see the latest events folds what is new first (`rows.fresh`, through
`advisor.views.fold.projector`); the fold never imports this package."""

__all__ = [
    "actions",
    "console",
    "corrections",
    "gpufaults",
    "history",
    "hosts",
    "incidents",
    "reading",
    "rows",
    "runs",
    "tallies",
]
