"""The write side of the views: folding the store's events into the projection tables (runs,
run labels, incidents, actions, GPU samples, each stream's newest events: `heads`), one
chunk at a time, whatever order the events arrived in (`projector`, over `chunk`'s parts),
and the keys, log pages and skipped-event records the fold is made of, and the lines it
hands a diagnoser as it cuts them (`sink`). Nothing here imports `advisor.views.read`."""

__all__ = [
    "heads",
    "incidents",
    "keys",
    "logpages",
    "projector",
    "sink",
    "skipped",
]
