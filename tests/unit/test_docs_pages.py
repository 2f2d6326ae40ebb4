"""The documentation's shape: one folder per service with the same pages, every relative link of
README.md and docs/ pointing at a file that exists, and docs/benchmarks.md naming every script
`make bench` runs."""

from __future__ import annotations

import re
from pathlib import Path

from ivmstream.service import available_services

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"^```.*?^```$|`[^`\n]*`", re.S | re.M)  # code blocks and inline code: not links


def test_every_service_has_its_folder_of_pages() -> None:
    for name in available_services():
        if not (ROOT / "services" / name).is_dir():
            continue  # a service from another distribution documents itself
        pages = {p.name for p in (DOCS / name).glob("*.md")}
        expected = {"index.md", "algorithm.md"} | ({"benchmark.md"} if name != "reference" else set())
        assert expected <= pages, f"docs/{name}/ lacks {sorted(expected - pages)}"
        index = (DOCS / "README.md").read_text()
        assert f"]({name}/index.md)" in index, f"docs/README.md does not link docs/{name}/index.md"


def test_relative_links_point_at_files_that_exist() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for target in LINK.findall(CODE.sub("", page.read_text())):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a URL or an anchor of the same page
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, f"links to files that do not exist: {broken}"


def test_benchmarks_page_names_every_script_make_bench_runs() -> None:
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^bench:.*?\n((?:\t.*\n)+)", makefile, re.M)
    assert target is not None
    scripts = re.findall(r"bench/\w+\.py", target.group(1))
    assert scripts
    section = (
        (DOCS / "benchmarks.md").read_text().split("## What `make bench` runs", 1)[1].split("\n## ", 1)[0]
    )
    missing = [s for s in scripts if f"`{s}`" not in section]
    assert not missing, f"docs/benchmarks.md, 'What `make bench` runs', does not name {missing}"
