/* A ledger's checkpoint entries, compiled (part of the _kernels extension; services/vwap/kernels.py
 * holds the same in Python): a tuple of ints in 64 bits written as orjson writes it, any other through
 * the callbacks.
 */
#include "_kernels.h"

/* The decimal text of x at out (at least 20 bytes); its length. */
static Py_ssize_t put_ll(char *out, long long x) {
    char tmp[24];
    Py_ssize_t n = 0, len = 0;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    do {
        tmp[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (x < 0) out[len++] = '-';
    while (n) out[len++] = tmp[--n];
    return len;
}

/* JSON bytes of the int v when it fits in 64 bits (a new reference), else value_of(v). */
static PyObject *int_json(PyObject *v, PyObject *value_of) {
    long long x;
    if (as_small(v, &x)) {
        char buf[24];
        return PyBytes_FromStringAndSize(buf, put_ll(buf, x));
    }
    return PyObject_CallOneArg(value_of, v);
}

/* One ledger tuple's state key: prefix (`["<rel>",`), its values and `]` when every value is an int in 64
 * bits (the text orjson gives such a list), else key_of(vals). A new reference. */
static PyObject *entry_key(PyObject *vals, const char *prefix, Py_ssize_t plen, PyObject *key_of) {
    char buf[512];
    Py_ssize_t n = PyTuple_Check(vals) ? PyTuple_GET_SIZE(vals) : 0;
    if (n == 0 || plen + 21 * n + 1 > (Py_ssize_t)sizeof(buf)) return PyObject_CallOneArg(key_of, vals);
    memcpy(buf, prefix, (size_t)plen);
    Py_ssize_t len = plen;
    for (Py_ssize_t k = 0; k < n; k++) {
        long long x;
        if (!as_small(PyTuple_GET_ITEM(vals, k), &x)) return PyObject_CallOneArg(key_of, vals);
        if (k) buf[len++] = ',';
        len += put_ll(buf + len, x);
    }
    buf[len++] = ']';
    return PyBytes_FromStringAndSize(buf, len);
}

/* bag_entries(ledger, touched, tag, prefix, key_of, value_of): kernels.py_bag_entries, compiled. */
PyObject *bag_entries(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ledger, *touched, *tag, *prefix, *key_of, *value_of;
    if (!PyArg_ParseTuple(args, "O!OOO!OO:bag_entries", &PyDict_Type, &ledger, &touched, &tag, &PyBytes_Type,
                          &prefix, &key_of, &value_of))
        return NULL;
    const char *pre = PyBytes_AS_STRING(prefix);
    Py_ssize_t plen = PyBytes_GET_SIZE(prefix);
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    PyObject *keys = touched == Py_None ? ledger : touched;
    if (!PyDict_Check(keys)) {
        PyErr_SetString(PyExc_TypeError, "touched must be a dict or None");
        goto fail;
    }
    Py_ssize_t pos = 0;
    PyObject *vals, *m, *was = NULL;
    Py_hash_t hash;
    while (_PyDict_Next(keys, &pos, &vals, &m, &hash)) {
        if (touched != Py_None) { /* the change log holds the tuple's hash: it is not computed again */
            was = m;                                           /* live at the checkpoint */
            m = _PyDict_GetItem_KnownHash(ledger, vals, hash); /* borrowed; NULL: no longer live */
            if (m == NULL && PyErr_Occurred()) goto fail;
        }
        int truth = m == NULL ? 0 : PyObject_IsTrue(m);
        if (truth < 0) goto fail;
        if (!truth && touched != Py_None) { /* no longer live: skipped where not live at the checkpoint either */
            int stored = PyObject_IsTrue(was);
            if (stored < 0) goto fail;
            if (!stored) continue;
        }
        PyObject *key = entry_key(vals, pre, plen, key_of);
        if (key == NULL) goto fail;
        PyObject *value = Py_None;
        if (truth && (value = int_json(m, value_of)) == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        if (!truth) Py_INCREF(value);
        PyObject *entry = PyTuple_Pack(3, tag, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (entry == NULL) goto fail;
        int rc = PyList_Append(out, entry);
        Py_DECREF(entry);
        if (rc < 0) goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}
