"""POSIX shell (sh / bash) command lines: the simple commands of a script and their words,
with exact positions, so advisor can change a flag where a wrapper script or a ``sh -c``
ExecStart= writes it.

The rule this module keeps: a word's span is exactly what the script says
(``script[start:end] == word.text``), its `value` is what bash makes of it after quote removal
(None where bash would expand something), and an edit (replace, insert_after) changes those
characters and nothing else. The tests check the values against bash itself.

What counts as what:

* Simple commands are split at ``;`` ``&`` ``&&`` ``||`` ``|`` ``|&`` newlines ``(`` ``)``
  ``;;``, and at the reserved words ``if then else elif fi while until do done { } ! time``
  where a command starts. ``for NAME [in WORDS]`` up to ``do``, ``case WORD in``, case
  patterns up to ``)``, ``function NAME``, ``NAME ( )`` and ``(( … ))`` are no commands;
  ``[[ … ]]`` is one command whose words include its operators.
* Comments (``#`` where a word starts) and here-document bodies are skipped.
* Redirections (``>f``, ``2>&1``, ``<<EOF``) are not words: they are in
  ``Command.redirects``.
* ``$(…)``, backquotes and ``${…}`` are parts of a word; the commands inside a command
  substitution are not listed. Inside ``$(…)`` parentheses are counted (a ``case`` pattern's
  ``)`` there would end it early).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from advisor.execution._shelllex import ARRAY_LHS, Lexer, Op, Redirect, Word

__all__ = [
    "Command",
    "assignment_value",
    "assignments",
    "commands",
    "insert_after",
    "quote",
    "replace",
    "sourced",
]

_SKIPPED: Final = frozenset(
    {"if", "then", "else", "elif", "fi", "while", "until", "do", "done", "{", "}", "!", "time"}
)
RESERVED: Final = _SKIPPED | {"for", "select", "case", "esac", "in", "function", "[[", "]]"}
_DECLARERS: Final = frozenset({"export", "declare", "typeset", "local", "readonly"})
_DEFAULT = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?=")
_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


@dataclass(frozen=True)
class Command:
    """One simple command: its words (leading ``VAR=x`` assignments included), the line of
    its first word, and its redirections."""

    words: tuple[Word, ...]
    line: int
    redirects: tuple[Redirect, ...] = ()

    @property
    def prefix(self) -> tuple[Word, ...]:
        """The leading assignments (``VAR=x cmd``)."""
        return self.words[: len(self.words) - len(self.argv)]

    @property
    def argv(self) -> tuple[Word, ...]:
        """The words after the leading assignments: the command and its arguments."""
        for i, word in enumerate(self.words):
            if not ARRAY_LHS.match(word.text):
                return self.words[i:]
        return ()


class _Parser:
    """Groups the lexer's tokens into simple commands."""

    def __init__(self, lexer: Lexer, tokens: list[Word | Op | Redirect]) -> None:
        self.lexer = lexer
        self.toks = tokens
        self.out: list[Command] = []
        self.words: list[Word] = []
        self.redirects: list[Redirect] = []
        self.stack: list[str] = []  # "(" subshell, "pattern" / "body" of a case
        self.mode = ""  # "for", "case", "function", "[[", "((" while skipping or collecting
        self.depth = 0

    def run(self) -> list[Command]:
        i = 0
        while i < len(self.toks):
            i = self.step(i)
        self.flush()
        return self.out

    def flush(self) -> None:
        if self.words:
            line = self.words[0].line
            self.out.append(Command(tuple(self.words), line, tuple(self.redirects)))
        self.words, self.redirects = [], []

    def step(self, i: int) -> int:
        tok = self.toks[i]
        if self.mode:
            return self.special(i)
        if self.stack and self.stack[-1] == "pattern":
            if _is(tok, "esac"):
                self.stack.pop()
            elif isinstance(tok, Op) and tok.op == ")":
                self.stack[-1] = "body"
            return i + 1
        if isinstance(tok, Redirect):
            self.redirects.append(tok)
        elif isinstance(tok, Word):
            if self.words or self.redirects or not self.keyword(tok):
                self.words.append(tok)
        else:
            return self.operator(tok, i)
        return i + 1

    def keyword(self, tok: Word) -> bool:
        """Handle a reserved word where a command starts (False: it is none)."""
        word = tok.text if tok.value == tok.text else ""
        if word in _SKIPPED:
            return True
        mode = {"for": "for", "select": "for", "case": "case", "function": "function"}
        if word in mode:
            self.mode = mode[word]
        elif word == "[[":
            self.mode = "[["
            self.words.append(tok)
        elif word == "esac" and self.stack and self.stack[-1] == "body":
            self.stack.pop()
        else:
            return False
        return True

    def special(self, i: int) -> int:
        tok = self.toks[i]
        if self.mode == "for" and _is(tok, "do"):
            self.mode = ""
        elif self.mode == "case" and _is(tok, "in"):
            self.mode = ""
            self.stack.append("pattern")
        elif self.mode == "function" and isinstance(tok, Word):
            self.mode = ""
            if _op(self.toks, i + 1, "(") and _op(self.toks, i + 2, ")"):
                return i + 3
        elif self.mode == "((" and isinstance(tok, Op):
            self.depth += {"(": 1, ")": -1}.get(tok.op, 0)
            self.mode = "((" if self.depth > 0 else ""
        elif self.mode == "[[":
            self.collect(tok)
        return i + 1

    def collect(self, tok: Word | Op | Redirect) -> None:
        """A token of ``[[ … ]]``: operators are words there."""
        line = self.lexer.line
        if isinstance(tok, Word):
            self.words.append(tok)
            if tok.text == "]]":
                self.mode = ""
                self.flush()
        elif isinstance(tok, Op) and tok.op != "\n":
            self.words.append(Word(tok.op, tok.start, tok.end, tok.op, (), False, line(tok.start)))
        elif isinstance(tok, Redirect):
            op_end = tok.start + len(tok.fd) + len(tok.op)
            text = self.lexer.s[tok.start : op_end]
            self.words.append(Word(text, tok.start, op_end, text, (), False, line(tok.start)))
            self.collect(tok.target)

    def operator(self, tok: Op, i: int) -> int:
        starts = not self.words and not self.redirects
        if tok.op == "(":
            if len(self.words) == 1 and not self.redirects and _op(self.toks, i + 1, ")"):
                self.words = []  # NAME ( ): a function definition
                return i + 2
            nxt = self.toks[i + 1] if i + 1 < len(self.toks) else None
            if starts and isinstance(nxt, Op) and nxt.op == "(" and nxt.start == tok.end:
                self.mode, self.depth = "((", 2
                return i + 2
            self.flush()
            self.stack.append("(")
        elif tok.op == ")":
            self.flush()
            if self.stack and self.stack[-1] == "(":
                self.stack.pop()
        elif tok.op in (";;", ";&", ";;&"):
            self.flush()
            if self.stack and self.stack[-1] == "body":
                self.stack[-1] = "pattern"
        else:
            self.flush()
        return i + 1


def _is(tok: Word | Op | Redirect, word: str) -> bool:
    return isinstance(tok, Word) and tok.text == word


def _op(toks: list[Word | Op | Redirect], i: int, op: str) -> bool:
    tok = toks[i] if i < len(toks) else None
    return isinstance(tok, Op) and tok.op == op


def commands(script: str) -> list[Command]:
    """The simple commands of `script`, in order (see the module's docstring for what counts).
    Raises ShellSyntaxError (a ValueError) for an unterminated quote, ``$(``, ``${``,
    backquote or array, or a redirection without a target."""
    lexer = Lexer(script)
    return _Parser(lexer, lexer.tokens()).run()


def assignments(commands: Sequence[Command]) -> dict[str, list[Word]]:
    """Where each variable is assigned, in script order: the words ``VAR=…`` (also
    ``VAR+=…``, ``VAR[i]=…``, ``VAR=(…)``) before a command or alone (a prefix assignment
    sets the variable for that command only: it is listed too), the ``VAR=…`` arguments of
    ``export declare typeset local readonly``, and any word holding a default assignment
    ``${VAR:=…}`` / ``${VAR=…}`` (the whole word, e.g. ``"${VAR:=1}"`` of ``: "${VAR:=1}"``).
    Words without ``=`` (``export VAR``) are no assignments."""
    found: dict[str, list[Word]] = {}

    def add(name: str, word: Word) -> None:
        found.setdefault(name, []).append(word)

    for command in commands:
        for word in command.prefix:
            add(_lhs_name(word), word)
        argv = command.argv
        if argv and argv[0].value in _DECLARERS:
            for word in argv[1:]:
                if ARRAY_LHS.match(word.text):
                    add(_lhs_name(word), word)
        for word in command.words:
            for name in _DEFAULT.findall(word.text):
                add(name, word)
    return found


def _lhs_name(word: Word) -> str:
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", word.text)
    assert m is not None
    return m.group()


def assignment_value(word: Word) -> Word:
    """The value part of an assignment word ``VAR=value`` (after the first ``=``), as a word
    with its own span and value: what to replace to change the value only."""
    m = ARRAY_LHS.match(word.text)
    if m is None:
        raise ValueError(f"{word.text!r} is not an assignment")
    cut = m.end()
    rest = word.text[cut:]
    if not rest or word.elements:
        value = "" if not rest else None
        return Word(rest, word.end - len(rest), word.end, value, (), False, word.line,
                    elements=word.elements)  # fmt: skip
    lexed, _ = Lexer(rest).word(0)
    line = word.line + word.text[:cut].count("\n")
    start = word.start + cut
    return Word(rest, start, word.end, lexed.value, lexed.refs, lexed.splits,
                line + lexed.line - 1, lexed.spreads, lexed.globs, lexed.elements)  # fmt: skip


def sourced(commands: Sequence[Command]) -> list[Word]:
    """The file words of ``source FILE`` and ``. FILE``, in order."""
    out = []
    for command in commands:
        argv = command.argv
        if len(argv) > 1 and argv[0].value in ("source", "."):
            out.append(argv[1])
    return out


def _check(script: str, word: Word) -> None:
    if script[word.start : word.end] != word.text:
        raise ValueError(f"the word {word.text!r} is not at {word.start} in this script")


def replace(script: str, word: Word, text: str) -> str:
    """`script` with `word` replaced by `text` (every other character kept)."""
    _check(script, word)
    return script[: word.start] + text + script[word.end :]


def insert_after(script: str, word: Word, text: str) -> str:
    """`script` with a space and `text` inserted right after `word`."""
    _check(script, word)
    return script[: word.end] + " " + text + script[word.end :]


def quote(value: str) -> str:
    """A shell word whose value is `value`: bare when it holds only plain characters and
    could be nothing else (not a reserved word, not ``VAR=…``), else single quotes with
    ``'`` written ``'\\''``."""
    if _SAFE.fullmatch(value) and value not in RESERVED and not ARRAY_LHS.match(value):
        return value
    return "'" + value.replace("'", "'\\''") + "'"
