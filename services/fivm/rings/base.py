"""The payload-ring protocol every F-IVM view tree computes in (docs/fivm/rings.md §1).

A view tree is generic in its ring: counts and sums, the cofactor (covariance) ring, the relational
ring for listings, factorized payloads and matrices all plug in here. Payloads are opaque to the view
tree; it only adds, multiplies, negates, scales by multiplicities, lifts variable values and asks
whether a payload is zero (zero payloads are removed from every view).

Rings are configured once per query with the *lifted variables in the view tree's preorder* (children
in product order): block-layout rings (cofactor) rely on every subtree's lifted variables forming one
contiguous index range, and keep products ordered themselves, so ``mul(a, b) == mul(b, a)``. What a
caller must keep is that every partial product covers a contiguous range: multiplying payloads with
a gap between their ranges (or a shared variable) is an engine error (``BlockLayoutError``,
docs/fivm/rings.md §2.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

P = TypeVar("P")

JSON = Any


class Ring(Protocol[P]):
    name: str

    def zero(self) -> P:
        """The additive identity (an absent key's payload)."""
        ...

    def one(self) -> P:
        """The multiplicative identity (a base tuple's payload per copy)."""
        ...

    def add(self, a: P, b: P) -> P: ...

    def mul(self, a: P, b: P) -> P:
        """The product; commutative as seen by the caller (block rings order their blocks).

        Block rings need the two operands' lifted variables to be adjacent ranges (§1.2 of
        docs/fivm/rings.md); payloads without lifted variables combine with anything.
        """
        ...

    def neg(self, a: P) -> P: ...

    def scale(self, k: int, a: P) -> P:
        """``k`` copies of ``a`` (k may be negative); base tuples of multiplicity k: ``scale(k, one())``."""
        ...

    def is_zero(self, a: P) -> bool:
        """True iff every component is zero (never only the count: a cancelled count with non-zero sums
        is not zero, docs/fivm/rings.md §1.3)."""
        ...

    def lift(self, var: str, value: Any) -> P:
        """g_X(x): the payload a variable's value contributes when the variable is marginalized."""
        ...

    def lifts(self, var: str) -> bool:
        """Whether ``lift(var, ·)`` can differ from ``one()`` (the view tree skips trivial lifts)."""
        ...

    def encode(self, a: P) -> bytes:
        """Bytes for the state store; ``decode(encode(a)) == a`` exactly."""
        ...

    def decode(self, data: bytes) -> P: ...

    def to_json(self, a: P) -> JSON:
        """The payload as a JSON-serializable result."""
        ...


class RingFactory(Protocol):
    def __call__(self, lifted: Sequence[str], **options: Any) -> Ring[Any]:
        """A ring for a query whose lifted variables, in view-tree preorder, are ``lifted``."""
        ...
