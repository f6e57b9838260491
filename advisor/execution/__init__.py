"""Carrying out approved actions: backends (systemd, dry run) and the step runner."""

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
