"""Sources to events: journald (JSON, export stream, journalctl), text logs, nvidia-smi CSV,
NVML, GPU recordings, and a watched folder. Depends only on advisor.core and advisor.store.
"""

__all__ = [
    "batches",
    "cgroup",
    "filejob",
    "files",
    "follow",
    "gpu",
    "gpu_faults",
    "gpu_health",
    "gpu_health_changes",
    "gpu_recording",
    "gpu_samples",
    "journal",
    "journal_sources",
    "kinds",
    "nvidia_smi",
    "nvml",
    "parallel",
    "sampling",
    "text",
    "watch",
]
