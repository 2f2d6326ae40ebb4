"""The compiled update-event decoder and dead-letter loop; everything else about the package is in
pyproject.toml.

Optional: without a C compiler the package still installs and decodes in Python (slower). `make setup`
installs gcc where it is missing, and the test suite checks that the extension was built.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "shared.events._fastjson",
            sources=["shared/events/_fastjson.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
        ),
        Extension(
            "shared.runtime._deadletters",
            sources=["shared/runtime/_deadletters.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
        ),
    ]
)
