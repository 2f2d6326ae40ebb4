"""Config options: how a key is declared (``Option``), the parsers keys are built from, and defaults.

A parser returns the typed value or raises ValueError with one line saying what is allowed
("must be one of graph, relations"); the config loader adds the key and the value given. Defaults
are filled in one place, ``parse_options``, so code that receives options indexes them directly
instead of restating defaults.

This module imports nothing of the platform, so ``ivmstream.service`` and ``ivmstream.config`` both build
on it without importing each other both ways.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration file or value that cannot be used; the message says which key and why."""


@dataclass(frozen=True)
class Option:
    """One config key: its default (used when the key is absent), a parser, and a help line.

    The parser returns the typed value or raises ValueError; the helpers below make parsers whose
    message names what is allowed. ``state`` says whether the value decides what stored state means:
    such options go into the checkpoint envelope, so state written under one value is refused under
    another. Tuning knobs (cache sizes) set it False and may change between restarts."""

    default: Any
    parse: Callable[[Any], Any]
    help: str
    state: bool = True


class Parser(Generic[T]):
    """A config value parser that can also say, in words, what it accepts (``expects``).

    Wrappers such as ``optional`` and ``mapping`` use ``expects`` to phrase their own messages."""

    __slots__ = ("_accept", "expects")

    def __init__(self, expects: str, accept: Callable[[Any], T]) -> None:
        self.expects = expects
        self._accept = accept

    def __call__(self, value: Any) -> T:
        return self._accept(value)

    def __repr__(self) -> str:
        return f"Parser({self.expects!r})"

    def invalid(self) -> ValueError:
        """The error for a value this parser does not accept: 'must be <expects>'."""
        return ValueError(f"must be {self.expects}")


def expects_of(parse: Callable[[Any], Any]) -> str:
    """What a parser accepts, in words ('a valid value' for a plain function)."""
    return parse.expects if isinstance(parse, Parser) else "a valid value"


def _is_int(v: Any) -> bool:
    return type(v) is int  # bool is an int subclass, and YAML's true must not read as 1


def choice(*values: T) -> Parser[T]:
    """One of the given values, compared by type and value (so true is not 1 and 1 is not '1')."""
    if not values:
        raise TypeError("choice() needs at least one value")

    def accept(v: Any) -> T:
        for allowed in values:
            if type(v) is type(allowed) and v == allowed:
                return allowed
        raise parser.invalid()

    parser: Parser[T] = Parser("one of " + ", ".join(map(str, values)), accept)
    return parser


def boolean() -> Parser[bool]:
    """true or false, nothing that merely looks like one ('yes', 1)."""

    def accept(v: Any) -> bool:
        if type(v) is not bool:
            raise parser.invalid()
        return v

    parser = Parser("true or false", accept)
    return parser


def positive_int(*, text: bool = False) -> Parser[int]:
    """An integer > 0; with ``text``, also its decimal digits, as a command line gives a value
    (``--read-option brokers=5``). A config file's value is typed, so there "5" is refused."""

    def accept(v: Any) -> int:
        if text and type(v) is str and v.strip().isascii() and v.strip().isdigit():
            v = int(v)
        if not _is_int(v) or v <= 0:
            raise parser.invalid()
        return int(v)

    parser = Parser("a positive integer", accept)
    return parser


def non_negative_int() -> Parser[int]:
    """An integer >= 0."""

    def accept(v: Any) -> int:
        if not _is_int(v) or v < 0:
            raise parser.invalid()
        return int(v)

    parser = Parser("an integer >= 0", accept)
    return parser


def positive_number() -> Parser[float]:
    """A finite int or float > 0, as a float."""

    def accept(v: Any) -> float:
        if not (_is_int(v) or type(v) is float) or not math.isfinite(v) or v <= 0:
            raise parser.invalid()
        return float(v)

    parser = Parser("a positive number", accept)
    return parser


def string() -> Parser[str]:
    """A non-empty string."""

    def accept(v: Any) -> str:
        if type(v) is not str or not v:
            raise parser.invalid()
        return v

    parser = Parser("a non-empty string", accept)
    return parser


def to_fraction(v: Any) -> Fraction | None:
    """The exact rational a config value denotes, or None when it denotes none.

    Accepts ints, Fractions, strings ('1/4', '0.25', ' 3 ') and finite floats read as written
    (0.1 is 1/10, not the binary double nearest to it); never booleans."""
    if isinstance(v, bool):
        return None
    if isinstance(v, Fraction | int):
        return Fraction(v)
    if isinstance(v, float):
        return Fraction(repr(v)) if math.isfinite(v) else None
    if isinstance(v, str):
        try:
            return Fraction(v.strip())
        except (ValueError, ZeroDivisionError):
            return None
    return None


def _range_text(lo: Fraction | None, hi: Fraction | None) -> str:
    if lo is not None and hi is not None:
        return f" in [{lo}, {hi}]"
    if lo is not None:
        return f" >= {lo}"
    if hi is not None:
        return f" <= {hi}"
    return ""


def fraction(lo: Any = None, hi: Any = None) -> Parser[str]:
    """An exact rational in [lo, hi] (either bound may be None), as canonical text like '1/4'.

    Text keeps options JSON-friendly (they are logged, stored and compared as JSON); ``Fraction(text)``
    gives the exact value back."""
    low = None if lo is None else Fraction(lo)
    high = None if hi is None else Fraction(hi)

    def accept(v: Any) -> str:
        f = to_fraction(v)
        if f is None or (low is not None and f < low) or (high is not None and f > high):
            raise parser.invalid()
        return str(f)

    parser = Parser(f"a rational number{_range_text(low, high)} like '1/4' or '0.25'", accept)
    return parser


def optional(parse: Callable[[Any], T]) -> Parser[T | None]:
    """null (None), or what ``parse`` accepts; the error is the one ``parse`` gives."""

    def accept(v: Any) -> T | None:
        return None if v is None else parse(v)

    return Parser(f"{expects_of(parse)} or null", accept)


def _names(keys: Iterable[str]) -> str:
    keys = list(keys)
    return ", ".join(keys[:-1]) + f" and {keys[-1]}" if len(keys) > 1 else "".join(keys)


def mapping(
    values: Callable[[Any], Any] | None = None, *, keys: Iterable[str] | None = None, exact: bool = False
) -> Parser[dict[str, Any]]:
    """A mapping of names to values, each value parsed by ``values`` (kept as given without one).

    ``keys`` lists the names allowed; with ``exact`` every one of them must be given. Errors name the
    offending key: 'for T: must be ...'."""
    allowed = None if keys is None else tuple(keys)
    if exact and allowed is None:
        raise TypeError("mapping(exact=True) needs keys")
    if allowed is None:
        expects = f"a mapping of names to {'values' if values is None else expects_of(values)}"
    elif exact:
        expects = f"a mapping that gives exactly {_names(allowed)}"
    else:
        expects = f"a mapping with keys among {', '.join(allowed)}"

    def accept(v: Any) -> dict[str, Any]:
        if not isinstance(v, Mapping) or not all(type(k) is str for k in v):
            raise parser.invalid()
        if allowed is not None:
            unknown = sorted(set(v) - set(allowed))
            missing = [k for k in allowed if k not in v] if exact else []
            if unknown or missing:
                wrong = [f"missing {', '.join(missing)}"] if missing else []
                wrong += [f"unknown {', '.join(map(repr, unknown))}"] if unknown else []
                raise ValueError(f"must be {expects}: {'; '.join(wrong)}")
        if values is None:
            return dict(v)
        out = {}
        for k, item in v.items():
            try:
                out[k] = values(item)
            except ValueError as exc:
                raise ValueError(f"for {k}: {exc}") from None
        return out

    parser = Parser(expects, accept)
    return parser


def parse_options(
    declared: Mapping[str, Option], given: Mapping[str, Any], *, owner: str, source: str = "<inline>"
) -> dict[str, Any]:
    """Every declared key, parsed from ``given`` or set to its default: the one place defaults are filled.

    Unknown keys and values a parser refuses raise ConfigError naming the key, the owner (e.g.
    'service triangles') and ``source`` (a file name)."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise ConfigError(
            f"{source}: unknown config key {unknown[0]!r} for {owner} (known: {', '.join(sorted(declared))})"
        )
    values: dict[str, Any] = {}
    for key, opt in declared.items():
        if key not in given:
            values[key] = copy.deepcopy(opt.default)  # changing one config's options leaves the default
            continue
        try:
            values[key] = opt.parse(given[key])
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{source}: config key {key!r} {exc} (got {given[key]!r})") from None
    return values
