"""``ivmstream sql``: views compiled from one SQL file (the SQL front end, ``ivmstream.sql``)."""

from __future__ import annotations

from ivmstream.sql.command import register

__all__ = ["register"]
