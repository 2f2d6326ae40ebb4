"""The input-format registry: readers declared by name, with typed options, looked up by the CLI.

A format is an ``InputFormat``: a name, a one-line summary, the file suffixes it is guessed from, its
read options (each with a default and a parser, like a service's config options) and a reader that
turns a ``ReadRequest`` into ``SourceRecord``s. A ``FormatRegistry`` maps names to formats; the
built-in one is ``ivmstream.events.readers.FORMATS``, and a service adds formats of its own through
``ServiceDefinition.formats`` (``registry.extended(...)``), so reading a new kind of file needs no
platform code.

Option values arrive as text from the command line (``--read-option key=value``) or as typed values
from code (a demo's ``read_options``); a parser accepts both and raises ValueError saying what is
allowed, which ``InputFormat.parse_options`` turns into one line naming the format and the key.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivmstream.events.codec import Schema
from ivmstream.events.source import SourceError, SourceRecord

# --- option parsers ----------------------------------------------------------------------------------
# Each returns the typed value or raises ValueError("must be ..."); the caller names format and key.
# Choices and counts use the config parsers (``ivmstream.options.choice``, ``positive_int(text=True)``).


_CHAR_NAMES = {"\\t": "\t", "tab": "\t", "space": " "}


def one_char(value: Any) -> str:
    """A single character; ``\\t``/``tab`` and ``space`` name the two a shell makes awkward."""
    if type(value) is str:
        value = _CHAR_NAMES.get(value, value)
        if len(value) == 1 and value not in "\r\n":
            return value
    raise ValueError("must be one character (or \\t, tab, space)")


def name_list(value: Any) -> tuple[str, ...]:
    """Distinct non-empty names, comma-separated (or a list of strings)."""
    if type(value) is str:
        names = [n.strip() for n in value.split(",")]
    elif isinstance(value, list | tuple) and all(type(n) is str for n in value):
        names = [n.strip() for n in value]
    else:
        raise ValueError("must be comma-separated column names")
    if not names or any(not n for n in names):
        raise ValueError("must be comma-separated column names, none empty")
    if len(set(names)) != len(names):
        raise ValueError("must name each column once")
    return tuple(names)


def non_empty_text(value: Any) -> str:
    if type(value) is not str or not value.strip():
        raise ValueError("must be a non-empty name")
    return value.strip()


# --- declarations ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOption:
    """One reader option: its default (used when not given), a parser, and a help line."""

    default: Any
    parse: Callable[[Any], Any]
    help: str


@dataclass(frozen=True)
class ReadRequest:
    """Everything a reader is told: the file, its parsed options (defaults filled in), the relation and
    partition-key column the caller named, and the consuming service's schema when it is known."""

    path: Path
    options: Mapping[str, Any] = field(default_factory=dict)
    relation: str | None = None
    key_field: str | None = None
    schema: Schema | None = None


Reader = Callable[[ReadRequest], Iterator[SourceRecord]]


@dataclass(frozen=True)
class InputFormat:
    """A named input format. ``reader`` must check the request when called (raising SourceError for what
    makes the whole input unreadable) and may yield its records lazily."""

    name: str
    summary: str
    reader: Reader
    options: Mapping[str, ReadOption] = field(default_factory=dict)
    suffixes: tuple[str, ...] = ()  # lower-case, with the dot: ".csv"

    def parse_options(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every declared option, typed: the given ones parsed, the rest at their defaults."""
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            allowed = ", ".join(self.options) if self.options else "it takes none"
            raise SourceError(f"format {self.name}: unknown read option {unknown[0]!r} (options: {allowed})")
        parsed: dict[str, Any] = {}
        for key, opt in self.options.items():
            if key not in given:
                parsed[key] = opt.default
                continue
            try:
                parsed[key] = opt.parse(given[key])
            except (ValueError, TypeError) as exc:
                raise SourceError(
                    f"format {self.name}: read option {key!r} {exc} (got {given[key]!r})"
                ) from None
        return parsed

    def describe(self, width: int = 100) -> str:
        """Help text: the summary, then each option with its default."""
        lines = textwrap.wrap(f"{self.name}: {self.summary}", width, subsequent_indent="    ")
        for key, opt in self.options.items():
            default = "none" if opt.default is None else opt.default
            if isinstance(default, tuple):
                default = ",".join(default)
            text = f"{key} (default {default}): {opt.help}"
            lines += textwrap.wrap(text, width, initial_indent="    ", subsequent_indent="        ")
        return "\n".join(lines)


class FormatRegistry(Mapping[str, InputFormat]):
    """Input formats by name, in registration order (which also breaks ties when guessing by suffix)."""

    def __init__(self, formats: Iterable[InputFormat] = ()) -> None:
        self._formats: dict[str, InputFormat] = {}
        for fmt in formats:
            self.register(fmt)

    def __getitem__(self, name: str) -> InputFormat:
        return self._formats[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._formats)

    def __len__(self) -> int:
        return len(self._formats)

    def register(self, fmt: InputFormat) -> InputFormat:
        """Add a format; a name taken already is a programming error (ValueError)."""
        if not isinstance(fmt, InputFormat):
            raise TypeError(f"not an InputFormat: {fmt!r}")
        if fmt.name in self._formats:
            raise ValueError(f"input format {fmt.name!r} is registered already")
        self._formats[fmt.name] = fmt
        return fmt

    def extended(
        self, formats: Mapping[str, InputFormat] | Iterable[InputFormat], owner: str = ""
    ) -> FormatRegistry:
        """A new registry with ``formats`` added (a service's own); none may take a registered name."""
        items = list(formats.items()) if isinstance(formats, Mapping) else [(f.name, f) for f in formats]
        out = FormatRegistry(self._formats.values())
        whose = f" of {owner}" if owner else ""
        for name, fmt in items:
            if not isinstance(fmt, InputFormat) or fmt.name != name:
                raise ValueError(f"format {name!r}{whose} must map to an InputFormat named {name!r}")
            if name in out:
                raise ValueError(f"format {name!r}{whose} takes the name of a format registered already")
            out.register(fmt)
        return out

    def get_format(self, name: str) -> InputFormat:
        """The format called ``name``; SourceError listing the known ones otherwise."""
        fmt = self._formats.get(name)
        if fmt is None:
            raise SourceError(f"unknown input format {name!r} (known: {', '.join(self._formats)})")
        return fmt

    def guess(self, path: str | Path) -> str:
        """The format a file's suffix names (first registered wins); SourceError if none does."""
        suffix = Path(path).suffix.lower()
        for fmt in self._formats.values():
            if suffix and suffix in fmt.suffixes:
                return fmt.name
        raise SourceError(f"cannot tell the format of {path}; pass --format ({'|'.join(self._formats)})")

    def read(
        self,
        path: str | Path,
        fmt: str | None = None,
        *,
        options: Mapping[str, Any] | None = None,
        relation: str | None = None,
        key_field: str | None = None,
        schema: Schema | None = None,
    ) -> Iterator[SourceRecord]:
        """Open ``path`` in ``fmt`` (default: guessed from its suffix). Everything that makes the input
        unreadable (missing file, unknown format, bad option) raises SourceError here, not on iteration."""
        p = Path(path)
        if not p.is_file():
            raise SourceError(f"input file not found: {path}")
        chosen = self.get_format(fmt or self.guess(p))
        parsed = chosen.parse_options(options or {})
        return chosen.reader(ReadRequest(p, parsed, relation or None, key_field, schema))

    def describe(self, width: int = 100) -> str:
        """Help text listing every format and its options."""
        return "\n".join(fmt.describe(width) for fmt in self._formats.values())


def merge_options(*sources: Mapping[str, Any]) -> dict[str, Any]:
    """Read options from several places (flags, aliases, keyword arguments); a key given twice is an error."""
    merged: dict[str, Any] = {}
    for source in sources:
        for key, value in source.items():
            if key in merged and merged[key] != value:
                raise SourceError(f"read option {key!r} given twice ({merged[key]!r} and {value!r})")
            merged[key] = value
    return merged


def parse_assignments(items: Sequence[str], flag: str = "--read-option") -> dict[str, str]:
    """``KEY=VALUE`` strings as a mapping; SourceError for a malformed item or a key given twice."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SourceError(f"{flag} expects KEY=VALUE, got {item!r}")
        if key in out:
            raise SourceError(f"{flag} {key} given twice ({out[key]!r} and {value!r})")
        out[key] = value
    return out
