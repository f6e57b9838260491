"""What `advisor install` writes on a host, as text: the agent's unit (from the shipped
deploy/advisor-watch.service, its ExecStart= the `advisor` executable that runs the install —
pipx's or pip's — with metrics on), the drop-in that points it at a central store, the
settings file and the policy example (from deploy/*.example). Nothing here touches the disk
or systemd; advisor.fleet.install does.

Paths in the texts are the host's final paths (`Layout.config_dir`, `Layout.state_dir`);
`Layout.root` only says where they are written (a package's staging root, a test's folder),
as DESTDIR does."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Final

from advisor.core.address import host_port
from advisor.core.errors import InputError, PrerequisiteError
from advisor.execution.dropins import quote

UNIT: Final = "advisor-watch.service"
CENTRAL_DROPIN: Final = "central.conf"
SETTINGS: Final = "advisor.toml"
POLICY_EXAMPLE: Final = "policy.toml.example"
DEFAULT_METRICS: Final = "127.0.0.1:9750"
DEFAULT_CONFIG_DIR: Final = Path("/etc/advisor")
DEFAULT_STATE_DIR: Final = Path("/var/lib/advisor")
DEFAULT_UNIT_DIR: Final = Path("/etc/systemd/system")
_PLAIN_PATH = re.compile(r"^/[A-Za-z0-9_./+-]*$")
_CENTRAL_SCHEMES: Final = ("postgresql", "postgresql+psycopg", "postgres")


def _plain_dir(path: Path, flag: str) -> Path:
    """An absolute folder whose name systemd and TOML take as written (no quoting needed)."""
    text = os.path.normpath(str(path))
    if not _PLAIN_PATH.match(text) or "/../" in f"{text}/":
        raise InputError(f"{flag} {str(path)[:120]!r}: not an absolute path of plain characters")
    return Path(text)


@dataclass(frozen=True)
class Layout:
    """Where the files go on the host, and the root they are written under."""

    root: Path = Path("/")
    config_dir: Path = DEFAULT_CONFIG_DIR
    state_dir: Path = DEFAULT_STATE_DIR
    unit_dir: Path = DEFAULT_UNIT_DIR

    @classmethod
    def checked(
        cls,
        root: Path | None = None,
        config_dir: Path | None = None,
        state_dir: Path | None = None,
    ) -> Layout:
        """A layout from the command's options, each checked (InputError naming it)."""
        return cls(
            _plain_dir(root or Path("/"), "--root"),
            _plain_dir(config_dir or DEFAULT_CONFIG_DIR, "--config-dir"),
            _plain_dir(state_dir or DEFAULT_STATE_DIR, "--state-dir"),
        )

    @property
    def live(self) -> bool:
        """Written into the running system (so systemd is told), not under another root."""
        return self.root == Path("/")

    def on_disk(self, path: Path) -> Path:
        """Where `path` (a path on the host) is written: under `root`."""
        return self.root / path.relative_to("/")

    @property
    def unit(self) -> Path:
        return self.unit_dir / UNIT

    @property
    def dropin(self) -> Path:
        return self.unit_dir / f"{UNIT}.d" / CENTRAL_DROPIN

    @property
    def settings(self) -> Path:
        return self.config_dir / SETTINGS

    @property
    def policy_example(self) -> Path:
        return self.config_dir / POLICY_EXAMPLE


def template(name: str) -> str:
    """A file of deploy/ as shipped in the wheel (`advisor.deploy`)."""
    return files("advisor.deploy").joinpath(name).read_text(encoding="utf-8")


def _relocated(text: str, layout: Layout) -> str:
    """`text` with the default folders replaced by the layout's."""
    text = text.replace(f"{DEFAULT_CONFIG_DIR}/", f"{layout.config_dir}/")
    return text.replace(f"{DEFAULT_STATE_DIR}/", f"{layout.state_dir}/")


def running_executable(argv0: str | None = None, python: str | None = None) -> Path:
    """The `advisor` command this process was started as (absolute, links kept: pipx's
    ~/.local/bin/advisor stays valid across `pipx upgrade`), else the one beside this
    Python (`python -m advisor` in a virtual environment); PrerequisiteError if neither."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    python = sys.executable if python is None else python
    candidates = [Path(os.path.abspath(argv0))] if Path(argv0).name == "advisor" else []
    candidates.append(Path(os.path.abspath(python)).parent / "advisor")
    for exe in candidates:
        if exe.is_file() and os.access(exe, os.X_OK):
            if "$" in str(exe) or "\n" in str(exe):
                raise PrerequisiteError(f"{exe}: a path systemd would expand; install elsewhere")
            return exe
    raise PrerequisiteError(
        "no `advisor` executable found to run the service: run `advisor install` as the "
        "installed command (pipx's or pip's), not from a checkout"
    )


def unsafe_for_root(executable: Path) -> str | None:
    """Why a root service should not run `executable`: it, its link's target or a folder
    above either is not root's, or others may write it (a user could change what root runs);
    None when it is safe."""
    seen: list[Path] = []
    for path in (executable, executable.resolve()):
        seen += [path, *path.parents]
    for path in seen:
        st = path.lstat()
        if st.st_uid != 0 or (st.st_mode & 0o022 and not path.is_symlink()):
            return (
                f"{path} is not root's alone: whoever may change it may change what the "
                "root service runs (install advisor for all users: README, Install on a host)"
            )
    return None


def checked_metrics(listen: str) -> str:
    """`--metrics HOST:PORT`, checked (InputError when it is not one)."""
    host_port(listen, "--metrics", DEFAULT_METRICS)
    if not re.fullmatch(r"[A-Za-z0-9.:\[\]-]+", listen):
        raise InputError(f"--metrics {listen[:80]!r}: not HOST:PORT (e.g. {DEFAULT_METRICS})")
    return listen


def checked_central(url: str) -> str:
    """`--central URL`: a PostgreSQL URL on one line (InputError otherwise)."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in _CENTRAL_SCHEMES or any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise InputError(
            f"--central {url[:80]!r}: not a PostgreSQL URL "
            "(postgresql+psycopg://ROLE@HOST/DB, its password in PGPASSFILE)"
        )
    return url


def unit_text(layout: Layout, executable: Path, metrics: str) -> str:
    """The agent's unit: deploy/advisor-watch.service with ExecStart= `executable watch
    --metrics METRICS` and the layout's folders."""
    argv = (str(executable), "watch", "--metrics", checked_metrics(metrics))
    lines = []
    for line in template(UNIT).splitlines():
        if line.startswith("ExecStart="):
            line = "ExecStart=" + " ".join(quote(a) for a in argv)
        elif line == "StateDirectory=advisor" and layout.state_dir != DEFAULT_STATE_DIR:
            continue  # systemd would make /var/lib/advisor; the installer made the state dir
        elif line.startswith("Environment=ADVISOR_KEY=") and layout.config_dir != (
            DEFAULT_CONFIG_DIR
        ):
            lines.append(f"Environment=ADVISOR_CONFIG={layout.config_dir}/{SETTINGS}")
        lines.append(line)
    return _relocated("\n".join(lines) + "\n", layout)


def dropin_text(layout: Layout, central: str) -> str:
    """The drop-in that makes the agent ship to `central` (the settings' ship_to), the
    role's password read from the password file beside the settings."""
    value = quote(f"ADVISOR_SHIP_TO={checked_central(central)}", always=True)
    return (
        "# Written by `advisor install --central URL`: `advisor watch` ships this host's events\n"
        "# to that central store (docs/fleet.md), the role's password in PGPASSFILE (mode 0600,\n"
        "# lines HOST:PORT:DATABASE:ROLE:PASSWORD).\n"
        f"[Service]\nEnvironment={value}\nEnvironment=PGPASSFILE={layout.config_dir}/pgpass\n"
    )


def settings_text(layout: Layout) -> str:
    """The settings file a fresh host gets: deploy/advisor.toml.example."""
    return _relocated(template(f"{SETTINGS}.example"), layout)


def policy_text(layout: Layout) -> str:
    """The policy example: deploy/policy.toml.example."""
    return _relocated(template(POLICY_EXAMPLE), layout)
