"""Carrying out approved actions: one handler per action kind (`handlers`; the kinds' registry
is `advisor.core.kinds`) over the primitives every backend offers (systemd over D-Bus, the
simulator, a dry run), each step judged before and read back after, and rolled back on
request; the step runner records every step as events."""

__all__ = [
    "backends",
    "bus",
    "containers",
    "decisions",
    "discover",
    "dropins",
    "gpuwait",
    "handlers",
    "locate",
    "notices",
    "preview",
    "primitives",
    "readiness",
    "received",
    "recovery",
    "rollback",
    "run",
    "state",
    "subject",
    "systemd",
]
