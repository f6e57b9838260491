"""The front door's long-running and fleet operations: install this host's agent, ship this
host's events to a central store, fetch the lines a host kept for a central post-mortem,
retain a central store's old partitions, watch (the daemon a host runs), and the demo. Each
delegates to advisor.fleet, advisor.pipeline.daemon and advisor.demo."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.front.base import Front, human

if TYPE_CHECKING:
    from advisor.demo.simulated import DemoResult
    from advisor.fleet.fetch import Asked
    from advisor.fleet.install import Report
    from advisor.fleet.retention import Retained
    from advisor.fleet.ship import ShipReport
    from advisor.store import EventStore
    from advisor.store.integrity.partitions import Partition


@dataclass(frozen=True)
class Watch:
    """What `watch` follows and does (`advisor watch`'s options; the rest from the
    settings: host, GPU twin, policy with `auto`, whom to notify, where metrics go)."""

    units: tuple[str, ...] = ()  # globs; none: the inference servers, discovered
    journal_files: tuple[Path, ...] = ()  # follow these instead of the system journal
    gpu_interval_s: float = 1.0
    no_gpu: bool = False
    ship_to: str | None = None  # None: the settings' ship_to, else no shipping
    auto: bool = False  # also apply what the settings' policy allows
    backend: str = "systemd"  # with auto: systemd | dry-run
    systemd_root: Path = Path("/etc/systemd/system")
    metrics: str | None = None  # HOST:PORT; None: the settings' [metrics] listen


def metrics_registry(db_url: str) -> Any:
    """The Prometheus metrics `advisor watch --metrics` serves, read from the store at
    `db_url` on a read-only connection of their own."""
    from advisor.front.base import open_store
    from advisor.pipeline.metrics import registry_for

    return registry_for(lambda: open_store(db_url, read_only=True))


class Fleet(Front):
    def ship(
        self,
        central_url: str,
        *,
        give_up_after_s: float = 300.0,
        key_path: Path | None = None,
        lines: str | None = None,
    ) -> tuple[ShipReport, str]:
        """Copy this host's events (the settings' host) to the central store at
        `central_url`; what was shipped, and that store's URL as shown. The chain heads are
        signed with the key at `key_path`, else the `key` setting, else the key that signs
        this store's heads (advisor.store.integrity.keyplace), if it exists. Refused before
        anything is shipped when the central store would refuse those heads. `lines` (else
        the `ship_lines` setting) says what ships (advisor.fleet.selection)."""
        from advisor.core.errors import InputError
        from advisor.fleet.selection import selection_for
        from advisor.fleet.ship import open_central, ship
        from advisor.store.integrity.headlog import load_key, store_label
        from advisor.store.integrity.keyplace import place_for

        local = self.store
        place = place_for(store_label(local.url), key_path or self.settings.key)
        key = load_key(place.key)
        if key_path is not None and key is None:
            raise InputError(f"--key {key_path}: no such file")
        central = open_central(central_url, give_up_after_s=give_up_after_s)
        try:
            report = ship(
                local,
                central,
                self.settings.host,
                give_up_after_s=give_up_after_s,
                key=key,
                store_label=store_label(local.url) or "",
                key_path=str(place.key),
                selection=selection_for(
                    lines or self.settings.ship_lines, self.settings.ship_gpu_every_s
                ),
            )
        finally:
            central.close()
        return report, central.display_url

    def fetch(self, service: str, incident_id: str | None, wait_s: float, last_s: float) -> Asked:
        """Ask SERVICE's host (HOST/UNIT in a central store) for the lines it kept in the
        last `last_s` seconds (0: all) of the runs of SERVICE's latest incident (or of
        `incident_id`), and its GPU samples there; wait up to `wait_s` for its shipper's
        answers, then fold what came, where this connection may (advisor.fleet.fetch)."""
        from advisor.fleet.fetch import ask_for, wait_answered
        from advisor.reports.keptlines import window
        from advisor.reports.postmortem import incident_runs
        from advisor.store.integrity.central import may_fold
        from advisor.views.fold.projector import Projector

        incident, runs = incident_runs(self.store, service, incident_id)
        asked = ask_for(self.store, incident.host, incident.unit, window(runs, last_s), human())
        if asked.waiting and wait_s > 0:
            asked = wait_answered(self.store, asked, wait_s)
        if asked.fetched and may_fold(self.store):
            Projector(self.store).catch_up()
        return asked

    def retainable(self, before_us: int) -> list[Partition]:
        """The central store's partitions whose events were all recorded before `before_us`."""
        from advisor.fleet.retention import retainable

        return retainable(self.store, before_us)

    def retain(self, before_us: int, folder: Path) -> list[Retained]:
        """Export those partitions as Parquet under `folder`, record it, detach them."""
        from advisor.fleet.retention import retain

        return retain(self.store, before_us, folder)

    def watch(
        self, what: Watch, open_store: Callable[[], EventStore], say: Callable[[str], None]
    ) -> None:
        """The daemon (advisor.pipeline.daemon): follow the journal and the GPUs, diagnose,
        propose, and with `what.auto` apply what the settings' policy allows, until SIGINT
        or SIGTERM. `open_store` opens the store each time the daemon needs one."""
        from advisor.pipeline.daemon import AutoSetup, WatchConfig, watch
        from advisor.planning.policy import load_policy

        conf = self.settings
        setup = None
        if what.auto:
            if conf.policy is None:
                raise ValueError("watch --auto needs a policy in the settings")
            policy = load_policy(conf.policy)
            setup = AutoSetup(policy, conf.policy.name, what.backend, what.systemd_root)
        config = WatchConfig(
            what.units,
            what.journal_files,
            what.gpu_interval_s,
            what.no_gpu,
            what.ship_to or conf.ship_to,
            conf.host,
            conf.gpu_twin,
            setup,
            notices=self.notices(),
            metrics=what.metrics or conf.metrics.listen,
            key=conf.key,
            heartbeat_s=conf.heartbeat_s,
            ship_lines=conf.ship_lines,
            ship_gpu_every_s=conf.ship_gpu_every_s,
        )
        watch(config, open_store, say)

    def demo(
        self,
        workdir: Path,
        *,
        under_systemd: bool,
        ask: Callable[[str], bool],
        say: Callable[[str], None],
    ) -> DemoResult:
        """The seed scenario on a simulated node (or under real systemd), on this store."""
        if under_systemd:
            from advisor.demo.systemd import run_systemd_demo

            return run_systemd_demo(self.store, workdir, ask=ask, say=say)
        from advisor.demo.simulated import run_demo

        return run_demo(self.store, workdir, ask=ask, say=say)

    @staticmethod
    def demo_unit() -> str:
        """The unit the demo's story is of."""
        from advisor.demo.simulated import UNIT

        return UNIT

    @staticmethod
    def systemd_unavailable() -> str | None:
        """Why the demo cannot run under real systemd here, or None."""
        from advisor.sim.box import unavailable

        return unavailable()

    @staticmethod
    def install(
        *,
        root: Path | None = None,
        config_dir: Path | None = None,
        state_dir: Path | None = None,
        metrics: str | None = None,
        central: str | None = None,
        start: bool = True,
        upgrade: bool = False,
        executable: Path | None = None,
    ) -> Report:
        """Install this host's agent (advisor.fleet.install): the unit running `executable`
        (default: the `advisor` this process runs as) with metrics on, the central store's
        drop-in, the settings and policy examples; enable and start it. Needs no store."""
        from advisor.fleet.hostfiles import DEFAULT_METRICS, Layout, running_executable
        from advisor.fleet.install import install

        layout = Layout.checked(root, config_dir, state_dir)
        exe = executable or running_executable()
        return install(
            layout,
            exe,
            metrics=metrics or DEFAULT_METRICS,
            central=central,
            start=start,
            upgrade=upgrade,
        )

    @staticmethod
    def uninstall(
        *,
        root: Path | None = None,
        config_dir: Path | None = None,
        state_dir: Path | None = None,
        purge: bool = False,
    ) -> Report:
        """Stop, disable and remove this host's agent; with `purge` its settings and store."""
        from advisor.fleet.hostfiles import Layout
        from advisor.fleet.install import uninstall

        return uninstall(Layout.checked(root, config_dir, state_dir), purge=purge)
