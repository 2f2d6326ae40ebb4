/* The vwap engine's per-event loop, compiled: the bag ledger's checks and updates and the netting of a
 * batch per price level (services/vwap/kernels.py holds the same loop in Python, the reference this is
 * tested against and the fallback where this is not built).
 *
 * The loop makes the Python loop's container operations on the ledger and the change log one for one,
 * in the same order (dict lookups, stores and deletes), so the bag and the change log come out identical,
 * iteration order included. The netting per price level is summed in C while its values are
 * 64-bit ints and reaches the netted dict in the order of each level's first event (LevelSums), so the
 * netted levels come out identical too. Arithmetic goes through Python's number protocol (ints and exact
 * Decimals alike); integers that fit in 64 bits take a shortcut that gives the same values.
 *
 * The module is built with _level_sums.c (the netting's sums per price level), _level_tree.c (the
 * crosscheck plan's LevelTree) and _bag_entries.c (a ledger's checkpoint entries); _kernels.h holds
 * what they share.
 */
#include "_kernels.h"

#include <stdint.h>
#include <structmember.h>

static PyObject *s_relation, *s_row, *s_delta, *s_volume, *s_price, *s_broker_id, *zero;

/* The event's fields. An event type whose fields are plain object slots (a msgspec Struct, a class with
 * __slots__) is read at the slots' offsets, found once per type from its member descriptors; any other
 * object, or a slot that is unset, goes through getattr. */
typedef struct {
    PyTypeObject *type; /* the type the offsets belong to (borrowed, compared by identity), or NULL */
    Py_ssize_t off[3];  /* relation, row, delta; -1 where the field is not an object slot */
} Fields;

static Py_ssize_t slot_offset(PyTypeObject *type, PyObject *name) {
    PyObject *d = _PyType_Lookup(type, name); /* borrowed */
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    return (m->type == T_OBJECT_EX || m->type == T_OBJECT) && !(m->flags & PY_AUDIT_READ) ? m->offset : -1;
}

static PyObject **field_names[3] = {&s_relation, &s_row, &s_delta};

/* Make `f` hold the offsets of ev's type (found once per type). */
static inline void fields_of(Fields *f, PyObject *ev) {
    PyTypeObject *type = Py_TYPE(ev);
    if (f->type != type) {
        for (int j = 0; j < 3; j++) f->off[j] = slot_offset(type, *field_names[j]);
        f->type = type;
    }
}

/* ev.<field k> as a new reference (`f` holds the offsets of ev's type). */
static inline PyObject *field(const Fields *f, PyObject *ev, int k) {
    if (f->off[k] >= 0) {
        PyObject *v = *(PyObject **)((char *)ev + f->off[k]);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(ev, *field_names[k]);
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
    Py_ssize_t ib;    /* position of "broker_id", -1 where absent */
    int reads;        /* rel in reads */
    PyObject *levels; /* netted[rel] (a new reference) where rel is read and netted is given */
    LevelSums sums;   /* the levels' sums not yet in `levels` */
    PyObject *touched; /* changed[rel] (a new reference) once an event of rel was valid, with `changed` */
} Rel;

/* Flush the level sums into the netted dict (keeping an exception already raised). */
static int rel_flush(Rel *r) {
    if (r->sums.n == 0) return 0;
    if (!PyErr_Occurred()) return sums_flush(&r->sums, r->levels);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int rc = sums_flush(&r->sums, r->levels);
    if (rc < 0) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    } else {
        PyErr_Restore(type, value, tb);
    }
    return rc;
}

/* Let go of the relation, its level sums flushed first. */
static int rel_clear(Rel *r) {
    int rc = rel_flush(r);
    Py_CLEAR(r->rel);
    Py_CLEAR(r->cols);
    Py_CLEAR(r->levels);
    Py_CLEAR(r->touched);
    r->ledger = NULL;
    return rc;
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
    if (rel_clear(r) < 0) return -1;
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
    r->ib = position(r->cols, s_broker_id);
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
    (void)rel_clear(r);
    return -1;
}

/* row[name], or vals[k] where the columns hold it at k (the same object): a new reference. */
static PyObject *column(PyObject *row, PyObject *vals, Py_ssize_t k, PyObject *name) {
    if (vals != NULL && k >= 0) {
        PyObject *v = PyTuple_GET_ITEM(vals, k);
        Py_INCREF(v);
        return v;
    }
    if (row == NULL) { /* a row given as columns lacks this one */
        PyErr_SetObject(PyExc_KeyError, name);
        return NULL;
    }
    return PyObject_GetItem(row, name);
}

/* Whether a book row passes: volume > 0 and, with `brokers`, 0 <= broker_id < brokers (1 yes, 0 no). */
static int book_row_ok(PyObject *row, PyObject *vals, Py_ssize_t iv, Py_ssize_t ib, PyObject *brokers) {
    PyObject *vol = column(row, vals, iv, s_volume);
    if (vol == NULL) return -1;
    long long x;
    int ok = as_small(vol, &x) ? x > 0 : PyObject_RichCompareBool(vol, zero, Py_GT);
    Py_DECREF(vol);
    if (ok <= 0 || brokers == Py_None) return ok;
    PyObject *g = column(row, vals, ib, s_broker_id);
    if (g == NULL) return -1;
    ok = PyObject_RichCompareBool(zero, g, Py_LE);
    if (ok > 0) ok = PyObject_RichCompareBool(g, brokers, Py_LT);
    Py_DECREF(g);
    return ok;
}

/* The row's values in the order of `cols`, as a tuple (the ledger's key). A dict row whose keys come in
 * the columns' order, as the same string objects, is read by walking its entries; from the first key that
 * is not the column's, the rest are looked up. A key tuple of numbers and strings cannot be part of a
 * reference cycle, so the garbage collector is not made to track it (as it would stop doing itself). */
static PyObject *row_values(PyObject *row, PyObject *cols) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(cols);
    PyObject *vals = PyTuple_New(n);
    if (vals == NULL) return NULL;
    int walk = PyDict_CheckExact(row), atomic = 1;
    Py_ssize_t pos = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *c = PySequence_Fast_GET_ITEM(cols, k), *v, *key;
        if (walk && !(PyDict_Next(row, &pos, &key, &v) && key == c)) walk = 0;
        if (walk) {
            Py_INCREF(v);
        } else if (PyDict_CheckExact(row)) {
            v = PyDict_GetItemWithError(row, c);
            if (v == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, c);
            Py_XINCREF(v);
        } else {
            v = PyObject_GetItem(row, c);
        }
        if (v == NULL) {
            Py_DECREF(vals);
            return NULL;
        }
        atomic &= !PyType_IS_GC(Py_TYPE(v));
        PyTuple_SET_ITEM(vals, k, v);
    }
    if (atomic) PyObject_GC_UnTrack(vals);
    return vals;
}

/* levels[price] += [delta, delta·volume]: in the level sums where every value is an int in 64 bits,
 * else (the sums flushed first) on the dict. */
static int net_level(Rel *r, PyObject *row, PyObject *vals, PyObject *delta) {
    PyObject *price = column(row, vals, r->ip, s_price);
    if (price == NULL) return -1;
    int rc = -1;
    PyObject *vol = NULL, *dw = NULL;
    long long k, d, v, w;
    if (vals != NULL && r->iv >= 0 && as_small(price, &k) && as_small(delta, &d) &&
        as_small(PyTuple_GET_ITEM(vals, r->iv), &v) && !__builtin_mul_overflow(d, v, &w)) {
        rc = sums_add(&r->sums, price, k, d, w);
        if (rc != 0) {
            Py_DECREF(price);
            return rc < 0 ? -1 : 0;
        }
        rc = -1;
    }
    if (rel_flush(r) < 0) goto done;
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
    if (list_add(acc, 0, delta) == 0 && (vol = column(row, vals, r->iv, s_volume)) != NULL)
        rc = list_add_product(acc, 1, delta, vol);
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
    Fields *fields;
} Pass;

/* The running Σ delta: int deltas summed in 64 bits (`small`) while they fit, into `obj` otherwise; once
 * `obj` is not an int (a decimal delta), every delta is added to it in order, as the Python loop does. */
typedef struct {
    PyObject *obj;
    long long small;
} Net;

static int fold_net(Net *net) {
    if (net->small == 0) return 0;
    PyObject *s = PyLong_FromLongLong(net->small);
    if (s == NULL) return -1;
    PyObject *sum = PyNumber_Add(net->obj, s);
    Py_DECREF(s);
    if (sum == NULL) return -1;
    Py_SETREF(net->obj, sum);
    net->small = 0;
    return 0;
}

static int add_net(Net *net, PyObject *delta) {
    long long d, s;
    if (PyLong_CheckExact(net->obj) && as_small(delta, &d) && !__builtin_add_overflow(net->small, d, &s)) {
        net->small = s;
        return 0;
    }
    if (fold_net(net) < 0) return -1;
    PyObject *sum = add(net->obj, delta);
    if (sum == NULL) return -1;
    Py_SETREF(net->obj, sum);
    return 0;
}

/* changed[rel], made empty where absent: a new reference. */
static PyObject *touched_of(PyObject *changed, PyObject *rel) {
    PyObject *t = PyDict_GetItemWithError(changed, rel);
    if (t == NULL) {
        if (PyErr_Occurred() || (t = PyDict_New()) == NULL) return NULL;
        if (PyDict_SetItem(changed, rel, t) < 0) Py_CLEAR(t);
        return t;
    }
    if (!PyDict_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "changed must map each relation to a dict");
        return NULL;
    }
    Py_INCREF(t);
    return t;
}

static int settle(const Pass *p, Rel *r, Py_ssize_t i, PyObject *ev, PyObject *rel, PyObject *row,
                  PyObject *vals, PyObject *delta, Net *net);

/* One event; 0 when applied or rejected, -1 on an exception. */
static int apply_one(const Pass *p, Rel *r, Py_ssize_t i, PyObject *ev, Net *net) {
    PyObject *row = NULL, *delta = NULL, *vals = NULL;
    int rc = -1;
    fields_of(p->fields, ev);
    PyObject *rel = field(p->fields, ev, 0);
    if (rel == NULL) return -1;
    int known = rel_load(r, rel, p->bag, p->columns, p->reads, p->netted);
    if (known <= 0) {
        rc = known < 0 ? -1 : call_reject(p->reject, i, ev, NULL);
        goto done;
    }
    row = field(p->fields, ev, 1);
    if (row == NULL) goto done;
    delta = field(p->fields, ev, 2);
    if (delta == NULL) goto done;
    vals = row_values(row, r->cols);
    if (vals == NULL) goto done;
    rc = settle(p, r, i, ev, rel, row, vals, delta, net);
done:
    Py_XDECREF(vals);
    Py_XDECREF(delta);
    Py_XDECREF(row);
    Py_DECREF(rel);
    return rc;
}

/* An event's tuple `vals` (its row's values in the order of the relation's columns) checked, applied to
 * the ledger, logged and netted; 0 when applied or rejected (`ev` goes to `reject`), -1 on an exception.
 * `row` is NULL for a row given as columns: its values are read from `vals` alone. */
static int settle(const Pass *p, Rel *r, Py_ssize_t i, PyObject *ev, PyObject *rel, PyObject *row,
                  PyObject *vals, PyObject *delta, Net *net) {
    PyObject *new = NULL;
    int rc = -1;
    if (p->book) {
        int ok = book_row_ok(row, vals, r->iv, r->ib, p->brokers);
        if (ok < 0) goto done;
        if (!ok) {
            rc = rel_flush(r) < 0 ? -1 : call_reject(p->reject, i, ev, NULL);
            goto done;
        }
    }
    /* The tuple is hashed once, for the lookup and the store or delete. */
    Py_hash_t hash = PyObject_Hash(vals);
    if (hash == -1) goto done;
    PyObject *have = _PyDict_GetItem_KnownHash(r->ledger, vals, hash);
    int was_live = have != NULL; /* the ledger holds live tuples only */
    if (have == NULL) {
        if (PyErr_Occurred()) goto done;
        have = zero;
    }
    Py_INCREF(have);
    long long h, d, m;
    int neg, live;
    if (as_small(have, &h) && as_small(delta, &d) && !__builtin_add_overflow(h, d, &m)) {
        neg = m < 0;
        live = m != 0;
        new = neg ? NULL : PyLong_FromLongLong(m);
        if (new == NULL && !neg) neg = -1;
    } else {
        new = add(have, delta);
        neg = new == NULL ? -1 : PyObject_RichCompareBool(new, zero, Py_LT);
        live = neg == 0 ? PyObject_IsTrue(new) : 0;
    }
    if (neg != 0) {
        rc = neg < 0 || rel_flush(r) < 0 ? -1 : call_reject(p->reject, i, ev, have);
        Py_DECREF(have);
        goto done;
    }
    Py_DECREF(have);
    if (live < 0) goto done;
    if ((live ? _PyDict_SetItem_KnownHash(r->ledger, vals, new, hash)
              : _PyDict_DelItem_KnownHash(r->ledger, vals, hash)) < 0)
        goto done;
    if (p->changed != Py_None) { /* changed.setdefault(rel, {}).setdefault(vals, was_live), hash known */
        if (r->touched == NULL && (r->touched = touched_of(p->changed, rel)) == NULL) goto done;
        PyObject *first = _PyDict_GetItem_KnownHash(r->touched, vals, hash);
        if (first == NULL &&
            (PyErr_Occurred() ||
             _PyDict_SetItem_KnownHash(r->touched, vals, was_live ? Py_True : Py_False, hash) < 0))
            goto done;
    }
    if (add_net(net, delta) < 0) goto done;
    if (r->reads) {
        if (r->levels != NULL) {
            if (net_level(r, row, vals, delta) < 0) goto done;
        } else if (p->update != Py_None) {
            if (row == NULL) {
                PyErr_SetString(PyExc_TypeError, "a row given as columns cannot go to update");
                goto done;
            }
            PyObject *res = PyObject_CallFunctionObjArgs(p->update, rel, row, delta, NULL);
            if (res == NULL) goto done;
            Py_DECREF(res);
        }
    }
    rc = 0;
done:
    Py_XDECREF(new);
    return rc;
}

static PyObject *ledger_pass(PyObject *self, PyObject *args) {
    (void)self;
    Pass p;
    PyObject *events;
    if (!PyArg_ParseTuple(args, "OO!OOOOOpOO:ledger_pass", &events, &PyDict_Type, &p.bag, &p.columns, &p.reads,
                          &p.netted, &p.update, &p.changed, &p.book, &p.brokers, &p.reject))
        return NULL;
    if (p.changed != Py_None && !PyDict_Check(p.changed)) {
        PyErr_SetString(PyExc_TypeError, "changed must be a dict or None");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(events, "events must be a sequence");
    if (fast == NULL) return NULL;
    Rel r;
    memset(&r, 0, sizeof(r));
    r.iv = r.ip = r.ib = -1;
    Fields fields = {NULL, {-1, -1, -1}};
    p.fields = &fields;
    Net net = {zero, 0};
    Py_INCREF(zero);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) rc = apply_one(&p, &r, i, PySequence_Fast_GET_ITEM(fast, i), &net);
    if (rc == 0) rc = fold_net(&net);
    if (rel_clear(&r) < 0) rc = -1;
    sums_free(&r.sums);
    if (rc < 0) Py_CLEAR(net.obj);
    Py_DECREF(fast);
    return net.obj;
}

/* The row at `i` of a relation given as columns (`lists[k]` holds column k), as the ledger's key. */
static PyObject *row_at(PyObject *lists, Py_ssize_t i) {
    Py_ssize_t n = PyList_GET_SIZE(lists);
    PyObject *vals = PyTuple_New(n);
    if (vals == NULL) return NULL;
    int atomic = 1;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = PyList_GET_ITEM(PyList_GET_ITEM(lists, k), i);
        Py_INCREF(v);
        atomic &= !PyType_IS_GC(Py_TYPE(v));
        PyTuple_SET_ITEM(vals, k, v);
    }
    if (atomic) PyObject_GC_UnTrack(vals);
    return vals;
}

static PyObject *ledger_columns(PyObject *self, PyObject *args) {
    (void)self;
    Pass p;
    PyObject *rel, *deltas, *lists;
    if (!PyArg_ParseTuple(args, "OO!O!O!OOOOpOO:ledger_columns", &rel, &PyList_Type, &deltas, &PyList_Type,
                          &lists, &PyDict_Type, &p.bag, &p.columns, &p.reads, &p.netted, &p.changed, &p.book,
                          &p.brokers, &p.reject))
        return NULL;
    if (p.changed != Py_None && !PyDict_Check(p.changed)) {
        PyErr_SetString(PyExc_TypeError, "changed must be a dict or None");
        return NULL;
    }
    p.update = Py_None;
    p.fields = NULL;
    Py_ssize_t n = PyList_GET_SIZE(deltas);
    Rel r;
    memset(&r, 0, sizeof(r));
    r.iv = r.ip = r.ib = -1;
    int known = rel_load(&r, rel, p.bag, p.columns, p.reads, p.netted);
    if (known < 0) return NULL;
    Net net = {zero, 0};
    Py_INCREF(zero);
    int rc = 0;
    if (!known) {
        for (Py_ssize_t i = 0; i < n && rc == 0; i++) rc = call_reject(p.reject, i, Py_None, NULL);
    } else {
        Py_ssize_t width = PyList_GET_SIZE(lists);
        if (width != PySequence_Fast_GET_SIZE(r.cols)) {
            PyErr_SetString(PyExc_ValueError, "one list per column of the relation expected");
            rc = -1;
        }
        for (Py_ssize_t k = 0; k < width && rc == 0; k++) {
            PyObject *col = PyList_GET_ITEM(lists, k);
            if (!PyList_Check(col) || PyList_GET_SIZE(col) != n) {
                PyErr_SetString(PyExc_ValueError, "each column must be a list as long as the deltas");
                rc = -1;
            }
        }
        for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
            PyObject *vals = row_at(lists, i);
            if (vals == NULL) {
                rc = -1;
                break;
            }
            rc = settle(&p, &r, i, Py_None, rel, NULL, vals, PyList_GET_ITEM(deltas, i), &net);
            Py_DECREF(vals);
        }
    }
    if (rc == 0) rc = fold_net(&net);
    if (rel_clear(&r) < 0) rc = -1;
    sums_free(&r.sums);
    if (rc < 0) Py_CLEAR(net.obj);
    return net.obj;
}

static PyMethodDef methods[] = {
    {"ledger_columns", ledger_columns, METH_VARARGS,
     "ledger_columns(rel, deltas, lists, bag, columns, reads, netted, changed, book, brokers, reject) -> net: "
     "the compiled kernels.py_ledger_columns."},
    {"ledger_pass", ledger_pass, METH_VARARGS,
     "ledger_pass(events, bag, columns, reads, netted, update, changed, book, brokers, reject) -> net: "
     "the compiled kernels.py_ledger_pass."},
    {"bag_entries", bag_entries, METH_VARARGS,
     "bag_entries(ledger, touched, tag, prefix, key_of, value_of) -> [(tag, key, value)]: the compiled "
     "kernels.py_bag_entries."},
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
    if (level_tree_ready() < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&LevelTreeType);
    if (PyModule_AddObject(m, "LevelTree", (PyObject *)&LevelTreeType) < 0) {
        Py_DECREF(&LevelTreeType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
