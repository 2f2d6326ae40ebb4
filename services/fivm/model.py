"""Linear regression from a maintained cofactor payload (docs/fivm/rings.md §7).

The root of a cofactor view tree holds ``c = Σ 1``, ``s = Σ t`` and ``Q = Σ t tᵀ`` over the join,
which is the Gram matrix ``[[c, sᵀ], [s, Q]]`` of the design matrix with an intercept column. Any
label and any subset of the other variables as features give a least-squares model in O(p³) for p
parameters, independent of the data size: solve the normal equations

    (G_FF + λ·D) θ = G_Fy,   D = diag(0, 1, …, 1)   (the intercept is not penalized)

Numerics: the system is scaled to unit diagonal (Jacobi scaling, so features of very different
magnitudes do not look singular), its eigenvalues decide whether it is safely positive definite,
and then it is solved (never inverted).

``gradient_descent`` reaches the same model the way the F-IVM paper trains it (its §7.2): batch
gradient descent ``θ := θ - step·Σθ`` over the Gram matrix Σ with the label's parameter held at -1,
each step O(p²) and independent of the data, until the gradient vanishes (relative to the first
step's). It exists beside the closed form so the two can be compared; ``fit_spec`` picks by the
service's ``model.method``. A singular, empty or indefinite system is a *result*
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
DEFAULT_TOLERANCE = 1e-9
DEFAULT_MAX_ITERATIONS = 10_000
METHODS = ("closed-form", "gradient-descent")


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
    head, gram, rhs, penalty, qyy = _system(stats, label, features, ridge, ring)
    if gram is None:
        return {"status": "empty", **head, "rank": 0}
    system = gram + penalty
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
    sse = float(qyy - 2.0 * theta @ rhs + theta @ gram @ theta)
    return {
        "status": "ok",
        **head,
        "rank": head["parameters"],
        "intercept": float(theta[0]),
        "coefficients": dict(zip(head["features"], theta[1:].tolist(), strict=True)),
        "sse": sse,
        "condition": float(eig[-1] / eig[0]),
    }


def _system(
    stats: Mapping[str, Any] | Cofactor,
    label: str,
    features: Sequence[str],
    ridge: float,
    ring: CofactorRing | None,
) -> tuple[dict[str, Any], Any, Any, Any, Any]:
    """The checked arguments' head, and (Gram over intercept+features, right-hand side, penalty, Q_yy)
    or Nones when the count is 0."""
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
        return head, None, None, None, None
    s = np.asarray(data["sum"], dtype=np.float64)
    q = np.asarray(data["sumprod"], dtype=np.float64)
    f = [where[v] for v in features]
    y = where[label]
    gram = np.empty((p, p), dtype=np.float64)
    gram[0, 0] = count
    gram[0, 1:] = gram[1:, 0] = s[f]
    gram[1:, 1:] = q[np.ix_(f, f)]
    rhs = np.concatenate(([s[y]], q[f, y]))
    penalty = ridge * np.diag([0.0] + [1.0] * len(features))
    return head, gram, rhs, penalty, float(q[y, y])


def gradient_descent(
    stats: Mapping[str, Any] | Cofactor,
    label: str,
    features: Sequence[str],
    ridge: float = 0.0,
    *,
    ring: CofactorRing | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> dict[str, Any]:
    """The model of ``fit`` by batch gradient descent over the Gram matrix (the paper's §7.2).

    θ covers the intercept, the features and the label, whose parameter stays -1 (the paper's footnote),
    so the gradient of ½‖Mθ‖² + ½λ‖θ_F‖² over the free parameters is ``(Σθ)_free + λ·θ_F``
    (= ``A·θ_free - b`` with ``A``, ``b`` the normal equations of ``fit``). The parameters are Jacobi
    scaled like ``fit``'s system; the step size is Barzilai and Borwein's (the first step an exact line
    search), O(p²) per iteration. Converged when ‖gradient‖ ≤ ``tolerance``·‖first gradient‖;
    ``status`` ``"not converged"`` after ``max_iterations``. ``iterations`` counts the steps."""
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"tolerance must be a positive number, got {tolerance!r}")
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
        raise ValueError(f"max_iterations must be a positive integer, got {max_iterations!r}")
    head, gram, rhs, penalty, qyy = _system(stats, label, features, ridge, ring)
    head["method"] = "gradient-descent"
    if gram is None:
        return {"status": "empty", **head, "rank": 0, "iterations": 0}
    system = gram + penalty
    diag = np.diag(system)
    if np.any(diag <= 0):
        return _stalled(float(diag.min()), head, 0)
    unit = 1.0 / np.sqrt(diag)
    a = system * unit[:, None] * unit[None, :]
    b = rhs * unit
    theta = np.zeros_like(b)
    grad = a @ theta - b
    first = float(np.linalg.norm(grad))
    iterations = 0
    converged = first == 0.0
    prev_theta = prev_grad = None
    while not converged and iterations < max_iterations:
        if prev_theta is None:
            ag = a @ grad
            curv = float(grad @ ag)
            if curv <= 0:
                return _stalled(curv, head, iterations)
            alpha = float(grad @ grad) / curv
        else:
            ds, dg = theta - prev_theta, grad - prev_grad
            curv = float(ds @ dg)
            if curv <= 0:
                return _stalled(curv, head, iterations)
            alpha = float(ds @ ds) / curv
        prev_theta, prev_grad = theta, grad
        theta = theta - alpha * grad
        grad = a @ theta - b
        iterations += 1
        converged = float(np.linalg.norm(grad)) <= tolerance * first
    theta = theta * unit
    sse = float(qyy - 2.0 * theta @ rhs + theta @ gram @ theta)
    return {
        "status": "ok" if converged else "not converged",
        **head,
        "rank": None,
        "intercept": float(theta[0]),
        "coefficients": dict(zip(head["features"], theta[1:].tolist(), strict=True)),
        "sse": sse,
        "iterations": iterations,
        "tolerance": tolerance,
    }


def _stalled(curvature: float, head: dict[str, Any], iterations: int) -> dict[str, Any]:
    """No descent along the gradient: a flat direction (a singular system) or a negative one."""
    status = "indefinite" if curvature < 0 else "underdetermined"
    return {"status": status, **head, "rank": None, "iterations": iterations}


def fit_spec(
    stats: Mapping[str, Any] | Cofactor, spec: Mapping[str, Any], features: Sequence[str]
) -> dict[str, Any]:
    """The service's ``model`` option applied: ``method`` closed-form (``fit``, the default) or
    gradient-descent (with its ``tolerance`` and ``max_iterations``)."""
    if spec.get("method", "closed-form") == "gradient-descent":
        return gradient_descent(
            stats,
            spec["label"],
            features,
            spec.get("ridge", 0.0),
            tolerance=spec.get("tolerance", DEFAULT_TOLERANCE),
            max_iterations=spec.get("max_iterations", DEFAULT_MAX_ITERATIONS),
        )
    return fit(stats, spec["label"], features, spec.get("ridge", 0.0))


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
