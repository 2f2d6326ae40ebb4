"""bench/lib/baseline_tree.py reads a commit's C extensions from its setup.py: an extension of several
sources is built as one module from all of them (a source built alone would leave its module's symbols
undefined, and the benchmark would measure that side in pure Python)."""

from __future__ import annotations

from helpers import REPO

from bench.lib.baseline_tree import declared_extensions


def test_every_extension_of_the_checkout_is_read_with_all_its_sources() -> None:
    folders, extensions = declared_extensions(REPO)
    assert folders == {"ivmstream": "shared", "ivmstream.services": "services"}
    sources = dict(extensions)
    assert len(sources) == len(extensions)  # one entry per module
    decoder = sources["ivmstream.events._fastjson"]
    assert decoder[0] == "shared/events/_fastjson.c"
    assert sorted(decoder) == sorted(
        p.relative_to(REPO).as_posix() for p in REPO.glob("shared/events/_fastjson*.c")
    )
    for name, files in extensions:
        assert files and all((REPO / f).is_file() and f.endswith(".c") for f in files), name
    built_from = [f for files in sources.values() for f in files]
    assert len(built_from) == len(set(built_from))  # no source is compiled into two modules
