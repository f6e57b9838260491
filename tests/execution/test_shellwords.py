"""advisor.execution.shellwords against bash itself: the words of each script, their values
(from bash's own quote removal), which commands there are (bash runs the script with every
command replaced by a recorder), and exact edits."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.execution._shelllex import ShellSyntaxError, Word
from advisor.execution.shellwords import (
    Command,
    assignment_value,
    assignments,
    commands,
    insert_after,
    quote,
    replace,
    sourced,
)

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")

VLLM_LINE = "source /opt/venv/bin/activate && exec vllm serve /m --max-num-seqs 1024"
PIPELINE = (
    "cd /srv && VLLM_USE_V1=1 exec python -m vllm.entrypoints.openai.api_server "
    '--model "$MODEL" $EXTRA_ARGS 2>&1 | tee /var/log/vllm.log'
)
WRAPPER = """#!/usr/bin/env bash
# Start the server (comments are no commands: exec rm -rf /)
set -euo pipefail
. /etc/default/vllm
export HF_HOME=/srv/hf CUDA_VISIBLE_DEVICES="0,1"
: "${MAX_SEQS:=256}"
MODEL_DIR=${MODEL_DIR:-/models/qwen3}
if [ -n "${DEBUG:-}" ]; then
  set -x
fi
cat > /tmp/vllm.json <<-'EOF'
	{"not": "a command"; exec nothing}
	EOF
ARGS=(--tensor-parallel-size 4
      --served-model-name 'qwen 3'  # a comment inside
      --max-num-seqs "$MAX_SEQS")
exec /opt/venv/bin/vllm serve "$MODEL_DIR" \\
    "${ARGS[@]}" \\
    --gpu-memory-utilization 0.9 "$@"
"""
TRICKY = r"""a 'b c' "d \"e\" \$f \\ \x" g\ h \$i 'j'"k"l $'t\tab' $"loc" ''
echo "multi
line" done\
continued x # trailing comment
printf '%s' "$(echo "nested ( ) )" | tr a b)" `echo back` "${X:-${Y:-z}}" ${#A} ${A[@]}
echo a{1,2} '*' * ~/x "~" 2>/dev/null 1>&2 >> /tmp/log < /dev/null
f() { echo in-function; }; function g { echo in-g; }
while false; do :; done; until true; do :; done
for i in 1 2; do echo "$i"; done
case "$1" in (a|b) echo ab ;; *) echo star ;; esac
(cd /tmp; echo sub) && { echo group; } || ! echo neg
[[ -n "$A" && "$B" < z ]] && (( i = (1 + 2) * 3 ))
cat <<"EOF" | sed s/a/b/; echo after-heredoc
not a command $(rm -rf /)
EOF
diff <(echo a) >(cat) & wait
"""


def bash_words(texts: list[str], env: dict[str, str] | None = None) -> list[list[str]]:
    """What bash makes of each word text (noglob, no brace expansion)."""
    assert BASH is not None
    probe = "set -f +B\n__w() { printf '%s\\0' $# \"$@\"; }\n"
    probe += "".join(f"__w {t}\n" for t in texts)
    done = subprocess.run(
        [BASH, "-c", probe, "bash", "p1", "p 2"],
        capture_output=True,
        env={"PATH": os.environ["PATH"], "HOME": "/root", "LC_ALL": "C.UTF-8", **(env or {})},
        check=True,
        timeout=30,
    )
    fields = [p.decode() for p in done.stdout.split(b"\0")[:-1]]
    out = []
    while fields:
        n = int(fields.pop(0))
        out.append(fields[:n])
        del fields[:n]
    return out


def all_words(cmds: list[Command]) -> list[Word]:
    """The words and redirection targets (not the operators inside [[ ]])."""
    out = []
    for c in cmds:
        out += [w for w in c.words if not w.elements and w.text not in ("&&", "<", "(", ")")]
        out += [r.target for r in c.redirects]
        out += [e for w in c.words for e in w.elements]
    return out


def values(command: Command) -> list[str | None]:
    return [w.value for w in command.words]


# ------------------------------------------------------------------ structure
def test_a_one_line_exec_start_script() -> None:
    cmds = commands(VLLM_LINE)
    assert [values(c) for c in cmds] == [
        ["source", "/opt/venv/bin/activate"],
        ["exec", "vllm", "serve", "/m", "--max-num-seqs", "1024"],
    ]
    assert sourced(cmds)[0].value == "/opt/venv/bin/activate"


def test_a_pipeline_with_an_assignment_a_variable_and_redirections() -> None:
    cd, server, tee = commands(PIPELINE)
    assert values(cd) == ["cd", "/srv"]
    assert [w.text for w in server.prefix] == ["VLLM_USE_V1=1"]
    assert server.argv[0].value == "exec"
    model, extra = server.words[-2:]
    assert (model.value, model.refs, model.splits) == (None, ("MODEL",), False)
    assert (extra.value, extra.refs, extra.splits) == (None, ("EXTRA_ARGS",), True)
    assert [(r.fd, r.op, r.target.text) for r in server.redirects] == [("2", ">&", "1")]
    assert PIPELINE[server.redirects[0].start : server.redirects[0].end] == "2>&1"
    assert values(tee) == ["tee", "/var/log/vllm.log"]


def test_a_wrapper_script() -> None:
    cmds = commands(WRAPPER)
    names = [c.argv[0].text if c.argv else c.words[0].text for c in cmds]
    array_text = (
        "ARGS=(--tensor-parallel-size 4\n      --served-model-name 'qwen 3'"
        '  # a comment inside\n      --max-num-seqs "$MAX_SEQS")'
    )
    assert names == ["set", ".", "export", ":", "MODEL_DIR=${MODEL_DIR:-/models/qwen3}",
                     "[", "set", "cat", array_text, "exec"]  # fmt: skip
    server = cmds[-1]
    assert server.line == 17
    assert [w.line for w in server.words][-4:] == [18, 19, 19, 19]
    assert [w.refs for w in server.words[3:5]] == [("MODEL_DIR",), ("ARGS",)]
    assert server.words[4].spreads and not server.words[4].splits
    assert server.words[-1].refs == ("@",) and server.words[-1].spreads
    array = cmds[8].words[0]
    assert [e.value for e in array.elements] == [
        "--tensor-parallel-size", "4", "--served-model-name", "qwen 3", "--max-num-seqs", None,
    ]  # fmt: skip
    found = assignments(cmds)
    assert {k: [w.text for w in v] for k, v in found.items()} == {
        "HF_HOME": ["HF_HOME=/srv/hf"],
        "CUDA_VISIBLE_DEVICES": ['CUDA_VISIBLE_DEVICES="0,1"'],
        "MAX_SEQS": ['"${MAX_SEQS:=256}"'],
        "MODEL_DIR": ["MODEL_DIR=${MODEL_DIR:-/models/qwen3}"],
        "ARGS": [array.text],
    }
    assert [w.value for w in sourced(cmds)] == ["/etc/default/vllm"]


def test_compound_commands_keywords_and_skipped_bodies() -> None:
    got = [[w.text for w in c.words] for c in commands(TRICKY)]
    assert got[1] == ["echo", '"multi\nline"', "done\\\ncontinued", "x"]
    assert got[3][0] == "echo" and got[3][-2:] == ["~/x", '"~"']
    assert got[4:] == [
        ["echo", "in-function"], ["echo", "in-g"], ["false"], [":"], ["true"], [":"],
        ["echo", '"$i"'], ["echo", "ab"], ["echo", "star"], ["cd", "/tmp"], ["echo", "sub"],
        ["echo", "group"], ["echo", "neg"],
        ["[[", "-n", '"$A"', "&&", '"$B"', "<", "z", "]]"],
        ["cat"], ["sed", "s/a/b/"], ["echo", "after-heredoc"], ["diff", "<(echo a)", ">(cat)"],
        ["wait"],
    ]  # fmt: skip


def test_word_flags() -> None:
    (c,) = commands('x $A "$A" ${A[@]} "${B[@]}" "${#C[@]}" a* "b*" ${D:-$E} $(f $G) `h` ~/p')
    w = {word.text: word for word in c.words}
    assert (w["$A"].splits, w['"$A"'].splits) == (True, False)
    assert w["${A[@]}"].spreads and w['"${B[@]}"'].spreads and not w['"${#C[@]}"'].spreads
    assert (w["a*"].globs, w['"b*"'].globs, w["a*"].value) == (True, False, "a*")
    assert w["${D:-$E}"].refs == ("D", "E")
    assert w["$(f $G)"].refs == () and w["$(f $G)"].value is None and w["$(f $G)"].splits
    assert w["`h`"].value is None and w["~/p"].value is None


@pytest.mark.parametrize(
    ("script", "position"),
    [("echo 'open", 5), ('echo "open', 5), ("echo $(open", 5), ("echo ${open", 5),
     ("echo `open", 5), ("A=(x y", 2), ("echo >", 5), ('echo "a $(b" c', 11)],
)  # fmt: skip
def test_syntax_errors_say_where(script: str, position: int) -> None:
    with pytest.raises(ShellSyntaxError) as e:
        commands(script)
    assert isinstance(e.value, ValueError)
    assert e.value.position == position and e.value.line == 1


def test_an_error_on_a_later_line_gives_its_line() -> None:
    with pytest.raises(ShellSyntaxError, match=r"line 3"):
        commands("a\nb\nc 'x\n")


def test_heredoc_forms() -> None:
    script = (
        "cat <<A <<-'B' >f; echo one\nbody A\nA\n\tbody B\n\tB\necho two\n"
        'cat <<"C"\n$(x)\nC\ncat <<D\nno end'
    )
    assert [values(c) for c in commands(script)] == [
        ["cat"], ["echo", "one"], ["echo", "two"], ["cat"], ["cat"],
    ]  # fmt: skip


# ------------------------------------------------------------------ against bash
@needs_bash
@pytest.mark.parametrize("script", [VLLM_LINE, PIPELINE, WRAPPER, TRICKY])
def test_every_literal_word_has_the_value_bash_gives_it(script: str) -> None:
    words = [w for w in all_words(commands(script)) if w.value is not None]
    got = bash_words([w.text for w in words])
    assert got == [[w.value] for w in words]


@needs_bash
def test_values_of_tricky_words_come_from_bash() -> None:
    texts = [r"'a'\''b'", r'"\a\b\$\`\"\\"', r"$'\x41\101\u00e9\n\c['", r"a\
b", r'"x\
y"', "'\\n'", r"\#", "a#b", r'"$"', r"'$A'", r"\$A", "%%%i", r"$'\xc3\xa9'", '"$"x']  # fmt: skip
    cmds = commands("x " + " ".join(texts))
    words = cmds[0].words[1:]
    assert [w.text for w in words] == texts
    assert [[w.value] for w in words] == bash_words(texts)


@needs_bash
@pytest.mark.parametrize("script", [PIPELINE, WRAPPER, TRICKY])
def test_splitting_flags_match_bash(script: str) -> None:
    words = [w for w in all_words(commands(script)) if w.refs and not w.spreads]
    names = {r for w in words for r in w.refs if r.isidentifier()}
    env = {n: "a  b" for n in names}
    got = bash_words([w.text for w in words], env)
    for word, out in zip(words, got, strict=True):
        if all(r.isidentifier() for r in word.refs) and "#" not in word.text:
            assert (len(out) > 1) == word.splits, word.text


RECORDED = """
set -euo pipefail
source /opt/venv/bin/activate && A=1 B="2 3" exec vllm serve --x "a b" 'c'd 2>&1 | cat >/dev/null
if [ -n "$HOME" ]; then . /etc/x; fi
while [ "$n" -lt 1 ]; do n=1; step "$n"; done
for i in 1; do each "$i" ; done
case "x" in (y) never ;; x|z) chosen here; also ;; esac
f() { inner "$@"; }; f one two
( sub 1; sub 2 ) && { grp 1; grp 2; } || never
cat <<EOF | tail -n1
never ran; this is a here-document
EOF
: "${V:=dflt}"; last $V
"""


@needs_bash
def test_the_commands_are_those_bash_runs(tmp_path: Path) -> None:
    """Every command name is a recording function: bash runs the script, the calls it records
    must be the commands found, in order (those bash reaches)."""
    assert BASH is not None
    cmds = commands(RECORDED)
    names = {c.argv[0].value for c in cmds if c.argv and c.argv[0].value} - {"[", "cat"}
    out = tmp_path / "calls"
    prelude = '__rec() { printf \'%s\\0\' "$@" >> "$OUT"; printf \'\\36\\0\' >> "$OUT"; }\n'
    prelude += "".join(f'{n}() {{ __rec {n} "$@"; }}\n' for n in sorted(names - {"f"}))
    env = {"PATH": os.environ["PATH"], "HOME": "/root", "OUT": str(out), "n": "0"}
    subprocess.run(
        [BASH, "-c", prelude + RECORDED], env=env, check=True, capture_output=True, timeout=30
    )
    records = out.read_bytes().split(b"\x1e\0")[:-1]
    ran = [[p.decode() for p in r.split(b"\0")[:-1]] for r in records]
    expected = [
        [w.value if w.value is not None else w.text for w in c.argv]
        for c in cmds
        if c.argv and c.argv[0].value not in ("never", "f", "[", "cat")
    ]
    literal = [[v for v in argv if "$" not in v] for argv in expected]
    assert [[v for v in r if v in argv] for r, argv in zip(ran, literal, strict=True)] == literal
    assert [r[0] for r in ran] == [a[0] for a in expected]


# ------------------------------------------------------------------ edits and quoting
def test_replace_and_insert_are_exact_splices() -> None:
    script = 'exec vllm serve  --max-num-seqs 1024 \\\n  --x "y"  # keep\n'
    (c,) = commands(script)
    seqs = c.words[4]
    assert replace(script, seqs, quote("512")) == script.replace("1024", "512")
    assert insert_after(script, c.words[-1], "--new 1") == script.replace('"y"', '"y" --new 1')
    stale = Word("1024", 0, 4, "1024", (), False, 1)
    with pytest.raises(ValueError, match="not at 0"):
        replace(script, stale, "1")


def test_assignment_value_spans_only_the_value() -> None:
    script = 'A="x y" B=$C D= E+=(1 2)\n'
    (c,) = commands(script)
    a, b, d = (assignment_value(w) for w in c.words[:3])
    assert (a.text, a.value, script[a.start : a.end]) == ('"x y"', "x y", '"x y"')
    assert (b.refs, b.splits) == (("C",), True)
    assert (d.text, d.value, d.start) == ("", "", c.words[2].end)
    assert [e.value for e in assignment_value(c.words[3]).elements] == ["1", "2"]
    with pytest.raises(ValueError, match="not an assignment"):
        assignment_value(Word("x", 0, 1, "x", (), False, 1))


@pytest.mark.parametrize(
    ("value", "quoted"),
    [("1024", "1024"), ("", "''"), ("a b", "'a b'"), ("it's", "'it'\\''s'"), ("if", "'if'"),
     ("A=1", "'A=1'"), ("--x=a,b:c/d%e@f+g", "--x=a,b:c/d%e@f+g"), ("~", "'~'"), ("#", "'#'")],
)  # fmt: skip
def test_quote(value: str, quoted: str) -> None:
    assert quote(value) == quoted


WORD_TEXT = st.text(st.characters(blacklist_characters="\0", blacklist_categories=["Cs"]))


@given(st.lists(WORD_TEXT, min_size=1, max_size=6))
def test_quoted_words_come_back_with_their_values(words: list[str]) -> None:
    (c,) = commands("cmd " + " ".join(quote(w) for w in words))
    assert [w.value for w in c.words[1:]] == words


@settings(max_examples=200)
@given(st.lists(WORD_TEXT, min_size=2, max_size=6), st.data())
def test_replacing_a_word_changes_that_word_only(words: list[str], data: st.DataObject) -> None:
    script = "exec srv " + " \\\n  ".join(quote(w) for w in words) + " 2>&1 # end"
    before = commands(script)[0]
    k = data.draw(st.integers(0, len(before.words) - 1))
    new = data.draw(WORD_TEXT)
    after = commands(replace(script, before.words[k], quote(new)))[0]
    expected = [new if i == k else w.value for i, w in enumerate(before.words)]
    assert [w.value for w in after.words] == expected
    assert after.redirects[0].target.value == "1"


@needs_bash
@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_characters="\0", codec="utf-8"), max_size=8)))
def test_bash_reads_quoted_words_back(words: list[str]) -> None:
    assert bash_words([quote(w) for w in words]) == [[w] for w in words]


PIECES = [*" \\'\"$`{}=~*?abc-#;", "\\\n", "$'", "${a}", "$(x)", "&&", "|", "\n", "'q r'",
          '"d e"', "$'\\x41'", "\\'", '\\"', "<<E\nE\n", "(", ")"]  # fmt: skip


@needs_bash
def test_random_scripts_bash_accepts_parse_and_their_literal_words_match_bash() -> None:
    """A seeded differential check: every script `bash -n` accepts parses, and each literal
    word (one not ending in a backslash: the probe would continue its line) is bash's."""
    assert BASH is not None
    rng = random.Random(252)
    checked = 0
    for _ in range(250):
        script = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12)))
        syntax = subprocess.run([BASH, "-n", "-c", script], capture_output=True, timeout=30)
        if syntax.returncode != 0:
            continue
        words = [
            w
            for w in all_words(commands(script))
            if w.value is not None and not w.text.endswith("\\") and w.text not in ("(", ")")
        ]
        assert bash_words([w.text for w in words]) == [[w.value] for w in words], script
        checked += 1
    assert checked > 60
