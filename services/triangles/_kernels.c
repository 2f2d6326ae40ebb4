/* The per-update loops of the triangle engines, compiled: sparse dot products over index rows and the
 * view steps of IVM^eps (services/triangles/kernels.py holds the same functions in Python, the
 * reference these are tested against and the fallback where this is not built).
 *
 * Rows are dicts {value: multiplicity}, an index is a dict {value: row}, a view is a dict
 * {(x, z): count}; `bump` updates an index entry in place. Multiplicities are Python ints of any
 * size: products and sums run in 64-bit integers while they fit and switch to Python's integer
 * arithmetic as soon as one would overflow, so every result equals the Python loop's. A view step reproduces the Python loop's dict operations one
 * for one (a delete pops the entry and stores a surviving value back; an insert updates in place), so
 * even the views' iteration order is the same.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* --- exact integer arithmetic with a 64-bit fast path ------------------------------------------- */

/* Σ of products: `small` while it fits in 64 bits, `big` (a Python number, NULL for 0) beyond. */
typedef struct {
    long long small;
    PyObject *big;
} Sum;

static int as_small(PyObject *v, long long *out) {
    if (!PyLong_CheckExact(v)) return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

/* base + a*b as a new reference; base NULL means 0. */
static PyObject *plus_product(PyObject *base, PyObject *a, PyObject *b) {
    long long x, y, z = 0, p, s;
    if (as_small(a, &x) && as_small(b, &y) && (base == NULL || as_small(base, &z)) &&
        !__builtin_mul_overflow(x, y, &p) && !__builtin_add_overflow(z, p, &s))
        return PyLong_FromLongLong(s);
    PyObject *prod = PyNumber_Multiply(a, b);
    if (prod == NULL || base == NULL) return prod;
    PyObject *out = PyNumber_Add(base, prod);
    Py_DECREF(prod);
    return out;
}

static int sum_add(Sum *sum, PyObject *a, PyObject *b) {
    long long x, y, p, s;
    if (as_small(a, &x) && as_small(b, &y) && !__builtin_mul_overflow(x, y, &p) &&
        !__builtin_add_overflow(sum->small, p, &s)) {
        sum->small = s;
        return 0;
    }
    PyObject *out = plus_product(sum->big, a, b);
    if (out == NULL) return -1;
    Py_XSETREF(sum->big, out);
    return 0;
}

static PyObject *sum_finish(Sum *sum) {
    PyObject *small = PyLong_FromLongLong(sum->small);
    if (small == NULL || sum->big == NULL) {
        Py_XDECREF(sum->big);
        return small;
    }
    PyObject *out = PyNumber_Add(sum->big, small);
    Py_DECREF(small);
    Py_DECREF(sum->big);
    return out;
}

static int positional(const char *name, Py_ssize_t nargs, Py_ssize_t expected) {
    if (nargs == expected) return 1;
    PyErr_Format(PyExc_TypeError, "%s expected %zd arguments, got %zd", name, expected, nargs);
    return 0;
}

static int need_dict(PyObject *v, const char *what) {
    if (PyDict_Check(v)) return 1;
    PyErr_Format(PyExc_TypeError, "%s must be a dict, not %.100s", what, Py_TYPE(v)->tp_name);
    return 0;
}

/* --- sparse dot products ------------------------------------------------------------------------ */

/* Σ_c walk[c]·probe[c], walking `walk` and probing `probe`. */
static PyObject *k_dot(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("dot", nargs, 2)) return NULL;
    PyObject *walk = args[0], *probe = args[1];
    if (!need_dict(walk, "walk") || !need_dict(probe, "probe")) return NULL;
    Sum sum = {0, NULL};
    Py_ssize_t pos = 0;
    PyObject *c, *a;
    while (PyDict_Next(walk, &pos, &c, &a)) {
        PyObject *b = PyDict_GetItemWithError(probe, c);
        if (b == NULL) {
            if (PyErr_Occurred()) goto fail;
            continue;
        }
        if (sum_add(&sum, a, b) < 0) goto fail;
    }
    return sum_finish(&sum);
fail:
    Py_XDECREF(sum.big);
    return NULL;
}

/* Σ_c walk[c]·index[c][x], walking `walk` and probing the index's rows at x. */
static PyObject *k_probe_dot(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("probe_dot", nargs, 3)) return NULL;
    PyObject *walk = args[0], *index = args[1], *x = args[2];
    if (!need_dict(walk, "walk") || !need_dict(index, "index")) return NULL;
    Sum sum = {0, NULL};
    Py_ssize_t pos = 0;
    PyObject *c, *a;
    while (PyDict_Next(walk, &pos, &c, &a)) {
        PyObject *row = PyDict_GetItemWithError(index, c);
        if (row == NULL) {
            if (PyErr_Occurred()) goto fail;
            continue;
        }
        if (!need_dict(row, "an index row")) goto fail;
        PyObject *b = PyDict_GetItemWithError(row, x);
        if (b == NULL) {
            if (PyErr_Occurred()) goto fail;
            continue;
        }
        if (sum_add(&sum, a, b) < 0) goto fail;
    }
    return sum_finish(&sum);
fail:
    Py_XDECREF(sum.big);
    return NULL;
}

/* --- view steps ------------------------------------------------------------------------------------ */

/* view[key] += a·b, as the Python loop does it: with `pop` (delete, then store a surviving value back)
 * when `popping`, else in place (a value that reaches 0 is deleted). Steals the reference to `key`. */
static int view_add(PyObject *view, PyObject *key, PyObject *a, PyObject *b, int popping) {
    int rc = -1;
    PyObject *old = PyDict_GetItemWithError(view, key);
    if (old == NULL && PyErr_Occurred()) goto done;
    Py_XINCREF(old);
    if (popping && old != NULL && PyDict_DelItem(view, key) < 0) goto done_old;
    PyObject *nv = plus_product(old, a, b);
    if (nv == NULL) goto done_old;
    int nonzero = PyObject_IsTrue(nv);
    if (nonzero < 0)
        rc = -1;
    else if (nonzero)
        rc = PyDict_SetItem(view, key, nv);
    else
        rc = popping ? 0 : PyDict_DelItem(view, key);
    Py_DECREF(nv);
done_old:
    Py_XDECREF(old);
done:
    Py_DECREF(key);
    return rc;
}

static int is_negative(PyObject *m) {
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL) return -1;
    int neg = PyObject_RichCompareBool(m, zero, Py_LT);
    Py_DECREF(zero);
    return neg;
}

/* The loop both passes share, in their Python loops' order of operations. For every (c, w) in walk:
 * light, view[(c, fixed)] += w·m, fused with Σ_c probe[c]·w (probe NULL: no sum, 0);
 * heavy, view[(fixed, c)] += m·w, fused with Σ_c w·probe[c][fixed]. Returns the sum. */
static PyObject *view_pass(PyObject *view, PyObject *walk, PyObject *fixed, PyObject *m, PyObject *probe,
                           int light) {
    int popping = is_negative(m);
    if (popping < 0) return NULL;
    Sum sum = {0, NULL};
    Py_ssize_t pos = 0;
    PyObject *c, *w;
    while (PyDict_Next(walk, &pos, &c, &w)) {
        PyObject *p = probe == NULL ? NULL : PyDict_GetItemWithError(probe, c);
        if (p != NULL && !light) {  /* heavy: p is an index row, the factor its entry at fixed */
            if (!need_dict(p, "an index row")) goto fail;
            p = PyDict_GetItemWithError(p, fixed);
        }
        if (p == NULL) {
            if (PyErr_Occurred()) goto fail;
        } else if ((light ? sum_add(&sum, p, w) : sum_add(&sum, w, p)) < 0)
            goto fail;
        PyObject *key = light ? PyTuple_Pack(2, c, fixed) : PyTuple_Pack(2, fixed, c);
        if (key == NULL) goto fail;
        if ((light ? view_add(view, key, w, m, popping) : view_add(view, key, m, w, popping)) < 0) goto fail;
    }
    return sum_finish(&sum);
fail:
    Py_XDECREF(sum.big);
    return NULL;
}

/* view[(c, y)] += col[c]·m for every c in col, fused with Σ_c probe[c]·col[c] (returned; 0 when probe
 * is None). */
static PyObject *k_light_pass(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("light_pass", nargs, 5)) return NULL;
    PyObject *view = args[0], *col = args[1], *y = args[2], *m = args[3], *probe = args[4];
    if (!need_dict(view, "view") || !need_dict(col, "col")) return NULL;
    if (view == col) return PyErr_Format(PyExc_ValueError, "the view cannot be the row it is extended by");
    if (probe == Py_None) probe = NULL;
    else if (!need_dict(probe, "probe")) return NULL;
    return view_pass(view, col, y, m, probe, 1);
}

/* view[(x, c)] += m·lrow[c] for every c in lrow, fused with Σ_c lrow[c]·plf[c][x] (returned). */
static PyObject *k_heavy_pass(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("heavy_pass", nargs, 5)) return NULL;
    PyObject *view = args[0], *x = args[1], *lrow = args[2], *m = args[3], *plf = args[4];
    if (!need_dict(view, "view") || !need_dict(lrow, "lrow") || !need_dict(plf, "plf")) return NULL;
    if (view == lrow) return PyErr_Format(PyExc_ValueError, "the view cannot be the row it is extended by");
    return view_pass(view, lrow, x, m, plf, 0);
}

/* --- index updates ----------------------------------------------------------------------------- */

/* index[x][y] += m, dropping zero entries and empty rows: the support change (-1, 0 or 1). */
static PyObject *k_bump(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("bump", nargs, 4)) return NULL;
    PyObject *index = args[0], *x = args[1], *y = args[2], *m = args[3];
    if (!need_dict(index, "index")) return NULL;
    PyObject *row = PyDict_GetItemWithError(index, x);
    if (row == NULL) {
        if (PyErr_Occurred()) return NULL;
        PyObject *fresh = PyDict_New();
        if (fresh == NULL) return NULL;
        int rc = PyDict_SetItem(fresh, y, m);
        if (rc == 0) rc = PyDict_SetItem(index, x, fresh);
        Py_DECREF(fresh);
        return rc < 0 ? NULL : PyLong_FromLong(1);
    }
    if (!need_dict(row, "an index row")) return NULL;
    Py_INCREF(row);
    PyObject *out = NULL;
    PyObject *old = PyDict_GetItemWithError(row, y);
    if (old == NULL) {
        if (!PyErr_Occurred() && PyDict_SetItem(row, y, m) == 0) out = PyLong_FromLong(1);
        goto done;
    }
    long long a, b, sum;
    PyObject *nv;
    if (as_small(old, &a) && as_small(m, &b) && !__builtin_add_overflow(a, b, &sum))
        nv = PyLong_FromLongLong(sum);
    else
        nv = PyNumber_Add(old, m);
    if (nv == NULL) goto done;
    int nonzero = PyObject_IsTrue(nv);
    if (nonzero > 0) {
        if (PyDict_SetItem(row, y, nv) == 0) out = PyLong_FromLong(0);
    } else if (nonzero == 0) {
        if (PyDict_DelItem(row, y) == 0 && (PyDict_GET_SIZE(row) != 0 || PyDict_DelItem(index, x) == 0))
            out = PyLong_FromLong(-1);
    }
    Py_DECREF(nv);
done:
    Py_DECREF(row);
    return out;
}

static PyMethodDef methods[] = {
    {"dot", (PyCFunction)(void (*)(void))k_dot, METH_FASTCALL, "Σ_c walk[c]·probe[c]."},
    {"probe_dot", (PyCFunction)(void (*)(void))k_probe_dot, METH_FASTCALL, "Σ_c walk[c]·index[c][x]."},
    {"light_pass", (PyCFunction)(void (*)(void))k_light_pass, METH_FASTCALL,
     "view[(c, y)] += col[c]·m for c in col, fused with Σ_c probe[c]·col[c]."},
    {"heavy_pass", (PyCFunction)(void (*)(void))k_heavy_pass, METH_FASTCALL,
     "view[(x, c)] += m·lrow[c] for c in lrow, fused with Σ_c lrow[c]·plf[c][x]."},
    {"bump", (PyCFunction)(void (*)(void))k_bump, METH_FASTCALL,
     "index[x][y] += m, dropping zero entries and empty rows: the support change."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The triangle engines' per-update loops, compiled.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
