"""Plans for incidents: what to do for each label (the taxonomy's unit remedies, the engines'
flag remedies), within which safe bounds, what a policy lets run unattended, and the planning
stage that turns `incident.classified` into `action.proposed`."""

__all__ = [
    "bounds",
    "context",
    "planner",
    "policy",
    "recommend",
    "remedies",
]
