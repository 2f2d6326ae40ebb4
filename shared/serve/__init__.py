"""``ivmstream serve``: the published results over HTTP (``create_app``, ``Server``)."""

from ivmstream.serve.app import create_app
from ivmstream.serve.server import Server, open_sources

__all__ = ["Server", "create_app", "open_sources"]
