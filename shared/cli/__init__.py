"""The ``ivmstream`` command: one module per subcommand, ``main`` the entry point."""

from ivmstream.cli.app import build_parser, main
from ivmstream.cli.common import CliError

__all__ = ["CliError", "build_parser", "main"]
