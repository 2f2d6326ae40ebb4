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

static PyMethodDef methods[] = {
    {"mul_rows_into", (PyCFunction)(void (*)(void))k_mul_rows_into, METH_FASTCALL,
     "Row-wise block product of two cofactor columns into preallocated outputs."},
    {"lift_into", (PyCFunction)(void (*)(void))k_lift_into, METH_FASTCALL,
     "The lifts m·(x, x xᵀ) of a leaf's tuples into preallocated outputs."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "F-IVM's column loops, compiled.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
