"""How the repository's folders map onto the one installed import package, ``ivmstream``, and the
compiled event decoder, dead-letter loop and triangle kernels; everything else about the package is in
pyproject.toml.

``shared/`` is the platform, installed as ``ivmstream``; ``services/`` holds the services, installed
as ``ivmstream.services``. The C extensions are optional: without a C compiler the package still
installs, decodes and counts triangles in Python (slower). `make setup` installs gcc where it is
missing, and the test suite checks that the extensions were built.
"""

from setuptools import Extension, find_namespace_packages, setup

FOLDERS = {"ivmstream": "shared", "ivmstream.services": "services"}


def _packages() -> list[str]:
    """Every folder under each root, data folders included (their files are package data)."""
    found = []
    for package, folder in FOLDERS.items():
        found.append(package)
        found += [f"{package}.{sub}" for sub in find_namespace_packages(folder, exclude=["*__pycache__*"])]
    return found


def _extension(name: str, *files: str) -> Extension:
    """An extension from its C sources and the project headers they include (so a change rebuilds it)."""
    return Extension(
        name,
        sources=[f for f in files if f.endswith(".c")],
        depends=[f for f in files if f.endswith(".h")],
        optional=True,
        extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
    )


def _vectorized(ext: Extension) -> Extension:
    """-O3 for loops the compiler vectorizes (element-wise IEEE products: the same bits, no reassociation)."""
    ext.extra_compile_args = [*ext.extra_compile_args, "-O3"]
    return ext


setup(
    package_dir=FOLDERS,
    packages=_packages(),
    ext_modules=[
        _extension(
            "ivmstream.events._fastjson",
            "shared/events/_fastjson.c",
            "shared/events/_fastjson_record.c",
            "shared/events/_fastjson_refusal.c",
            "shared/events/_fastjson_errors.c",
            "shared/events/_fastjson_changes.c",
            "shared/events/_fastjson_batch.c",
            "shared/events/_fastjson.h",
        ),
        _extension("ivmstream.runtime._deadletters", "shared/runtime/_deadletters.c"),
        _extension("ivmstream.state._staging", "shared/state/_staging.c"),
        _extension("ivmstream._backed_map", "shared/_backed_map.c"),
        _extension("ivmstream.services.triangles._kernels", "services/triangles/_kernels.c"),
        _extension(
            "ivmstream.services.triangles._graph_kernels",
            "services/triangles/_graph_kernels.c",
            "services/triangles/_graph_sets.h",
        ),
        _extension(
            "ivmstream.services.vwap._kernels",
            "services/vwap/_kernels.c",
            "services/vwap/_level_sums.c",
            "services/vwap/_level_tree.c",
            "services/vwap/_bag_entries.c",
            "services/vwap/_kernels.h",
        ),
        _extension(
            "ivmstream.services.reservoir._kernels",
            "services/reservoir/_kernels.c",
            "services/reservoir/_weights.c",
            "services/reservoir/_batches.c",
            "services/reservoir/_arrivals.c",
            "services/reservoir/_sample_rows.c",
            "services/reservoir/_kernels.h",
            "services/reservoir/_capi.h",
        ),
        _extension(
            "ivmstream.services.reservoir._exact_kernels",
            "services/reservoir/_exact_kernels.c",
            "services/reservoir/_fenwick.c",
            "services/reservoir/_exact_kernels.h",
            "services/reservoir/_capi.h",
        ),
        _vectorized(
            _extension(
                "ivmstream.services.fivm._kernels",
                "services/fivm/_kernels.c",
                "services/fivm/_products.c",
                "services/fivm/_payloads.c",
                "services/fivm/_views.c",
                "services/fivm/_entries.c",
                "services/fivm/_intake.c",
                "services/fivm/_kernels.h",
            )
        ),
        _extension(
            "ivmstream.services.reference._kernels",
            "services/reference/_kernels.c",
            "services/reference/_bag_rows.c",
            "services/reference/_decimals.c",
            "services/reference/_kernels.h",
        ),
    ],
)
