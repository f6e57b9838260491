"""The fleet: a host installed as an agent (`advisor install`), what of its events it ships
(`selection`) to a central store (`ship`), and the central store's retention."""

__all__ = ["hostfiles", "install", "retention", "selection", "ship"]
