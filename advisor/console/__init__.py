"""`advisor serve`: the web console. Incidents (pending approvals first), one incident with its
timeline, evidence and plan, and the fleet's figures, read through the views; approve, reject,
choose an alternative, roll back and run, recorded by the functions the command line uses."""

__all__ = [
    "app",
]
