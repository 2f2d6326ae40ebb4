"""The recognisers tried before fivm, most specific first; each returns a plan or None."""

from __future__ import annotations

from collections.abc import Callable

from ivmstream.sql.analyze import Shape
from ivmstream.sql.fivm_lifts import plan_lifted
from ivmstream.sql.model import Script
from ivmstream.sql.nested import plan_nested
from ivmstream.sql.plan import ViewPlan
from ivmstream.sql.recognisers import plan_reservoir, plan_sketches, plan_triangles

Recogniser = Callable[[Shape, Script], ViewPlan | None]


def _nested(shape: Shape, script: Script) -> ViewPlan | None:
    return plan_nested(shape, script) if shape.nested else None


RECOGNISERS: list[Recogniser] = [plan_sketches, plan_reservoir, _nested, plan_triangles, plan_lifted]
