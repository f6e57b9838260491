"""advisor: crash analytics and recovery advice for GPU LLM inference servers run as systemd
units. The sub-packages are the stages of one pipeline, each importing only those below it:

    ingest → store (events) → views → diagnosis → planning → execution → store (events)

with `core` under everything, `parsing` under views and diagnosis, and `reports`, `fleet`,
`pipeline`, `sim`, `demo`, `front` (the front door, `Advisor`, that the two front ends go
through), `console` (the web console) and `cli` on top. `.importlinter` holds the contracts.
"""

__all__ = [
    "core",
    "store",
]
