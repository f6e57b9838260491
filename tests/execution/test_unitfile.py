"""advisor.execution.unitfile: systemd 252's unit-file lines, ExecStart= words with their
spans, specifiers and writing a word back (test_syntax_systemd checks the same against a booted
systemd)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.execution.unitfile import (
    ExecSyntaxError,
    SpecifierError,
    UnitLine,
    UnitSyntaxError,
    assignments,
    environment_tokens,
    exec_start,
    expand_specifiers,
    parse_exec,
    physical_lines,
    replace_token,
    token_text,
)


def test_sections_comments_and_continuations() -> None:
    text = (
        "ExecStart=/outside/any/section\n"
        "[Unit]\nDescription=x\n"
        "[Service]\n"
        "  Environment = A=1 \n"
        "ExecStart=/bin/srv --a 1 \\\n"
        "# a comment line inside the continuation is skipped\n"
        "   --b 2\\\\\n"
        "ExecStart=/bin/two\\\n"
        "; another\n"
        "NoEquals\n"
        "=no-key\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    assert assignments(text) == [
        UnitLine("Environment", "A=1", 5, 5),
        UnitLine("ExecStart", "/bin/srv --a 1     --b 2" + "\\" * 2, 6, 8),
        UnitLine("ExecStart", "/bin/two NoEquals", 9, 11),
    ]
    assert [a.key for a in assignments(text, "Unit")] == ["Description"]


def test_line_ends_are_those_of_systemd() -> None:
    assert physical_lines("a\r\nb\n\rc\rd\n\ne\0f") == ["a", "b", "c", "d", "", "e", "f"]
    assert physical_lines("") == [] and physical_lines("x\n") == ["x"]
    text = "\ufeff[Service]\r\nExecStart=/bin/a\\\r\n b\r\n"
    assert assignments(text) == [UnitLine("ExecStart", "/bin/a  b", 2, 3)]


@pytest.mark.parametrize("header", ["[Service", '[Ser"vice]', "[a\\b]"])
def test_a_bad_section_header_is_refused(header: str) -> None:
    with pytest.raises(UnitSyntaxError):
        assignments(f"{header}\nA=1\n")


def values(raw: str) -> list[list[str]]:
    return [[t.value for t in line.tokens] for line in parse_exec(raw)]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("/bin/a b  c", [["/bin/a", "b", "c"]]),
     ("/bin/a 'b c' \"d 'e'\" f\"g h\"i", [["/bin/a", "b c", "d 'e'", "fg hi"]]),
     (r"/bin/a \x41\101\u00e9\U0001F600 '\n' \s \\ \" \'", [["/bin/a", "AAé😀", "\n", " ", "\\",
                                                             '"', "'"]]),
     (r"/bin/a \xc3\xa9 \303\251", [["/bin/a", "é", "é"]]),
     ("/bin/a ; /bin/b x;y ;", [["/bin/a"], ["/bin/b", "x;y"]]),
     (r"/bin/a \; ';' x", [["/bin/a", ";", ";", "x"]]),
     ("; /bin/a", [["/bin/a"]]),
     ("/bin/a $X ${Y} %i %% 100%", [["/bin/a", "$X", "${Y}", "%i", "%%", "100%"]])],
)  # fmt: skip
def test_exec_words(raw: str, expected: list[list[str]]) -> None:
    assert values(raw) == expected
    for line in parse_exec(raw):
        assert all(raw[t.start : t.end] == t.raw for t in line.tokens)


@pytest.mark.parametrize(
    ("raw", "prefix", "first"),
    [("-/bin/a", "-", "/bin/a"), ("@/bin/sh mysh -c x", "@", "/bin/sh"),
     ("-@:+/bin/a argv0", "-@:+", "/bin/a"), ("!!/bin/a", "!!", "/bin/a"),
     ("+!/bin/a", "+", "!/bin/a"), ("--/bin/a", "-", "-/bin/a"), ("!!!/x", "!!", "!/x")],
)  # fmt: skip
def test_prefixes(raw: str, prefix: str, first: str) -> None:
    (line,) = parse_exec(raw)
    assert (line.prefix, line.tokens[0].value, line.prefix_in_token) == (prefix, first, False)
    assert line.argv0 == (1 if "@" in prefix else 0)
    assert raw[: line.tokens[0].start] == prefix


def test_a_prefix_inside_quotes_is_kept_when_the_path_is_replaced() -> None:
    (line,) = parse_exec('"-/bin/a" x')
    assert (line.prefix, line.tokens[0].value, line.prefix_in_token) == ("-", "/bin/a", True)
    new = replace_token(line, 0, "/bin/b")
    assert new == "-/bin/b x"
    assert parse_exec(new)[0].prefix == "-"


@pytest.mark.parametrize(
    "raw",
    ["/bin/a 'open", '/bin/a "open', "/bin/a 'x\\", r"/bin/a \ud800", "-", "@/bin/a", "'"],
)
def test_what_systemd_refuses_raises(raw: str) -> None:
    with pytest.raises(ExecSyntaxError):
        parse_exec(raw)


def test_unknown_escapes_are_kept_verbatim_as_systemd_does() -> None:
    raw = r"/bin/a a\qb \x00 \xZZ \4000 a\ b 'in \q quote' \U00110000 x\\ end" + "\\"
    assert values(raw) == [["/bin/a", r"a\qb", r"\x00", r"\xZZ", r"\4000", r"a\ b",
                            r"in \q quote", r"\U00110000", "x\\", "end\\"]]  # fmt: skip


def test_drop_ins_reset_and_append() -> None:
    fragment = "[Service]\nType=oneshot\nExecStart=/bin/one a\nExecStart=/bin/two b ; /bin/three\n"
    reset = "[Service]\nExecStart=\nExecStart=/bin/four 'x y'\n"
    more = "[Service]\nExecStart=/bin/five\n[Unit]\nExecStart=/not/service\n"
    got = exec_start([("/u/f.service", fragment), ("/u/f.service.d/a.conf", more)])
    assert [(c.path, c.line, c.tokens[0].value) for c in got] == [
        ("/u/f.service", 3, "/bin/one"),
        ("/u/f.service", 4, "/bin/two"),
        ("/u/f.service", 4, "/bin/three"),
        ("/u/f.service.d/a.conf", 2, "/bin/five"),
    ]
    got = exec_start([("f", fragment), ("r", reset), ("m", more)])
    assert [[t.value for t in c.tokens] for c in got] == [["/bin/four", "x y"], ["/bin/five"]]


UNIT = r"adv-syn@a-b\x2dc.service"


@pytest.mark.parametrize(
    ("value", "out"),
    [("%i", r"a-b\x2dc"), ("%I", "a/b-c"), ("%n", UNIT), ("%N", r"adv-syn@a-b\x2dc"),
     ("%p", "adv-syn"), ("%P", "adv/syn"), ("%j", "syn"), ("%J", "syn"), ("%f", "/a/b-c"),
     ("100%% %-x %", "100% %-x %"), ("/srv/%i/x", r"/srv/a-b\x2dc/x"), ("%é", "%é")],
)  # fmt: skip
def test_specifiers_of_an_instance(value: str, out: str) -> None:
    assert expand_specifiers(value, UNIT) == out


def test_specifiers_of_a_plain_unit_and_unknown_ones() -> None:
    assert expand_specifiers("[%i][%I][%f][%j]", "vllm-qwen3.service") == "[][][/vllm/qwen3][qwen3]"
    for bad in ("%H", "%t", "%Z", "%0"):
        with pytest.raises(SpecifierError):
            expand_specifiers(bad, "vllm@x.service")
    with pytest.raises(SpecifierError):
        expand_specifiers("%f", "a--b.service")
    with pytest.raises(SpecifierError):
        expand_specifiers("%n", "no-suffix")
    assert expand_specifiers("%n", "a--b.service") == "a--b.service"  # only what is used


def test_replace_token_is_an_exact_splice() -> None:
    raw = "/opt/vllm serve  %i  --max-num-seqs 1024   --x 'a b'"
    (line,) = parse_exec(raw)
    assert replace_token(line, 4, token_text("512")) == raw.replace("1024", "512")
    assert replace_token(line, 6, token_text("c d")) == raw.replace("'a b'", '"c d"')


@pytest.mark.parametrize(
    ("value", "text"),
    [("1024", "1024"), ("", '""'), ("a b", '"a b"'), ("%i", "%i"), ("${MODEL}", "${MODEL}"),
     (";", '";"'), ('q"\\', '"q\\"\\\\"'), ("t\tn\n\x01", '"t\\tn\\n\\x01"'), ("it's", "\"it's\"")],
)  # fmt: skip
def test_token_text(value: str, text: str) -> None:
    assert token_text(value) == text


def test_environment_tokens() -> None:
    tokens = environment_tokens('A=1 "B=two words" C=\\x41')
    assert [t.value for t in tokens] == ["A=1", "B=two words", "C=A"]


ARG = st.text(st.characters(blacklist_characters="\0", blacklist_categories=["Cs"]), min_size=0)


@given(st.lists(ARG, max_size=5))
def test_token_text_reads_back(args: list[str]) -> None:
    raw = "/bin/x " + " ".join(token_text(a) for a in args)
    (line,) = parse_exec(raw)
    assert [t.value for t in line.tokens[1:]] == args


@given(st.lists(ARG, min_size=1, max_size=5), st.data())
def test_replacing_a_token_changes_only_it(args: list[str], data: st.DataObject) -> None:
    (line,) = parse_exec("-/bin/x  " + "  ".join(token_text(a) for a in args) + " ")
    k = data.draw(st.integers(1, len(args)))
    new = data.draw(ARG)
    (after,) = parse_exec(replace_token(line, k, token_text(new)))
    assert [t.value for t in after.tokens] == ["/bin/x", *args[: k - 1], new, *args[k:]]
    assert after.prefix == "-"
