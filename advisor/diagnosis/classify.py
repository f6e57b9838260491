"""Rules and model together: one label per run, with a calibrated confidence, the evidence
lines and the facts the log states.

Rules are explicit evidence and lead when they fire; the model confirms (raising the
confidence), or disagrees (lowering it, and both candidates are reported). Where no rule
fires, the model's label stands if it is confident enough. Below `UNKNOWN_BELOW` the label
is `unknown`, which is never acted on automatically.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from advisor.core.engines import ENGINES
from advisor.core.gcpause import gc_paused
from advisor.core.taxonomy import HEALTHY, NOT_FAILURES, TAXONOMY, UNKNOWN, WEDGED_STOP
from advisor.diagnosis.features import featurize
from advisor.diagnosis.model import LinearModel
from advisor.diagnosis.rules import Hit, RuleSet, match_run
from advisor.parsing.lines import LogLine
from advisor.parsing.parsed import Parsed, parse
from advisor.parsing.sequence import Run, is_serving, segment
from advisor.parsing.values import CONFIG_FACTS, FACT_KEYS

UNKNOWN_BELOW: Final = 0.55
TRUSTED_RULE: Final = 0.85  # a rule at least this sure keeps its label against the model
MAX_EVIDENCE: Final = 8


@dataclass(frozen=True)
class Candidate:
    label: str
    confidence: float
    source: str  # "rules" | "model"
    rule_id: str | None = None


@dataclass
class RunVerdict:
    run: Run
    label: str
    confidence: float
    candidates: list[Candidate]
    hit: Hit | None
    phase: str | None
    evidence: list[int] = field(default_factory=list)
    related: list[Hit] = field(default_factory=list)  # other rules that found the same

    @property
    def failed(self) -> bool:
        return self.label not in NOT_FAILURES

    @property
    def corroborated(self) -> bool:
        """Does a rule's evidence agree with the label? (A label the model gave alone is
        reported with its evidence, but a plan for it only notifies.)"""
        return corroborated(self.label, self.candidates)


def corroborated(label: str, candidates: Sequence[Candidate]) -> bool:
    """A rule among the candidates gives `label` (healthy and unknown need no corroboration:
    nothing is done for them either way)."""
    if label in NOT_FAILURES:
        return True
    return any(c.source == "rules" and c.label == label for c in candidates)


@dataclass(frozen=True)
class RuleVote:
    """What the combination needs of the best rule hit."""

    label: str
    confidence: float
    rule_id: str


def decide(
    hit: RuleVote | None, probabilities: dict[str, float] | None
) -> tuple[str, float, list[Candidate]]:
    """Combine the best rule hit and the model's probabilities."""
    candidates: list[Candidate] = []
    if hit is not None:
        candidates.append(Candidate(hit.label, hit.confidence, "rules", hit.rule_id))
    if probabilities:
        model_label = max(probabilities, key=lambda k: probabilities[k])
        p = probabilities[model_label]
        candidates.append(Candidate(model_label, round(p, 4), "model"))
    if hit is None and not probabilities:
        return UNKNOWN, 0.0, candidates
    if hit is None:
        label, confidence = model_label, p
    elif not probabilities:
        label, confidence = hit.label, hit.confidence
    elif model_label == hit.label:
        label, confidence = hit.label, min(0.995, 1 - (1 - hit.confidence) * (1 - p) ** 0.5)
    else:
        agreement = probabilities.get(hit.label, 0.0)
        penalised = hit.confidence - 0.5 * (p - agreement)
        if hit.confidence >= TRUSTED_RULE:
            # Explicit evidence the model has no pattern for loses less to its doubt.
            trusted = hit.confidence - 0.25 * (p - agreement)
            label, confidence = hit.label, max(trusted, UNKNOWN_BELOW)
        elif penalised >= p:
            label, confidence = hit.label, penalised
        else:
            label, confidence = model_label, p
    if confidence < UNKNOWN_BELOW:
        label = UNKNOWN
    if len({c.label for c in candidates}) < 2:
        candidates = candidates[:1] if label != UNKNOWN else candidates
    return label, round(confidence, 4), candidates


def final_label(
    vote: RuleVote | None,
    probabilities: dict[str, float] | None,
    *,
    healthy_seen: bool,
    trouble: bool,
    lacking: Callable[[], frozenset[str]] | None = None,
) -> tuple[str, float, list[Candidate]]:
    """`decide`, with three guards: `healthy` needs the server to have said so
    (`healthy_seen`: a healthy rule fired — ready, or a clean stop — or it was serving
    requests); the model may not name a label whose causal evidence the run lacks
    (`lacking`: the labels of `GUARDED` the run shows nothing for, asked only when the
    model's vote would name one); and the model alone does not name a failure from
    lifecycle lines only (`trouble`). A label the evidence does not allow is taken from the
    model's vote. Without a sign of health the model's other labels share what it gave
    `healthy`; what it gave a label without its evidence is shared by none (that evidence is
    missing, which makes no other label likelier): its other labels keep their own
    probabilities, so a weak second guess stays weak."""
    if probabilities and not healthy_seen:
        probabilities = _without(probabilities, frozenset({HEALTHY}), share=True)
    if probabilities and lacking is not None:
        top = max(probabilities, key=probabilities.__getitem__)
        if top in GUARDED:
            lacks = lacking()
            if top in lacks:
                probabilities = _without(probabilities, lacks, share=False)
    label, confidence, candidates = decide(vote, probabilities)
    weak = vote is None or vote.confidence < UNKNOWN_BELOW
    if weak and label not in (HEALTHY, UNKNOWN) and not trouble:
        label = UNKNOWN
    if label == HEALTHY and not healthy_seen:
        label = UNKNOWN
    return label, confidence, candidates


def _without(
    probabilities: dict[str, float], barred: frozenset[str], *, share: bool
) -> dict[str, float] | None:
    """`probabilities` without the `barred` labels; with `share`, what they had is shared by
    the others in proportion."""
    if not barred & probabilities.keys():
        return probabilities
    rest = {k: v for k, v in probabilities.items() if k not in barred}
    total = sum(rest.values())
    if total <= 0:
        return None
    return {k: v / total for k, v in rest.items()} if share else rest


# The labels whose causal evidence the model's vote is checked against: what shows each
# (the taxonomy's `shown_by`); systemd's stop events show a wedged stop too.
_SHOWN_BY: Final = {
    name: re.compile(spec.shown_by) for name, spec in TAXONOMY.items() if spec.shown_by
}
GUARDED: Final = frozenset(_SHOWN_BY)
_STOP_EVENTS: Final = frozenset({"stop_requested", "stop_timeout", "still_around", "stop_pending"})


def lacking_evidence(run: Run, parsed: Sequence[Parsed], hits: Sequence[Hit]) -> frozenset[str]:
    """The labels of `GUARDED` whose causal evidence the run lacks: no rule gave the label,
    and no line has what shows it (an out-of-memory label: a line that says memory ran out
    or did not suffice; `nccl_error`: a collective or the distributed runtime; …). A hint
    — "if out-of-memory occurs, lower …" — speaks of memory too: then the rules decide
    whether it is evidence; this only keeps the model from naming a failure no line speaks
    of."""
    given = {h.label for h in hits}
    if WEDGED_STOP in GUARDED and _STOP_EVENTS & run.events.keys():
        given.add(WEDGED_STOP)
    bodies = [parsed[i].body for i in run.indexes]
    checked: dict[str, bool] = {}  # labels sharing one pattern are searched once
    lacks = set()
    for label, pattern in _SHOWN_BY.items():
        if label in given:
            continue
        key = pattern.pattern
        if key not in checked:
            search = pattern.search
            checked[key] = any(search(b) for b in bodies)
        if not checked[key]:
            lacks.add(label)
    return frozenset(lacks)


def judge_run(
    run: Run,
    parsed: Sequence[Parsed],
    rules: RuleSet,
    model: LinearModel | None,
    gpu_peak_fraction: float | None = None,
) -> RunVerdict:
    hits = match_run(rules, run, parsed)
    hit = hits[0] if hits else None
    probabilities = (
        model.probabilities(featurize(run, parsed, gpu_peak_fraction))
        if model is not None
        else None
    )
    vote = RuleVote(hit.label, hit.confidence, hit.rule.id) if hit is not None else None
    label, confidence, candidates = final_label(
        vote,
        probabilities,
        healthy_seen=any(h.label == HEALTHY for h in hits) or is_serving(run, parsed),
        trouble=shows_trouble(run, parsed),
        lacking=lambda: lacking_evidence(run, parsed, hits),
    )
    phase = hit.phase if hit is not None else None
    if label == HEALTHY or phase is None:
        phase = run.last_phase() if label == HEALTHY else phase or _failure_phase(run)
    verdict = RunVerdict(
        run,
        label,
        confidence,
        candidates,
        hit,
        phase,
        related=[h for h in hits[1:] if h.label == label][:2],
    )
    verdict.evidence = _evidence(verdict, parsed)
    return verdict


_TROUBLE_EVENTS: Final = frozenset(
    {"stop_timeout", "sigkill", "still_around", "oom_kill", "stop_pending"}
)


def shows_trouble(run: Run, parsed: Sequence[Parsed]) -> bool:
    """Is there anything besides lifecycle lines to judge by: a traceback, an error-level
    line, a kernel message, a stop that would not end?"""
    if _TROUBLE_EVENTS & run.events.keys():
        return True
    if any(not _relays(parsed[i].body) for tb in run.tracebacks for i in tb.exceptions):
        return True
    if any("(most recent call first)" in parsed[i].body for i in run.indexes):
        return True  # faulthandler's dump of a crashed interpreter
    return any(
        (
            parsed[i].split.level in ("ERROR", "CRITICAL")
            and not _relays(parsed[i].body)
            and not _in_traceback(run, i)
        )
        or parsed[i].engine == "kernel"
        for i in run.indexes
    )


# Lines that only point at an error shown elsewhere (which the input may have lost).
_RELAYS: Final = (
    "root cause above",
    "stack trace (above)",
    "stack trace above",
    "EngineDeadError",
    "failed to start.",
    "encountered a fatal error.",
    "hit an exception.",
    "died unexpectedly",
    "Traceback (most recent call last)",
)


def _relays(body: str) -> bool:
    return any(cue in body for cue in _RELAYS)


def _in_traceback(run: Run, position: int) -> bool:
    return any(position in tb.indexes for tb in run.tracebacks)


def _failure_phase(run: Run) -> str | None:
    for tb in run.tracebacks:
        phase = tb.phase()
        if phase is not None:
            return phase
    return run.last_phase()


def _evidence(verdict: RunVerdict, parsed: Sequence[Parsed]) -> list[int]:
    """Positions of the lines that show the verdict: the rule's line and its support, the
    exception lines of its traceback, and systemd's word on how the run ended."""
    run, hit = verdict.run, verdict.hit
    chosen: list[int] = []
    if hit is not None:
        chosen.append(hit.position)
        chosen.extend(hit.support)
        chosen.extend(h.position for h in verdict.related)
        for tb in run.tracebacks:
            if hit.position in tb.indexes:
                chosen.extend(tb.exceptions[:3])
    elif run.tracebacks:  # the root cause first: each traceback's first exception line
        chosen.extend(tb.exceptions[0] for tb in run.tracebacks[:3] if tb.exceptions)
        chosen.extend(run.tracebacks[-1].exceptions[-1:])
    for event in ("stop_timeout", "exit", "failed", "sigkill", "still_around", "deactivated"):
        if event in run.events:
            chosen.append(run.events[event])
    return sorted(list(dict.fromkeys(chosen))[:MAX_EVIDENCE])


@dataclass
class Diagnosis:
    """A whole input: every run's verdict, and the one that matters most."""

    parsed: list[Parsed]
    verdicts: list[RunVerdict]

    @property
    def primary(self) -> RunVerdict | None:
        """The first failed run; else the first that died without a known cause; else the
        last run."""
        failed = [v for v in self.verdicts if v.failed]
        if failed:
            return failed[0]
        died = [v for v in self.verdicts if v.run.died]
        if died:
            return died[0]
        return self.verdicts[-1] if self.verdicts else None


def diagnose(lines: Sequence[LogLine], rules: RuleSet, model: LinearModel | None) -> Diagnosis:
    with gc_paused():
        parsed = parse(lines)
        runs = segment(parsed)
        return Diagnosis(parsed, [judge_run(run, parsed, rules, model) for run in runs])


def verdict_facts(
    verdict: RunVerdict, parsed: Sequence[Parsed], others: Sequence[RunVerdict] = ()
) -> dict[str, Any]:
    """The facts of one run, every key present, null where the log is silent; config the
    run does not state may come from the other runs of the same input."""
    facts: dict[str, Any] = dict.fromkeys(FACT_KEYS)
    run = verdict.run
    facts["engine"] = run.engine or next(
        (parsed[i].engine for i in run.indexes if parsed[i].engine in ENGINES), None
    )  # an engine known by its messages alone (llama.cpp's server) names the run's too
    for other in [run, *(v.run for v in others if v.run is not run)]:
        for key, value in other.config.items():
            if facts[key] is None:
                facts[key] = value
    for i in run.indexes:
        for key, value in parsed[i].facts.facts.items():
            if key not in CONFIG_FACTS and facts.get(key) is None and key != "restart_count":
                facts[key] = value
    if verdict.hit is not None:
        facts.update(verdict.hit.facts)
    for key, value in run.event_facts.items():
        if key != "restart_count":
            facts[key] = value
    restarts = [v.run.event_facts.get("restart_count") for v in [verdict, *others]]
    counted = [r for r in restarts if r is not None]
    facts["restart_count"] = max(counted) if counted else None
    facts["phase"] = verdict.phase
    facts["facts_dropped"] = run.facts_dropped
    return facts
