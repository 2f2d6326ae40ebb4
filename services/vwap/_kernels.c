/* The vwap engine's per-event loop, compiled: the bag ledger's checks and updates and the netting of a
 * batch per price level (services/vwap/kernels.py holds the same loop in Python, the reference this is
 * tested against and the fallback where this is not built).
 *
 * The loop makes the Python loop's container operations one for one, in the same order (dict lookups,
 * stores and deletes on the ledger and the netted levels, set adds on the change log), so the bag,
 * the netted levels and the change log come out identical, iteration order included. Arithmetic goes
 * through Python's number protocol (ints and exact Decimals alike); integers that fit in 64 bits take
 * a shortcut that gives the same values.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *s_relation, *s_row, *s_delta, *s_volume, *s_price, *s_broker_id, *zero;

/* Exact ints that fit in 64 bits (any other number: 0, and the caller uses the number protocol). */
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

static PyObject *add(PyObject *a, PyObject *b) {
    long long x, y, s;
    if (as_small(a, &x) && as_small(b, &y) && !__builtin_add_overflow(x, y, &s)) return PyLong_FromLongLong(s);
    return PyNumber_Add(a, b);
}

static PyObject *in_place_add(PyObject *a, PyObject *b) {
    long long x, y, s;
    if (as_small(a, &x) && as_small(b, &y) && !__builtin_add_overflow(x, y, &s)) return PyLong_FromLongLong(s);
    return PyNumber_InPlaceAdd(a, b);
}

static PyObject *mul(PyObject *a, PyObject *b) {
    long long x, y, p;
    if (as_small(a, &x) && as_small(b, &y) && !__builtin_mul_overflow(x, y, &p)) return PyLong_FromLongLong(p);
    return PyNumber_Multiply(a, b);
}

/* `acc[k] += v` on a list. */
static int list_add(PyObject *acc, Py_ssize_t k, PyObject *v) {
    PyObject *old = PyList_GET_ITEM(acc, k);
    PyObject *sum = in_place_add(old, v);
    if (sum == NULL) return -1;
    PyList_SET_ITEM(acc, k, sum);
    Py_DECREF(old);
    return 0;
}

static int call_reject(PyObject *reject, Py_ssize_t i, PyObject *ev, PyObject *have) {
    PyObject *r = PyObject_CallFunction(reject, "nOO", i, ev, have == NULL ? Py_None : have);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* What the loop needs of one relation, looked up once per run of events of that relation. */
typedef struct {
    PyObject *rel;    /* the relation name these fields belong to (a new reference), NULL: none yet */
    PyObject *ledger; /* bag[rel] (borrowed: the bag is not changed while the loop runs) */
    PyObject *cols;   /* columns[rel] as a fast sequence (a new reference) */
    Py_ssize_t iv;    /* position of "volume" and "price" in the columns, -1 where absent */
    Py_ssize_t ip;
    int reads;        /* rel in reads */
    PyObject *levels; /* netted[rel] (a new reference) where rel is read and netted is given */
} Rel;

static void rel_clear(Rel *r) {
    Py_CLEAR(r->rel);
    Py_CLEAR(r->cols);
    Py_CLEAR(r->levels);
    r->ledger = NULL;
}

static Py_ssize_t position(PyObject *cols, PyObject *name) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(cols);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *c = PySequence_Fast_GET_ITEM(cols, k);
        if (c == name || (PyUnicode_Check(c) && PyUnicode_Compare(c, name) == 0)) return k;
    }
    return -1;
}

/* Point `r` at relation `rel`: 1 when it is one of the bag's, 0 when not, -1 on an exception. */
static int rel_load(Rel *r, PyObject *rel, PyObject *bag, PyObject *columns, PyObject *reads, PyObject *netted) {
    if (r->rel != NULL) {
        if (r->rel == rel) return 1;
        int same = PyObject_RichCompareBool(r->rel, rel, Py_EQ);
        if (same < 0) return -1;
        if (same) return 1;
    }
    rel_clear(r);
    PyObject *ledger = PyDict_GetItemWithError(bag, rel);
    if (ledger == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!PyDict_Check(ledger)) {
        PyErr_SetString(PyExc_TypeError, "a ledger must be a dict");
        return -1;
    }
    PyObject *cols = PyObject_GetItem(columns, rel);
    if (cols == NULL) return -1;
    r->cols = PySequence_Fast(cols, "columns must be a sequence");
    Py_DECREF(cols);
    if (r->cols == NULL) return -1;
    r->iv = position(r->cols, s_volume);
    r->ip = position(r->cols, s_price);
    if (PyErr_Occurred()) goto fail;
    r->reads = PySequence_Contains(reads, rel);
    if (r->reads < 0) goto fail;
    if (r->reads && netted != Py_None) {
        r->levels = PyObject_GetItem(netted, rel);
        if (r->levels == NULL) goto fail;
        if (!PyDict_Check(r->levels)) {
            PyErr_SetString(PyExc_TypeError, "netted levels must be dicts");
            goto fail;
        }
    }
    r->ledger = ledger;
    Py_INCREF(rel);
    r->rel = rel;
    return 1;
fail:
    rel_clear(r);
    return -1;
}

/* row[name], or vals[k] where the columns hold it at k (the same object): a new reference. */
static PyObject *column(PyObject *row, PyObject *vals, Py_ssize_t k, PyObject *name) {
    if (vals != NULL && k >= 0) {
        PyObject *v = PyTuple_GET_ITEM(vals, k);
        Py_INCREF(v);
        return v;
    }
    return PyObject_GetItem(row, name);
}

/* Whether a book row passes: volume > 0 and, with `brokers`, 0 <= broker_id < brokers (1 yes, 0 no). */
static int book_row_ok(PyObject *row, PyObject *vals, Py_ssize_t iv, PyObject *brokers) {
    PyObject *vol = column(row, vals, iv, s_volume);
    if (vol == NULL) return -1;
    int ok = PyObject_RichCompareBool(vol, zero, Py_GT);
    Py_DECREF(vol);
    if (ok <= 0 || brokers == Py_None) return ok;
    PyObject *g = PyObject_GetItem(row, s_broker_id);
    if (g == NULL) return -1;
    ok = PyObject_RichCompareBool(zero, g, Py_LE);
    if (ok > 0) ok = PyObject_RichCompareBool(g, brokers, Py_LT);
    Py_DECREF(g);
    return ok;
}

static PyObject *row_values(PyObject *row, PyObject *cols) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(cols);
    PyObject *vals = PyTuple_New(n);
    if (vals == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = PyObject_GetItem(row, PySequence_Fast_GET_ITEM(cols, k));
        if (v == NULL) {
            Py_DECREF(vals);
            return NULL;
        }
        PyTuple_SET_ITEM(vals, k, v);
    }
    return vals;
}

/* levels[price] += [delta, delta·volume] */
static int net_level(const Rel *r, PyObject *row, PyObject *vals, PyObject *delta) {
    PyObject *price = column(row, vals, r->ip, s_price);
    if (price == NULL) return -1;
    int rc = -1;
    PyObject *vol = NULL, *dw = NULL;
    PyObject *acc = PyDict_GetItemWithError(r->levels, price);
    if (acc == NULL && PyErr_Occurred()) goto done;
    if (acc != NULL && (!PyList_Check(acc) || PyList_GET_SIZE(acc) != 2)) {
        PyErr_SetString(PyExc_TypeError, "a netted level must be a list [count, weight]");
        goto done;
    }
    if (acc == NULL) {
        vol = column(row, vals, r->iv, s_volume);
        if (vol == NULL || (dw = mul(delta, vol)) == NULL) goto done;
        PyObject *fresh = PyList_New(2);
        if (fresh == NULL) goto done;
        Py_INCREF(delta);
        PyList_SET_ITEM(fresh, 0, delta);
        PyList_SET_ITEM(fresh, 1, dw);
        dw = NULL;
        rc = PyDict_SetItem(r->levels, price, fresh);
        Py_DECREF(fresh);
        goto done;
    }
    Py_INCREF(acc);
    if (list_add(acc, 0, delta) == 0 && (vol = column(row, vals, r->iv, s_volume)) != NULL &&
        (dw = mul(delta, vol)) != NULL)
        rc = list_add(acc, 1, dw);
    Py_DECREF(acc);
done:
    Py_XDECREF(dw);
    Py_XDECREF(vol);
    Py_DECREF(price);
    return rc;
}

typedef struct {
    PyObject *bag, *columns, *reads, *netted, *update, *changed, *brokers, *reject;
    int book;
} Pass;

/* One event; 0 when applied or rejected, -1 on an exception. `net` is the running Σ delta. */
static int apply_one(const Pass *p, Rel *r, Py_ssize_t i, PyObject *ev, PyObject **net) {
    PyObject *row = NULL, *delta = NULL, *vals = NULL, *new = NULL, *key = NULL;
    int rc = -1;
    PyObject *rel = PyObject_GetAttr(ev, s_relation);
    if (rel == NULL) return -1;
    int known = rel_load(r, rel, p->bag, p->columns, p->reads, p->netted);
    if (known <= 0) {
        rc = known < 0 ? -1 : call_reject(p->reject, i, ev, NULL);
        goto done;
    }
    row = PyObject_GetAttr(ev, s_row);
    if (row == NULL) goto done;
    delta = PyObject_GetAttr(ev, s_delta);
    if (delta == NULL) goto done;
    vals = row_values(row, r->cols);
    if (vals == NULL) goto done;
    if (p->book) {
        int ok = book_row_ok(row, vals, r->iv, p->brokers);
        if (ok < 0) goto done;
        if (!ok) {
            rc = call_reject(p->reject, i, ev, NULL);
            goto done;
        }
    }
    /* The tuple is hashed once, for the lookup and the store or delete. */
    Py_hash_t hash = PyObject_Hash(vals);
    if (hash == -1) goto done;
    PyObject *have = _PyDict_GetItem_KnownHash(r->ledger, vals, hash);
    if (have == NULL) {
        if (PyErr_Occurred()) goto done;
        have = zero;
    }
    Py_INCREF(have);
    new = add(have, delta);
    int neg = new == NULL ? -1 : PyObject_RichCompareBool(new, zero, Py_LT);
    if (neg != 0) {
        rc = neg < 0 ? -1 : call_reject(p->reject, i, ev, have);
        Py_DECREF(have);
        goto done;
    }
    Py_DECREF(have);
    int live = PyObject_IsTrue(new);
    if (live < 0) goto done;
    if ((live ? _PyDict_SetItem_KnownHash(r->ledger, vals, new, hash)
              : _PyDict_DelItem_KnownHash(r->ledger, vals, hash)) < 0)
        goto done;
    if (p->changed != Py_None) {
        key = PyTuple_Pack(2, rel, vals);
        if (key == NULL || PySet_Add(p->changed, key) < 0) goto done;
    }
    PyObject *sum = add(*net, delta);
    if (sum == NULL) goto done;
    Py_SETREF(*net, sum);
    if (r->reads) {
        if (r->levels != NULL) {
            if (net_level(r, row, vals, delta) < 0) goto done;
        } else if (p->update != Py_None) {
            PyObject *res = PyObject_CallFunctionObjArgs(p->update, rel, row, delta, NULL);
            if (res == NULL) goto done;
            Py_DECREF(res);
        }
    }
    rc = 0;
done:
    Py_XDECREF(key);
    Py_XDECREF(new);
    Py_XDECREF(vals);
    Py_XDECREF(delta);
    Py_XDECREF(row);
    Py_DECREF(rel);
    return rc;
}

static PyObject *ledger_pass(PyObject *self, PyObject *args) {
    (void)self;
    Pass p;
    PyObject *events;
    if (!PyArg_ParseTuple(args, "OO!OOOOOpOO:ledger_pass", &events, &PyDict_Type, &p.bag, &p.columns, &p.reads,
                          &p.netted, &p.update, &p.changed, &p.book, &p.brokers, &p.reject))
        return NULL;
    if (p.changed != Py_None && !PySet_Check(p.changed)) {
        PyErr_SetString(PyExc_TypeError, "changed must be a set or None");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(events, "events must be a sequence");
    if (fast == NULL) return NULL;
    Rel r = {NULL, NULL, NULL, -1, -1, 0, NULL};
    PyObject *net = zero;
    Py_INCREF(net);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (apply_one(&p, &r, i, PySequence_Fast_GET_ITEM(fast, i), &net) < 0) {
            Py_CLEAR(net);
            break;
        }
    }
    rel_clear(&r);
    Py_DECREF(fast);
    return net;
}

static PyMethodDef methods[] = {
    {"ledger_pass", ledger_pass, METH_VARARGS,
     "ledger_pass(events, bag, columns, reads, netted, update, changed, book, brokers, reject) -> net: "
     "the compiled kernels.py_ledger_pass."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kernels(void) {
    s_relation = PyUnicode_InternFromString("relation");
    s_row = PyUnicode_InternFromString("row");
    s_delta = PyUnicode_InternFromString("delta");
    s_volume = PyUnicode_InternFromString("volume");
    s_price = PyUnicode_InternFromString("price");
    s_broker_id = PyUnicode_InternFromString("broker_id");
    zero = PyLong_FromLong(0);
    if (!s_relation || !s_row || !s_delta || !s_volume || !s_price || !s_broker_id || !zero) return NULL;
    return PyModule_Create(&module);
}
