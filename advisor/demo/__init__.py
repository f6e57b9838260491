"""`advisor demo`: the whole pipeline end to end on a simulated node (or a booted systemd)."""

__all__ = ["simulated", "systemd"]
