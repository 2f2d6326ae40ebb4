/* Payload objects to columns and back (part of the _kernels extension, _kernels.h). */
#include "_kernels.h"

static int copy_row(PyObject *payload, PyObject *name, double *dst, Py_ssize_t width, int *fits) {
    PyObject *arr = PyObject_GetAttr(payload, name);
    if (arr == NULL) return -1;
    Buf b = {0};
    int rc = take(arr, &b, 1, 'd', 0, "a payload's array");
    Py_DECREF(arr);
    if (rc < 0) {
        release(&b, 1);
        return -1;
    }
    if (dim(&b, 0) != width)
        *fits = 0;
    else
        memcpy(dst, b.view.buf, (size_t)width * sizeof(double));
    release(&b, 1);
    return 0;
}

/* Row `row` of the payload's block into dst rows: sets *fits = 0 when the block's width differs. */
static int copy_block_row(PyObject *p, Source *src, double *sums, double *quad, Py_ssize_t k,
                          Py_ssize_t t, int *fits) {
    PyObject *block = PyObject_GetAttr(p, s_block);
    if (block == NULL) return -1;
    int rc = source_of(src, block);
    Py_DECREF(block);  /* the payload keeps it alive, and with it the buffers */
    if (rc < 0) return -1;
    PyObject *row = PyObject_GetAttr(p, s_row);
    if (row == NULL) return -1;
    Py_ssize_t r = PyLong_AsSsize_t(row);
    Py_DECREF(row);
    if (r == -1 && PyErr_Occurred()) return -1;
    if (r < 0 || r >= dim(&src->cols[0], 0) || dim(&src->cols[1], 0) != dim(&src->cols[0], 0)) {
        PyErr_SetString(PyExc_IndexError, "gather_into: a row payload's row is outside its columns");
        return -1;
    }
    if (dim(&src->cols[0], 1) != k || dim(&src->cols[1], 1) != t) {
        *fits = 0;
        return 0;
    }
    memcpy(sums, (double *)src->cols[0].view.buf + r * k, (size_t)k * sizeof(double));
    memcpy(quad, (double *)src->cols[1].view.buf + r * t, (size_t)t * sizeof(double));
    return 0;
}

/* gather_into(payloads, lo, counts, sums, quad[, row_cls]): the count, sums and upper triangle of each
 * payload object (attributes `lo`, `count`, `sums`, `quad`, the arrays float64) copied into row i of
 * the columns. A payload whose type is exactly `row_cls` (RowCofactor) is row `row` of the columns
 * `block` (attributes `sums`, `quad`): its row is copied from those columns, their buffers taken once
 * per run of payloads of one block. Returns False, leaving the columns partly filled, when a payload's
 * block is not [lo, lo + k) with k the columns' width (the caller then says which blocks differ). */
PyObject *k_gather_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6 && !positional("gather_into", nargs, 5)) return NULL;
    PyTypeObject *row_cls = NULL;
    if (nargs == 6 && args[5] != Py_None) {
        if (!PyType_Check(args[5])) {
            PyErr_SetString(PyExc_TypeError, "gather_into: row_cls must be a class or None");
            return NULL;
        }
        row_cls = (PyTypeObject *)args[5];
    }
    PyObject *seq = PySequence_Fast(args[0], "payloads must be a sequence");
    if (seq == NULL) return NULL;
    long lo = PyLong_AsLong(args[1]);
    if (lo == -1 && PyErr_Occurred()) {
        Py_DECREF(seq);
        return NULL;
    }
    Buf b[3];
    memset(b, 0, sizeof b);
    Source src;
    memset(&src, 0, sizeof src);
    PyObject *result = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), k = take_rows(args + 2, b, 1, &n, "gather_into");
    if (k < 0) goto done;
    const Py_ssize_t t = k * (k + 1) / 2;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    int64_t *counts = b[0].view.buf;
    double *sums = b[1].view.buf, *quad = b[2].view.buf;
    int fits = 1;
    for (Py_ssize_t i = 0; i < n && fits; i++) {
        PyObject *p = items[i];
        PyObject *count = PyObject_GetAttr(p, s_count);
        if (count == NULL) goto done;
        long long c = PyLong_AsLongLong(count);
        Py_DECREF(count);
        if (c == -1 && PyErr_Occurred()) goto done;
        counts[i] = (int64_t)c;
        if (k) {
            PyObject *plo = PyObject_GetAttr(p, s_lo);
            if (plo == NULL) goto done;
            long l = PyLong_AsLong(plo);
            Py_DECREF(plo);
            if (l == -1 && PyErr_Occurred()) goto done;
            if (l != lo) fits = 0;
        }
        if (!fits) break;
        if (row_cls != NULL && Py_TYPE(p) == row_cls) {
            if (copy_block_row(p, &src, sums + i * k, quad + i * t, k, t, &fits) < 0) goto done;
            continue;
        }
        if (copy_row(p, s_sums, sums + i * k, k, &fits) < 0) goto done;
        if (fits && copy_row(p, s_quad, quad + i * t, t, &fits) < 0) goto done;
    }
    result = PyBool_FromLong(fits);
done:
    release(src.cols, 2);
    release(b, 3);
    Py_DECREF(seq);
    return result;
}

/* payload_rows(cls, keys, lo, counts, block): [(keys[i], p_i)], each p_i a new instance of the slotted
 * class `cls` (RowCofactor) made without calling __init__ (as `cls.__new__(cls)`), with attributes
 * lo, count = counts[i] (a list of ints), block and row = i: the payloads of the rows of `block`. */
PyObject *k_payload_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("payload_rows", nargs, 5)) return NULL;
    if (!PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "payload_rows: cls must be a class");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    PyObject *keys = args[1], *lo = args[2], *counts = args[3], *block = args[4];
    if (!PyList_Check(keys) || !PyList_Check(counts)) {
        PyErr_SetString(PyExc_TypeError, "payload_rows: keys and counts must be lists");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(counts) != n || PyObject_Length(block) != n) {
        if (!PyErr_Occurred()) shape_error("payload_rows");
        return NULL;
    }
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    PyObject *names[4] = {s_block, s_row, s_count, s_lo};
    Py_ssize_t offsets[4];
    const int direct = slot_offsets(cls, names, 4, offsets);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = cls->tp_alloc(cls, 0);
        if (p == NULL) goto fail;
        PyObject *row = PyLong_FromSsize_t(i);
        int bad;
        if (direct && row != NULL) {  /* a fresh object's empty slots, written as their descriptors would */
            PyObject *values[4] = {block, row, PyList_GET_ITEM(counts, i), lo};
            for (int j = 0; j < 4; j++) *(PyObject **)((char *)p + offsets[j]) = Py_NewRef(values[j]);
            bad = 0;
        } else {
            bad = row == NULL || PyObject_SetAttr(p, s_block, block) < 0 || PyObject_SetAttr(p, s_row, row) < 0 ||
                  PyObject_SetAttr(p, s_count, PyList_GET_ITEM(counts, i)) < 0 ||
                  PyObject_SetAttr(p, s_lo, lo) < 0;
        }
        Py_XDECREF(row);
        if (bad) {
            Py_DECREF(p);
            goto fail;
        }
        /* A row payload refers to ints and its batch's columns, never to anything that refers back to
         * it: it cannot be part of a reference cycle, so the cycle collector need not walk it. */
        if (PyObject_IS_GC(p)) PyObject_GC_UnTrack(p);
        PyObject *pair = PyTuple_Pack(2, PyList_GET_ITEM(keys, i), p);
        Py_DECREF(p);
        if (pair == NULL) goto fail;
        PyList_SET_ITEM(out, i, pair);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* columns_into(rows, positions, out): out[i, j] = float(rows[i][positions[j]]) for tuples `rows`, as
 * numpy converts a number to float64 (a float as it is, an int rounded to the nearest double). */
PyObject *k_columns_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("columns_into", nargs, 3)) return NULL;
    PyObject *rows = PySequence_Fast(args[0], "columns_into: rows must be a sequence");
    if (rows == NULL) return NULL;
    PyObject *pos = PySequence_Fast(args[1], "columns_into: positions must be a sequence");
    if (pos == NULL) {
        Py_DECREF(rows);
        return NULL;
    }
    Buf b = {0};
    PyObject *result = NULL;
    Py_ssize_t *at = NULL;
    if (take(args[2], &b, 2, 'd', 1, "out") < 0) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(rows), w = PySequence_Fast_GET_SIZE(pos);
    if (dim(&b, 0) != n || dim(&b, 1) != w) {
        shape_error("columns_into");
        goto done;
    }
    at = PyMem_Calloc((size_t)(w > 0 ? w : 1), sizeof(Py_ssize_t));
    if (at == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < w; j++) {
        at[j] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(pos, j));
        if (at[j] == -1 && PyErr_Occurred()) goto done;
    }
    double *out = b.view.buf;
    PyObject **items = PySequence_Fast_ITEMS(rows);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = items[i];
        if (!PyTuple_Check(row)) {
            PyErr_SetString(PyExc_TypeError, "columns_into: rows must be tuples");
            goto done;
        }
        for (Py_ssize_t j = 0; j < w; j++) {
            if (at[j] < 0 || at[j] >= PyTuple_GET_SIZE(row)) {
                PyErr_SetString(PyExc_IndexError, "columns_into: a position is outside a row");
                goto done;
            }
            PyObject *v = PyTuple_GET_ITEM(row, at[j]);
            double d = PyFloat_CheckExact(v) ? PyFloat_AS_DOUBLE(v) : PyFloat_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred()) goto done;
            out[i * w + j] = d;
        }
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(at);
    release(&b, 1);
    Py_DECREF(pos);
    Py_DECREF(rows);
    return result;
}
