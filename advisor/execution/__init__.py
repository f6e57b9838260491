"""Carrying out approved actions: backends (systemd, dry run) and the step runner."""

__all__ = [
    "alertmanager",
    "attest",
    "backends",
    "bus",
    "confine",
    "decisions",
    "discover",
    "dropins",
    "gpuwait",
    "guards",
    "handlers",
    "notices",
    "preview",
    "primitives",
    "readiness",
    "recovery",
    "rollback",
    "run",
    "state",
    "systemd",
]
