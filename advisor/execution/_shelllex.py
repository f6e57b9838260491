"""The lexer behind advisor.execution.shellwords: a POSIX sh / bash script as words,
operators and redirections, each with its exact span.

Rule kept: a word's span is exactly what the script says (``script[start:end] == text``) and its
value is what bash gives after quote removal, or None where bash would expand something. The
tests compare the values with bash itself. Approximations (documented in shellwords): inside
``$(…)`` parentheses are counted, so a ``case`` pattern's ``)`` there ends it early.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Final

META: Final = " \t\n;&|()<>"
OPS: Final = ("&>>", ";;&", "<<<", "<<-", "&&", "||", ";;", ";&", "|&", "<<", ">>", "<&",
              ">&", "<>", ">|", "&>", ";", "&", "|", "(", ")", "<", ">")  # fmt: skip
REDIRS: Final = frozenset({"<", ">", ">>", "<<", "<<-", "<<<", "<&", ">&", "<>", ">|", "&>", "&>>"})
_NAME = re.compile(r"[A-Za-z_](?:(?:\\\n)*[A-Za-z0-9_])*")  # line continuations inside
ARRAY_LHS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_REF = re.compile(r"(?<!\\)\$\{?[#!]?([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])")
_SPREAD = re.compile(r"\$\{!?(@|[A-Za-z_][A-Za-z0-9_]*\[@\])")
_GLOB = re.compile(r"[*?]|\[[^\]]*\]|\{[^{}]*(,|\.\.)[^{}]*\}")
_ANSI = re.compile(
    r"\\(?:([abeEfnrtv\\'\"?])|([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{1,4})"
    r"|U([0-9a-fA-F]{1,8})|c(.))",
    re.S,
)
_ANSI_SIMPLE: Final = dict(zip("abeEfnrtv", "\a\b\x1b\x1b\f\n\r\t\v", strict=True))


class ShellSyntaxError(ValueError):
    """The script does not parse (an unterminated quote, ``$(``, ``${``…)."""

    def __init__(self, message: str, position: int, line: int) -> None:
        super().__init__(f"line {line} (offset {position}): {message}")
        self.position = position
        self.line = line


@dataclass(frozen=True)
class Word:
    """One shell word: ``script[start:end] == text``.

    `value` is the word after quote removal when it is literal, None when bash expands
    something in it (``$X``, ``${…}``, ``$(…)``, backquotes, ``$((…))``, a leading ``~``, an
    array assignment). `refs` names the variables it expands, in order (``@``/``*``/digits for
    positional ones). `splits`: it holds an unquoted expansion (its value is word-split);
    `spreads`: it expands ``$@`` or ``${A[@]}`` (any number of words, even quoted); `globs`:
    unquoted pattern or brace-expansion characters (bash may turn it into other words);
    `elements`: the words of an array assignment ``A=(…)``."""

    text: str
    start: int
    end: int
    value: str | None
    refs: tuple[str, ...]
    splits: bool
    line: int
    spreads: bool = False
    globs: bool = False
    elements: tuple[Word, ...] = ()


@dataclass(frozen=True)
class Op:
    op: str
    start: int
    end: int


@dataclass(frozen=True)
class Redirect:
    """A redirection (``2>&1``, ``>f``, ``<<EOF``): `fd` as written (may be empty), `op`, and
    its target word; ``start``/``end`` span all of it."""

    fd: str
    op: str
    target: Word
    start: int
    end: int


@dataclass
class _Acc:
    value: list[str] = field(default_factory=list)
    literal: bool = True
    refs: list[str] = field(default_factory=list)
    splits: bool = False
    spreads: bool = False
    bare: list[str] = field(default_factory=list)  # unquoted characters (for globs)

    def expansion(self, quoted: bool, refs: list[str], spreads: bool = False) -> None:
        self.literal = False
        self.refs += refs
        self.splits = self.splits or not quoted
        self.spreads = self.spreads or spreads


def _ansi_c(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        simple, octal, hx, u4, u8, ctl = m.groups()
        if simple:
            return _ANSI_SIMPLE.get(simple, simple)
        if ctl:
            return chr(ord(ctl) & 0x1F)
        code = int(octal, 8) & 0xFF if octal else int(hx or u4 or u8, 16)
        if (octal or hx) and code >= 0x80:
            return chr(0xDC00 + code)  # a raw byte: surrogate escape, merged below
        return chr(code) if code <= 0x10FFFF else ""

    text = _ANSI.sub(one, body)
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")


class Lexer:
    """Tokens of one script: Word, Op (``;``, ``&&``, newline…) and Redirect."""

    def __init__(self, script: str) -> None:
        self.s = script
        self.n = len(script)
        self.starts = [0] + [i + 1 for i, c in enumerate(script) if c == "\n"]

    def line(self, pos: int) -> int:
        return bisect_right(self.starts, pos)

    def error(self, message: str, pos: int) -> ShellSyntaxError:
        return ShellSyntaxError(message, pos, self.line(pos))

    # ------------------------------------------------------------------ tokens
    def tokens(self) -> list[Word | Op | Redirect]:
        out: list[Word | Op | Redirect] = []
        heredocs: list[tuple[str, bool]] = []
        s, pos = self.s, 0
        while pos < self.n:
            c = s[pos]
            if c in " \t":
                pos += 1
            elif s.startswith("\\\n", pos):
                pos += 2
            elif c == "#":
                end = s.find("\n", pos)
                pos = self.n if end < 0 else end
            elif c == "\n":
                out.append(Op("\n", pos, pos + 1))
                pos += 1
                for delimiter, strip in heredocs:
                    pos = self.heredoc(pos, delimiter, strip)
                heredocs = []
            elif c in "<>" and s.startswith("(", pos + 1):
                word, pos = self.word(pos)
                out.append(word)
            elif op := next((o for o in OPS if s.startswith(o, pos)), None):
                pos = self.operator(op, pos, None, out, heredocs)
            else:
                word, pos = self.word(pos)
                op = next((o for o in OPS if s.startswith(o, pos)), None)
                if word.text.isdigit() and op in REDIRS and op[0] in "<>":
                    pos = self.operator(op, pos, word, out, heredocs)
                else:
                    out.append(word)
        return out

    def operator(
        self,
        op: str,
        pos: int,
        fd: Word | None,
        out: list[Word | Op | Redirect],
        heredocs: list[tuple[str, bool]],
    ) -> int:
        end = pos + len(op)
        if op not in REDIRS:
            out.append(Op(op, pos, end))
            return end
        i = end
        while i < self.n and (self.s[i] in " \t" or self.s.startswith("\\\n", i)):
            i += 1 if self.s[i] in " \t" else 2
        substitution = self.s[i : i + 2] in ("<(", ">(")
        if i >= self.n or (self.s[i] in "\n;&|()<>" and not substitution):
            raise self.error(f"{op!r} without a target", pos)
        target, i = self.word(i)
        if op in ("<<", "<<-"):
            delimiter = target.value or re.sub(r"[\"'\\]", "", target.text)
            heredocs.append((delimiter, op == "<<-"))
        start = fd.start if fd is not None else pos
        out.append(Redirect(fd.text if fd is not None else "", op, target, start, i))
        return i

    def heredoc(self, pos: int, delimiter: str, strip: bool) -> int:
        """Skip a here-document's body (to its delimiter line, or the end)."""
        while pos < self.n:
            end = self.s.find("\n", pos)
            line = self.s[pos : self.n if end < 0 else end]
            pos = self.n if end < 0 else end + 1
            if (line.lstrip("\t") if strip else line) == delimiter:
                break
        return pos

    # ------------------------------------------------------------------ words
    def word(self, pos: int) -> tuple[Word, int]:
        s, start, acc = self.s, pos, _Acc()
        elements: tuple[Word, ...] = ()
        if s[pos] in "<>":  # <(…) / >(…): process substitution
            pos = self.parens(pos + 2, pos)
            acc.expansion(True, [])
        while pos < self.n:
            c = s[pos]
            if c == "(" and ARRAY_LHS.fullmatch(s[start:pos]):
                pos, elements = self.array(pos)
                acc.literal = False
            elif c in META:
                break
            elif c == "\\":
                pos = self.backslash(pos, acc)
            elif c == "'":
                end = s.find("'", pos + 1)
                if end < 0:
                    raise self.error("unterminated single quote", pos)
                acc.value.append(s[pos + 1 : end])
                acc.bare.append("\0")
                pos = end + 1
            elif c in '"$`':
                pos = self.quoted_part(pos, acc)
            else:
                acc.value.append(c)
                acc.bare.append(c)
                pos += 1
        text = s[start:pos]
        if text.startswith("~") or re.match(ARRAY_LHS.pattern + "~", text):
            acc.literal = False
        value = "".join(acc.value) if acc.literal else None
        globs = _GLOB.search("".join(acc.bare)) is not None
        word = Word(text, start, pos, value, tuple(acc.refs), acc.splits, self.line(start),
                    acc.spreads, globs, elements)  # fmt: skip
        return word, pos

    def quoted_part(self, pos: int, acc: _Acc) -> int:
        acc.bare.append("\0")
        c = self.s[pos]
        if c == '"':
            return self.dquote(pos, acc)
        if c == "`":
            return self.backquote(pos, acc, quoted=False)
        return self.dollar(pos, acc, quoted=False)

    def backslash(self, pos: int, acc: _Acc) -> int:
        nxt = self.s[pos + 1 : pos + 2]
        if nxt == "\n":
            return pos + 2
        acc.value.append(nxt or "\\")
        acc.bare.append("\0")
        return pos + 1 + len(nxt)

    def dquote(self, pos: int, acc: _Acc) -> int:
        s, i = self.s, pos + 1
        while i < self.n:
            c = s[i]
            if c == '"':
                return i + 1
            if c == "\\":
                nxt = s[i + 1 : i + 2]
                if nxt and nxt in '$`"\\\n':
                    acc.value.append("" if nxt == "\n" else nxt)
                    i += 2
                    continue
                acc.value.append("\\")
                i += 1
            elif c == "$":
                i = self.dollar(i, acc, quoted=True)
            elif c == "`":
                i = self.backquote(i, acc, quoted=True)
            else:
                acc.value.append(c)
                i += 1
        raise self.error("unterminated double quote", pos)

    def dollar(self, pos: int, acc: _Acc, quoted: bool) -> int:
        s, j = self.s, pos + 1
        while s.startswith("\\\n", j):  # bash drops line continuations before anything
            j += 2
        nxt = s[j : j + 1]
        if nxt == "'" and not quoted:
            i = j + 1
            while i < self.n and s[i] != "'":
                i += 2 if s[i] == "\\" else 1
            if i >= self.n:
                raise self.error("unterminated $'…'", pos)
            acc.value.append(_ansi_c(s[j + 1 : i]))
            return i + 1
        if nxt == '"' and not quoted:
            return self.dquote(j, acc)
        if nxt == "(":
            end = self.parens(j + 1, pos)
            acc.expansion(quoted, [])
            return end
        if nxt == "{":
            end = self.braces(j + 1, pos, quoted)
            text = "$" + s[j:end].replace("\\\n", "")
            acc.expansion(quoted, _REF.findall(text), _SPREAD.match(text) is not None)
            return end
        m = _NAME.match(s, j)
        if m:
            acc.expansion(quoted, [m.group().replace("\\\n", "")])
            return m.end()
        if nxt and nxt in "@*#?$!-0123456789":
            acc.expansion(quoted, [nxt], nxt == "@")
            return j + 1
        acc.value.append("$")
        return pos + 1

    def backquote(self, pos: int, acc: _Acc, quoted: bool) -> int:
        i = pos + 1
        while i < self.n and self.s[i] != "`":
            i += 2 if self.s[i] == "\\" else 1
        if i >= self.n:
            raise self.error("unterminated backquote", pos)
        acc.expansion(quoted, [])
        return i + 1

    def parens(self, i: int, opener: int) -> int:
        """The end of ``$(…)`` / ``$((…))`` / ``<(…)`` whose body starts at `i`."""
        s, depth, scratch = self.s, 1, _Acc()
        while i < self.n:
            c = s[i]
            if c == "\\":
                i += 2
            elif c == "'":
                end = s.find("'", i + 1)
                if end < 0:
                    raise self.error("unterminated single quote", i)
                i = end + 1
            elif c == '"':
                i = self.dquote(i, scratch)
            elif c == "$":
                i = self.dollar(i, scratch, quoted=False)
            elif c == "`":
                i = self.backquote(i, scratch, quoted=False)
            elif c == "#" and s[i - 1] in " \t\n;&|()":
                end = s.find("\n", i)
                i = self.n if end < 0 else end
            else:
                depth += {"(": 1, ")": -1}.get(c, 0)
                if depth == 0:
                    return i + 1
                i += 1
        raise self.error("unterminated $(", opener)

    def braces(self, i: int, opener: int, quoted: bool) -> int:
        """The end of ``${…}`` whose body starts at `i` (only ``${`` nests, as in bash)."""
        s, scratch = self.s, _Acc()
        while i < self.n:
            c = s[i]
            if c == "}":
                return i + 1
            if c == "\\":
                i += 2
            elif c == "'" and not quoted:
                end = s.find("'", i + 1)
                if end < 0:
                    raise self.error("unterminated single quote", i)
                i = end + 1
            elif c == '"':
                i = self.dquote(i, scratch)
            elif c == "$":
                i = self.dollar(i, scratch, quoted)
            elif c == "`":
                i = self.backquote(i, scratch, quoted)
            else:
                i += 1
        raise self.error("unterminated ${", opener)

    def array(self, pos: int) -> tuple[int, tuple[Word, ...]]:
        """``NAME=(…)``: the elements, to the closing parenthesis."""
        s, i = self.s, pos + 1
        elements: list[Word] = []
        while i < self.n:
            c = s[i]
            if c in " \t\n":
                i += 1
            elif s.startswith("\\\n", i):
                i += 2
            elif c == "#":
                end = s.find("\n", i)
                i = self.n if end < 0 else end
            elif c == ")":
                return i + 1, tuple(elements)
            elif c in META:
                raise self.error(f"{c!r} inside an array assignment", i)
            else:
                word, i = self.word(i)
                elements.append(word)
        raise self.error("unterminated array assignment", pos)
