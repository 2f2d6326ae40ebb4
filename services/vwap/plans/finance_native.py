"""The crosscheck plan (docs/vwap/algorithm.md §5.3) on the compiled level tree (``_kernels.LevelTree``):
price -> (W, PV) in one treap over arrays, with the prefix descent and suffix sum of ``result`` in C.

It holds integer prices, weights and payloads while every sum stays within 2^62. The first value outside
that (a decimal, a negative price, a sum that large) moves the plan to the Python trees of
``CrossCheckPlan``, built from the levels it holds, where it continues exactly; the answer is the same
either way (tests/unit/vwap/test_vwap_kernels.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ivmstream.services.vwap import kernels
from ivmstream.services.vwap.exact import to_json
from ivmstream.services.vwap.plans.base import LevelChanges, Row
from ivmstream.services.vwap.plans.finance_rpai import CrossCheckPlan, make_crosscheck_plan
from ivmstream.services.vwap.trees.rpai import RPAITree


class NativeCrossCheckPlan(CrossCheckPlan):
    def __init__(self, params: Mapping[str, Any], paper: bool) -> None:
        super().__init__(params, paper)
        assert kernels.compiled is not None  # chosen only where the kernels are built
        self.levels: Any = kernels.compiled.LevelTree()  # None once the plan runs on the Python trees

    def _to_python(self) -> None:
        self._python_trees(self.levels.items())

    def _python_trees(self, items: list[tuple[Any, Any, Any]]) -> None:
        self.w = RPAITree.from_sorted((p, w) for p, w, _pv in items)
        self.pv = RPAITree.from_sorted((p, pv) for p, _w, pv in items)
        self.levels = None

    def __getstate__(self) -> dict[str, Any]:
        # the compiled tree does not pickle: copies (deepcopy, pickle) carry its levels as a list
        state = self.__dict__.copy()
        if self.levels is not None:
            state["levels"] = self.levels.items()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        items = state["levels"]
        if items is None:
            return
        if kernels.compiled is None:  # restored where the kernels are not built
            self._python_trees(items)
            return
        tree = kernels.compiled.LevelTree()
        for p, w, pv in items:
            tree.add(p, w, pv)
        self.levels = tree

    def update(self, rel: str, row: Row, mult: int) -> None:
        if self.levels is None or rel != "bids":
            super().update(rel, row, mult)
            return
        p = row["price"]
        w = row["volume"]
        c = self.cnt.get(p, 0) + mult
        try:
            if c:
                self.levels.add(p, mult * w, mult * p * w)
            else:
                self.levels.delete(p)
        except OverflowError:
            self._to_python()
            super().update(rel, row, mult)
            return
        self.total += mult * w
        if c:
            self.cnt[p] = c
        else:
            del self.cnt[p]

    def apply_levels(self, rel: str, changes: LevelChanges) -> None:
        if self.levels is None or rel != "bids":
            super().apply_levels(rel, changes)
            return
        if type(changes) is dict:  # the engine's netted levels: the loop below, in C
            applied, self.total = self.levels.apply_netted(self.cnt, changes, self.total)
            if applied < len(changes):  # a level the tree cannot hold: the rest on the Python trees
                self._to_python()
                super().apply_levels(rel, dict(list(changes.items())[applied:]))
            return
        cnt = self.cnt
        levels = self.levels
        items = list(changes.items())
        for i, (p, (dc, dw)) in enumerate(items):
            old = cnt.get(p, 0)
            c = old + dc
            if (not c and not old) or (not dc and not dw):
                continue
            try:
                if c:
                    levels.add(p, dw, p * dw)
                else:
                    levels.delete(p)
            except OverflowError:
                self._to_python()
                super().apply_levels(rel, dict(items[i:]))
                return
            self.total += dw
            if c:
                cnt[p] = c
            else:
                del cnt[p]

    def load_levels(self, levels: Mapping[str, list[tuple[Any, Any, int, Any]]]) -> None:
        assert kernels.compiled is not None
        tree = kernels.compiled.LevelTree()
        try:
            for p, w, _c, pv in levels["bids"]:
                tree.add(p, w, pv)
        except OverflowError:
            super().load_levels(levels)
            self.levels = None
            return
        self.levels = tree
        bids = levels["bids"]
        self.cnt = {p: c for p, _w, c, _pv in bids}
        self.total = sum((w for _p, w, _c, _pv in bids), 0)

    def load_netted(self, netted: Mapping[str, Mapping[Any, list[Any]]]) -> bool:
        """From an empty book: the live levels of a batch netted per price (price -> [count, W]), sorted
        and built into the level tree in C. False, the plan unchanged, where a level is not one the tree
        holds (the engine then builds the plan from the sorted levels in Python)."""
        if self.levels is None or len(self.levels) or self.cnt or set(netted) - {"bids"}:
            return False
        try:
            self.cnt, self.total = self.levels.load_netted(netted.get("bids", {}))
        except OverflowError:
            return False
        return True

    def result(self) -> Any:
        if self.levels is None:
            return super().result()
        if not self.cnt:
            return {"vwap": 0}
        star = self.levels.min_key_prefix_gt(self._g_num * self.total // self._g_den)
        return {"vwap": to_json(0 if star is None else self.levels.suffix_ge(star))}

    def stats(self) -> dict[str, float]:
        out = super().stats()
        out["native_levels"] = float(self.levels is not None)
        return out

    def trees(self) -> list[RPAITree]:
        return [] if self.levels is not None else super().trees()


def make_plan(query: str, params: Mapping[str, Any]) -> Any:
    """The crosscheck plan: on the compiled level tree where the kernels are active, else on the Python
    trees."""
    plan = make_crosscheck_plan(query, params)  # refuses a query crosscheck does not support
    if kernels.ACTIVE == "compiled":
        return NativeCrossCheckPlan(params, paper=query == "vwap-paper")
    return plan
