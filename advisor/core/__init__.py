"""The ground every stage stands on: the event and action models, errors, settings, unit
names, times, text safety, and the outside formats several stages read (journal export,
journalctl, the GPU sampler's shape).
"""

__all__ = [
    "actions",
    "address",
    "errors",
    "events",
    "host",
    "ids",
    "journal_export",
    "journalctl",
    "journald",
    "payloads",
    "progress",
    "quantiles",
    "records",
    "release",
    "render",
    "sampler",
    "settings",
    "shapes",
    "timefmt",
    "toml",
    "units",
]
