"""The post-mortem dict (`postmortem.build`) written out for people: as text for a terminal,
and as Markdown for a ticket or a wiki.

The Markdown is structured, not one block of text: headings, the summary, timeline, config,
facts and the other incidents as lists, the plan as a numbered list with each step's
arithmetic in a code block under it, and the evidence and GPU memory in code blocks. Whatever
came from a log is in a code span or a fenced code block that it cannot close (the fence is
longer than any run of backticks in it), or escaped as literal text, so no log line can bring
raw HTML, links, emphasis or headings of its own into the page.
"""

from __future__ import annotations

from typing import Any, Final, TypedDict

from advisor.core.statuses import IncidentStatus
from advisor.reports.gpufaults import fault_lines
from advisor.reports.render import (
    clip,
    markdown_code,
    markdown_code_block,
    markdown_text,
    safe_text,
)

EVIDENCE_CHARS: Final = 300  # an evidence line is cut (at a word) after this many characters
GPU_TITLE: Final = "GPU memory (used / total, over the incident)"
KEPT_TITLE: Final = "Lines kept on the host"
FAULTS_TITLE: Final = "GPU faults (linked to this incident)"


_NO_PHASE = "unknown"  # a failure whose phase is not known (not a label)


class ReportIncident(TypedDict):
    """The report's `incident`: the incident's row, in part, and its short id."""

    incident_id: str
    host: str
    unit: str
    label: str | None
    confidence: float | None
    phase: str | None
    runs: int
    status: IncidentStatus
    short_id: str


class OtherIncident(TypedDict):
    """One of the report's `others`: another incident of the same service."""

    incident_id: str
    short_id: str
    label: str | None
    opened: str
    last_seen: str
    runs: int
    status: IncidentStatus


class SimilarIncident(TypedDict):
    """One of the report's `similar`: an incident with the same label on the same host."""

    incident_id: str
    short_id: str
    unit: str
    opened: str
    runs: int
    status: IncidentStatus


def step_title(step: dict[str, Any]) -> str:
    """A plan step in a few words: `set_flag --max-num-seqs 256`, `set_unit_option K=V`."""
    what = str(step["kind"])
    if step.get("flag"):
        what += f" {step['flag']} {step.get('value')}"
    elif step.get("option"):
        what += f" {step['option']}={step.get('value')}"
    return what + (" (alternative)" if step.get("alternative") else "")


def plan_lines(steps: list[dict[str, Any]]) -> list[str]:
    """The plan's steps, each with its arithmetic and outcome indented below it (`[status]`
    first when the step has one)."""
    plan: list[str] = []
    for step in steps:
        status = f"[{step['status']}] " if step.get("status") else ""
        plan.append(f"{status}{step_title(step)}: {step.get('why', '')}")
        plan += [f"    {line}" for line in step.get("arithmetic", ())]
        if step.get("detail"):
            plan.append(f"    → {step['detail']}")
    return plan


def _summary(report: dict[str, Any]) -> str:
    inc: ReportIncident = report["incident"]
    return (
        f"{inc['runs']} failed run(s), {inc['status']}; failing phase: {inc['phase'] or _NO_PHASE}"
    )


def _sections(report: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The report's sections below the summary, as (title, lines) for the terminal."""
    sections: list[tuple[str, list[str]]] = [
        ("Timeline", [f"{e.time}  {e.what}" for e in report["timeline"]]),
        ("Config", [f"{k}: {v}" for k, v in sorted(report["config"].items())]),
        ("Evidence", [_evidence_line(e) for e in report["evidence"]]),
    ]
    if report["facts"]:
        sections.append(("Facts", [f"{k}: {v}" for k, v in sorted(report["facts"].items())]))
    sections.append(("Plan", plan_lines(report["plan"])))
    if report.get("kept"):
        sections.append((KEPT_TITLE, kept_lines(report["kept"])))
    if report["gpu_memory"]:
        sections.append((GPU_TITLE, _gpu_lines(report)))
    if report.get("gpu_faults"):
        sections.append((FAULTS_TITLE, fault_lines(report["gpu_faults"])))
    sections.append(("Other incidents of this service", _other_lines(report) or ["none"]))
    sections.append(("Similar incidents on this host", _similar_lines(report) or ["none"]))
    return sections


def _evidence_line(e: dict[str, Any]) -> str:
    return f"{e['time'] or '?'}  #{e['seq']}  {clip(e['text'], EVIDENCE_CHARS)}"


def _gpu_lines(report: dict[str, Any]) -> list[str]:
    return [
        f"gpu{g}  {v['sparkline']}  peak {v['peak_fraction']:.0%}"
        for g, v in report["gpu_memory"].items()
    ]


def _other_lines(report: dict[str, Any]) -> list[str]:
    others: list[OtherIncident] = report.get("others", [])
    return [
        f"{o['short_id']}  {o['opened']}  {o['label'] or '?'}  {o['runs']} run(s), {o['status']}"
        for o in others
    ]


def _similar_lines(report: dict[str, Any]) -> list[str]:
    similar: list[SimilarIncident] = report["similar"]
    return [
        f"{s['short_id']}  {s['opened']}  {s['unit']}  {s['runs']} run(s), {s['status']}"
        for s in similar
    ]


def kept_lines(kept: dict[str, Any]) -> list[str]:
    """The post-mortem's lines kept on the host (`advisor.reports.keptlines`) in words, a
    line each (the fetched lines' text as stored: the caller makes it safe for where it
    goes)."""
    out: list[str] = []
    if kept["on_host"]:
        out.append(
            f"{kept['on_host']:,} routine lines of the last {kept['last_s'] / 60:g} minutes "
            f"before the end are on {kept['host']} only: {kept['command']} brings them here"
        )
    if kept["fetched"]:
        out.append(f"{kept['fetched']:,} fetched from {kept['host']}; the last before the end:")
        out += [
            f"  {line['time']}  #{line['seq']}  {clip(line['text'], EVIDENCE_CHARS)}"
            for line in kept["last_lines"]
        ]
    return out


def operator_words(report: dict[str, Any]) -> str | None:
    """What the operators say the incident is (`advisor label`), beside the diagnosis: the
    label, who and when, and why; None when no one corrected it."""
    said = report.get("operator")
    if not said:
        return None
    why = f": {clip(str(said['why']), EVIDENCE_CHARS)}" if said.get("why") else ""
    return f"operator label {said['label']} (by {said['by']}, {said['time']}){why}"


def render_text(report: dict[str, Any], markdown: bool = False) -> str:
    """The post-mortem as text for a terminal (log text made safe: `safe_text`), or as
    Markdown (`render_markdown`)."""
    if markdown:
        return render_markdown(report)
    inc: ReportIncident = report["incident"]
    out = [
        safe_text(
            f"{inc['host']}/{inc['unit']}: {inc['label']} (confidence {inc['confidence']:.2f})"
        ),
        safe_text(
            f"incident {inc['short_id']} ({inc['incident_id']}), opened {report['opened']}, "
            f"{_summary(report)}"
        ),
    ]
    said = operator_words(report)
    if said is not None:
        out.insert(1, safe_text(f"{said}; the diagnosis said {inc['label']}"))
    for title, lines in _sections(report):
        out.append(f"\n{title}\n" + "-" * len(title))
        out += [safe_text(line) for line in lines]
    return "\n".join(out) + "\n"


def _pairs(items: dict[str, Any]) -> list[str]:
    """`key: value` pairs as list items, both in code spans."""
    return [f"- {markdown_code(k)}: {markdown_code(str(v))}" for k, v in sorted(items.items())]


def _list_or_none(items: list[str]) -> list[str]:
    return items or ["none"]


def _indented(block: str, width: int) -> list[str]:
    return [" " * width + line for line in block.split("\n")]


def _markdown_plan(steps: list[dict[str, Any]]) -> list[str]:
    """The plan as a numbered list: status, the step and why; the arithmetic and what the
    step did in a code block inside its item."""
    out: list[str] = []
    for n, step in enumerate(steps, start=1):
        marker = f"{n}. "
        status = f"{step['status']}: " if step.get("status") else ""
        out.append(
            f"{marker}{markdown_text(status)}{markdown_code(step_title(step))} — "
            f"{markdown_text(str(step.get('why', '')))}"
        )
        inner = [str(line) for line in step.get("arithmetic", ())]
        if step.get("detail"):
            inner.append(f"→ {step['detail']}")
        if inner:
            out += ["", *_indented(markdown_code_block(inner), len(marker)), ""]
    return out[:-1] if out and not out[-1] else out


def render_markdown(report: dict[str, Any]) -> str:
    """The post-mortem as CommonMark: headings, lists and code blocks (module docstring)."""
    inc: ReportIncident = report["incident"]
    service = f"{inc['host']}/{inc['unit']}"
    out = [
        f"# {markdown_code(service)}: {markdown_text(str(inc['label']))} "
        f"(confidence {inc['confidence']:.2f})",
        "",
        f"- incident: {markdown_code(inc['short_id'])} ({markdown_code(inc['incident_id'])})",
        f"- opened: {markdown_code(report['opened'])}",
        f"- failed runs: {inc['runs']}, {markdown_text(inc['status'])}",
        f"- failing phase: {markdown_code(str(inc['phase'] or _NO_PHASE))}",
        *([f"- {markdown_text(said)}"] if (said := operator_words(report)) else []),
        "",
        "## Timeline",
        "",
        *_list_or_none(
            [f"- {markdown_code(e.time)} {markdown_text(e.what)}" for e in report["timeline"]]
        ),
        "",
        "## Config",
        "",
        *_list_or_none(_pairs(report["config"])),
        "",
        "## Evidence",
        "",
        markdown_code_block([_evidence_line(e) for e in report["evidence"]])
        if report["evidence"]
        else "none",
        "",
        "## Facts",
        "",
        *_list_or_none(_pairs(report["facts"])),
        "",
        "## Plan",
        "",
        *_list_or_none(_markdown_plan(report["plan"])),
    ]
    if report.get("kept"):
        out += ["", f"## {KEPT_TITLE}", "", markdown_code_block(kept_lines(report["kept"]))]
    if report["gpu_memory"]:
        out += ["", f"## {GPU_TITLE}", "", markdown_code_block(_gpu_lines(report))]
    if report.get("gpu_faults"):
        out += [
            "",
            f"## {FAULTS_TITLE}",
            "",
            markdown_code_block(fault_lines(report["gpu_faults"])),
        ]
    for title, lines in (
        ("Other incidents of this service", _other_lines(report)),
        ("Similar incidents on this host", _similar_lines(report)),
    ):
        out += ["", f"## {title}", "", *_list_or_none([f"- {markdown_code(x)}" for x in lines])]
    return "\n".join(out).rstrip("\n") + "\n"
