"""The services of this repository, one folder each (``<name>/service.py`` exposes ``SERVICE``),
installed as ``ivmstream.services.<name>``.

A service kept in another distribution is found by name through the ``ivmstream.services``
entry-point group instead (``ivmstream.service.available_services``).
"""
