"""``python -m ivmstream.cli``: the same command as the ``ivmstream`` script."""

import sys

from ivmstream.cli.app import main

sys.exit(main())
