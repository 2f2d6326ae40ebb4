"""``--input`` and its reading flags, shared by ``replay`` and ``produce``: files opened through the formats
registry, each with the relation its rows feed and a label for messages about its lines."""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ivmstream.cli.common import CliError
from ivmstream.events import FORMATS, FormatRegistry, Schema, SourceRecord, read_source
from ivmstream.events.formats import parse_assignments
from ivmstream.events.source import file_stem

# Flags kept beside --read-option: each is an alias of the read option of the same name.
_READ_OPTION_ALIASES = ("book", "brokers", "delimiter")
# Formats whose rows do not name their relation: it comes from the command line, the file name or the
# service's only relation.
ROW_FORMATS = ("csv", "tbl")
_RELATION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        required=True,
        action="append",
        metavar="FILE[:RELATION]",
        help="input file, optionally with the relation its rows feed; repeatable: read one after another "
        "(--format tpch: tables interleaved by size)",
    )
    p.add_argument(
        "--format",
        metavar="FORMAT",
        help=f"input format: {', '.join(FORMATS)} or one of the service's own (default: from the file "
        "suffix; see the list below)",
    )
    p.add_argument(
        "--relation",
        action="append",
        help="relation of the rows of every csv or tbl --input without its own :RELATION (default: the "
        "relation the file name names up to its first dot, else the service's only relation); tpch: the "
        "table",
    )
    p.add_argument(
        "--allow-rejects",
        action="store_true",
        help="exit 0 although input lines were rejected (default: exit 1, saying how many)",
    )
    p.add_argument(
        "--read-option",
        action="append",
        metavar="KEY=VALUE",
        help="an option of the format's reader (repeatable; listed below)",
    )
    p.add_argument("--delimiter", help="csv: the field separator (--read-option delimiter=C)")
    p.add_argument("--book", help="orderbook: side(s) to emit, auto|bids|asks|both (--read-option book=B)")
    p.add_argument("--brokers", help="orderbook: broker_id = id mod N (--read-option brokers=N)")


def formats_epilog() -> str:
    listing = textwrap.indent(FORMATS.describe(), "  ")
    return (
        "input formats (--format NAME; options as --read-option KEY=VALUE):\n"
        f"{listing}\n"
        "A service may add formats of its own (see its page in docs/)."
    )


def count_lines(path: str) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def read_options(args: argparse.Namespace) -> dict[str, str]:
    """``--read-option KEY=VALUE`` pairs plus the alias flags; the reader types and checks them."""
    given = parse_assignments(args.read_option or [])
    for key in _READ_OPTION_ALIASES:
        value = getattr(args, key)
        if value is None:
            continue
        if key in given and given[key] != value:
            raise CliError(f"--{key} {value} and --read-option {key}={given[key]} disagree")
        given[key] = value
    return given


@dataclass(frozen=True)
class InputFile:
    """One ``--input``: its path, the relation given for it (None: from its name or the service) and how
    it was given, for messages."""

    path: str
    relation: str | None
    how: str


def input_files(args: argparse.Namespace) -> list[InputFile]:
    """``--input FILE[:RELATION]`` values, ``--relation`` applying to those without their own. A value
    that is an existing file is a path even if it holds a colon."""
    relations: list[str] = args.relation or []
    if len(relations) > 1:
        raise CliError(
            "--relation given more than once: give each file its relation as --input FILE:RELATION"
        )
    default = relations[0] if relations else None
    out = []
    for value in args.input:
        path, sep, relation = value.rpartition(":")
        if sep and path and _RELATION_NAME.fullmatch(relation) and not Path(value).is_file():
            out.append(InputFile(path, relation, f"--input {value}"))
        else:
            out.append(InputFile(value, default, "--relation" if default else ""))
    return out


def _relation(inp: InputFile, fmt: str, schema: Schema | None, service: str | None) -> str | None:
    """The relation a csv or tbl file's rows feed: the one given, else the one its name names, else the
    service's only relation."""
    if fmt not in ROW_FORMATS:
        return inp.relation
    declared = list(schema.relations) if schema is not None else None
    listing = f"the relations of {service} ({', '.join(declared)})" if declared is not None else ""
    if inp.relation is not None:
        if declared is not None and inp.relation not in declared:
            raise CliError(f"{inp.path}: relation {inp.relation!r} ({inp.how}) is not one of {listing}")
        return inp.relation
    stem = file_stem(inp.path)
    if declared is None or stem in declared:
        return stem
    if len(declared) == 1:
        print(
            f"ivmstream: {inp.path}: rows of {declared[0]}, the only relation of {service} "
            f"(another: --input {inp.path}:RELATION)",
            file=sys.stderr,
        )
        return declared[0]
    raise CliError(f"{inp.path}: its name names none of {listing}: pass --input {inp.path}:RELATION")


@dataclass(frozen=True)
class OpenInput:
    """An opened input: its records and where a record of it came from, for messages."""

    records: Iterator[SourceRecord]
    label: str
    files: dict[str, str] | None = None  # interleaved tables: each relation's file

    def where(self, relation: str | None) -> str:
        """The file a record of ``relation`` was read from."""
        if self.files is not None and relation in self.files:
            return self.files[relation]
        return self.label


def open_inputs(
    args: argparse.Namespace,
    key_field: str | None,
    schema: Schema | None = None,
    formats: FormatRegistry = FORMATS,
    service: str | None = None,
) -> list[OpenInput]:
    """Each ``--input``'s label and records, read one after another; several TPC-H tables (``--format
    tpch``) are one interleaved source labelled by the tables' files. ``schema`` (the consuming
    service's, when known) fills in what a file leaves out. Everything that makes an input unreadable
    raises here, before any record is read."""
    inputs = input_files(args)
    options = read_options(args)
    if args.format == "tpch" and len(inputs) > 1:
        if args.relation:
            raise CliError(
                "--relation names one table; with several tpch inputs each table comes from its file name "
                "(or --input FILE:TABLE)"
            )
        formats.get_format("tpch").parse_options(options)  # it takes none: any given is an error
        from ivmstream.events.tpch import interleave_tpch, tpch_relation_of

        paths, relations = [i.path for i in inputs], [i.relation for i in inputs]
        records = interleave_tpch(paths, relations=relations, key_field=key_field)
        files = {tpch_relation_of(p, r): p for p, r in zip(paths, relations, strict=True)}
        return [OpenInput((rec for _rel, rec in records), "+".join(paths), files)]
    opened = []
    for inp in inputs:
        fmt = (args.format or formats.guess(inp.path)) if Path(inp.path).is_file() else args.format
        source = read_source(
            inp.path,
            fmt,
            relation=_relation(inp, fmt, schema, service) if fmt else inp.relation,
            key_field=key_field,
            schema=schema,
            formats=formats,
            options=options,
        )
        opened.append(OpenInput(source, inp.path))
    return opened
