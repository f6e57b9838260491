"""The front door's reading and explaining: the store's events and status, its schema, the
projections (runs, incidents) and their upkeep (fold, diagnose, rebuild), a service's
post-mortem in a format, and the fleet's figures and SQL over the store or its Parquet
export. Each delegates to advisor.store, advisor.views, advisor.pipeline and advisor.reports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.core.statuses import IncidentStatus
from advisor.front.base import Front

if TYPE_CHECKING:
    from advisor.core.events import StoredEvent
    from advisor.pipeline.processing import ProcessReport
    from advisor.reports.analytics import Answer
    from advisor.store.integrity.audit import StoreStatus
    from advisor.views.read.hosts import HostHealth

EXPLAIN_FORMATS = ("text", "markdown", "json", "html")


class Reading(Front):
    def upgrade(self) -> str | None:
        """Create the store or bring its schema up to date; the schema's revision."""
        from advisor.store import migrate

        with self.store.connect() as conn:
            return migrate.current_revision(conn)

    def events(
        self,
        *,
        stream: str | None = None,
        type_: str | None = None,
        since_us: int | None = None,
        limit: int | None = None,
    ) -> Iterator[StoredEvent]:
        """Stored events, oldest first, of `stream` and `type_`, since `since_us`; the last
        `limit` of them."""
        from advisor.store import EventFilter

        flt = EventFilter(stream=stream, type=type_, limit=limit, since_us=since_us)
        return iter(self.store.read(flt))

    def status(self) -> tuple[StoreStatus, dict[str, int]]:
        """The store's URL, revision, counts and checkpoints; and what was skipped, by stage."""
        from advisor.store.integrity import audit
        from advisor.views.fold.skipped import count_skipped

        return audit.status(self.store), count_skipped(self.store)

    def skipped(self) -> dict[str, int]:
        """Events the fold, runs the diagnoser could not use, by stage."""
        from advisor.views.fold.skipped import count_skipped

        return count_skipped(self.store)

    def runs(self, *, unit: str | None = None, host: str | None = None) -> list[dict[str, Any]]:
        """Service runs (rows of the projection), in time order."""
        from advisor.views.read.reading import read_rows

        return read_rows(self.store, "runs", unit=unit, host=host)

    def incidents(
        self, *, unit: str | None = None, host: str | None = None, only_open: bool = False
    ) -> list[dict[str, Any]]:
        """Incidents (rows of the projection), in time order; `only_open`: not resolved. Each
        with its operators' label beside the diagnosis: `operator_label` and `operator` (the
        latest `advisor label` correction; None for an incident no one corrected)."""
        from advisor.views.read.corrections import with_operator_labels
        from advisor.views.read.reading import read_rows

        status = IncidentStatus.OPEN.value if only_open else None
        rows = read_rows(self.store, "incidents", unit=unit, host=host, status=status)
        return with_operator_labels(self.store, rows)

    def hosts(self, *, now_s: float | None = None) -> list[HostHealth]:
        """Every host of the store: newest event and heartbeat, agent version, ship lag (a
        host shipping here), GPUs, open incidents, GPU faults, and whether it is silent."""
        from advisor.views.read.hosts import host_health

        return host_health(self.store, now_s)

    def diagnose(self) -> ProcessReport:
        """Bring the projections up to date and diagnose the runs not diagnosed yet."""
        from advisor.pipeline.processing import Processor

        return Processor(self.store).run(final=True)

    def fold(self) -> int:
        """Bring the projections up to date without diagnosing; the events folded."""
        from advisor.views.fold.projector import Projector

        return Projector(self.store).catch_up()

    def rebuild(self) -> int:
        """Drop the projections and rebuild them from the events; the events folded."""
        from advisor.views.fold.projector import Projector

        return Projector(self.store).rebuild()

    def postmortem(
        self,
        service: str,
        incident_id: str | None = None,
        series: dict[str, list[tuple[int, float]]] | None = None,
    ) -> dict[str, Any]:
        """The post-mortem of SERVICE's latest incident (or of `incident_id`), as data (the
        GPU samples of its window into `series`, when given)."""
        from advisor.reports.postmortem import build

        return build(self.store, service, incident_id, series)

    def explain(self, service: str, incident_id: str | None = None, fmt: str = "text") -> str:
        """The post-mortem of SERVICE's latest incident (or of `incident_id`) in `fmt`: text,
        markdown, json, or html (one self-contained page)."""
        import orjson

        from advisor.core.units import parse_service

        if fmt not in EXPLAIN_FORMATS:
            raise ValueError(f"explain: no format {fmt!r}")
        parse_service(service)  # a name that is not a unit is refused before the store opens
        series: dict[str, list[tuple[int, float]]] = {}
        report = self.postmortem(service, incident_id, series)
        if fmt == "html":
            from advisor.reports.html import render

            return render(report, series)
        if fmt == "json":
            from advisor.reports.postmortem import report_json

            return orjson.dumps(report_json(report), option=orjson.OPT_INDENT_2).decode() + "\n"
        from advisor.reports.writeup import render_text

        return render_text(report, markdown=fmt == "markdown")

    def stats(
        self,
        *,
        unit: str | None = None,
        host: str | None = None,
        since_us: int | None = None,
        parquet_dir: Path | None = None,
        url: str | None = None,
    ) -> dict[str, list[dict[str, Any]]]:
        """Crashes by label, service and week, time to recovery, restart loops, GPU headroom
        and memory release: section → rows, over the store at `url` (default: the
        settings'), in a process of its own for SQLite, or over a Parquet export."""
        from advisor.reports.analytics import connect_parquet
        from advisor.reports.stats import stats as stats_
        from advisor.reports.stats import store_stats

        if parquet_dir is None:
            where = self.settings.db_url if url is None else url
            return store_stats(where, unit=unit, host=host, since_us=since_us)
        conn = connect_parquet(parquet_dir, sandbox=True)
        try:
            return stats_(conn, unit=unit, host=host, since_us=since_us)
        finally:
            conn.close()

    @staticmethod
    def stats_text(report: dict[str, list[dict[str, Any]]], fmt: str = "text") -> str:
        """`stats`'s report for a person: a table per section (`text`), or one page (`html`)."""
        if fmt == "html":
            from advisor.reports.html import render_stats

            return render_stats(report)
        from advisor.reports.stats_columns import shown_rows, text_table

        return "".join(
            "\n".join(text_table(section, shown_rows(rows))) + "\n"
            for section, rows in report.items()
        )

    def query(self, sql: str, *, parquet_dir: Path | None = None, sandbox: bool = True) -> Answer:
        """DuckDB SQL over the views of the settings' store (attached read-only) or of a
        Parquet export; `sandbox`: the SQL reaches nothing else. Bad SQL is refused before
        the store is opened."""
        from advisor.reports.analytics import query_parquet, query_store
        from advisor.reports.sandbox import check_sql

        check_sql(sql, sandbox=sandbox)
        if parquet_dir is not None:
            return query_parquet(parquet_dir, sql, sandbox=sandbox)
        return query_store(self.settings.db_url, sql, sandbox=sandbox)

    def export_parquet(self, folder: Path, *, force: bool = False) -> dict[str, int]:
        """The settings' store as Parquet under `folder`; rows written, by table."""
        from advisor.reports.analytics import export_parquet

        return export_parquet(self.settings.db_url, folder, force=force)

    def display_url(self) -> str:
        """The settings' store URL, its password hidden (without opening the store)."""
        from advisor.store.engine import redact

        return redact(self.settings.db_url)
