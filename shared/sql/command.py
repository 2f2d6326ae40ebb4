"""The ``ivmstream sql`` subcommand: explain, replay (and run/produce over Kafka) from one SQL file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# The compiler's modules (sqlglot, the services) load when a verb runs, not when the CLI starts.


def _inputs(items: list[str] | None) -> dict[str, str]:
    from ivmstream.sql.errors import SqlError

    out: dict[str, str] = {}
    for item in items or []:
        table, sep, path = item.partition("=")
        if not sep or not table or not path:
            raise SqlError(f"--input {item!r}: expected TABLE=PATH")
        out[table.lower()] = path
    return out


def cmd_explain(args: argparse.Namespace) -> int:
    from ivmstream.sql.explain import explain_json, explain_text
    from ivmstream.sql.load import load_script
    from ivmstream.sql.routing import plan_script

    script = load_script(args.file)
    plans = plan_script(script, args.view)
    if args.json:
        for line in explain_json(plans):
            print(line)
    else:
        print(explain_text(plans))
    return 0


def _print(results: list[dict[str, Any]], after: int | None = None) -> None:
    for obj in results:
        out = {**obj, "after": after} if after is not None else obj
        print(json.dumps(out, default=str))
    sys.stdout.flush()


def cmd_replay(args: argparse.Namespace) -> int:
    from ivmstream.sql.inputs import InputChoice
    from ivmstream.sql.load import load_script
    from ivmstream.sql.replay import replay_script
    from ivmstream.sql.routing import plan_script

    script = load_script(args.file)
    plans = plan_script(script, args.view)
    choice = InputChoice(_inputs(args.input), args.dataset, Path.cwd())
    results = replay_script(
        script, plans, choice, args.every, (lambda res, n: _print(res, n)) if args.every else None
    )
    _print(results)
    return 0


def register(sub: Any) -> None:
    """Register ``ivmstream sql`` and its subcommands on the CLI's subparsers."""
    p = sub.add_parser("sql", help="compile views from one SQL file and explain, replay or run them")
    verbs = p.add_subparsers(dest="sql_command", required=True, metavar="VERB")

    e = verbs.add_parser("explain", help="per view: service, strategy, why, plan and cost")
    e.add_argument("file", help="the SQL file")
    e.add_argument("--view", help="only this view")
    e.add_argument("--json", action="store_true", help="one JSON object per view")
    e.set_defaults(func=cmd_explain)

    r = verbs.add_parser("replay", help="run the views over their FROM FILE inputs; one JSON line per view")
    r.add_argument("file", help="the SQL file")
    r.add_argument("--view", help="only this view")
    r.add_argument("--every", type=int, help="also print every view's rows after every N input events")
    r.add_argument("--input", action="append", metavar="TABLE=PATH", help="read TABLE from PATH (repeatable)")
    r.add_argument(
        "--dataset",
        help="read data set NAME where a FROM FILE path names 'standard' (DBToaster's test convention; "
        "a *_del data set is read in the deletions format)",
    )
    r.set_defaults(func=cmd_replay)
