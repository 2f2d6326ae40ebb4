"""``python -m deploy``: rewrite every generated deployment file; ``--check``: list the stale ones."""

from __future__ import annotations

import argparse
import sys

from deploy.services import REPO, deployable_services


def generated_files() -> dict[str, str]:
    from deploy.chart import chart_files
    from deploy.compose import compose_files
    from deploy.dashboards import dashboard_files

    services = deployable_services()
    files = compose_files(services)
    files.update(chart_files(services))
    files.update(dashboard_files(services))
    return files


def stale_files() -> list[str]:
    stale = []
    for path, content in generated_files().items():
        target = REPO / path
        if not target.is_file() or target.read_text() != content:
            stale.append(path)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only list the files that differ")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for path in stale:
            print(f"stale: {path}")
        return 1 if stale else 0
    for path, content in generated_files().items():
        target = REPO / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_text() != content:
            target.write_text(content)
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
