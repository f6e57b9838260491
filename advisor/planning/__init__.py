"""Plans for incidents: what to do, within which bounds, and the planning stage."""

__all__ = [
    "bounds",
    "context",
    "engine_remedies",
    "planner",
    "policy",
    "recommend",
    "remedies",
    "sizing",
]
