"""The SQL of `advisor stats`: one query per section, over the projections as DuckDB sees
them (`advisor.reports.stats.stats` fills in `{where}` / `{where_and}`). The GPU release
after a kill takes its thresholds from advisor.core.release, as the recommender's history:
per host, every kill, how many of them were measured (the run had used a GPU, and it was free
again within the horizon), and the p50 and p95 of those (null when none was)."""

from __future__ import annotations

from typing import Final

from advisor.core.release import FREE, HORIZON_US, QUANTILE, USED

# The columns of the projections the sections read: each table is read from the store once,
# into DuckDB, rather than once a section.
STATS_COLUMNS: Final = {
    "incidents": "incident_id, host, unit, label, runs, status, opened_us, resolved_us",
    "runs": "run_id, host, unit, started_us, ended_us, exit_signal, peak_gpu_used_bytes, "
    "peak_gpu_total_bytes",
}

# Where each host's killed runs lie (the release section's `killed`): the GPU samples that
# section reads are these windows', each a filter of its own, which DuckDB hands the store.
KILL_WINDOWS: Final = """
    SELECT host, min(started_us) AS lo, max(ended_us) AS hi FROM runs
    {where_and} exit_signal = 'KILL' AND ended_us IS NOT NULL GROUP BY host ORDER BY host"""
RELEASE: Final = "gpu_release_after_kill"

STATS_SQL: Final = {
    "crashes_by_label": """
        SELECT label, count(*) AS incidents, sum(runs) AS failed_runs FROM incidents {where}
        GROUP BY label ORDER BY incidents DESC, label""",
    "crashes_by_service": """
        SELECT host, unit, count(*) AS incidents, sum(runs) AS failed_runs FROM incidents {where}
        GROUP BY host, unit ORDER BY incidents DESC, host, unit""",
    "crashes_by_week": """
        SELECT strftime(make_timestamp(opened_us), '%G-W%V') AS week, count(*) AS incidents
        FROM incidents {where} GROUP BY week ORDER BY week""",
    "time_to_recovery": """
        SELECT count(*) AS resolved, round(avg(resolved_us - opened_us) / 1e6, 1) AS mean_s,
               round(quantile_cont((resolved_us - opened_us) / 1e6, 0.9), 1) AS p90_s
        FROM incidents {where_and} resolved_us IS NOT NULL""",
    "restart_loops": """
        SELECT count(*) AS loops, max(runs) AS longest, round(avg(runs), 1) AS mean_length
        FROM incidents {where_and} runs > 1""",
    "gpu_headroom_by_service": """
        SELECT host, unit, count(*) AS runs,
               round(quantile_cont(1 - peak_gpu_used_bytes::DOUBLE / peak_gpu_total_bytes, 0.1), 3)
                   AS p10,
               round(quantile_cont(1 - peak_gpu_used_bytes::DOUBLE / peak_gpu_total_bytes, 0.5), 3)
                   AS p50
        FROM runs {where_and} peak_gpu_total_bytes > 0 GROUP BY host, unit ORDER BY host, unit""",
    RELEASE: f"""
        WITH killed AS (
            SELECT run_id, host, unit, started_us, ended_us FROM runs
            {{where_and}} exit_signal = 'KILL' AND ended_us IS NOT NULL),
        used AS (
            SELECT k.run_id, s.gpu FROM killed k JOIN {{samples}} s
              ON s.host = k.host AND s.time_us BETWEEN k.started_us AND k.ended_us
            GROUP BY k.run_id, s.gpu
            HAVING max(s.used_bytes::DOUBLE / nullif(s.total_bytes, 0)) > {USED}
                OR bool_or(list_contains(string_split(coalesce(s.units, ''), ','), k.unit))),
        freed AS (
            SELECT k.run_id, k.host, u.gpu, min(s.time_us) - k.ended_us AS dt
            FROM killed k JOIN used u ON u.run_id = k.run_id
            JOIN {{samples}} s ON s.host = k.host AND s.gpu = u.gpu
             AND s.time_us > k.ended_us AND s.time_us <= k.ended_us + {HORIZON_US}
             AND s.used_bytes::DOUBLE / nullif(s.total_bytes, 0) < {FREE}
            GROUP BY k.run_id, k.host, u.gpu, k.ended_us)
        SELECT k.host, count(*) AS kills, count(f.dt) AS measured,
               round(quantile_cont(f.dt / 1e6, 0.5), 1) AS p50_s,
               round(quantile_disc(f.dt / 1e6, {QUANTILE}), 1) AS p95_s
        FROM killed k LEFT JOIN (SELECT run_id, max(dt) AS dt FROM freed GROUP BY run_id) f
          ON f.run_id = k.run_id
        GROUP BY k.host ORDER BY k.host""",
}
