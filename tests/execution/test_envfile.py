"""advisor.execution.envfile: systemd 252's EnvironmentFile= syntax, `$VAR` splitting and
`${VAR}` expansion, case by case and as round trips (test_syntax_systemd checks the same
against a booted systemd)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.execution.envfile import (
    Assignment,
    EnvFileError,
    effective,
    env_file_text,
    expand,
    expand_argv,
    join_words,
    parse_env_file,
    split_words,
)

# (file text, what systemd 252 loads), read from parse_env_file_internal.
CASES = [
    ("A=1\nB=2", [("A", "1"), ("B", "2")]),
    ("  A  =   spaced value  \t\n", [("A", "spaced value")]),
    ('A="x" y\n', [("A", "xy")]),  # after a closing quote blanks are skipped
    ("A='x'\"y\"z w\n", [("A", "xyz w")]),
    ('A=x "y"\n', [("A", 'x "y"')]),  # quotes mid-value are literal
    ("A=a\\ \n", [("A", "a ")]),  # an escaped blank is kept
    ("A=a\\\n  b\n", [("A", "a  b")]),  # continuation: the next line's blanks kept
    ('A="a\\zb\\$c\\"\\\\\\`"\n', [("A", 'a\\zb$c"\\`')]),
    ('A="multi\nline"\n', [("A", "multi\nline")]),
    ('A="x\\\ny"\n', [("A", "xy")]),
    ("A='s\\n'\\\nF\n", [("A", "s\\nF")]),
    ("A=x # not a comment\n", [("A", "x # not a comment")]),
    ("# c1 \\\nSWALLOWED=1\nB=2\n", [("B", "2")]),  # v252: a comment's \ eats the newline
    ("; semicolon comment\n  # indented\nA=1\n", [("A", "1")]),
    ("export C=1\n9X=1\nA-B=1\nKEY\n=v\nÄ=1\nOK_1=y\n", [("OK_1", "y")]),
    ("A=1\nA=2\n", [("A", "1"), ("A", "2")]),
    ('A=1\r\nB="two\r"\r\n', [("A", "1"), ("B", "two\r")]),
    ("A=\nB=   \nC=''\n", [("A", ""), ("B", ""), ("C", "")]),
    ("A='unterminated\nstill", [("A", "unterminated\nstill")]),
    ("A=x\0B=2\n", [("A", "x")]),  # reading stops at a NUL
    ("A=1\\", [("A", "1")]),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_parse_env_file(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(a.key, a.value) for a in parse_env_file(text)] == expected


def test_lines_are_where_the_key_starts() -> None:
    text = "\n# c\nA=1\n\n  B='x\ny'\nC=3\n"
    assert parse_env_file(text) == [Assignment("A", "1", 3), Assignment("B", "x\ny", 5),
                                    Assignment("C", "3", 7)]  # fmt: skip


def test_invalid_utf8_makes_systemd_refuse_the_file() -> None:
    text = b"A=\xff\n".decode("utf-8", "surrogateescape")
    with pytest.raises(EnvFileError, match="invalid UTF-8"):
        parse_env_file(text)


@pytest.mark.parametrize(
    ("value", "words"),
    [("a b  c", ["a", "b", "c"]), ("  ", []), ("", []), ("'a b' \"c d\"", ["a b", "c d"]),
     ("a\\ b", ["a b"]), ("'it\\'s'", ["it's"]), ('x"y z"w', ["xy zw"]), ("''", [""]),
     ("a\tb\nc\rd", ["a", "b", "c", "d"]), ("'open q", ["open q"]), ("end\\", ["end"]),
     ("\\n", ["n"]), ('"\\"', ['"'])],
)  # fmt: skip
def test_split_words(value: str, words: list[str]) -> None:
    assert split_words(value) == words


@pytest.mark.parametrize(
    ("word", "out"),
    [("${A}", "1 2"), ("x${A}y", "x1 2y"), ("${UNSET}", ""), ("$$", "$"), ("$$$", "$$"),
     ("$A", "$A"), ("${A:-d}", "${A:-d}"), ("${A", "${A"), ("${}", ""), ("$${A}", "${A}"),
     ("${A:-${B}}", "${A:-b}"), ("${A${B}}", "}"), ("100%", "100%"), ("a$", "a$")],
)  # fmt: skip
def test_expand(word: str, out: str) -> None:
    assert expand(word, {"A": "1 2", "B": "b"}) == out


def test_expand_argv() -> None:
    env = {"W": "a 'b c'", "E": "", "V": "1"}
    argv = ["/bin/x", "$W", "${W}", "x$W", "$E", "$UNSET", "$$V", "$", "$V-x", "${V}y"]
    assert expand_argv(argv, env) == ["/bin/x", "a", "b c", "a 'b c'", "x$W", "$V", "1y"]


def test_files_override_environment_and_later_files_earlier_ones() -> None:
    files = [
        ("/etc/a", [Assignment("A", "from-a", 1), Assignment("B", "b1", 2),
                    Assignment("B", "b2", 3)]),
        ("/etc/missing", None),
        ("/etc/c", [Assignment("A", "from-c", 1)]),
    ]  # fmt: skip
    got = effective(["A=env", "C=env=x", "bad", "1X=y"], files)
    assert got == {"A": ("from-c", "/etc/c"), "B": ("b2", "/etc/a"), "C": ("env=x", "Environment=")}


def test_env_file_text_quotes_only_what_needs_it() -> None:
    text = env_file_text({"A": "plain/1.0", "B": "two words", "C": 'q"$`\\', "D": ""}, "hi\\")
    assert text == '# hi\\ \nA=plain/1.0\nB="two words"\nC="q\\"\\$\\`\\\\"\nD=""\n'
    with pytest.raises(EnvFileError):
        env_file_text({"1A": "x"})
    with pytest.raises(EnvFileError):
        env_file_text({"A": "nul\0"})


VALUE = st.text(st.characters(blacklist_characters="\0", blacklist_categories=["Cs"]))
NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)


@given(st.dictionaries(NAME, VALUE, max_size=6), st.text(max_size=30))
def test_env_file_text_reads_back(values: dict[str, str], header: str) -> None:
    assert {a.key: a.value for a in parse_env_file(env_file_text(values, header))} == values


@given(st.lists(VALUE, max_size=6))
def test_join_words_splits_back(words: list[str]) -> None:
    assert split_words(join_words(words)) == words


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_an_env_file_advisor_writes_means_the_same_to_a_shell() -> None:
    """Wrappers sometimes `source` the same file: bash reads it back as the same values."""
    values = {"A": "a b", "B": 'q"$`\\x', "C": "line\nbreak", "D": "", "E": "100%", "F": "it's"}
    script = env_file_text(values) + "".join(f'printf "%s\\0" "${k}"\n' for k in values)
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, check=True, timeout=30, env=dict(os.environ)
    )
    assert done.stdout.decode().split("\0")[:-1] == list(values.values())
