"""matplotlib with the Agg backend, imported when this module is: a script imports it before it starts
any clock, so a plot's import never lands inside a measurement."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import matplotlib.ticker as ticker

__all__ = ["matplotlib", "plt", "ticker"]
