"""The front door's reading for the console's pages: the incident list with its filters'
choices, one incident and its plan, one event, and the store's position. Each delegates to
advisor.views.read (the console's list and look-ups) and the store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.front.base import Front

if TYPE_CHECKING:
    from advisor.core.events import StoredEvent
    from advisor.views.read.console import IncidentFilter, IncidentLine
    from advisor.views.read.rows import ActionRow, IncidentView


class Browsing(Front):
    def position(self) -> int:
        """The store's newest position (its last sequence number, 0 when empty): a page
        read at it holds until the store moves."""
        from advisor.store.integrity.retained import last_seq

        return last_seq(self.store)

    def incident_list(
        self, flt: IncidentFilter, *, limit: int = 200
    ) -> tuple[list[IncidentLine], int]:
        """The incidents `flt` selects (pending approvals first, then newest), and how many
        there are in all."""
        from advisor.views.read.console import incident_list

        return incident_list(self.store, flt, limit=limit)

    def incident_choices(self) -> dict[str, list[str]]:
        """The hosts, units and labels there are incidents of (the list's filters)."""
        from advisor.views.read.console import choices

        return choices(self.store)

    def resolve_incident(self, given: str) -> str:
        """The incident id `given` names (whole, a prefix, or its short id's prefix)."""
        from advisor.views.read.console import resolve_incident

        return resolve_incident(self.store, given)

    def incident(self, incident_id: str) -> IncidentView | None:
        """One incident's row (None: no such incident), what is new folded first."""
        from advisor.views.read.console import incident_by_id

        return incident_by_id(self.store, incident_id)

    def incident_plan(self, incident_id: str) -> list[ActionRow]:
        """The steps proposed for an incident, its plans in order, and what became of them."""
        from advisor.views.read.actions import plan_actions

        return plan_actions(self.store, incident_id)

    def event(self, seq: int) -> StoredEvent | None:
        """The event at position `seq`, None when there is none."""
        from advisor.store import EventFilter

        found = next(iter(self.store.read(EventFilter(after_seq=seq - 1), chunk=1)), None)
        return found if found is not None and found.seq == seq else None

    def refresh(self) -> None:
        """Fold what is new into the projections (no diagnosis): the figures read them."""
        from advisor.views.read.rows import fresh

        fresh(self.store)
