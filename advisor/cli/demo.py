"""`advisor demo`: the seed scenario on the simulated node."""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.cli.common import advisor_for, echo_json, json_option, say_for, with_short

if TYPE_CHECKING:
    from advisor.demo.simulated import DemoResult
    from advisor.front import Advisor


@click.command()
@click.option("--yes", is_flag=True, help="Grant the approvals it asks for.")
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    help="Where the simulated node keeps its journal, GPU samples and claims "
    "(default: a temporary folder).",
)
@click.option(
    "--systemd",
    "under_systemd",
    is_flag=True,
    help="Run the story under real systemd, booted in a box of namespaces (needs "
    "root); the advisor acts through its systemd backend.",
)
@click.option(
    "--db",
    "db_url",
    default=None,
    metavar="URL",
    help="Store URL. Default: the demo's own SQLite file, demo.db beside the default store "
    "($XDG_DATA_HOME/advisor/demo.db), made anew for each run; $ADVISOR_DB is not used.",
)
@json_option
def demo(
    yes: bool, workdir: Path | None, under_systemd: bool, db_url: str | None, as_json: bool
) -> None:
    """Crash, restart loop, wedged stop, diagnosis, approval, fix, healthy — on a simulated
    GPU node (or under real systemd with --systemd) — then the post-mortem. It keeps its own
    store (printed at the start), so the simulated host never enters your real one; with
    `--db` that store answers `advisor explain` and `advisor events` afterwards.

    The demo's own store is made anew at each run, so that the post-mortem and the plan's
    bounds are that run's alone; a store `--db` names is used as it is. With --json the
    story goes to stderr and stdout holds one JSON object: healthy, seconds, plans, steps,
    store.

    \b
    Examples:
      advisor demo --yes
      advisor demo --yes --db sqlite:///tmp/demo.db
      advisor demo --yes --json
    """
    from advisor.core.errors import PrerequisiteError

    say = say_for(as_json)
    adv = _advisor(db_url, say)

    def ask(plan: str) -> bool:
        say(plan)
        if yes:
            say("approved (--yes)")
            return True
        return click.confirm("Approve this plan?", default=False, err=as_json)

    if under_systemd:
        reason = adv.systemd_unavailable()
        if reason is not None:
            raise PrerequisiteError(f"demo --systemd: {reason} (the default demo runs anywhere)")
    with tempfile.TemporaryDirectory(prefix="advisor-demo-") as tmp:
        where = workdir or Path(tmp) / ("host" if under_systemd else "node")
        result = adv.demo(where, under_systemd=under_systemd, ask=ask, say=say)
    _ending(adv, result, as_json)


def _ending(adv: Advisor, result: DemoResult, as_json: bool) -> None:
    """The demo's result (one JSON object with --json), then exit 1 when it did not end
    healthy, else the post-mortem and where the store is (on stderr with --json)."""
    unit = adv.demo_unit()
    store = adv.store
    say = say_for(as_json)
    if as_json:
        echo_json(
            {
                "healthy": result.healthy,  # the demo came back healthy (not a label)
                "seconds": round(result.seconds, 1),
                "unit": unit,
                "plans": [with_short("plan_id", p) for p in result.incidents],
                "steps": result.steps,
                "store": store.display_url,
            }
        )
    if not result.healthy:
        raise SystemExit(1)
    first = result.incidents[0] if result.incidents else None
    say(f"\nhealthy after {result.seconds:.1f} s; the post-mortem:\n")
    click.echo(adv.explain(unit, first), nl=False, err=as_json)
    where = f"--db {shlex.quote(store.display_url)}"
    say(
        f"\nstore: {store.display_url} (try `advisor explain {unit} {where}`, "
        f"`advisor incidents {where}`)"
    )


def _advisor(db_url: str | None, say: Callable[[str], None]) -> Advisor:
    """On the store `--db` names, as it is; else on the demo's own, made anew (said either
    way)."""
    from advisor.core.settings import demo_db_path

    if db_url is not None:
        adv = advisor_for(db_url)
        say(f"store: {adv.store.display_url}")
        return adv
    own = demo_db_path()
    for stale in (own, *(own.with_name(own.name + end) for end in ("-wal", "-shm"))):
        stale.unlink(missing_ok=True)  # the last demo's store: this run starts afresh
    adv = advisor_for(f"sqlite:///{own}")
    say(f"store: {adv.store.display_url} (the demo's own, made anew; --db URL picks another)")
    return adv
