/* A step's sibling lookups and a batch's installs into a view (part of the _kernels extension, _kernels.h). */
#include "_kernels.h"

/* The row filter both probes build: keep None and kept `rows` itself while every row is kept; at the
 * first dropped row i, keep = [0, ..., i - 1] and kept = rows[:i], and each kept row after it appends
 * its index to keep and itself to kept. Inline, so the probes' loops pay one test per row as before. */
static inline int drop_row(PyObject *rows, Py_ssize_t i, PyObject **keep, PyObject **kept) {
    if (*keep != NULL) return 0;
    *keep = PyList_New(0);
    *kept = PyList_GetSlice(rows, 0, i);
    if (*keep == NULL || *kept == NULL) return -1;
    for (Py_ssize_t j = 0; j < i; j++) {
        PyObject *at = PyLong_FromSsize_t(j);
        int rc = at == NULL ? -1 : PyList_Append(*keep, at);
        Py_XDECREF(at);
        if (rc < 0) return -1;
    }
    return 0;
}

static inline int keep_row(PyObject *rows, Py_ssize_t i, PyObject *keep, PyObject *kept) {
    if (keep == NULL) return 0;
    PyObject *at = PyLong_FromSsize_t(i);
    int rc = at == NULL ? -1 : PyList_Append(keep, at);
    Py_XDECREF(at);
    return rc < 0 || PyList_Append(kept, PyList_GET_ITEM(rows, i)) < 0 ? -1 : 0;
}

/* (found, keep, kept) as the probes return it. */
static inline PyObject *probe_result(PyObject *found, PyObject *rows, PyObject *keep, PyObject *kept) {
    return keep == NULL ? PyTuple_Pack(3, found, Py_None, rows) : PyTuple_Pack(3, found, keep, kept);
}

/* probe_get(data, keys, rows): the point lookups of one sibling for every join row: (found, keep,
 * kept) with found the payloads data[keys[i]] that exist, in row order; keep None and kept `rows`
 * itself when every key is present, else keep the indexes of the rows that found one and kept those
 * rows. */
PyObject *k_probe_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("probe_get", nargs, 3)) return NULL;
    PyObject *data = args[0];
    if (!PyDict_Check(data) || !PyList_Check(args[1]) || !PyList_Check(args[2]) ||
        PyList_GET_SIZE(args[1]) != PyList_GET_SIZE(args[2])) {
        PyErr_SetString(PyExc_TypeError, "probe_get: a dict, and keys and rows as lists of one length");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(args[1]);
    PyObject *found = PyList_New(0), *keep = NULL, *kept = NULL, *result = NULL;
    if (found == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *hit = PyDict_GetItemWithError(data, PyList_GET_ITEM(args[1], i));
        if (hit == NULL) {
            if (PyErr_Occurred() || drop_row(args[2], i, &keep, &kept) < 0) goto done;
            continue;
        }
        if (PyList_Append(found, hit) < 0 || keep_row(args[2], i, keep, kept) < 0) goto done;
    }
    result = probe_result(found, args[2], keep, kept);
done:
    Py_DECREF(found);
    Py_XDECREF(keep);
    Py_XDECREF(kept);
    return result;
}

/* install_new(data, seq, changed, delta, next_seq): a view's grouped batch (distinct keys, non-zero
 * payloads) installed where its keys are new: for each (key, payload) in order, changed[key] = None;
 * a key absent from data gets data[key] = payload and seq[key] = the next creation number. Returns
 * (the next creation number, the (key, payload) pairs of keys data already held, in order). */
PyObject *k_install_new(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("install_new", nargs, 5)) return NULL;
    PyObject *data = args[0], *seqd = args[1], *changed = args[2];
    if (!PyDict_Check(data) || !PyDict_Check(seqd) || !PyDict_Check(changed) || !PyList_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "install_new: three dicts and a list of (key, payload) pairs");
        return NULL;
    }
    Py_ssize_t nxt = PyLong_AsSsize_t(args[4]);
    if (nxt == -1 && PyErr_Occurred()) return NULL;
    PyObject *present = PyList_New(0);
    if (present == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(args[3]);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(args[3], i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "install_new: a change is a (key, payload) tuple");
            goto fail;
        }
        PyObject *key = PyTuple_GET_ITEM(pair, 0), *payload = PyTuple_GET_ITEM(pair, 1);
        Py_hash_t hash = PyObject_Hash(key);  /* once for the three dicts */
        if (hash == -1 || _PyDict_SetItem_KnownHash(changed, key, Py_None, hash) < 0) goto fail;
        int held = _PyDict_Contains_KnownHash(data, key, hash);
        if (held < 0) goto fail;
        if (held) {
            if (PyList_Append(present, pair) < 0) goto fail;
            continue;
        }
        PyObject *number = PyLong_FromSsize_t(nxt);
        int rc = number == NULL || _PyDict_SetItem_KnownHash(data, key, payload, hash) < 0 ||
                 _PyDict_SetItem_KnownHash(seqd, key, number, hash) < 0;
        Py_XDECREF(number);
        if (rc) goto fail;
        nxt++;
    }
    PyObject *out = Py_BuildValue("(nN)", nxt, present);
    return out;
fail:
    Py_DECREF(present);
    return NULL;
}

/* probe_all(datas, keylists, rows): a step's point lookups in all its siblings, for every join row
 * at once: row i is kept when every sibling p holds keylists[p][i]. Returns (found, keep, kept): per
 * sibling the payloads of the kept rows, in row order; keep None and kept `rows` itself when every row
 * is kept, else the kept rows' indexes and the kept rows (as probe_get applied sibling after sibling
 * gives). A key list that is the same object as the previous sibling's is hashed once per row. */
PyObject *k_probe_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("probe_all", nargs, 3)) return NULL;
    PyObject *datas = args[0], *keylists = args[1], *rows = args[2];
    if (!PyList_Check(datas) || !PyList_Check(keylists) || !PyList_Check(rows) ||
        PyList_GET_SIZE(datas) != PyList_GET_SIZE(keylists)) {
        PyErr_SetString(PyExc_TypeError, "probe_all: lists of dicts, of key lists and of rows");
        return NULL;
    }
    Py_ssize_t m = PyList_GET_SIZE(datas), n = PyList_GET_SIZE(rows);
    for (Py_ssize_t p = 0; p < m; p++) {
        PyObject *keys = PyList_GET_ITEM(keylists, p);
        if (!PyDict_Check(PyList_GET_ITEM(datas, p)) || !PyList_Check(keys) || PyList_GET_SIZE(keys) != n) {
            PyErr_SetString(PyExc_TypeError, "probe_all: each sibling a dict and a key list of one per row");
            return NULL;
        }
    }
    PyObject *found = PyList_New(m), *keep = NULL, *kept = NULL, *result = NULL;
    PyObject **hits = PyMem_Calloc((size_t)(m > 0 ? m : 1), sizeof(PyObject *));
    if (found == NULL || hits == NULL) goto done;
    for (Py_ssize_t p = 0; p < m; p++) {
        PyObject *lst = PyList_New(0);
        if (lst == NULL) goto done;
        PyList_SET_ITEM(found, p, lst);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_hash_t hash = -1;
        PyObject *prev_keys = NULL;
        int all = 1;
        for (Py_ssize_t p = 0; p < m && all; p++) {
            PyObject *keys = PyList_GET_ITEM(keylists, p), *key = PyList_GET_ITEM(keys, i);
            if (keys != prev_keys) {
                hash = PyObject_Hash(key);
                if (hash == -1) goto done;
                prev_keys = keys;
            }
            hits[p] = _PyDict_GetItem_KnownHash(PyList_GET_ITEM(datas, p), key, hash);
            if (hits[p] == NULL) {
                if (PyErr_Occurred()) goto done;
                all = 0;
            }
        }
        if (!all) {
            if (drop_row(rows, i, &keep, &kept) < 0) goto done;
            continue;
        }
        for (Py_ssize_t p = 0; p < m; p++)
            if (PyList_Append(PyList_GET_ITEM(found, p), hits[p]) < 0) goto done;
        if (keep_row(rows, i, keep, kept) < 0) goto done;
    }
    result = probe_result(found, rows, keep, kept);
done:
    PyMem_Free(hits);
    Py_XDECREF(found);
    Py_XDECREF(keep);
    Py_XDECREF(kept);
    return result;
}
