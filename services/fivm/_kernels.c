/* The row loops of F-IVM's column execution, compiled: the block product of two columns of cofactor
 * payloads and the lift of a leaf's tuples (services/fivm/kernels.py holds the same loops in numpy, the
 * reference these are tested against and the fallback where this is not built).
 *
 * Arrays come in through the buffer protocol (C-contiguous int64 counts, float64 sums and upper
 * triangles), so the extension needs no numpy headers; the caller allocates the outputs. Every output
 * element is the same single IEEE product the numpy expression computes (`c_b * s_a`, `s_a[i] * s_b[j]`,
 * `m * (x_r * x_c)`, ...), so the results are equal bit for bit. Counts multiply in 64-bit
 * two's-complement arithmetic, as numpy's int64 columns do; the caller keeps them far below overflow.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static void release(Buf *bufs, int n) {
    for (int i = 0; i < n; i++)
        if (bufs[i].held) {
            PyBuffer_Release(&bufs[i].view);
            bufs[i].held = 0;
        }
}

/* A C-contiguous buffer of 8-byte items of kind 'i' (int64) or 'd' (float64) and `ndim` dimensions. */
static int take(PyObject *obj, Buf *buf, int ndim, char kind, int writable, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &buf->view, flags) < 0) return -1;
    buf->held = 1;
    const char *fmt = buf->view.format ? buf->view.format : "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
    int ok_kind = kind == 'd' ? strcmp(fmt, "d") == 0 : (strcmp(fmt, "l") == 0 || strcmp(fmt, "q") == 0);
    if (!ok_kind || buf->view.itemsize != 8 || buf->view.ndim != ndim) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous %s array of %d dimension(s)", what,
                     kind == 'd' ? "float64" : "int64", ndim);
        return -1;
    }
    return 0;
}

static Py_ssize_t dim(Buf *buf, int i) { return buf->view.shape[i]; }

static int positional(const char *name, Py_ssize_t nargs, Py_ssize_t expected) {
    if (nargs == expected) return 1;
    PyErr_Format(PyExc_TypeError, "%s expected %zd arguments, got %zd", name, expected, nargs);
    return 0;
}

static int shape_error(const char *name) {
    PyErr_Format(PyExc_ValueError, "%s: array shapes do not match", name);
    return -1;
}

/* mul_rows_into(ac, as, aq, bc, bs, bq, oc, os, oq): row i of the outputs is the block product
 * a[i]·b[i] of docs/fivm/rings.md §2.3, block a first: counts ac·bc; sums (bc·s_a | ac·s_b); the
 * upper triangle of [[bc·Q_a, s_a s_bᵀ], [., ac·Q_b]] row-major. */
static PyObject *k_mul_rows_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("mul_rows_into", nargs, 9)) return NULL;
    Buf b[9];
    memset(b, 0, sizeof b);
    static const int ndims[9] = {1, 2, 2, 1, 2, 2, 1, 2, 2};
    static const char *names[9] = {"a counts", "a sums", "a quad", "b counts", "b sums",
                                   "b quad",   "counts", "sums",   "quad"};
    for (int i = 0; i < 9; i++)
        if (take(args[i], &b[i], ndims[i], i % 3 == 0 ? 'i' : 'd', i >= 6, names[i]) < 0) goto fail;
    Py_ssize_t n = dim(&b[0], 0), ka = dim(&b[1], 1), kb = dim(&b[4], 1), k = ka + kb;
    Py_ssize_t ta = ka * (ka + 1) / 2, tb = kb * (kb + 1) / 2, t = k * (k + 1) / 2;
    if (dim(&b[1], 0) != n || dim(&b[2], 0) != n || dim(&b[2], 1) != ta || dim(&b[3], 0) != n ||
        dim(&b[4], 0) != n || dim(&b[5], 0) != n || dim(&b[5], 1) != tb || dim(&b[6], 0) != n ||
        dim(&b[7], 0) != n || dim(&b[7], 1) != k || dim(&b[8], 0) != n || dim(&b[8], 1) != t) {
        shape_error("mul_rows_into");
        goto fail;
    }
    const int64_t *ac = b[0].view.buf, *bc = b[3].view.buf;
    const double *as = b[1].view.buf, *aq = b[2].view.buf, *bs = b[4].view.buf, *bq = b[5].view.buf;
    int64_t *oc = b[6].view.buf;
    double *os = b[7].view.buf, *oq = b[8].view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const double ca = (double)ac[i], cb = (double)bc[i];
        const double *sa = as + i * ka, *sb = bs + i * kb, *qa = aq + i * ta, *qb = bq + i * tb;
        double *s = os + i * k, *q = oq + i * t;
        oc[i] = (int64_t)((uint64_t)ac[i] * (uint64_t)bc[i]);
        for (Py_ssize_t j = 0; j < ka; j++) s[j] = cb * sa[j];
        for (Py_ssize_t j = 0; j < kb; j++) s[ka + j] = ca * sb[j];
        for (Py_ssize_t r = 0; r < ka; r++) {
            for (Py_ssize_t c = r; c < ka; c++) *q++ = cb * *qa++;
            const double sr = sa[r];
            for (Py_ssize_t c = 0; c < kb; c++) *q++ = sr * sb[c];
        }
        for (Py_ssize_t j = 0; j < tb; j++) *q++ = ca * qb[j];
    }
    Py_END_ALLOW_THREADS
    release(b, 9);
    Py_RETURN_NONE;
fail:
    release(b, 9);
    return NULL;
}

/* lift_into(x, m, sums, quad): per row i, sums[i] = m_i·x[i] and quad[i] = m_i·(x[i] x[i]ᵀ)'s upper
 * triangle row-major, each product as m_i·(x_r·x_c): the leaf's lifts m·(1, x, x xᵀ). */
static PyObject *k_lift_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("lift_into", nargs, 4)) return NULL;
    Buf b[4];
    memset(b, 0, sizeof b);
    if (take(args[0], &b[0], 2, 'd', 0, "x") < 0 || take(args[1], &b[1], 1, 'i', 0, "multiplicities") < 0 ||
        take(args[2], &b[2], 2, 'd', 1, "sums") < 0 || take(args[3], &b[3], 2, 'd', 1, "quad") < 0)
        goto fail;
    Py_ssize_t n = dim(&b[0], 0), k = dim(&b[0], 1), t = k * (k + 1) / 2;
    if (dim(&b[1], 0) != n || dim(&b[2], 0) != n || dim(&b[2], 1) != k || dim(&b[3], 0) != n ||
        dim(&b[3], 1) != t) {
        shape_error("lift_into");
        goto fail;
    }
    const double *x = b[0].view.buf;
    const int64_t *m = b[1].view.buf;
    double *os = b[2].view.buf, *oq = b[3].view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const double mi = (double)m[i];
        const double *xi = x + i * k;
        double *s = os + i * k, *q = oq + i * t;
        for (Py_ssize_t r = 0; r < k; r++) {
            s[r] = mi * xi[r];
            const double xr = xi[r];
            for (Py_ssize_t c = r; c < k; c++) *q++ = mi * (xr * xi[c]);
        }
    }
    Py_END_ALLOW_THREADS
    release(b, 4);
    Py_RETURN_NONE;
fail:
    release(b, 4);
    return NULL;
}


/* gather_into(payloads, lo, counts, sums, quad[, row_cls]): the count, sums and upper triangle of each
 * payload object (attributes `lo`, `count`, `sums`, `quad`, the arrays float64) copied into row i of
 * the columns. A payload whose type is exactly `row_cls` (RowCofactor) is row `row` of the columns
 * `block` (attributes `sums`, `quad`): its row is copied from those columns, their buffers taken once
 * per run of payloads of one block. Returns False, leaving the columns partly filled, when a payload's
 * block is not [lo, lo + k) with k the columns' width (the caller then says which blocks differ). */
static PyObject *s_lo, *s_count, *s_sums, *s_quad, *s_block, *s_row;

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

/* The columns of a run of row payloads: the block object (borrowed: a payload holds it) and its
 * sums and quad buffers. */
typedef struct {
    PyObject *block;
    Buf cols[2];
} Source;

static int source_of(Source *src, PyObject *block) {
    if (src->block == block) return 0;
    release(src->cols, 2);
    src->block = NULL;
    PyObject *sums = PyObject_GetAttr(block, s_sums);
    if (sums == NULL) return -1;
    int rc = take(sums, &src->cols[0], 2, 'd', 0, "a row payload's sums column");
    Py_DECREF(sums);
    if (rc < 0) return -1;
    PyObject *quad = PyObject_GetAttr(block, s_quad);
    if (quad == NULL) return -1;
    rc = take(quad, &src->cols[1], 2, 'd', 0, "a row payload's quad column");
    Py_DECREF(quad);
    if (rc < 0) return -1;
    src->block = block;
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

static PyObject *k_gather_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
    if (take(args[2], &b[0], 1, 'i', 1, "counts") < 0 || take(args[3], &b[1], 2, 'd', 1, "sums") < 0 ||
        take(args[4], &b[2], 2, 'd', 1, "quad") < 0)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), k = dim(&b[1], 1), t = k * (k + 1) / 2;
    if (dim(&b[0], 0) != n || dim(&b[1], 0) != n || dim(&b[2], 0) != n || dim(&b[2], 1) != t) {
        shape_error("gather_into");
        goto done;
    }
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
static PyObject *k_payload_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = cls->tp_alloc(cls, 0);
        if (p == NULL) goto fail;
        PyObject *row = PyLong_FromSsize_t(i);
        int bad = row == NULL || PyObject_SetAttr(p, s_block, block) < 0 ||
                  PyObject_SetAttr(p, s_row, row) < 0 ||
                  PyObject_SetAttr(p, s_count, PyList_GET_ITEM(counts, i)) < 0 ||
                  PyObject_SetAttr(p, s_lo, lo) < 0;
        Py_XDECREF(row);
        if (bad) {
            Py_DECREF(p);
            goto fail;
        }
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

/* absorb_run(run, columns, batch): a run of one all-float relation's events (attributes `delta`,
 * `row`) added to `batch` (tuple of the row's values at `columns` -> summed multiplicity), in the order
 * the tuples first appear, -0.0 stored as 0.0. Returns False, leaving `batch` untouched, when any event
 * needs the per-event checks: a delta that is not an exact non-zero int, a row that is not a dict of
 * exactly `columns`, a value that is not a finite float. */
static PyObject *s_delta, *s_event_row;

static PyObject *k_absorb_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("absorb_run", nargs, 3)) return NULL;
    PyObject *batch = args[2];
    if (!PyDict_Check(batch)) {
        PyErr_SetString(PyExc_TypeError, "absorb_run: batch must be a dict");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[0], "absorb_run: run must be a sequence");
    if (seq == NULL) return NULL;
    PyObject *cols = PySequence_Fast(args[1], "absorb_run: columns must be a sequence");
    if (cols == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    PyObject *acc = PyDict_New(), *zero = PyFloat_FromDouble(0.0), *result = NULL;
    if (acc == NULL || zero == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), width = PySequence_Fast_GET_SIZE(cols);
    PyObject **events = PySequence_Fast_ITEMS(seq), **names = PySequence_Fast_ITEMS(cols);
    int fits = 1;
    for (Py_ssize_t i = 0; i < n && fits; i++) {
        PyObject *delta = PyObject_GetAttr(events[i], s_delta);
        if (delta == NULL) goto done;
        PyObject *row = PyLong_CheckExact(delta) && PyObject_IsTrue(delta) == 1
                            ? PyObject_GetAttr(events[i], s_event_row)
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
        if (fits) {
            PyObject *old = PyDict_GetItemWithError(acc, key);
            PyObject *sum = old != NULL ? PyNumber_Add(old, delta) : (PyErr_Occurred() ? NULL : (Py_INCREF(delta), delta));
            int rc = sum == NULL ? -1 : PyDict_SetItem(acc, key, sum);
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
        result = Py_NewRef(Py_False);
        goto done;
    }
    if (PyDict_GET_SIZE(batch) == 0) {
        if (PyDict_Update(batch, acc) < 0) goto done;
    } else {
        Py_ssize_t pos = 0;
        PyObject *key, *m;
        while (PyDict_Next(acc, &pos, &key, &m)) {
            PyObject *old = PyDict_GetItemWithError(batch, key);
            if (old == NULL && PyErr_Occurred()) goto done;
            PyObject *sum = old != NULL ? PyNumber_Add(old, m) : Py_NewRef(m);
            if (sum == NULL) goto done;
            int rc = PyDict_SetItem(batch, key, sum);
            Py_DECREF(sum);
            if (rc < 0) goto done;
        }
    }
    result = Py_NewRef(Py_True);
done:
    Py_XDECREF(acc);
    Py_XDECREF(zero);
    Py_DECREF(cols);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"mul_rows_into", (PyCFunction)(void (*)(void))k_mul_rows_into, METH_FASTCALL,
     "Row-wise block product of two cofactor columns into preallocated outputs."},
    {"lift_into", (PyCFunction)(void (*)(void))k_lift_into, METH_FASTCALL,
     "The lifts m·(x, x xᵀ) of a leaf's tuples into preallocated outputs."},
    {"gather_into", (PyCFunction)(void (*)(void))k_gather_into, METH_FASTCALL,
     "The counts, sums and upper triangles of payload objects of one block into preallocated columns."},
    {"payload_rows", (PyCFunction)(void (*)(void))k_payload_rows, METH_FASTCALL,
     "(key, payload) pairs, one new row payload object per row of the columns."},
    {"absorb_run", (PyCFunction)(void (*)(void))k_absorb_run, METH_FASTCALL,
     "A run of one all-float relation's events consolidated into a batch, or False."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "F-IVM's column loops, compiled.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    s_lo = PyUnicode_InternFromString("lo");
    s_count = PyUnicode_InternFromString("count");
    s_sums = PyUnicode_InternFromString("sums");
    s_quad = PyUnicode_InternFromString("quad");
    s_block = PyUnicode_InternFromString("block");
    s_row = PyUnicode_InternFromString("row");
    s_event_row = s_row;
    s_delta = PyUnicode_InternFromString("delta");
    if (!s_lo || !s_count || !s_sums || !s_quad || !s_block || !s_row || !s_delta) return NULL;
    return PyModule_Create(&module);
}
