"""What makes the store's hash chain evidence, built on the event store (`advisor.store.store`)
and never imported by it: signed chain heads, where they are kept and which key signs a
store's heads (`heads`, `headlog`, `keyplace`), walking the chain and summarising the store
(`audit`), shipped hosts' chains in a central store, taking a host's events there and asking
first whether it takes the host's heads (`hostchain`, `central`, `binding`), the ranges of
events a host kept, in its chain as shipped (`held`), asked for (`fetchrequests`) and fetched
from it later (`kept`), and the chain anchors retention leaves behind (`retained`,
`partitions`).

`.importlinter` keeps the direction (the event store never reaches up into this package) and
keeps the signed heads (`heads`) free of SQL: they can be made and checked with no database."""

__all__ = [
    "audit",
    "binding",
    "central",
    "fetchrequests",
    "headlog",
    "heads",
    "held",
    "hostchain",
    "kept",
    "keyplace",
    "partitions",
    "retained",
]
