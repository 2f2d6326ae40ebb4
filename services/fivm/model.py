"""Linear regression from a maintained cofactor payload (docs/fivm/rings.md §7).

The root of a cofactor view tree holds ``c = Σ 1``, ``s = Σ t`` and ``Q = Σ t tᵀ`` over the join,
which is the Gram matrix ``[[c, sᵀ], [s, Q]]`` of the design matrix with an intercept column. Any
label and any subset of the other variables as features give a least-squares model in O(p³) for p
parameters, independent of the data size: solve the normal equations

    (G_FF + λ·D) θ = G_Fy,   D = diag(0, 1, …, 1)   (the intercept is not penalized)

Numerics: the system is scaled to unit diagonal (Jacobi scaling, so features of very different
magnitudes do not look singular), its eigenvalues decide whether it is safely positive definite,
and then it is solved (never inverted). A singular, empty or indefinite system is a *result*
(``status`` other than ``"ok"``), not an exception: such a state is legitimate in a stream (no data
yet, a feature that is constant so far); only bad arguments raise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ivmstream.services.fivm.rings.cofactor import Cofactor, CofactorRing

DEFAULT_RCOND = 1e-12


def _statistics(stats: Mapping[str, Any] | Cofactor, ring: CofactorRing | None) -> Mapping[str, Any]:
    if isinstance(stats, Cofactor):
        if ring is None:
            raise ValueError("a cofactor payload needs its ring to name its variables")
        return ring.to_json(stats)
    return stats


def fit(
    stats: Mapping[str, Any] | Cofactor,
    label: str,
    features: Sequence[str],
    ridge: float = 0.0,
    *,
    ring: CofactorRing | None = None,
    rcond: float = DEFAULT_RCOND,
) -> dict[str, Any]:
    """Least squares (ridge ``λ`` if > 0) of ``label`` on an intercept and ``features`` (§7).

    ``stats`` is the cofactor ring's result form (``{"count", "variables", "sum", "sumprod"}``) or a
    root payload together with its ``ring``. Returns ``status`` ``"ok"`` with ``intercept`` and
    ``coefficients``; ``"empty"`` when the count is 0; ``"underdetermined"`` when the (ridged) Gram
    matrix is singular to relative tolerance ``rcond``; ``"indefinite"`` when it has clearly negative
    eigenvalues (possible only when the data has net negative multiplicities).
    """
    data = _statistics(stats, ring)
    names = list(data["variables"])
    where = {v: i for i, v in enumerate(names)}
    features = list(features)
    for v in [label, *features]:
        if v not in where:
            raise ValueError(f"unknown variable {v!r} (the cofactor result has {names})")
    if label in features or len(set(features)) != len(features):
        raise ValueError("features must be distinct and must not contain the label")
    if not (math.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"ridge must be a finite non-negative number, got {ridge!r}")

    count = int(data["count"])
    p = 1 + len(features)
    head = {"label": label, "features": features, "ridge": ridge, "count": count, "parameters": p}
    if count == 0:
        return {"status": "empty", **head, "rank": 0}

    s = np.asarray(data["sum"], dtype=np.float64)
    q = np.asarray(data["sumprod"], dtype=np.float64)
    f = [where[v] for v in features]
    y = where[label]
    gram = np.empty((p, p), dtype=np.float64)
    gram[0, 0] = count
    gram[0, 1:] = gram[1:, 0] = s[f]
    gram[1:, 1:] = q[np.ix_(f, f)]
    rhs = np.concatenate(([s[y]], q[f, y]))
    system = gram + ridge * np.diag([0.0] + [1.0] * len(features))

    diag = np.diag(system)
    if np.any(diag < 0):
        return {"status": "indefinite", **head, "rank": None}
    if np.any(diag == 0):
        if np.any(system[diag == 0]):  # a zero diagonal with a non-zero row: not semidefinite
            return {"status": "indefinite", **head, "rank": None}
        return {"status": "underdetermined", **head, "rank": _rank(system, rcond)}
    unit = 1.0 / np.sqrt(diag)
    scaled = system * unit[:, None] * unit[None, :]
    eig = np.linalg.eigvalsh(scaled)
    tol = rcond * max(float(eig[-1]), 1.0)
    if eig[0] < -tol:
        return {"status": "indefinite", **head, "rank": None}
    if eig[0] <= tol:
        return {"status": "underdetermined", **head, "rank": int(np.sum(eig > tol))}

    theta = np.linalg.solve(scaled, rhs * unit) * unit
    sse = float(q[y, y] - 2.0 * theta @ rhs + theta @ gram @ theta)
    return {
        "status": "ok",
        **head,
        "rank": p,
        "intercept": float(theta[0]),
        "coefficients": dict(zip(features, theta[1:].tolist(), strict=True)),
        "sse": sse,
        "condition": float(eig[-1] / eig[0]),
    }


def _rank(system: np.ndarray, rcond: float) -> int:
    """The numerical rank of a system with a zero diagonal entry (its rows/columns are dropped)."""
    keep = np.diag(system) != 0
    sub = system[np.ix_(keep, keep)]
    if not sub.size:
        return 0
    unit = 1.0 / np.sqrt(np.abs(np.diag(sub)))
    eig = np.linalg.eigvalsh(sub * unit[:, None] * unit[None, :])
    return int(np.sum(eig > rcond * max(float(eig[-1]), 1.0)))


def predict(model: Mapping[str, Any], row: Mapping[str, float]) -> float:
    """The model's prediction for one row of feature values."""
    if model.get("status") != "ok":
        raise ValueError(f"no model to predict with (status {model.get('status')!r})")
    coefs: Mapping[str, float] = model["coefficients"]
    return float(model["intercept"]) + sum(c * float(row[v]) for v, c in coefs.items())
