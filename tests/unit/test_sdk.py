"""The service-author API: every exported name exists, and importing it pulls in no client library,
so engines that import it stay pure at run time too (the engines-pure contract checks the imports)."""

from __future__ import annotations

import subprocess
import sys

import ivmstream.sdk
import ivmstream.sdk.batch


def test_every_exported_name_exists() -> None:
    for module in (ivmstream.sdk, ivmstream.sdk.batch):
        assert len(set(module.__all__)) == len(module.__all__)
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert not missing, (module.__name__, missing)


def test_importing_the_sdk_loads_no_client_library() -> None:
    probe = (
        "import sys, ivmstream.sdk; "
        "print(sorted(m for m in ('pyspark', 'confluent_kafka', 'redis', 'rocksdict') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
