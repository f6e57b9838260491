"""Runs to labels: the rules engine, the learned model, `classify` on a file, and the live
diagnoser that labels the runs the views hold.
"""

__all__ = [
    "calibration",
    "classify",
    "corrections",
    "held",
    "holdout",
    "live",
    "model",
    "rulefile",
    "rules",
    "ruletest",
    "stream",
    "training",
]
