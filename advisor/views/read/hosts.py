"""Which hosts a store holds log lines of (journal entries, text logs): `advisor ingest
nvidia-smi` asks before it files a CSV under this host's name."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from sqlalchemy import func, select

from advisor.store.schema import events

if TYPE_CHECKING:
    from advisor.store import EventStore

GPU_STREAM: Final = re.compile(r"/gpu\d+\Z")  # HOST/gpuN holds GPU samples, never log lines


def log_hosts(store: EventStore, at_most: int = 2) -> set[str]:
    """The hosts of the streams that hold a `log.recorded` event, up to `at_most` of them.
    Streams are found one at a time through the (stream, seq) index, so a store of millions
    of events costs one index look-up per stream, not a scan."""
    hosts: set[str] = set()
    with store.connect() as conn:
        stream = conn.execute(select(func.min(events.c.stream))).scalar()
        while stream is not None and len(hosts) < at_most:
            host = stream.split("/", 1)[0]
            if host not in hosts and not GPU_STREAM.search(stream):
                logged = conn.execute(
                    select(events.c.seq)
                    .where(events.c.stream == stream, events.c.type == "log.recorded")
                    .limit(1)
                ).first()
                if logged is not None:
                    hosts.add(host)
            stream = conn.execute(
                select(func.min(events.c.stream)).where(events.c.stream > stream)
            ).scalar()
    return hosts
