"""``--input`` and its reading flags, shared by ``replay`` and ``produce``: files opened through the formats
registry."""

from __future__ import annotations

import argparse
import itertools
import textwrap
from typing import Any

from ivmstream.cli.common import CliError
from ivmstream.events import FORMATS, FormatRegistry, Schema, read_source
from ivmstream.events.formats import parse_assignments

# Flags kept beside --read-option: each is an alias of the read option of the same name.
_READ_OPTION_ALIASES = ("book", "brokers", "delimiter")


def add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        required=True,
        action="append",
        help="input file; repeatable: read one after another (--format tpch: tables interleaved by size)",
    )
    p.add_argument(
        "--format",
        metavar="FORMAT",
        help=f"input format: {', '.join(FORMATS)} or one of the service's own (default: from the file "
        "suffix; see the list below)",
    )
    p.add_argument(
        "--relation",
        help="relation of a csv or tbl file's rows (tbl default: the file name up to its first dot); "
        "tpch: the table (default: from the file name)",
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


def open_inputs(
    args: argparse.Namespace,
    key_field: str | None,
    schema: Schema | None = None,
    formats: FormatRegistry = FORMATS,
) -> tuple[Any, str]:
    """Records of ``--input`` and a label for messages: one file, several files one after another (each
    ``.tbl`` or ``.csv`` table's relation from its name unless ``--relation`` is given), or several
    TPC-H tables interleaved. ``schema`` (the consuming service's, when known) fills in what a file
    leaves out."""
    inputs: list[str] = args.input
    options = read_options(args)
    if args.format != "tpch" or len(inputs) == 1:
        sources = [
            read_source(
                path,
                args.format,
                relation=args.relation,
                key_field=key_field,
                schema=schema,
                formats=formats,
                options=options,
            )
            for path in inputs
        ]
        return (sources[0] if len(sources) == 1 else itertools.chain.from_iterable(sources)), "+".join(inputs)
    if args.relation:
        raise CliError(
            "--relation names one table; with several tpch inputs each table comes from its file name"
        )
    formats.get_format("tpch").parse_options(options)  # it takes none: any given is an error
    from ivmstream.events.tpch import interleave_tpch

    return (rec for _rel, rec in interleave_tpch(inputs, key_field=key_field)), "+".join(inputs)
