"""The fleet: a host installed as an agent (`advisor install`), its events shipped to a
central store, and the central store's retention."""

__all__ = ["hostfiles", "install", "retention", "ship"]
