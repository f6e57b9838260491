"""`Advisor`: the one front door to the library, one object per store and settings, with a
method for each operation people use (docs/api.md). Its parts are the sibling modules:

- `acting`: plan, replan, decide (approve, reject, roll back), run, auto;
- `diagnosing`: classify a log, the rules, the learned model;
- `reading`: events, status, projections, explain (post-mortems), stats, query, export;
- `browsing`: what the console's pages read (the incident list, one incident, one event);
- `integrity`: signed heads and verify;
- `fleet`: ship, retention, watch (the daemon), the demo;
- `ingesting`: bringing observations in.

Each method delegates to the library function that does the work; none of it is here."""

from __future__ import annotations

from advisor.front.acting import Acting
from advisor.front.browsing import Browsing
from advisor.front.diagnosing import Diagnosing
from advisor.front.fleet import Fleet
from advisor.front.ingesting import Ingesting
from advisor.front.integrity import Integrity
from advisor.front.reading import Reading


class Advisor(Acting, Diagnosing, Reading, Browsing, Integrity, Fleet, Ingesting):
    """`Advisor(store, settings)`: the operations on `store` (an EventStore, a function that
    opens one when first needed, or None for those that need none) with `settings` (None
    where every backend is given by the caller).

        adv = Advisor(open_store(url), load_settings())
        adv.classify("crash.log").result["label"]
        print(adv.explain("vllm-llama70b", fmt="markdown"))
        plan = adv.plan("vllm-llama70b")
        adv.approve(plan.plan_id)
        adv.run(adv.backend("systemd", Path("/etc/systemd/system")), plan.plan_id)
    """
