"""``ivmstream serve``: the published results of every view over HTTP (``ivmstream.serve``)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from ivmstream.cli.common import CliError

TOKEN_ENV = "IVMSTREAM_SERVE_TOKEN"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="serve every view's results over HTTP: lookups, key lists, history, server-sent events",
        description="GET /v1/{service}/results, /v1/{service}/results/{key}, /v1/{service}/history/{key} "
        "(with --postgres) and /v1/{service}/subscribe[?key=K] (server-sent events); the OpenAPI "
        "document at /openapi.json. Lookups and subscriptions read Redis when given, else PostgreSQL.",
    )
    p.add_argument("--redis", help="Redis URL the workers publish to (--redis of `ivmstream run`)")
    p.add_argument("--postgres", metavar="DSN", help="PostgreSQL DSN the workers upsert into (--postgres)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    p.add_argument(
        "--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM; with --tls-key)"
    )
    p.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from ivmstream.secrets import from_env
    from ivmstream.serve.server import Server, Tls, build

    if not args.redis and not args.postgres:
        raise CliError("give --redis, --postgres or both: where the workers publish their results")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise CliError("--tls-cert and --tls-key go together")
    token = from_env(TOKEN_ENV)  # a bearer token every /v1 request must carry (or the file _FILE names)
    app = build(args.redis, args.postgres, token)
    tls = Tls(args.tls_cert, args.tls_key) if args.tls_cert else None
    server = Server(app, args.host, args.port, tls)
    logging.getLogger("ivmstream").info(
        "serving results on %s://%s:%d (%s)%s",
        "https" if tls else "http",
        args.host,
        args.port,
        " and ".join(n for n, given in (("Redis", args.redis), ("PostgreSQL", args.postgres)) if given),
        ", bearer token required" if token else "",
    )
    server.run()
    return 0
