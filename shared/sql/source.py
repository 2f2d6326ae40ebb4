"""A SQL file as statements with their positions: comments dropped, ``INCLUDE`` followed.

Statements are split at ``;`` outside quotes and comments. Every later rewrite of a statement keeps
its length (consumed clauses become blanks, newlines stay), so a position sqlglot reports inside a
rewritten statement is the position in the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ivmstream.sql.errors import Position, SqlError

_INCLUDE = re.compile(r"\s*INCLUDE\s+'([^']*)'\s*$", re.IGNORECASE | re.DOTALL)
MAX_INCLUDE_DEPTH = 8


@dataclass
class Statement:
    """One statement's text (comments blanked) and where it starts in its file."""

    text: str
    file: str
    line: int  # 1-based line of the statement's first character
    col: int  # 1-based column of its first character
    index: int = 0  # position among the file's statements (1-based), for unnamed views

    def position(self, offset: int) -> Position:
        """The file position of a character offset inside ``text``."""
        before = self.text[:offset]
        nl = before.count("\n")
        if nl == 0:
            return Position(self.file, self.line, self.col + offset)
        return Position(self.file, self.line + nl, offset - before.rfind("\n"))

    def at(self, line: int, col: int) -> Position:
        """The file position of sqlglot's (line, col) inside ``text`` (col points at a token's end)."""
        if line <= 1:
            return Position(self.file, self.line, self.col + col - 1)
        return Position(self.file, self.line + line - 1, col)

    def blank(self, start: int, end: int) -> None:
        """Replace ``text[start:end]`` by spaces, keeping newlines."""
        piece = "".join("\n" if ch == "\n" else " " for ch in self.text[start:end])
        self.text = self.text[:start] + piece + self.text[end:]

    def replace(self, start: int, end: int, new: str) -> None:
        """Replace a span by ``new`` padded with blanks to the span's length (never longer)."""
        width = end - start
        if len(new) > width:
            raise ValueError("a rewrite may not lengthen a statement")
        self.text = self.text[:start] + new + " " * (width - len(new)) + self.text[end:]


def _blank_comments(text: str) -> str:
    """Comments (``--`` to the line's end, ``/* */``) replaced by blanks; quotes respected."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"":
            j = text.find(ch, i + 1)
            while j != -1 and j + 1 < n and text[j + 1] == ch:  # doubled quote
                j = text.find(ch, j + 2)
            i = n if j == -1 else j + 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j == -1 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j == -1 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        else:
            i += 1
    return "".join(out)


def _split(text: str) -> list[tuple[int, str]]:
    """(offset, text) of each statement, split at semicolons outside quotes and parentheses (IMP's
    ``UPDATEPS (s1; s2) ...`` is one statement)."""
    parts: list[tuple[int, str]] = []
    start, i, n = 0, 0, len(text)
    quote = ""
    depth = 0
    while i < n:
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif ch == ";" and depth == 0:
            parts.append((start, text[start:i]))
            start = i + 1
        i += 1
    parts.append((start, text[start:]))
    return [(o, t) for o, t in parts if t.strip()]


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def read_statements(path: str | Path, *, base: Path | None = None, depth: int = 0) -> list[Statement]:
    """Every statement of a file, ``INCLUDE 'f'`` replaced by f's statements (f relative to ``base``,
    the working directory by default, as DBToaster resolves it; then relative to the including file)."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SqlError(f"cannot read SQL file {str(p)!r}: {reason}") from None
    text = _blank_comments(raw)
    out: list[Statement] = []
    index = 0
    for offset, stmt in _split(text):
        lead = len(stmt) - len(stmt.lstrip())
        line, col = _line_col(text, offset + lead)
        body = stmt[lead:].rstrip()
        inc = _INCLUDE.match(body)
        if inc:
            where = Position(str(p), line, col)
            if depth >= MAX_INCLUDE_DEPTH:
                raise SqlError(f"INCLUDE nested more than {MAX_INCLUDE_DEPTH} deep", where)
            target = _resolve_include(inc.group(1), p, base, where)
            out.extend(read_statements(target, base=base, depth=depth + 1))
            continue
        index += 1
        out.append(Statement(body, str(p), line, col, index))
    return out


def _resolve_include(name: str, including: Path, base: Path | None, where: Position) -> Path:
    cwd = base if base is not None else Path.cwd()
    for candidate in (cwd / name, including.parent / name, including.parent / Path(name).name):
        if candidate.is_file():
            return candidate
    raise SqlError(
        f"INCLUDE {name!r}: no such file (relative to {str(cwd)!r} or {str(including.parent)!r})", where
    )
