"""The fleet: a host installed as an agent (`advisor install`), what of its events it ships
(`selection`) to a central store (`ship`), the lines it kept, fetched when a central
post-mortem asks (`fetch`), and the central store's retention."""

__all__ = ["fetch", "hostfiles", "install", "retention", "selection", "ship"]
