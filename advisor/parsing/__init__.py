"""Log lines read: their facts, and the runs they make."""

__all__ = ["facts", "lines", "parsed", "runfold", "sequence", "tracebacks", "values"]
