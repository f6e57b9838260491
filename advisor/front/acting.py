"""The front door's actions: plan and replan a service's incident, decide on a step
(approve, reject, roll back), run the approved steps, apply by policy (`auto`), and correct
an incident's label (`label`). Each delegates to advisor.execution, advisor.pipeline.remediate
and advisor.diagnosis.corrections; nothing is decided here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.core.statuses import ActionStatus
from advisor.front.base import Front, human

if TYPE_CHECKING:
    from advisor.execution.backends import Backend
    from advisor.execution.recovery import Replanned
    from advisor.pipeline.remediate import OpenPlan, Outcome
    from advisor.views.read.corrections import Correction
    from advisor.views.read.rows import ActionRow


class Acting(Front):
    def actions(self, *, pending: bool = False) -> list[ActionRow]:
        """Every proposed action and what became of it, by plan and step (`pending`: only
        those waiting for a decision)."""
        from advisor.views.read.actions import all_actions

        rows = all_actions(self.store)
        return [r for r in rows if r.status == ActionStatus.PROPOSED] if pending else rows

    def plan(self, service: str) -> OpenPlan:
        """SERVICE's open incident and its plan (UNIT or HOST/UNIT)."""
        from advisor.pipeline.remediate import open_plan

        return open_plan(self.store, service)

    def plan_anew(self, backend: Backend, service: str) -> tuple[OpenPlan, str | None]:
        """SERVICE's plan, replanned first when the last one stopped (and what was said of
        that), as `advisor remediate` takes it."""
        from advisor.pipeline.remediate import anew

        return anew(self.store, backend, service)

    def plan_steps(self, plan_id: str) -> list[ActionRow]:
        """The steps of plan `plan_id` as they are now."""
        from advisor.execution.decisions import plan_rows

        return plan_rows(self.store, plan_id)

    def plan_of(self, ident: str) -> str:
        """The whole id of the plan that `ident` (a plan or an action, or a prefix) is of."""
        from advisor.execution.decisions import plan_of

        return plan_of(self.store, ident)

    def replan(self, backend: Backend, service: str) -> Replanned:
        """Close SERVICE's stopped or interrupted plan, lift advisor's hold on restarts, and
        propose a new plan from the unit's current state."""
        from advisor.core.units import parse_service
        from advisor.execution.recovery import replan

        host, unit = parse_service(service)
        return replan(self.store, backend, host, unit)

    def approve(self, ident: str, by: str | None = None) -> list[str]:
        """Approve action `ident`, or every main proposed step of plan `ident`; the ids
        approved. `by`: who (default: this terminal's user)."""
        from advisor.execution.decisions import approve

        return approve(self.store, ident, human() if by is None else by)

    def reject(self, ident: str, why: str, by: str | None = None) -> str:
        """Reject action `ident`: it will never run; its whole id."""
        from advisor.execution.decisions import reject

        return reject(self.store, ident, human() if by is None else by, why)

    def label(self, incident: str, label: str, why: str = "", by: str | None = None) -> Correction:
        """Record that `incident` (an id, a prefix, a short id's prefix) is `label` (a
        `label.corrected` event; the diagnosis stays), `by` whom (default: this terminal's
        user) and `why`; the correction as stored."""
        from advisor.diagnosis.corrections import record

        return record(self.store, incident, label, human() if by is None else by, why)

    def corrections(self, incident_id: str | None = None) -> dict[str, Correction]:
        """The latest operator's correction of each corrected incident (or of one)."""
        from advisor.views.read.corrections import latest_corrections

        return latest_corrections(self.store, incident_id)

    def resolve_action(self, ident: str) -> str:
        """The whole id of action `ident` (the id, a prefix of it or of its short id)."""
        from advisor.execution.decisions import resolve_ident

        return resolve_ident(self.store, ident, plans=False)

    def rollback(self, ident: str, backend: Backend, systemd_root: Path) -> str:
        """Put back the drop-in action `ident` wrote, as it was before; what was done."""
        from advisor.execution.rollback import rollback

        return str(rollback(self.store, backend, ident, root=systemd_root))

    def decide(
        self,
        kind: str,
        ident: str,
        *,
        by: str,
        why: str = "",
        backend: Callable[[], Backend | None] | None = None,
        systemd_root: Path | None = None,
    ) -> str:
        """One decision (`approve`, `reject`, `rollback`) as the console records it; what
        was done, in words. A rollback acts through `backend()` (None: a dry run)."""
        if kind == "approve":
            approved = self.approve(ident, by)
            return f"approved {len(approved)} action(s): {', '.join(approved) or '-'}"
        if kind == "reject":
            self.reject(ident, why or "rejected in the console", by)
            return f"rejected {ident}"
        chosen = None if backend is None else backend()
        if chosen is None or systemd_root is None:
            return "rollback: this console runs with --backend dry-run: nothing is changed"
        return self.rollback(ident, chosen, systemd_root)

    def preview(
        self, plan_id: str, systemd_root: Path, gpu_twin: Path | None, host: str | None
    ) -> list[str]:
        """What each step of plan `plan_id` would do now; nothing changed or recorded."""
        from advisor.pipeline.remediate import preview

        return preview(self.store, plan_id, systemd_root, gpu_twin, host)

    def run(self, backend: Backend, plan_id: str) -> Outcome:
        """Carry out the approved steps of plan `plan_id` through `backend` (remediate)."""
        from advisor.pipeline.remediate import carry_out

        return carry_out(self.store, backend, plan_id)

    def still_failing(self, backend: Backend, unit: str) -> str | None:
        """Why `unit` is still failing after its plan, or None."""
        from advisor.pipeline.remediate import failing

        return failing(backend, unit)

    def auto(
        self,
        backend: str,
        systemd_root: Path,
        *,
        interval_s: float,
        once: bool,
        say: Callable[[str], None],
    ) -> None:
        """Apply what the settings' policy allows through `backend` (`systemd`, `dry-run`),
        pass after pass, until SIGINT or SIGTERM (or one pass, `once`); the rest is left for
        a person."""
        from advisor.pipeline.auto import run_auto
        from advisor.planning.policy import load_policy

        path = self.settings.policy
        if path is None:
            raise ValueError("auto needs a policy in the settings")
        policy = load_policy(path)  # refused before the store is opened
        store = self.store
        chosen = self.backend(backend, systemd_root)
        run_auto(store, chosen, policy, path.name, interval_s=interval_s, once=once, say=say)
