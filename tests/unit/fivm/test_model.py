"""Regression from cofactor results against least squares on the materialised data (fivm-rings.md §7)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ivmstream.services.fivm.model import fit, fit_spec, gradient_descent, predict
from ivmstream.services.fivm.rings.cofactor import CofactorRing

NAMES = ["x0", "x1", "x2", "x3"]


def cofactor_of(ring, rows, mults):
    """The cofactor payload of a bag of tuples: Σ mult · lift(t)."""
    total = ring.zero()
    for t, m in zip(rows, mults, strict=True):
        total = ring.add(total, ring.scale(int(m), ring.lift_block(ring.variables, t)))
    return total


def materialise(rows, mults, label, features):
    """Rows repeated by multiplicity, with an intercept column."""
    reps = np.repeat(np.asarray(rows, dtype=float), mults, axis=0)
    cols = [NAMES.index(f) for f in features]
    x = np.column_stack([np.ones(len(reps)), reps[:, cols]])
    return x, reps[:, NAMES.index(label)]


def close(got, want, scale=1.0):
    return np.allclose(got, want, rtol=1e-6, atol=1e-6 * scale)


def choose(data):
    label = data.draw(st.sampled_from(NAMES))
    others = [v for v in NAMES if v != label]
    features = data.draw(st.lists(st.sampled_from(others), unique=True, max_size=3))
    return label, features


@settings(max_examples=200)
@given(st.integers(0, 2**32 - 1), st.integers(8, 30), st.data())
def test_coefficients_equal_lstsq_on_the_materialised_data(seed, n, data):
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(n, 4)) * rng.choice([1e-3, 1.0, 1e3], size=4)
    mults = rng.integers(1, 4, size=n)
    label, features = choose(data)
    x, y = materialise(rows, mults, label, features)
    assume(np.linalg.cond(x / np.linalg.norm(x, axis=0)) < 1e4)  # well posed up to column scaling
    ring = CofactorRing(NAMES)
    model = fit(cofactor_of(ring, rows, mults), label, features, ring=ring)
    want = np.linalg.lstsq(x, y, rcond=None)[0]
    assert model["status"] == "ok"
    got = np.array([model["intercept"], *(model["coefficients"][f] for f in features)])
    assert close(got, want, np.abs(want).max())
    residual = y - x @ want
    assert np.isclose(model["sse"], residual @ residual, rtol=1e-6, atol=1e-6 * (y @ y))
    assert np.isclose(
        predict(model, dict(zip(NAMES, rows[0], strict=True))), x[0] @ want, rtol=1e-6, atol=1e-6
    )


@settings(max_examples=200)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.floats(0.01, 100.0), st.data())
def test_ridge_equals_the_direct_formula_without_penalising_the_intercept(seed, n, ridge, data):
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(n, 4))
    mults = rng.integers(1, 3, size=n)
    label, features = choose(data)
    x, y = materialise(rows, mults, label, features)
    penalty = ridge * np.diag([0.0] + [1.0] * len(features))
    want = np.linalg.solve(x.T @ x + penalty, x.T @ y)
    ring = CofactorRing(NAMES)
    model = fit(ring.to_json(cofactor_of(ring, rows, mults)), label, features, ridge)
    assert model["status"] == "ok"  # ridge makes even fewer rows than parameters solvable
    got = np.array([model["intercept"], *(model["coefficients"][f] for f in features)])
    assert close(got, want, np.abs(want).max())


def test_the_join_root_of_a_view_tree_fits_like_lstsq_for_every_label():
    """R(A, r) ⋈ S(A, s): the factorized root gives the same models as the flat join."""
    rng = np.random.default_rng(5)
    R = [(int(a), float(v)) for a, v in zip(rng.integers(0, 4, 25), rng.normal(size=25), strict=True)]
    S = [(int(a), float(v)) for a, v in zip(rng.integers(0, 4, 25), rng.normal(size=25), strict=True)]
    ring = CofactorRing(["A", "r", "s"])
    root = ring.zero()
    for a in range(4):
        v_r = ring.zero()
        for ka, v in R:
            if ka == a:
                v_r = ring.add(v_r, ring.lift("r", v))
        v_s = ring.zero()
        for ka, v in S:
            if ka == a:
                v_s = ring.add(v_s, ring.lift("s", v))
        root = ring.add(root, ring.mul(ring.lift("A", a), ring.mul(v_r, v_s)))
    flat = np.array([(a, r, s) for a, r in R for b, s in S if a == b], dtype=float)
    for label in range(3):
        features = [i for i in range(3) if i != label]
        x = np.column_stack([np.ones(len(flat)), flat[:, features]])
        want = np.linalg.lstsq(x, flat[:, label], rcond=None)[0]
        model = fit(root, ring.variables[label], [ring.variables[i] for i in features], ring=ring)
        got = [model["intercept"], *model["coefficients"].values()]
        assert close(got, want)


def test_collinear_or_too_few_rows_is_underdetermined_not_a_crash():
    ring = CofactorRing(NAMES)
    rows = np.array([[1.0, 2.0, 5.0, 1.0], [2.0, 4.0, 7.0, 0.0], [3.0, 6.0, 1.0, 2.0], [4.0, 8.0, 0.0, 1.0]])
    ones = np.ones(4, dtype=int)
    collinear = fit(cofactor_of(ring, rows, ones), "x2", ["x0", "x1"], ring=ring)  # x1 = 2·x0
    assert collinear["status"] == "underdetermined" and collinear["rank"] == 2
    few = fit(cofactor_of(ring, rows[:2], ones[:2]), "x2", ["x0", "x3"], ring=ring)
    assert few["status"] == "underdetermined" and few["rank"] == 2
    constant_zero = fit(
        cofactor_of(ring, rows[:, [0, 1, 2, 3]] * [1, 1, 1, 0], ones), "x2", ["x3"], ring=ring
    )
    assert constant_zero["status"] == "underdetermined" and constant_zero["rank"] == 1
    assert fit(cofactor_of(ring, rows, ones), "x2", ["x0", "x1"], 0.5, ring=ring)["status"] == "ok"


def test_empty_and_indefinite_statistics_are_results():
    ring = CofactorRing(NAMES)
    empty = fit(ring.zero(), "x0", ["x1"], ring=ring)
    assert empty["status"] == "empty" and empty["count"] == 0
    rows = np.array([[1.0, 2.0, 0, 0], [2.0, 1.0, 0, 0], [0.0, 0.0, 0, 0]])
    signed = cofactor_of(ring, rows, np.array([1, 1, -3]))  # more deletes than inserts: count -1
    assert fit(signed, "x0", ["x1"], ring=ring)["status"] == "indefinite"
    with pytest.raises(ValueError):
        predict(empty, {"x1": 1.0})


def test_bad_arguments_raise():
    ring = CofactorRing(NAMES)
    stats = ring.to_json(ring.lift_block(NAMES, [1, 2, 3, 4]))
    for label, features, ridge in (
        ("x9", [], 0.0),
        ("x0", ["x0"], 0.0),
        ("x0", ["x1", "x1"], 0.0),
        ("x0", [], -1.0),
    ):
        with pytest.raises(ValueError):
            fit(stats, label, features, ridge)
    with pytest.raises(ValueError, match="needs its ring"):
        fit(ring.one(), "x0", [])


def test_no_features_fits_the_mean():
    ring = CofactorRing(NAMES)
    rows = np.array([[1.0, 0, 0, 0], [4.0, 0, 0, 0]])
    model = fit(cofactor_of(ring, rows, np.array([1, 2])), "x0", [], ring=ring)
    assert model["status"] == "ok" and model["coefficients"] == {}
    assert np.isclose(model["intercept"], 3.0) and np.isclose(model["sse"], 6.0)


# --- batch gradient descent (the paper's §7.2) against numpy and the closed form -------------------------


@settings(max_examples=200)
@given(st.integers(0, 2**32 - 1), st.integers(8, 30), st.floats(0.0, 10.0), st.data())
def test_gradient_descent_reaches_the_least_squares_model(seed, n, ridge, data):
    """Converged descent equals numpy's solution of the same (ridge) problem on the materialised data."""
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(n, 4)) * rng.choice([1e-3, 1.0, 1e3], size=4)
    mults = rng.integers(1, 4, size=n)
    label, features = choose(data)
    x, y = materialise(rows, mults, label, features)
    assume(np.linalg.cond(x / np.linalg.norm(x, axis=0)) < 1e3)
    penalty = ridge * np.diag([0.0] + [1.0] * len(features))
    want = np.linalg.solve(x.T @ x + penalty, x.T @ y)
    ring = CofactorRing(NAMES)
    stats = ring.to_json(cofactor_of(ring, rows, mults))
    model = gradient_descent(stats, label, features, ridge, tolerance=1e-12)
    assert model["status"] == "ok" and model["method"] == "gradient-descent"
    assert 0 < model["iterations"] <= 10_000
    got = np.array([model["intercept"], *(model["coefficients"][f] for f in features)])
    assert close(got, want, np.abs(want).max())
    closed = fit(stats, label, features, ridge)
    assert np.isclose(model["sse"], closed["sse"], rtol=1e-6, atol=1e-6 * (y @ y))


def test_gradient_descent_stops_at_max_iterations_and_reports_it():
    ring = CofactorRing(NAMES)
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(40, 4))
    rows[:, 1] = rows[:, 0] + 1e-3 * rng.normal(size=40)  # nearly collinear: slow to converge
    stats = ring.to_json(cofactor_of(ring, rows, np.ones(40, dtype=int)))
    model = gradient_descent(stats, "x2", ["x0", "x1", "x3"], tolerance=1e-14, max_iterations=2)
    assert model["status"] == "not converged" and model["iterations"] == 2
    assert gradient_descent(ring.zero(), "x0", ["x1"], ring=ring)["status"] == "empty"
    with pytest.raises(ValueError):
        gradient_descent(stats, "x0", ["x1"], tolerance=0.0)
    with pytest.raises(ValueError):
        gradient_descent(stats, "x0", ["x1"], max_iterations=0)


def test_fit_spec_picks_the_method():
    ring = CofactorRing(NAMES)
    rng = np.random.default_rng(4)
    stats = ring.to_json(cofactor_of(ring, rng.normal(size=(20, 4)), np.ones(20, dtype=int)))
    closed = fit_spec(stats, {"label": "x0", "ridge": 0.5}, ["x1", "x2"])
    descent = fit_spec(
        stats, {"label": "x0", "ridge": 0.5, "method": "gradient-descent", "tolerance": 1e-12}, ["x1", "x2"]
    )
    assert "method" not in closed and descent["method"] == "gradient-descent"
    assert close(list(descent["coefficients"].values()), list(closed["coefficients"].values()))
