"""One error type for the SQL front end: one line naming the file, line and column of the construct.

It is a ``ConfigError`` so the command line reports it as a known failure (one line, no traceback).
Everything is checked before anything runs, so raising one means nothing partial ran.
"""

from __future__ import annotations

from dataclasses import dataclass

from ivmstream.options import ConfigError


@dataclass(frozen=True)
class Position:
    """A place in a SQL file (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class SqlError(ConfigError):
    """A refusal of a SQL file: ``<file>:<line>:<col>: <what>``."""

    def __init__(self, message: str, where: Position | None = None) -> None:
        self.message = message
        self.where = where
        super().__init__(f"{where}: {message}" if where is not None else message)
