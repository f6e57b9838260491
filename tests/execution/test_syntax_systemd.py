"""The syntax modules against real systemd 252 (a box: advisor.sim.box): ExecStart= words and
specifiers vs the ExecStartEx argv systemd loaded, EnvironmentFile= parsing and precedence vs
the environment a service really gets, `$VAR` splitting vs the argv a program really receives,
and advisor's writers (env_file_text, join_words, token_text) read back by systemd."""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.execution import envfile, shellwords, unitfile
from advisor.execution.bus import SERVICE, UNIT, SystemdBus
from advisor.sim.box import SystemdBox
from advisor.sim.box import unavailable as box_unavailable

FLAGS = {"-": "ignore-failure", "+": "privileged", "!": "no-setuid", "!!": "ambient",
         ":": "no-env-expand"}  # fmt: skip
ARGV_PY = "import json, sys\nopen(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))\n"


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SystemdBox]:
    """One booted systemd for the module (each test installs its own units)."""
    reason = box_unavailable()
    if reason is not None:
        pytest.skip(f"no systemd box: {reason}")
    with SystemdBox(tmp_path_factory.mktemp("syntax") / "box") as booted:
        yield booted


@pytest.fixture
def work(box: SystemdBox, tmp_path: Path) -> Path:
    (tmp_path / "argv.py").write_text(f"#!{sys.executable}\n{ARGV_PY}")
    (tmp_path / "argv.py").chmod(0o755)
    return tmp_path


def service(box: SystemdBox, name: str) -> dict[str, Any]:
    with SystemdBus(box.bus_address, peer_to_peer=True) as bus:
        path = bus.unit_path(name)
        unit = bus.properties(path, UNIT)
        assert unit["LoadState"] == "loaded", (name, unit["LoadState"])
        return bus.properties(path, SERVICE)


def install(box: SystemdBox, files: dict[str, str]) -> list[tuple[str, str]]:
    """Write unit files and drop-ins (relative to the unit folder), then daemon-reload."""
    out = []
    for rel, text in files.items():
        path = box.units_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        out.append((str(path), text))
    box.systemctl("daemon-reload")
    return out


def read_env(path: Path) -> dict[str, str]:
    """`env -0` output (bytes: read_text would turn \\r into \\n)."""
    return dict(e.split("=", 1) for e in path.read_bytes().decode().split("\0") if e)


def simplified(path: str) -> str:
    return re.sub(r"/(\./)+", "/", re.sub(r"/{2,}", "/", path))


def loaded_commands(props: dict[str, Any]) -> list[tuple[str, list[str], set[str]]]:
    return [(str(e[0]), [str(a) for a in e[1]], {str(f) for f in e[2]})
            for e in props["ExecStartEx"]]  # fmt: skip


def ours(lines: list[unitfile.ExecLine], unit: str) -> list[tuple[str, list[str], set[str]]]:
    """What advisor's reading says systemd loads: specifiers expanded, argv[0] as written."""
    out = []
    for line in lines:
        words = [unitfile.expand_specifiers(t.value, unit) for t in line.tokens]
        flags = {FLAGS[p] for p in ("-", "+", ":", "!!") if p in line.prefix}
        flags |= {FLAGS["!"]} if "!" in line.prefix and "!!" not in line.prefix else set()
        out.append((simplified(words[0]), words[line.argv0 :], flags))
    return out


TEMPLATE = r"""[Unit]
Description=syntax probe %i
[Service]
Type=oneshot
ExecStart=/usr//bin/true 'a b' "c\"d" \x41\101\u00e9 "\s" %i %I %n %N %p %P %j %J %f 100%% %- \
  $X ${Y} $$Z \; ';' x;y "%%i"
ExecStart=-@/bin/echo myecho 1 \
# a comment line inside a continuation is skipped
  2 ; :/bin/echo 3 \\ ; /bin/echo "4;" '5 6' \
; so is this one
    tail
ExecStart=/bin/echo join\
ed
"""


def test_exec_start_words_and_specifiers_are_those_systemd_loads(box: SystemdBox) -> None:
    unit = r"adv-syn@a-b\x2dc.service"
    files = install(box, {
        "adv-syn@.service": TEMPLATE,
        "adv-syn@.service.d/10-a.conf": "[Service]\nExecStart=+/bin/echo dropin %i '%%'\n",
        unit + ".d/20-b.conf": "[Service]\nExecStart=!!/bin/echo instance\n",
    })  # fmt: skip
    lines = unitfile.exec_start(files)
    assert len(lines) == 7
    assert [t.value for t in lines[4].tokens] == ["/bin/echo", "join", "ed"]
    assert ours(lines, unit) == loaded_commands(service(box, unit))
    first = lines[0]
    assert [t.raw for t in first.tokens[1:4]] == ["'a b'", '"c\\"d"', r"\x41\101\u00e9"]
    assert all(first.raw[t.start : t.end] == t.raw for t in first.tokens)


BAD_ESCAPES = r"/bin/echo a\qb \x00 \xZZ \4000 a\ b 'in \q quote' \U00110000 x\\ \\\;"


def test_resets_unknown_escapes_and_what_systemd_refuses(box: SystemdBox) -> None:
    files = install(box, {
        "adv-reset.service": "[Service]\nType=oneshot\nExecStart=/bin/echo one\n",
        "adv-reset.service.d/50-x.conf": "[Service]\nExecStart=\nExecStart=/bin/echo 'two 2'\n",
        "adv-esc.service": f"[Service]\nType=oneshot\nExecStart={BAD_ESCAPES}\n",
        "adv-bad.service": "[Service]\nType=oneshot\nExecStart=/bin/echo 'open\n",
    })  # fmt: skip
    for name, texts in (("adv-reset.service", files[:2]), ("adv-esc.service", files[2:3])):
        assert ours(unitfile.exec_start(texts), name) == loaded_commands(service(box, name))
    with pytest.raises(unitfile.ExecSyntaxError):
        unitfile.exec_start(files[3:])
    assert box.show("adv-bad.service", "LoadState")["LoadState"] == "bad-setting"


ENV_FILE_1 = (
    "# c1 \\\nSWALLOWED=1\n"  # v252: a comment's trailing backslash eats the next line
    "  SPACED  =   a value  \t\n"
    "QUOTES=\"x\" y 'z'\n"
    'MID=x "y" \\\n  continued\n'
    'DQ="a\\zb\\$c\\"\\\\\\`"\n'
    "SQ='s\\n'\\\nF\n"
    "HASH=x # not a comment\n"
    "export EXPORTED=1\n9DIGIT=1\nA-B=1\nNOEQUALS\n"
    "DUP=first\nDUP=second\n"
    "CRLF=yes\r\n"
    'MULTI="line1\nline2"\n'
    "EMPTY=\n"
    "E1=from-file-1\n"
    "LAST='unterminated at the end"
)
ENV_FILE_2 = "E1=from-file-2\nDUP=file-2\n"


def test_the_environment_a_service_gets(box: SystemdBox, work: Path) -> None:
    f1, f2, missing = work / "e1.env", work / "e2.env", work / "missing.env"
    f1.write_text(ENV_FILE_1)
    f2.write_text(ENV_FILE_2)
    out = work / "env.out"
    install(box, {"adv-env.service": (
        "[Service]\nType=oneshot\n"
        'Environment="E1=from env" E2=env-only "E3=x  y" E4=%n\n'
        f"EnvironmentFile={f1}\nEnvironmentFile=-{missing}\nEnvironmentFile={f2}\n"
        f"ExecStart=/usr/bin/env -0\nStandardOutput=truncate:{out}\n"
    )})  # fmt: skip
    props = service(box, "adv-env.service")
    box.systemctl("start", "adv-env.service")
    got = read_env(out)
    files = [(str(f1), envfile.parse_env_file(ENV_FILE_1)), (str(missing), None),
             (str(f2), envfile.parse_env_file(ENV_FILE_2))]  # fmt: skip
    expected = envfile.effective(props["Environment"], files)
    assert {k: got.get(k) for k in expected} == {k: v for k, (v, _) in expected.items()}
    assert expected["E1"] == ("from-file-2", str(f2)) and expected["DUP"][1] == str(f2)
    assert expected["E2"] == ("env-only", "Environment=")
    for absent in ("SWALLOWED", "EXPORTED", "export EXPORTED", "9DIGIT", "NOEQUALS"):
        assert absent not in got and absent not in expected
    # Environment= itself: its words, specifiers expanded, are the D-Bus property.
    (line,) = [a for a in unitfile.assignments(box.units_dir.joinpath("adv-env.service")
                                               .read_text()) if a.key == "Environment"]  # fmt: skip
    words = [unitfile.expand_specifiers(t.value, "adv-env.service")
             for t in unitfile.environment_tokens(line.value)]  # fmt: skip
    assert words == props["Environment"]


SPLIT_VALUES = {
    "A": "one 'two three' \"four  five\" six\\ seven 'it\\'s' x\"y z\"w",
    "B": "  \t lead\nand\r\ntrail  ",
    "EMPTY": "",
    "BLANK": "   ",
    "Q": "'unbalanced \"quote",
    "BS": "end\\\\ back\\",
}


def test_dollar_words_reach_the_program_as_systemd_splits_them(box: SystemdBox, work: Path) -> None:
    env, out = work / "split.env", work / "argv.json"
    env.write_text(envfile.env_file_text(SPLIT_VALUES))
    argv = (f"{work}/argv.py {out} $A ${{A}} x${{A}}y $B $EMPTY $BLANK $Q $BS $UNSET "
            '"$A" $$A x$A ${A:-d} $A-x :$Q ${UNSET}')  # fmt: skip
    install(box, {"adv-split.service": (
        f"[Service]\nType=oneshot\nEnvironmentFile={env}\nExecStart={argv}\n"
    )})  # fmt: skip
    loaded = loaded_commands(service(box, "adv-split.service"))[0][1]
    box.systemctl("start", "adv-split.service")
    received = json.loads(out.read_text())
    assert received == envfile.expand_argv(loaded, SPLIT_VALUES)[2:]
    assert received[:7] == [*envfile.split_words(SPLIT_VALUES["A"]), SPLIT_VALUES["A"]]


NASTY = [*" \t\n\r'\"\\$`%;#=&|<>(){}*?~!@é😀\x01\x7f", "abc", "--x=1", "%%", "${A}"]


def nasty_values(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(NASTY) for _ in range(rng.randint(0, 8))) for _ in range(n)]


def test_what_advisor_writes_systemd_reads_back(box: SystemdBox, work: Path) -> None:
    values = {f"V{i}": v for i, v in enumerate(nasty_values(252, 30))}
    words = nasty_values(253, 12)
    args = [v for v in nasty_values(254, 20) if not re.search(r"%[^%i\-/ ]|%$", v)]
    env, out_env, out_argv = work / "rt.env", work / "rt-env.out", work / "rt-argv.json"
    env.write_text(envfile.env_file_text({**values, "W": envfile.join_words(words)}, "hdr\\"))
    unit = "adv-rt@inst.service"
    line = f"{work}/argv.py {out_argv} $W " + " ".join(unitfile.token_text(a) for a in args)
    install(box, {"adv-rt@.service": (
        f"[Service]\nType=oneshot\nEnvironmentFile={env}\nExecStart={line}\n"
        f"ExecStart=/usr/bin/env -0\nStandardOutput=truncate:{out_env}\n"
    )})  # fmt: skip
    loaded = loaded_commands(service(box, unit))[0][1]
    assert loaded[3:] == [unitfile.expand_specifiers(a, unit) for a in args]
    box.systemctl("start", unit)
    got = read_env(out_env)
    assert {k: got.get(k) for k in values} == values
    received = json.loads(out_argv.read_text())
    assert received[: len(words)] == words


def test_a_flag_changed_inside_an_sh_c_script_reaches_the_program(
    box: SystemdBox, work: Path
) -> None:
    """The lead's path: ExecStart= token → shell words → replace → token_text → drop-in."""
    out = work / "sh-argv.json"
    script = f"cd /tmp && exec {work}/argv.py {out} --max-num-seqs 1024 --name 'a b' \"$@\""
    fragment = (
        "[Service]\nType=oneshot\n"
        f"ExecStart=/bin/sh -c {unitfile.token_text(script)} sh 'extra 1'\n"
    )
    files = install(box, {"adv-sh.service": fragment})
    (line,) = unitfile.exec_start(files)
    token = line.tokens[2]
    assert token.value == script
    cmds = shellwords.commands(token.value)
    seqs = next(w for w in cmds[1].words if w.value == "1024")
    edited = shellwords.replace(token.value, seqs, shellwords.quote("512 x"))
    value = unitfile.replace_token(line, 2, unitfile.token_text(edited))
    install(
        box, {"adv-sh.service.d/50-advisor.conf": f"[Service]\nExecStart=\nExecStart={value}\n"}
    )
    box.systemctl("start", "adv-sh.service")
    assert json.loads(out.read_text()) == ["--max-num-seqs", "512 x", "--name", "a b", "extra 1"]
