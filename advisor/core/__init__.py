"""The ground every stage stands on: the domain's three registries (the engines, the failure
taxonomy, the action kinds), the event and action models, errors, settings, unit names, times,
the outside formats several stages read (journal export, journalctl, the GPU sampler's shape),
and what keeps per-line work cheap (a paused garbage collector, slot-setting dataclass
constructors).
"""

__all__ = [
    "actions",
    "address",
    "engines",
    "errors",
    "events",
    "gcpause",
    "heartbeat",
    "host",
    "ids",
    "journal_export",
    "journalctl",
    "kinds",
    "payloads",
    "quantiles",
    "records",
    "release",
    "sampler",
    "settings",
    "slots",
    "statuses",
    "steps",
    "taxonomy",
    "timefmt",
    "toml",
    "units",
    "xids",
]
