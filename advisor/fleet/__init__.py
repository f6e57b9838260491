"""The fleet: a host's events shipped to a central store, and the central store's
retention."""

__all__ = ["retention", "ship"]
