/* The rounded join index's weight updates, compiled (services/reservoir/index.py holds the same steps
 * in Python, `JoinIndex._reweigh` and the methods it calls: the reference these are tested against and
 * the fallback where this is not built).
 *
 * `reweigh(index, e, item, old_f, f)` re-weighs one item of node e in every structure D[e->*]: its
 * weight there is its children's rounded counts times f (was old_f); the item moves between the
 * exponent buckets of its key, the key's count changes, and when the key's rounded count changes the
 * change travels to the parent items with that key, in every parent structure, recursively. It works
 * on the index's own dicts and lists, performing the Python steps' container operations one for one
 * (same insertion and removal positions), so the buckets' order, and so every later sample, is the
 * same. Weights and counts are Python ints of any size.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *S_key_pos, *S_buckets, *S_exps, *S_where, *S_cnt, *S_rcnt, *S_parent, *S_node,
    *S_parents, *S_children, *S_child_pos, *S_idx, *S_by_key, *S_items, *S_ds, *S_nodes, *S_grouped,
    *S_tracking, *S_dirty, *S_places, *S_propagations, *S_out;
static PyObject *ZERO, *ONE;

typedef struct {
    PyObject *ds;    /* list of Directed */
    PyObject *nodes; /* list of NodeStore */
    int grouped;
    PyObject *dirty; /* the index's set of changed (structure, key), NULL when not tracking */
    long long places, propagations;
} Ctx;

/* An attribute the object keeps holding during the call (a slot that is never reassigned here). */
static PyObject *held(PyObject *o, PyObject *name) {
    PyObject *r = PyObject_GetAttr(o, name);
    if (r != NULL) Py_DECREF(r);
    return r;
}

/* tuple(item[i] for i in pos), a new reference. */
static PyObject *key_of(PyObject *item, PyObject *pos) {
    if (!PyTuple_Check(item) || !PyTuple_Check(pos)) {
        PyErr_SetString(PyExc_TypeError, "items and key positions are tuples");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(pos), width = PyTuple_GET_SIZE(item);
    PyObject *k = PyTuple_New(n);
    if (k == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t j = PyLong_AsSsize_t(PyTuple_GET_ITEM(pos, i));
        if (j < 0 || j >= width) {
            Py_DECREF(k);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "key position out of range");
            return NULL;
        }
        PyObject *x = PyTuple_GET_ITEM(item, j);
        Py_INCREF(x);
        PyTuple_SET_ITEM(k, i, x);
    }
    return k;
}

/* w.bit_length() - 1 as a Python int (w > 0): the exponent of a power-of-two weight. */
static PyObject *exponent(PyObject *w) {
    size_t bits = _PyLong_NumBits(w);
    if (bits == (size_t)-1 && PyErr_Occurred()) return NULL;
    return PyLong_FromSize_t(bits - 1);
}

/* 1 << (c - 1).bit_length(), the smallest power of two >= c (c > 0), a new reference. */
static PyObject *nextpow2(PyObject *c) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(c, &overflow);
    if (!overflow && x > 0 && x <= (1LL << 61)) {
        long long p = 1;
        while (p < x) p <<= 1;
        return PyLong_FromLongLong(p);
    }
    if (PyErr_Occurred()) return NULL;
    PyObject *less = PyNumber_Subtract(c, ONE);
    if (less == NULL) return NULL;
    size_t bits = _PyLong_NumBits(less);
    Py_DECREF(less);
    if (bits == (size_t)-1 && PyErr_Occurred()) return NULL;
    PyObject *shift = PyLong_FromSize_t(bits);
    if (shift == NULL) return NULL;
    PyObject *r = PyNumber_Lshift(ONE, shift);
    Py_DECREF(shift);
    return r;
}

/* dict[key] as a borrowed reference, raising KeyError when absent (as `dict[key]` does). */
static PyObject *item_or_keyerror(PyObject *dict, PyObject *key) {
    PyObject *r = PyDict_GetItemWithError(dict, key);
    if (r == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
    return r;
}

/* dict.get(key, 0) as a borrowed reference. */
static PyObject *get_or_zero(PyObject *dict, PyObject *key) {
    PyObject *r = PyDict_GetItemWithError(dict, key);
    if (r == NULL && !PyErr_Occurred()) return ZERO;
    return r;
}

/* The index in a sorted list of ints where x goes after its equals (append, then sort). */
static Py_ssize_t sorted_slot(PyObject *list, PyObject *x) {
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(list);
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        int lt = PyObject_RichCompareBool(x, PyList_GET_ITEM(list, mid), Py_LT);
        if (lt < 0) return -1;
        if (lt) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

static int bucket_add(PyObject *d, PyObject *v, PyObject *x, PyObject *item) {
    PyObject *buckets = held(d, S_buckets), *where = held(d, S_where);
    if (buckets == NULL || where == NULL) return -1;
    PyObject *per = PyDict_GetItemWithError(buckets, v);
    if (per == NULL) {
        if (PyErr_Occurred()) return -1;
        per = PyDict_New();
        if (per == NULL || PyDict_SetItem(buckets, v, per) < 0) {
            Py_XDECREF(per);
            return -1;
        }
        Py_DECREF(per);
    }
    PyObject *arr = PyDict_GetItemWithError(per, x);
    if (arr == NULL) {
        if (PyErr_Occurred()) return -1;
        arr = PyList_New(0);
        if (arr == NULL || PyDict_SetItem(per, x, arr) < 0) {
            Py_XDECREF(arr);
            return -1;
        }
        Py_DECREF(arr);
        PyObject *exps_of = held(d, S_exps);
        if (exps_of == NULL) return -1;
        PyObject *exps = PyDict_GetItemWithError(exps_of, v);
        if (exps == NULL) {
            if (PyErr_Occurred()) return -1;
            exps = PyList_New(0);
            if (exps == NULL || PyDict_SetItem(exps_of, v, exps) < 0) {
                Py_XDECREF(exps);
                return -1;
            }
            Py_DECREF(exps);
        }
        Py_ssize_t at = sorted_slot(exps, x);
        if (at < 0 || PyList_Insert(exps, at, x) < 0) return -1;
    }
    PyObject *slot = PyLong_FromSsize_t(PyList_GET_SIZE(arr));
    if (slot == NULL) return -1;
    int rc = PyDict_SetItem(where, item, slot);
    Py_DECREF(slot);
    if (rc < 0) return -1;
    return PyList_Append(arr, item);
}

static int bucket_remove(PyObject *d, PyObject *v, PyObject *x, PyObject *item) {
    PyObject *buckets = held(d, S_buckets), *where = held(d, S_where);
    if (buckets == NULL || where == NULL) return -1;
    PyObject *per = item_or_keyerror(buckets, v);
    if (per == NULL) return -1;
    PyObject *arr = item_or_keyerror(per, x);
    if (arr == NULL || !PyList_Check(arr)) return -1;
    PyObject *slot = item_or_keyerror(where, item);
    if (slot == NULL) return -1;
    Py_ssize_t i = PyLong_AsSsize_t(slot);
    if (i == -1 && PyErr_Occurred()) return -1;
    if (PyDict_DelItem(where, item) < 0) return -1;
    Py_ssize_t n = PyList_GET_SIZE(arr);
    PyObject *last = PyList_GET_ITEM(arr, n - 1);
    Py_INCREF(last);
    if (PyList_SetSlice(arr, n - 1, n, NULL) < 0) {
        Py_DECREF(last);
        return -1;
    }
    if (i < n - 1) {
        PyObject *moved = PyLong_FromSsize_t(i);
        if (moved == NULL) {
            Py_DECREF(last);
            return -1;
        }
        Py_INCREF(last);
        if (PyList_SetItem(arr, i, last) < 0) { /* steals the new reference, releases the item's */
            Py_DECREF(moved);
            Py_DECREF(last);
            return -1;
        }
        int rc = PyDict_SetItem(where, last, moved);
        Py_DECREF(moved);
        Py_DECREF(last);
        if (rc < 0) return -1;
    } else {
        Py_DECREF(last);
    }
    if (PyList_GET_SIZE(arr) == 0) {
        if (PyDict_DelItem(per, x) < 0) return -1;
        PyObject *exps_of = held(d, S_exps);
        PyObject *exps = exps_of == NULL ? NULL : item_or_keyerror(exps_of, v);
        if (exps == NULL) return -1;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(exps); j++) {
            int eq = PyObject_RichCompareBool(PyList_GET_ITEM(exps, j), x, Py_EQ);
            if (eq < 0) return -1;
            if (eq) return PyList_SetSlice(exps, j, j + 1, NULL);
        }
        PyErr_SetString(PyExc_ValueError, "list.remove(x): x not in list");
        return -1;
    }
    return 0;
}

static int place(Ctx *cx, PyObject *d, PyObject *item, PyObject *w_old, PyObject *w_new);

/* The product of the children's rounded counts at this item's keys, skipping child slot `skip`, times
 * `start` (a new reference; 0 as soon as one is 0). */
static PyObject *children_product(Ctx *cx, PyObject *d, PyObject *item, Py_ssize_t skip, PyObject *start) {
    PyObject *children = held(d, S_children), *child_pos = held(d, S_child_pos);
    if (children == NULL || child_pos == NULL) return NULL;
    PyObject *w = start;
    Py_INCREF(w);
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(children); j++) {
        if (j == skip) continue;
        Py_ssize_t c = PyLong_AsSsize_t(PyList_GET_ITEM(children, j));
        if (c == -1 && PyErr_Occurred()) goto fail;
        PyObject *rcnt = held(PyList_GET_ITEM(cx->ds, c), S_rcnt);
        if (rcnt == NULL) goto fail;
        PyObject *k = key_of(item, PyList_GET_ITEM(child_pos, j));
        if (k == NULL) goto fail;
        PyObject *r = get_or_zero(rcnt, k);
        Py_DECREF(k);
        if (r == NULL) goto fail;
        PyObject *prod = PyNumber_Multiply(w, r);
        Py_DECREF(w);
        if (prod == NULL) return NULL;
        w = prod;
        int nz = PyObject_IsTrue(w);
        if (nz < 0) goto fail;
        if (!nz) break;
    }
    return w;
fail:
    Py_DECREF(w);
    return NULL;
}

/* The change of a key's rounded count reaches every parent item with that key (JoinIndex._propagate). */
static int propagate(Ctx *cx, PyObject *d, PyObject *v, PyObject *old, PyObject *new_) {
    Py_ssize_t p = PyLong_AsSsize_t(held(d, S_parent));
    if (p == -1 && PyErr_Occurred()) return -1;
    if (p < 0) return 0;
    PyObject *node = PyList_GET_ITEM(cx->nodes, p);
    PyObject *by_key = held(node, S_by_key), *items = held(node, S_items);
    PyObject *parents = held(d, S_parents);
    if (by_key == NULL || items == NULL || parents == NULL) return -1;
    PyObject *keyed = item_or_keyerror(by_key, held(d, S_node));
    if (keyed == NULL) return -1;
    PyObject *matching = PyDict_GetItemWithError(keyed, v);
    if (matching == NULL) return PyErr_Occurred() ? -1 : 0;
    if (PyDict_GET_SIZE(matching) == 0) return 0;
    for (Py_ssize_t pp = 0; pp < PyList_GET_SIZE(parents); pp++) {
        PyObject *pair = PyList_GET_ITEM(parents, pp);
        Py_ssize_t pi = PyLong_AsSsize_t(PyTuple_GetItem(pair, 0));
        Py_ssize_t slot = PyLong_AsSsize_t(PyTuple_GetItem(pair, 1));
        if ((pi == -1 || slot == -1) && PyErr_Occurred()) return -1;
        PyObject *parent = PyList_GET_ITEM(cx->ds, pi);
        PyObject *snapshot = PyDict_Keys(matching);
        if (snapshot == NULL) return -1;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(snapshot); j++) {
            PyObject *item = PyList_GET_ITEM(snapshot, j);
            cx->propagations++;
            PyObject *f = ONE;
            Py_INCREF(f);
            if (cx->grouped) {
                PyObject *members = item_or_keyerror(items, item);
                Py_ssize_t n = members == NULL ? -1 : PyObject_Size(members);
                PyObject *size = n < 0 ? NULL : PyLong_FromSsize_t(n);
                Py_DECREF(f);
                f = size == NULL ? NULL : nextpow2(size);
                Py_XDECREF(size);
                if (f == NULL) goto fail;
            }
            PyObject *o = children_product(cx, parent, item, slot, f);
            Py_DECREF(f);
            if (o == NULL) goto fail;
            int nz = PyObject_IsTrue(o);
            int rc = nz;
            if (nz > 0) {
                PyObject *a = PyNumber_Multiply(old, o), *b = PyNumber_Multiply(new_, o);
                rc = (a == NULL || b == NULL) ? -1 : place(cx, parent, item, a, b);
                Py_XDECREF(a);
                Py_XDECREF(b);
            }
            Py_DECREF(o);
            if (rc < 0) goto fail;
        }
        Py_DECREF(snapshot);
        continue;
    fail:
        Py_DECREF(snapshot);
        return -1;
    }
    return 0;
}

/* JoinIndex._place in rounded mode. */
static int place(Ctx *cx, PyObject *d, PyObject *item, PyObject *w_old, PyObject *w_new) {
    cx->places++;
    PyObject *cnt = held(d, S_cnt), *rcnt = held(d, S_rcnt), *key_pos = held(d, S_key_pos);
    if (cnt == NULL || rcnt == NULL || key_pos == NULL) return -1;
    PyObject *v = key_of(item, key_pos);
    if (v == NULL) return -1;
    PyObject *old_r = NULL, *c = NULL, *new_r = NULL, *x = NULL;
    int rc = -1;
    if (cx->dirty != NULL) {
        PyObject *changed = PyTuple_Pack(2, held(d, S_idx), v);
        if (changed == NULL) goto done;
        int added = PySet_Add(cx->dirty, changed);
        Py_DECREF(changed);
        if (added < 0) goto done;
    }
    int old_nz = PyObject_IsTrue(w_old), new_nz = PyObject_IsTrue(w_new);
    if (old_nz < 0 || new_nz < 0) goto done;
    if (old_nz) {
        if ((x = exponent(w_old)) == NULL || bucket_remove(d, v, x, item) < 0) goto done;
        Py_CLEAR(x);
    }
    if (new_nz) {
        if ((x = exponent(w_new)) == NULL || bucket_add(d, v, x, item) < 0) goto done;
        Py_CLEAR(x);
    }
    old_r = get_or_zero(rcnt, v); /* read before cnt changes */
    if (old_r == NULL) goto done;
    Py_INCREF(old_r);
    PyObject *c0 = get_or_zero(cnt, v);
    if (c0 == NULL) goto done;
    PyObject *sum = PyNumber_Add(c0, w_new);
    if (sum == NULL) goto done;
    c = PyNumber_Subtract(sum, w_old);
    Py_DECREF(sum);
    if (c == NULL) goto done;
    int c_nz = PyObject_IsTrue(c);
    if (c_nz < 0) goto done;
    if (c_nz) {
        if (PyDict_SetItem(cnt, v, c) < 0 || (new_r = nextpow2(c)) == NULL) goto done;
    } else { /* the key is gone from this structure (deletes only) */
        PyObject *buckets = held(d, S_buckets), *exps = held(d, S_exps);
        if (buckets == NULL || exps == NULL) goto done;
        if (PyDict_DelItem(cnt, v) < 0 || PyDict_DelItem(rcnt, v) < 0 || PyDict_DelItem(buckets, v) < 0 ||
            PyDict_DelItem(exps, v) < 0)
            goto done;
        new_r = ZERO;
        Py_INCREF(new_r);
    }
    int differ = PyObject_RichCompareBool(new_r, old_r, Py_NE);
    if (differ < 0) goto done;
    if (differ) {
        if (c_nz && PyDict_SetItem(rcnt, v, new_r) < 0) goto done;
        if (propagate(cx, d, v, old_r, new_r) < 0) goto done;
    }
    rc = 0;
done:
    Py_DECREF(v);
    Py_XDECREF(old_r);
    Py_XDECREF(c);
    Py_XDECREF(new_r);
    Py_XDECREF(x);
    return rc;
}

/* Add `extra` to the int attribute `name` of `o`. */
static int bump_counter(PyObject *o, PyObject *name, long long extra) {
    if (extra == 0) return 0;
    PyObject *now = PyObject_GetAttr(o, name);
    if (now == NULL) return -1;
    PyObject *more = PyLong_FromLongLong(extra);
    PyObject *sum = more == NULL ? NULL : PyNumber_Add(now, more);
    Py_DECREF(now);
    Py_XDECREF(more);
    if (sum == NULL) return -1;
    int rc = PyObject_SetAttr(o, name, sum);
    Py_DECREF(sum);
    return rc;
}

static PyObject *k_reweigh(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "reweigh(index, e, item, old_f, f)");
        return NULL;
    }
    PyObject *ix = args[0], *item = args[2], *old_f = args[3], *f = args[4];
    Py_ssize_t e = PyLong_AsSsize_t(args[1]);
    if (e == -1 && PyErr_Occurred()) return NULL;
    Ctx cx = {0};
    cx.ds = held(ix, S_ds);
    cx.nodes = held(ix, S_nodes);
    PyObject *out = held(ix, S_out), *grouped = held(ix, S_grouped), *tracking = held(ix, S_tracking);
    if (cx.ds == NULL || cx.nodes == NULL || out == NULL || grouped == NULL || tracking == NULL) return NULL;
    if (!PyList_Check(cx.ds) || !PyList_Check(cx.nodes) || !PyList_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "the index's ds, nodes and out are lists");
        return NULL;
    }
    cx.grouped = PyObject_IsTrue(grouped);
    int track = PyObject_IsTrue(tracking);
    if (cx.grouped < 0 || track < 0) return NULL;
    if (track && (cx.dirty = held(ix, S_dirty)) == NULL) return NULL;
    PyObject *mine = PyList_GetItem(out, e);
    if (mine == NULL) return NULL;
    int rc = 0;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(mine) && rc == 0; j++) {
        Py_ssize_t di = PyLong_AsSsize_t(PyList_GET_ITEM(mine, j));
        if (di == -1 && PyErr_Occurred()) {
            rc = -1;
            break;
        }
        PyObject *d = PyList_GET_ITEM(cx.ds, di);
        PyObject *base = children_product(&cx, d, item, -1, ONE);
        if (base == NULL) {
            rc = -1;
            break;
        }
        int nz = PyObject_IsTrue(base);
        rc = nz < 0 ? -1 : 0;
        if (nz > 0) {
            PyObject *a = PyNumber_Multiply(old_f, base), *b = PyNumber_Multiply(f, base);
            rc = (a == NULL || b == NULL) ? -1 : place(&cx, d, item, a, b);
            Py_XDECREF(a);
            Py_XDECREF(b);
        }
        Py_DECREF(base);
    }
    if (bump_counter(ix, S_places, cx.places) < 0 || bump_counter(ix, S_propagations, cx.propagations) < 0)
        return NULL;
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"reweigh", (PyCFunction)(void (*)(void))k_reweigh, METH_FASTCALL,
     "Re-weigh an item of node e (factor old_f -> f) in every D[e->*], propagating rounded-count changes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The rounded join index's weight updates, compiled.", -1, methods,
    NULL, NULL, NULL, NULL,
};

#define INTERN(var, text)                                  \
    do {                                                   \
        if ((var = PyUnicode_InternFromString(text)) == NULL) \
            return NULL;                                   \
    } while (0)

PyMODINIT_FUNC PyInit__kernels(void) {
    INTERN(S_key_pos, "key_pos");
    INTERN(S_buckets, "buckets");
    INTERN(S_exps, "exps");
    INTERN(S_where, "where");
    INTERN(S_cnt, "cnt");
    INTERN(S_rcnt, "rcnt");
    INTERN(S_parent, "parent");
    INTERN(S_node, "node");
    INTERN(S_parents, "parents");
    INTERN(S_children, "children");
    INTERN(S_child_pos, "child_pos");
    INTERN(S_idx, "idx");
    INTERN(S_by_key, "by_key");
    INTERN(S_items, "items");
    INTERN(S_ds, "ds");
    INTERN(S_nodes, "nodes");
    INTERN(S_grouped, "grouped");
    INTERN(S_tracking, "tracking");
    INTERN(S_dirty, "dirty");
    INTERN(S_places, "places");
    INTERN(S_propagations, "propagations");
    INTERN(S_out, "out");
    if ((ZERO = PyLong_FromLong(0)) == NULL || (ONE = PyLong_FromLong(1)) == NULL) return NULL;
    return PyModule_Create(&module);
}
