"""One folder per incremental view (``services/<name>/service.py`` exposes ``SERVICE``).

A ``services/`` directory (without an ``__init__.py``) in any other ``sys.path`` entry, e.g. one named
in PYTHONPATH, adds its folders to this package, so a service kept outside this repository is found by
name like the ones here.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
