/* A batch's events or columns consolidated (part of the _kernels extension, _kernels.h). */
#include "_kernels.h"

/* absorb_run(events, start, relation, columns, batch): the run of `relation`'s events from `start` (up
 * to the first event of another relation; attributes `relation`, `delta`, `row`), an all-float
 * relation, added to `batch` (tuple of the row's values at `columns` -> summed multiplicity), in the
 * order the tuples first appear, -0.0 stored as 0.0. Returns the index after the run; or `start`,
 * leaving `batch` untouched, when the run is shorter than two events or any of its events needs the
 * per-event checks: a delta that is not an exact non-zero int, a row that is not a dict of exactly
 * `columns`, a value that is not a finite float. */

/* Reads an event's fields (relation, delta, row) from its slots when its class keeps them as plain
 * object slots read by the generic getattr (a msgspec struct's fields, a __slots__ class), the class
 * resolved once per call; any other event, or an empty slot, goes through getattr. */
typedef struct {
    PyTypeObject *cls;
    Py_ssize_t offsets[3];
} EventSlots;

static void event_slots(EventSlots *es, PyObject *event) {
    PyTypeObject *cls = Py_TYPE(event);
    PyObject *names[3] = {s_relation, s_delta, s_row};
    es->cls = NULL;
    if (cls->tp_getattro != PyObject_GenericGetAttr) return;
    for (int j = 0; j < 3; j++) {
        PyObject *d = _PyType_Lookup(cls, names[j]);
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return;
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX && m->type != T_OBJECT) return;
        es->offsets[j] = m->offset;
    }
    es->cls = cls;
}

/* field 0 relation, 1 delta, 2 row: a new reference, or NULL with an exception set */
static PyObject *event_field(EventSlots *es, PyObject *event, int field) {
    if (Py_TYPE(event) == es->cls) {
        PyObject *v = *(PyObject **)((char *)event + es->offsets[field]);
        if (v != NULL) return Py_NewRef(v);
    }
    return PyObject_GetAttr(event, field == 0 ? s_relation : field == 1 ? s_delta : s_row);
}

PyObject *k_absorb_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("absorb_run", nargs, 5)) return NULL;
    PyObject *batch = args[4], *relation = args[2];
    if (!PyDict_Check(batch)) {
        PyErr_SetString(PyExc_TypeError, "absorb_run: batch must be a dict");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    PyObject *all = PySequence_Fast(args[0], "absorb_run: events must be a sequence");
    if (all == NULL) return NULL;
    Py_ssize_t total = PySequence_Fast_GET_SIZE(all), end = start < 0 ? total : start;
    EventSlots es = {NULL, {0, 0, 0}};
    if (end < total) event_slots(&es, PySequence_Fast_GET_ITEM(all, end));
    for (; end < total; end++) {  /* the run: events of `relation` from `start` */
        PyObject *r = event_field(&es, PySequence_Fast_GET_ITEM(all, end), 0);
        if (r == NULL) {
            Py_DECREF(all);
            return NULL;
        }
        int same = PyObject_RichCompareBool(r, relation, Py_EQ);
        Py_DECREF(r);
        if (same < 0) {
            Py_DECREF(all);
            return NULL;
        }
        if (!same) break;
    }
    if (start < 0 || end - start < 2) {
        Py_DECREF(all);
        return start < 0 ? (PyErr_SetString(PyExc_ValueError, "absorb_run: start < 0"), NULL)
                         : PyLong_FromSsize_t(start);
    }
    PyObject *seq = PyList_GetSlice(all, start, end);
    Py_DECREF(all);
    if (seq == NULL) return NULL;
    PyObject *cols = PySequence_Fast(args[3], "absorb_run: columns must be a sequence");
    if (cols == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    /* An empty batch takes the run directly (and is emptied again if the run needs the per-event
     * checks); else the run is consolidated apart, then added. */
    const int direct = PyDict_GET_SIZE(batch) == 0;
    int absorbed = 0;
    PyObject *acc = direct ? Py_NewRef(batch) : PyDict_New(), *zero = PyFloat_FromDouble(0.0), *result = NULL;
    if (acc == NULL || zero == NULL) goto done;
    Py_ssize_t n = PyList_GET_SIZE(seq), width = PySequence_Fast_GET_SIZE(cols);
    PyObject **events = PySequence_Fast_ITEMS(seq), **names = PySequence_Fast_ITEMS(cols);
    int fits = 1;
    for (Py_ssize_t i = 0; i < n && fits; i++) {
        PyObject *delta = event_field(&es, events[i], 1);
        if (delta == NULL) goto done;
        PyObject *row = PyLong_CheckExact(delta) && PyObject_IsTrue(delta) == 1
                            ? event_field(&es, events[i], 2)
                            : (fits = 0, NULL);
        if (!fits) {
            Py_DECREF(delta);
            break;
        }
        if (row == NULL) {
            Py_DECREF(delta);
            goto done;
        }
        PyObject *key = NULL;
        if (PyDict_CheckExact(row) && PyDict_GET_SIZE(row) == width && (key = PyTuple_New(width)) != NULL) {
            for (Py_ssize_t j = 0; j < width; j++) {
                PyObject *v = PyDict_GetItemWithError(row, names[j]);
                if (v == NULL || !PyFloat_CheckExact(v) || !isfinite(PyFloat_AS_DOUBLE(v))) {
                    fits = 0;
                    break;
                }
                v = PyFloat_AS_DOUBLE(v) == 0.0 ? zero : v;  /* -0.0 == 0.0: one encoding of zero */
                Py_INCREF(v);
                PyTuple_SET_ITEM(key, j, v);
            }
        } else if (key == NULL && !PyErr_Occurred()) {
            fits = 0;
        }
        Py_DECREF(row);
        if (PyErr_Occurred()) {
            Py_XDECREF(key);
            Py_DECREF(delta);
            goto done;
        }
        if (fits) {  /* the key hashed once for the lookup and the store */
            Py_hash_t hash = PyObject_Hash(key);
            PyObject *old = hash == -1 ? NULL : _PyDict_GetItem_KnownHash(acc, key, hash);
            PyObject *sum = old != NULL ? PyNumber_Add(old, delta) : (PyErr_Occurred() ? NULL : (Py_INCREF(delta), delta));
            int rc = sum == NULL ? -1 : _PyDict_SetItem_KnownHash(acc, key, sum, hash);
            Py_XDECREF(sum);
            if (rc < 0) {
                Py_DECREF(key);
                Py_DECREF(delta);
                goto done;
            }
        }
        Py_XDECREF(key);
        Py_DECREF(delta);
    }
    if (!fits) {
        result = PyLong_FromSsize_t(start);
        goto done;
    }
    if (!direct) {
        Py_ssize_t pos = 0;
        PyObject *key, *m;
        Py_hash_t hash;
        while (_PyDict_Next(acc, &pos, &key, &m, &hash)) {  /* each key's hash as the run stored it */
            PyObject *old = _PyDict_GetItem_KnownHash(batch, key, hash);
            if (old == NULL && PyErr_Occurred()) goto done;
            PyObject *sum = old != NULL ? PyNumber_Add(old, m) : Py_NewRef(m);
            if (sum == NULL) goto done;
            int rc = _PyDict_SetItem_KnownHash(batch, key, sum, hash);
            Py_DECREF(sum);
            if (rc < 0) goto done;
        }
    }
    result = PyLong_FromSsize_t(end);
    absorbed = result != NULL;
done:
    if (direct && !absorbed) PyDict_Clear(batch);  /* untouched: as it came, empty */
    Py_XDECREF(acc);
    Py_XDECREF(zero);
    Py_DECREF(cols);
    Py_DECREF(seq);
    return result;
}

/* absorb_columns(columns, deltas): one relation's batch given as columns (equal-length lists, one per
 * declared column, in declared order) and its deltas, summed into a new dict (the tuple of a row's
 * values -> summed multiplicity, tuples in order of first appearance, -0.0 stored as 0.0); None when
 * the batch is empty or any row needs the per-event checks: a delta that is not an exact non-zero
 * int, a value that is not a finite float. */
PyObject *k_absorb_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("absorb_columns", nargs, 2)) return NULL;
    PyObject *cols = PySequence_Fast(args[0], "absorb_columns: columns must be a sequence");
    if (cols == NULL) return NULL;
    PyObject *ds = PySequence_Fast(args[1], "absorb_columns: deltas must be a sequence");
    if (ds == NULL) {
        Py_DECREF(cols);
        return NULL;
    }
    Py_ssize_t width = PySequence_Fast_GET_SIZE(cols), n = PySequence_Fast_GET_SIZE(ds), held = 0;
    PyObject **deltas = PySequence_Fast_ITEMS(ds), *out = NULL, *zero = NULL, *result = NULL;
    int fits = n > 0;
    PyObject **fast = PyMem_Calloc(width > 0 ? (size_t)width : 1, sizeof(PyObject *));
    if (fast == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    while (held < width) {
        PyObject *column = PySequence_Fast(PySequence_Fast_GET_ITEM(cols, held), "absorb_columns: a column must be a sequence");
        if (column == NULL) goto done;
        fast[held++] = column;
        if (PySequence_Fast_GET_SIZE(column) != n) {
            PyErr_SetString(PyExc_ValueError, "absorb_columns: columns and deltas differ in length");
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n && fits; i++) {
        PyObject *d = deltas[i];
        fits = PyLong_CheckExact(d) && PyObject_IsTrue(d) == 1;
    }
    for (Py_ssize_t j = 0; j < width && fits; j++) {
        PyObject **values = PySequence_Fast_ITEMS(fast[j]);
        for (Py_ssize_t i = 0; i < n && fits; i++)
            fits = PyFloat_CheckExact(values[i]) && isfinite(PyFloat_AS_DOUBLE(values[i]));
    }
    if (!fits) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    zero = PyFloat_FromDouble(0.0);
    out = PyDict_New();
    if (zero == NULL || out == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyTuple_New(width);
        if (key == NULL) goto done;
        for (Py_ssize_t j = 0; j < width; j++) {
            PyObject *v = PySequence_Fast_ITEMS(fast[j])[i];
            v = PyFloat_AS_DOUBLE(v) == 0.0 ? zero : v; /* -0.0 == 0.0: one encoding of zero */
            PyTuple_SET_ITEM(key, j, Py_NewRef(v));
        }
        Py_hash_t hash = PyObject_Hash(key); /* hashed once for the lookup and the store */
        PyObject *old = hash == -1 ? NULL : _PyDict_GetItem_KnownHash(out, key, hash);
        PyObject *sum = old != NULL ? PyNumber_Add(old, deltas[i]) : (PyErr_Occurred() ? NULL : Py_NewRef(deltas[i]));
        int rc = sum == NULL ? -1 : _PyDict_SetItem_KnownHash(out, key, sum, hash);
        Py_XDECREF(sum);
        Py_DECREF(key);
        if (rc < 0) goto done;
    }
    result = Py_NewRef(out);
done:
    if (fast != NULL) {
        for (Py_ssize_t j = 0; j < held; j++) Py_DECREF(fast[j]);
        PyMem_Free(fast);
    }
    Py_XDECREF(out);
    Py_XDECREF(zero);
    Py_DECREF(ds);
    Py_DECREF(cols);
    return result;
}
