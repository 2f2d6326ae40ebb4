/* The rounded join index's kernels, compiled: the module (its functions and the names it interns), an
 * insert into a node store and the re-weighing it makes (_weights.c), an insert's virtual batch
 * (_batches.c), an event's projection. services/reservoir/index.py holds the same steps in Python
 * (`JoinIndex.insert`, `_reweigh`, `delta_size`, `delta_get`): the reference these are tested against
 * and the fallback where this is not built. The index's containers are the Python objects the
 * Python steps use, and these steps make the same container operations in the same order, so the
 * buckets' order, and so every later sample, is the same.
 */
#include "_kernels.h"

#define RESERVOIR_DEFINE_NAME(n) PyObject *S_##n;
RESERVOIR_NAMES(RESERVOIR_DEFINE_NAME)
PyObject *ZERO, *ONE;

/* NodeStore.add: record t (arrival number seq, None: the next) in the node; its item (new reference)
 * and whether the item is new. NULL without an error (and *there set) when the node holds t already:
 * one probe of the node's tuples both asks and records. */
static PyObject *node_add(PyObject *node, PyObject *t, PyObject *seq, int *is_new, int *there, Keys *ks) {
    PyObject *tuples = held(node, S_tuples), *items = held(node, S_items), *by_key = held(node, S_by_key);
    PyObject *key_pos = held(node, S_key_pos), *whole = held(node, S_whole), *next = held(node, S_next_seq);
    if (tuples == NULL || items == NULL || by_key == NULL || key_pos == NULL || whole == NULL || next == NULL)
        return NULL;
    if (seq == Py_None) seq = next;
    Py_ssize_t held_before = PyDict_GET_SIZE(tuples);
    if (PyDict_SetDefault(tuples, t, seq) == NULL) return NULL;
    if (PyDict_GET_SIZE(tuples) == held_before) {
        *there = 1;
        return NULL;
    }
    Py_INCREF(seq);
    Py_INCREF(next);
    int later = PyObject_RichCompareBool(seq, next, Py_GE);
    Py_DECREF(next);
    if (later < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    if (later) {
        PyObject *after = PyNumber_Add(seq, ONE);
        int rc = after == NULL ? -1 : set_held(node, S_next_seq, after);
        Py_XDECREF(after);
        if (rc < 0) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    int w = PyObject_IsTrue(whole);
    if (w < 0) return NULL;
    PyObject *item;
    if (w) { /* the tuple is its own item, its one member: `tuples` holds it, `items` stays empty */
        item = t;
        Py_INCREF(item);
    } else {
        PyObject *item_pos = held(node, S_item_pos);
        if (item_pos == NULL || (item = key_of(t, item_pos)) == NULL) return NULL;
        PyObject *members = PyDict_GetItemWithError(items, item);
        if (members != NULL) {
            if (PyList_Append(members, t) < 0) goto fail_item;
            *is_new = 0;
            return item;
        }
        if (PyErr_Occurred()) goto fail_item;
        PyObject *list = atom_list(1);
        if (list == NULL) goto fail_item;
        Py_INCREF(t);
        PyList_SET_ITEM(list, 0, t);
        int rc = PyDict_SetItem(items, item, list);
        Py_DECREF(list);
        if (rc < 0) goto fail_item;
        unwatch(items);
    }
    if (!PyDict_Check(key_pos) || !PyDict_Check(by_key)) {
        PyErr_SetString(PyExc_TypeError, "a node's key_pos and by_key are dicts");
        goto fail_item;
    }
    Py_ssize_t at = 0;
    PyObject *n, *pos;
    while (PyDict_Next(key_pos, &at, &n, &pos)) {
        PyObject *keyed = item_or_keyerror(by_key, n);
        PyObject *v = keyed == NULL ? NULL : key_of(item, pos);
        if (v == NULL) goto fail_item;
        PyObject *inner = PyDict_GetItemWithError(keyed, v);
        if (inner == NULL) {
            if (PyErr_Occurred() || (inner = PyDict_New()) == NULL) {
                Py_DECREF(v);
                goto fail_item;
            }
            int rc = PyDict_SetItem(keyed, v, inner);
            Py_DECREF(inner);
            if (rc < 0) {
                Py_DECREF(v);
                goto fail_item;
            }
            unwatch(keyed);
        }
        if (ks->n < KEYS_MAX) { /* kept for the re-weighing and the batch's size */
            ks->pos[ks->n] = pos;
            ks->key[ks->n++] = v;
        } else {
            Py_DECREF(v);
        }
        if (PyDict_SetItem(inner, item, Py_None) < 0) goto fail_item;
    }
    ks->item = item;
    *is_new = 1;
    return item;
fail_item:
    Py_DECREF(item);
    return NULL;
}

/* JoinIndex.insert in rounded mode with counts: t into node e (arrival number seq or None), the item
 * re-weighed when it is new or its rounded group size changes; 1 inserted, 0 if t was there, -1 error. */
static int insert(PyObject *ix, Py_ssize_t e, PyObject *t, PyObject *seq, Keys *ks) {
    settle(t);
    Ctx cx = {0};
    if (open_ctx(&cx, ix) < 0) return -1;
    PyObject *node = PyList_GetItem(cx.nodes, e);
    if (node == NULL) return -1;
    int is_new = 0, there = 0;
    PyObject *item = node_add(node, t, seq, &is_new, &there, ks);
    if (item == NULL) return there ? 0 : -1;
    cx.keys = ks;
    int rc;
    if (is_new) {
        rc = reweigh(&cx, ix, e, item, ZERO, ONE);
    } else {
        PyObject *items = held(node, S_items);
        PyObject *members = items == NULL ? NULL : item_or_keyerror(items, item);
        Py_ssize_t size = members == NULL ? -1 : PyObject_Size(members);
        PyObject *now = size < 0 ? NULL : PyLong_FromSsize_t(size);
        PyObject *before = size < 0 ? NULL : PyLong_FromSsize_t(size - 1);
        PyObject *old_f = before == NULL ? NULL : nextpow2(before), *f = now == NULL ? NULL : nextpow2(now);
        rc = -1;
        if (old_f != NULL && f != NULL) {
            int differ = PyObject_RichCompareBool(f, old_f, Py_NE);
            rc = differ < 0 ? -1 : differ ? reweigh(&cx, ix, e, item, old_f, f) : 0;
        }
        Py_XDECREF(now);
        Py_XDECREF(before);
        Py_XDECREF(old_f);
        Py_XDECREF(f);
    }
    if (ks->item == item && Py_REFCNT(item) == 1) ks->item = NULL; /* its keys outlive no item */
    Py_DECREF(item);
    return close_ctx(&cx, ix, rc) < 0 ? -1 : 1;
}

static PyObject *k_insert(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    EXPECT_ARGS(nargs, 4, "insert(index, e, t, seq)");
    Py_ssize_t e;
    if (as_index(args[1], &e) < 0) return NULL;
    Keys ks = {0};
    int rc = insert(args[0], e, args[2], args[3], &ks);
    keys_clear(&ks);
    if (rc < 0) return NULL;
    return PyBool_FromLong(rc);
}

/* JoinIndex.insert_sized: insert, then the size and radices of the insert's virtual batch (one call where
 * a sampling engine made two); None if t was there. */
static PyObject *k_insert_sized(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    EXPECT_ARGS(nargs, 4, "insert_sized(index, e, t, seq)");
    Py_ssize_t e;
    if (as_index(args[1], &e) < 0) return NULL;
    Keys ks = {0};
    int rc = insert(args[0], e, args[2], args[3], &ks);
    PyObject *sized = rc < 0 ? NULL : rc == 0 ? Py_NewRef(Py_None) : delta_size(args[0], args[1], args[2], &ks);
    keys_clear(&ks);
    return sized;
}

static PyObject *k_reweigh(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    EXPECT_ARGS(nargs, 5, "reweigh(index, e, item, old_f, f)");
    Py_ssize_t e = PyLong_AsSsize_t(args[1]);
    if (e == -1 && PyErr_Occurred()) return NULL;
    Ctx cx = {0};
    if (open_ctx(&cx, args[0]) < 0) return NULL;
    int rc = reweigh(&cx, args[0], e, args[2], args[3], args[4]);
    if (close_ctx(&cx, args[0], rc) < 0) return NULL;
    Py_RETURN_NONE;
}

/* tuple(row[c] for c in columns), settled: an event's tuple, ready to enter the relations' dicts. */
static PyObject *k_project(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    EXPECT_ARGS(nargs, 2, "project(row, columns: tuple)");
    if (!PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "project(row, columns: tuple)");
        return NULL;
    }
    PyObject *row = args[0], *columns = args[1];
    Py_ssize_t n = PyTuple_GET_SIZE(columns);
    PyObject *t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyObject_GetItem(row, PyTuple_GET_ITEM(columns, i));
        if (x == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    settle(t);
    return t;
}

static PyMethodDef methods[] = {
    {"project", (PyCFunction)(void (*)(void))k_project, METH_FASTCALL,
     "tuple(row[c] for c in columns), untracked by the garbage collector when it holds atoms only."},
    {"reweigh", (PyCFunction)(void (*)(void))k_reweigh, METH_FASTCALL,
     "Re-weigh an item of node e (factor old_f -> f) in every D[e->*], propagating rounded-count changes."},
    {"insert", (PyCFunction)(void (*)(void))k_insert, METH_FASTCALL,
     "Add tuple t to node e (arrival number seq or None) and re-weigh its item; False if t was there."},
    {"insert_sized", (PyCFunction)(void (*)(void))k_insert_sized, METH_FASTCALL,
     "insert, then delta_size: (|dJ|, radices) of tuple t inserted into node e, or None if t was there."},
    {"delta_get", (PyCFunction)(void (*)(void))k_delta_get, METH_FASTCALL,
     "Entry z of dJ for tuple t just inserted into node e: a result row, or None for a dummy."},
    {"delta_size", (PyCFunction)(void (*)(void))k_delta_size, METH_FASTCALL,
     "|dJ| of tuple t just inserted into node e, and the radices."},
    {"insert_run", (PyCFunction)(void (*)(void))k_insert_run, METH_FASTCALL,
     "The engine's plain inserts from events[start:] until one it must judge: (its position, any sized)."},
    {"sample_dicts", (PyCFunction)(void (*)(void))k_sample_dicts, METH_FASTCALL,
     "[dict(zip(columns, r)) for r in sorted(rows)] when every row is a tuple of ints, else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The rounded join index's weight updates, compiled.", -1, methods,
    NULL, NULL, NULL, NULL,
};

#define RESERVOIR_INTERN_NAME(n)                              \
    if ((S_##n = PyUnicode_InternFromString(#n)) == NULL) return NULL;

PyMODINIT_FUNC PyInit__kernels(void) {
    RESERVOIR_NAMES(RESERVOIR_INTERN_NAME)
    if ((ZERO = PyLong_FromLong(0)) == NULL || (ONE = PyLong_FromLong(1)) == NULL) return NULL;
    return PyModule_Create(&module);
}
