"""Plans for incidents: what to do, within which bounds, and the planning stage."""

__all__ = [
    "bounds",
    "context",
    "planner",
    "policy",
    "recommend",
    "remedies",
]
