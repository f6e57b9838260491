"""Containers: reading ``docker run`` / ``podman run`` lines; asking the runtime for processes.

``parse_run`` reads ``docker|podman|nerdctl [global options] [container] run [options] IMAGE
[COMMAND [ARG...]]`` as the clients' parser (spf13/pflag, not interspersed) does. Which options
take a value is the clients' own definitions: docker/cli v29.7.2-16-g28f7560 (container/opts.go,
run.go, cli/flags/options.go; nerdctl is read with these) and podman 6.0.0-dev c6580b4
(common/create.go, netflags.go, containers/run.go, root.go, utils/alias.go). An option they do
not know means a newer client or a broken line: the parse goes on (``--x=v`` holds its value; a
bare ``--x`` takes the next word unless that looks like an option or an image) and says
``certain=False``, as for a missing value, a switch given a non-boolean, an image word that is
no image reference. Callers edit a command line only when it is certain.

``inspect_pid`` / ``container_pids`` ask the runtime for the main PID, then list its cgroup,
else its descendants. Rules kept: never a shell, a container reference checked before it is
passed, every call bounded in time, failures None or empty, never an exception. Stdlib only.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final, NamedTuple

Runner = Callable[..., "subprocess.CompletedProcess[Any]"]
PROC: Final = Path("/proc")
CGROUP_ROOT: Final = Path("/sys/fs/cgroup")
_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_BOOL_WORDS: Final = _TRUE | {"0", "f", "F", "FALSE", "false", "False"}

# `run`'s options taking a value, and its switches: in both clients, docker's only, podman's only
# (with its persistent options, which may also come before `run`).
_RUN_VALUES: Final = """
both: add-host annotation attach blkio-weight blkio-weight-device cap-add cap-drop cgroup-parent
cgroupns cidfile cpu-period cpu-quota cpu-rt-period cpu-rt-runtime cpu-shares cpus cpuset-cpus
cpuset-mems detach-keys device device-cgroup-rule device-read-bps device-read-iops device-write-bps
device-write-iops dns dns-opt dns-option dns-search entrypoint env env-file expose gpus group-add
health-cmd health-interval health-retries health-start-period health-timeout hostname ip ip6 ipc
kernel-memory label label-file log-driver log-opt mac-address memory memory-reservation memory-swap
memory-swappiness mount name net network network-alias oom-score-adj pid pids-limit platform
publish pull restart runtime security-opt shm-size stop-signal stop-timeout storage-opt sysctl
tmpfs ulimit user userns uts volume volumes-from workdir
docker: cpu-count cpu-percent domainname health-start-interval io-maxbandwidth io-maxiops isolation
link link-local-ip net-alias volume-driver
podman: arch authfile cert-dir cgroup-conf cgroups chrootdirs conmon-pidfile creds decryption-key
env-merge gidmap group-entry health-log-destination health-max-log-count health-max-log-size
health-on-failure health-startup-cmd health-startup-interval health-startup-retries
health-startup-success health-startup-timeout healthcheck-command healthcheck-interval
healthcheck-retries healthcheck-start-period healthcheck-timeout hosts-file hostuser image-volume
init-path os override-arch override-os passwd-entry personality pidfile pod pod-id-file preserve-fd
preserve-fds rdt-class requires retry retry-delay sdnotify seccomp-policy secret shm-size-systemd
signature-policy subgidname subuidname systemd timeout tz uidmap umask unsetenv variant
persistent: cdi-spec-dir cgroup-manager conmon cpu-profile default-mounts-file events-backend
hooks-dir imagestore log-level max-workers memory-profile namespace network-backend
network-config-dir pull-option registries-conf root runroot runtime-flag storage-driver tmpdir
volumepath
"""
_RUN_BOOLS: Final = """
both: detach disable-content-trust help init interactive no-healthcheck oom-kill-disable privileged
publish-all quiet read-only rm sig-proxy tty
docker: use-api-socket
podman: env-host http-proxy no-hostname no-hosts passwd read-only-tmpfs replace rmi rootfs syslog
trace transient-store unsetenv-all
letters: a:attach c:cpu-shares e:env h:hostname l:label m:memory p:publish u:user v:volume
w:workdir P:publish-all d:detach i:interactive q:quiet t:tty
"""


class _Table(NamedTuple):
    """One command's options: long names taking a value, switches, short letter → long name."""

    values: frozenset[str]
    bools: frozenset[str]
    shorts: Mapping[str, str]


def _groups(text: str) -> dict[str, str]:
    parts = re.split(r"\s*(\w+):\s+", text)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


_VALUES, _BOOLS = _groups(_RUN_VALUES), _groups(_RUN_BOOLS)


def _table(values: str, bools: str, shorts: str) -> _Table:
    pairs = (pair.split(":") for pair in shorts.split())
    return _Table(frozenset(values.split()), frozenset(bools.split()), dict(pairs))


def _run_table(*groups: str) -> _Table:
    values, bools = (" ".join(kind.get(g, "") for g in groups) for kind in (_VALUES, _BOOLS))
    return _table(values, bools, _BOOLS["letters"])


_GLOBAL_DOCKER: Final = _table(
    "config context host log-level tlscacert tlscert tlskey",
    "debug help tls tlsverify version",
    "c:context D:debug H:host l:log-level v:version",
)
_GLOBAL_PODMAN: Final = _table(
    _VALUES["persistent"] + " runtime storage-opt cni-config-dir config connection context host "
    "identity module out ssh tls-ca tls-cert tls-details tls-key url",
    "debug help noout remote syslog trace transient-store version",
    "c:connection D:debug H:host r:remote v:version",
)
_RUN_DOCKER: Final = _run_table("both", "docker")
TABLES: Final[Mapping[str, tuple[_Table, _Table]]] = {
    "docker": (_GLOBAL_DOCKER, _RUN_DOCKER),
    "nerdctl": (_GLOBAL_DOCKER, _RUN_DOCKER),
    "podman": (_GLOBAL_PODMAN, _run_table("both", "podman", "persistent")),
}

# An image reference as docker's reference grammar has it: [host[:port]/]path[:tag][@digest].
_COMPONENT: Final = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST: Final = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*(?::[0-9]+)?)"
IMAGE_REFERENCE: Final = re.compile(
    rf"(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::\w[\w.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)


@dataclass(frozen=True)
class EnvOption:
    """``-e``/``--env``: word ``index`` is ``prefix + name[=value]``; no value: the client's."""

    index: int
    name: str
    value: str | None
    prefix: str = ""


@dataclass(frozen=True)
class ContainerRun:
    """What a ``run`` command line says; indices are argv's. ``command_start`` is the first
    word after the image (``len(argv)`` when none): a new engine flag goes at the end."""

    runtime: str
    run_index: int
    image_index: int
    image: str
    command_start: int
    name: str | None = None
    cidfile: str | None = None
    entrypoint: str | None = None
    env: tuple[EnvOption, ...] = ()
    env_files: tuple[str, ...] = ()
    detached: bool = False
    rm: bool = False  # --rm, or podman's --rmi
    replace: bool = False  # podman's --replace
    certain: bool = True
    unknown: tuple[str, ...] = ()  # the words of options the tables do not know


@dataclass(frozen=True)
class _Option:
    index: int  # the word naming it
    name: str  # its long name (the letter or word itself when unknown)
    value: str | None  # a switch's: "true", or the word given after "="
    value_index: int  # the word holding the value, which starts with `prefix`
    prefix: str
    known: bool = True


_Scan = tuple[list[_Option], int, bool]  # options, the next word's index, sure


def _value_follows(argv: Sequence[str], k: int) -> bool:
    """An unknown option's guess: the next word is its value unless it looks like an option,
    an image, or is ``run`` / ``container`` (the subcommand, after global options)."""
    word = argv[k] if k < len(argv) else "-"
    return not (word[:1] == "-" or word in ("run", "container") or IMAGE_REFERENCE.fullmatch(word))


def _long(argv: Sequence[str], i: int, table: _Table) -> _Scan:
    name, eq, value = argv[i][2:].partition("=")
    known = name in table.values or name in table.bools
    if eq:
        sure = name in table.values or (name in table.bools and value in _BOOL_WORDS)
        return [_Option(i, name, value, i, f"--{name}=", known)], i + 1, sure
    if name in table.bools or (not known and not _value_follows(argv, i + 1)):
        return [_Option(i, name, "true" if known else None, i, "", known)], i + 1, known
    if i + 1 < len(argv):
        return [_Option(i, name, argv[i + 1], i + 1, "", known)], i + 2, known
    return [_Option(i, name, None, i, "")], i + 1, False


def _shorts(argv: Sequence[str], i: int, table: _Table) -> _Scan:
    word, found, sure = argv[i], list[_Option](), True
    for j in range(1, len(word)):
        name, rest = table.shorts.get(word[j], word[j]), word[j + 1 :]
        cut = j + 2 if rest.startswith("=") else j + 1
        if name in table.values:
            if rest:
                return [*found, _Option(i, name, word[cut:], i, word[:cut])], i + 1, sure
            if i + 1 < len(argv):
                return [*found, _Option(i, name, argv[i + 1], i + 1, "")], i + 2, sure
            return [*found, _Option(i, name, None, i, "")], i + 1, False
        known = name in table.bools
        if rest.startswith("="):
            good = sure and known and rest[1:] in _BOOL_WORDS
            return [*found, _Option(i, name, rest[1:], i, word[:cut], known)], i + 1, good
        sure = sure and known
        if not known and not rest and _value_follows(argv, i + 1):
            return [*found, _Option(i, name, argv[i + 1], i + 1, "", False)], i + 2, False
        found.append(_Option(i, name, "true", i, "", known))
    return found, i + 1, sure


def _scan(argv: Sequence[str], start: int, table: _Table) -> _Scan:
    """The options from ``start`` to the first positional word (``--`` ends them too)."""
    options: list[_Option] = []
    sure, i = True, start
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return options, i + 1, sure
        if not word.startswith("-") or word == "-":
            break
        found, i, ok = (_long if word.startswith("--") else _shorts)(argv, i, table)
        options += found
        sure = sure and ok
    return options, i, sure


def subcommand(argv: Sequence[str]) -> tuple[str, int, bool] | None:
    """(runtime, the subcommand word's index, global options sure) for a container client's
    argv (the program known by its file name); None for another program or no subcommand."""
    runtime = PurePosixPath(argv[0]).name if argv else ""
    if runtime not in TABLES:
        return None
    _, index, sure = _scan(argv, 1, TABLES[runtime][0])
    return None if index >= len(argv) else (runtime, index, sure)


def _env(option: _Option) -> EnvOption:
    name, eq, value = (option.value or "").partition("=")
    return EnvOption(option.value_index, name, value if eq else None, option.prefix)


def parse_run(argv: Sequence[str]) -> ContainerRun | None:
    """``argv`` read as a ``run`` command line; None for another program or command, no image."""
    found = subcommand(argv)
    if found is None:
        return None
    runtime, k, global_sure = found
    k += argv[k] == "container" and k + 1 < len(argv)
    if argv[k] != "run":
        return None
    options, image_index, sure = _scan(argv, k + 1, TABLES[runtime][1])
    if image_index >= len(argv):
        return None
    image = argv[image_index]
    last = {o.name: o.value for o in options if o.known}  # an option given twice: the last
    return ContainerRun(
        runtime=runtime,
        run_index=k,
        image_index=image_index,
        image=image,
        command_start=image_index + 1,
        name=last.get("name"),
        cidfile=last.get("cidfile"),
        entrypoint=last.get("entrypoint"),
        env=tuple(_env(o) for o in options if o.name == "env" and o.value is not None),
        env_files=tuple(o.value for o in options if o.name == "env-file" and o.value is not None),
        detached=last.get("detach") in _TRUE,
        rm=last.get("rm") in _TRUE or last.get("rmi") in _TRUE,
        replace=last.get("replace") in _TRUE,
        certain=global_sure and sure and IMAGE_REFERENCE.fullmatch(image) is not None,
        unknown=tuple(argv[o.index] for o in options if not o.known),
    )


_HUB: Final = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})


def split_image(image: str) -> tuple[str | None, str, str | None]:
    """(registry host or None, repository path, tag or None), the path lower-cased, the
    digest dropped, docker hub's ``library/`` taken off (``docker.io/library/x`` is ``x``)."""
    ref, tag = image.partition("@")[0], None
    if ref.rfind(":") > ref.rfind("/"):
        ref, _, tag = ref.rpartition(":")
    first, slash, rest = ref.partition("/")
    host = None
    if slash and ("." in first or ":" in first or first == "localhost"):
        host, ref = first.lower(), rest
    if (host is None or host in _HUB) and ref.startswith("library/"):
        ref = ref.removeprefix("library/")
    return host, ref.lower(), tag


def image_engine(image: str, images: Mapping[str, str]) -> str | None:
    """The engine of ``image`` from ``images`` (repository → engine). A key matches the image's
    path or its end (of two components or more: a mirror's prefix, ``harbor.corp/hub/vllm/x``);
    its host and tag only when the key names them (the digest never). The most specific wins."""
    host, path, tag = split_image(image)
    parts = path.split("/")
    best: tuple[tuple[bool, bool, int], str] | None = None
    for key, engine in images.items():
        khost, kpath, ktag = split_image(key)
        kparts = kpath.split("/")
        host_ok = khost in (None, host) or (khost in _HUB and host in _HUB | {None})
        if (ktag is not None and ktag != tag) or not host_ok:
            continue
        if parts[-len(kparts) :] != kparts or (len(kparts) < 2 and kparts != parts):
            continue
        score = (ktag is not None, khost is not None, len(kparts))
        if best is None or score > best[0]:
            best = (score, engine)
    return None if best is None else best[1]


_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")  # a 12–64 hex ID is one too
_PROGRAM: Final = re.compile(r"[A-Za-z0-9_.+][A-Za-z0-9_.+/-]*|/[A-Za-z0-9_.+/-]+")


def valid_container(ref: str) -> bool:
    """A container name (docker's grammar) or a 12–64 hex ID: safe to pass as an argument."""
    return _NAME.fullmatch(ref) is not None


def inspect_pid(
    runtime: str, container: str, *, runner: Runner = subprocess.run, timeout_s: float = 10.0
) -> int | None:
    """The main PID, from ``RUNTIME inspect --type container --format {{.State.Pid}} NAME``;
    None when not running or unknown, refused (runtime or name), failing or over ``timeout_s``."""
    if not _PROGRAM.fullmatch(runtime) or not valid_container(container):
        return None
    argv = [runtime, "inspect", "--type", "container", "--format", "{{.State.Pid}}", container]
    try:
        done = runner(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    out = done.stdout.strip() if isinstance(done.stdout, str) and done.returncode == 0 else ""
    return int(out) if out.isdigit() and int(out) > 0 else None


def _procs_under(folder: Path, limit: int = 4096) -> set[int]:
    """The PIDs of a cgroup and of those below it (at most ``limit`` cgroups read)."""
    pids: set[int] = set()
    for path in itertools.islice(folder.glob("**/cgroup.procs"), limit):
        with contextlib.suppress(OSError, ValueError):
            pids.update(int(word) for word in path.read_text().split())
    return pids


def cgroup_pids(pid: int, *, proc: Path = PROC, cgroup_root: Path = CGROUP_ROOT) -> set[int]:
    """Every process of ``pid``'s v2 cgroup (``0::/path``; ``cgroup_root/unified/path`` in the
    hybrid layout) and below it; empty when unread, the root, or not listing ``pid``."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return set()
    for line in lines:
        rel = line.removeprefix("0::").strip().lstrip("/")
        if not line.startswith("0::") or not rel or ".." in rel.split("/"):
            continue
        for folder in (cgroup_root / rel, cgroup_root / "unified" / rel):
            if pid in (pids := _procs_under(folder)):
                return pids
    return set()


def descendants(pid: int, *, proc: Path = PROC) -> set[int]:
    """``pid`` and every process below it, by the parent PIDs in /proc/*/stat."""
    children: dict[int, list[int]] = {}
    try:
        entries = [int(e) for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return set()
    for entry in entries:
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int((proc / str(entry) / "stat").read_text().rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append(entry)
    found, todo = ({pid}, [pid]) if pid in entries else (set(), [])
    while todo:
        fresh = [c for c in children.get(todo.pop(), []) if c not in found]
        found.update(fresh)
        todo += fresh
    return found


def container_pids(
    runtime: str,
    container: str,
    *,
    runner: Runner = subprocess.run,
    proc: Path = PROC,
    cgroup_root: Path = CGROUP_ROOT,
    timeout_s: float = 10.0,
) -> set[int]:
    """All the processes of a running container: its cgroup's, else its main PID's tree."""
    pid = inspect_pid(runtime, container, runner=runner, timeout_s=timeout_s)
    if pid is None:
        return set()
    return cgroup_pids(pid, proc=proc, cgroup_root=cgroup_root) or descendants(pid, proc=proc)
