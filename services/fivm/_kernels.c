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
#include <structmember.h>
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

/* Whether two held buffers share memory (an output given as an input too: refused). */
static int overlap(Buf *a, Buf *b) {
    const char *pa = a->view.buf, *pb = b->view.buf;
    return a->view.len > 0 && b->view.len > 0 && pa < pb + b->view.len && pb < pa + a->view.len;
}

static int outputs_apart(Buf *outs, int nout, Buf *ins, Py_ssize_t nin, const char *name) {
    for (int o = 0; o < nout; o++)
        for (Py_ssize_t i = 0; i < nin; i++)
            if (overlap(&outs[o], &ins[i]) || (i < o && overlap(&outs[o], &outs[i]))) {
                PyErr_Format(PyExc_ValueError, "%s: an output shares memory with an input or output", name);
                return 0;
            }
    return 1;
}

static int positional(const char *name, Py_ssize_t nargs, Py_ssize_t expected) {
    if (nargs == expected) return 1;
    PyErr_Format(PyExc_TypeError, "%s expected %zd arguments, got %zd", name, expected, nargs);
    return 0;
}

static int shape_error(const char *name) {
    PyErr_Format(PyExc_ValueError, "%s: array shapes do not match", name);
    return -1;
}

/* One row of the block product a·b (a's block first): count ac·bc, sums (bc·s_a | ac·s_b), the upper
 * triangle of [[bc·Q_a, s_a s_bᵀ], [., ac·Q_b]] row-major. Every kernel multiplying payloads calls it,
 * so each element is the same IEEE product wherever it is computed. Its outputs never overlap its inputs
 * (the callers refuse arrays that share memory), so the compiler may vectorize the loops; each element
 * stays one IEEE product. */
static void mul_row(int64_t ac, const double *restrict sa, const double *restrict qa, Py_ssize_t ka, int64_t bc,
                    const double *restrict sb, const double *restrict qb, Py_ssize_t kb, int64_t *restrict oc,
                    double *restrict s, double *restrict q) {
    const double ca = (double)ac, cb = (double)bc;
    const Py_ssize_t tb = kb * (kb + 1) / 2;
    *oc = (int64_t)((uint64_t)ac * (uint64_t)bc);
    for (Py_ssize_t j = 0; j < ka; j++) s[j] = cb * sa[j];
    for (Py_ssize_t j = 0; j < kb; j++) s[ka + j] = ca * sb[j];
    for (Py_ssize_t r = 0; r < ka; r++) {
        for (Py_ssize_t c = r; c < ka; c++) *q++ = cb * *qa++;
        const double sr = sa[r];
        for (Py_ssize_t c = 0; c < kb; c++) *q++ = sr * sb[c];
    }
    for (Py_ssize_t j = 0; j < tb; j++) *q++ = ca * qb[j];
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
    if (!outputs_apart(b + 6, 3, b, 6, "mul_rows_into")) goto fail;
    const int64_t *ac = b[0].view.buf, *bc = b[3].view.buf;
    const double *as = b[1].view.buf, *aq = b[2].view.buf, *bs = b[4].view.buf, *bq = b[5].view.buf;
    int64_t *oc = b[6].view.buf;
    double *os = b[7].view.buf, *oq = b[8].view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        mul_row(ac[i], as + i * ka, aq + i * ta, ka, bc[i], bs + i * kb, bq + i * tb, kb, oc + i, os + i * k,
                oq + i * t);
    Py_END_ALLOW_THREADS
    release(b, 9);
    Py_RETURN_NONE;
fail:
    release(b, 9);
    return NULL;
}

/* mul_chain_into(slots, swaps, counts, sums, quad): row i of the outputs is the product of row i of
 * every slot, multiplied in the slots' order: the running product P starts as slot 0 and step j sets
 * P = P·s_j, or s_j·P where swaps[j - 1] is true (the block of s_j comes first), each step the block
 * product of mul_rows_into. A slot is a (counts, sums, quad) triple of columns. One row's partial
 * products live in two small buffers, so the columns of the partial products are never written. */
static PyObject *k_mul_chain_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("mul_chain_into", nargs, 5)) return NULL;
    PyObject *slots = PySequence_Fast(args[0], "mul_chain_into: slots must be a sequence");
    if (slots == NULL) return NULL;
    PyObject *swaps = PySequence_Fast(args[1], "mul_chain_into: swaps must be a sequence");
    if (swaps == NULL) {
        Py_DECREF(slots);
        return NULL;
    }
    Py_ssize_t m = PySequence_Fast_GET_SIZE(slots);
    Buf out[3];
    memset(out, 0, sizeof out);
    Buf *in = m > 0 ? PyMem_Calloc((size_t)(3 * m), sizeof(Buf)) : NULL;
    Py_ssize_t *ks = m > 0 ? PyMem_Calloc((size_t)m, sizeof(Py_ssize_t)) : NULL;
    unsigned char *swap = m > 0 ? PyMem_Calloc((size_t)m, 1) : NULL;
    double *scratch = NULL;
    PyObject *result = NULL;
    if (m < 2 || PySequence_Fast_GET_SIZE(swaps) != m - 1) {
        if (m >= 2 || !PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "mul_chain_into: at least two slots and one swap flag per step");
        goto done;
    }
    if (in == NULL || ks == NULL || swap == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n = -1, k = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        PyObject *slot = PySequence_Fast_GET_ITEM(slots, j);
        if (!PyTuple_Check(slot) || PyTuple_GET_SIZE(slot) != 3) {
            PyErr_SetString(PyExc_TypeError, "mul_chain_into: a slot is a (counts, sums, quad) tuple");
            goto done;
        }
        if (take(PyTuple_GET_ITEM(slot, 0), &in[3 * j], 1, 'i', 0, "a slot's counts") < 0 ||
            take(PyTuple_GET_ITEM(slot, 1), &in[3 * j + 1], 2, 'd', 0, "a slot's sums") < 0 ||
            take(PyTuple_GET_ITEM(slot, 2), &in[3 * j + 2], 2, 'd', 0, "a slot's quad") < 0)
            goto done;
        ks[j] = dim(&in[3 * j + 1], 1);
        if (n < 0) n = dim(&in[3 * j], 0);
        if (dim(&in[3 * j], 0) != n || dim(&in[3 * j + 1], 0) != n || dim(&in[3 * j + 2], 0) != n ||
            dim(&in[3 * j + 2], 1) != ks[j] * (ks[j] + 1) / 2) {
            shape_error("mul_chain_into");
            goto done;
        }
        k += ks[j];
        if (j > 0) {
            int flag = PyObject_IsTrue(PySequence_Fast_GET_ITEM(swaps, j - 1));
            if (flag < 0) goto done;
            swap[j] = (unsigned char)flag;
        }
    }
    Py_ssize_t t = k * (k + 1) / 2;
    if (take(args[2], &out[0], 1, 'i', 1, "counts") < 0 || take(args[3], &out[1], 2, 'd', 1, "sums") < 0 ||
        take(args[4], &out[2], 2, 'd', 1, "quad") < 0)
        goto done;
    if (dim(&out[0], 0) != n || dim(&out[1], 0) != n || dim(&out[1], 1) != k || dim(&out[2], 0) != n ||
        dim(&out[2], 1) != t) {
        shape_error("mul_chain_into");
        goto done;
    }
    if (!outputs_apart(out, 3, in, 3 * m, "mul_chain_into")) goto done;
    scratch = PyMem_Malloc((size_t)(2 * (k + t) + 1) * sizeof(double));
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *oc = out[0].view.buf;
    double *os = out[1].view.buf, *oq = out[2].view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t pc = ((const int64_t *)in[0].view.buf)[i];
        Py_ssize_t pk = ks[0];
        const double *ps = (const double *)in[1].view.buf + i * pk;
        const double *pq = (const double *)in[2].view.buf + i * (pk * (pk + 1) / 2);
        for (Py_ssize_t j = 1; j < m; j++) {
            const Py_ssize_t kj = ks[j], nk = pk + kj;
            const int64_t cj = ((const int64_t *)in[3 * j].view.buf)[i];
            const double *sj = (const double *)in[3 * j + 1].view.buf + i * kj;
            const double *qj = (const double *)in[3 * j + 2].view.buf + i * (kj * (kj + 1) / 2);
            int64_t nc;
            double *ns, *nq;
            if (j == m - 1) {
                ns = os + i * k;
                nq = oq + i * t;
            } else {
                ns = scratch + (j & 1) * (k + t);
                nq = ns + k;
            }
            if (swap[j])
                mul_row(cj, sj, qj, kj, pc, ps, pq, pk, &nc, ns, nq);
            else
                mul_row(pc, ps, pq, pk, cj, sj, qj, kj, &nc, ns, nq);
            pc = nc;
            pk = nk;
            ps = ns;
            pq = nq;
        }
        oc[i] = pc;
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    if (in != NULL) release(in, (int)(3 * m));
    release(out, 3);
    PyMem_Free(in);
    PyMem_Free(ks);
    PyMem_Free(swap);
    PyMem_Free(scratch);
    Py_DECREF(swaps);
    Py_DECREF(slots);
    return result;
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

/* The offsets of `cls`'s __slots__ `names` when each is a plain writable object slot (a member
 * descriptor the class itself resolves to), so a fresh instance's slots can be filled without a setattr
 * per slot; 0 when any is not (or the class has its own __setattr__), and the caller uses setattr. */
static int slot_offsets(PyTypeObject *cls, PyObject **names, int n, Py_ssize_t *offsets) {
    if (cls->tp_setattro != PyObject_GenericSetAttr) return 0;
    for (int j = 0; j < n; j++) {
        PyObject *d = _PyType_Lookup(cls, names[j]);
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return 0;
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY)) return 0;
        offsets[j] = m->offset;
    }
    return 1;
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
static PyObject *k_columns_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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

/* probe_get(data, keys, rows): the point lookups of one sibling for every join row: (found, keep,
 * kept) with found the payloads data[keys[i]] that exist, in row order; keep None and kept `rows`
 * itself when every key is present, else keep the indexes of the rows that found one and kept those
 * rows. */
static PyObject *k_probe_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
            if (PyErr_Occurred()) goto done;
            if (keep == NULL) {  /* the first miss: the rows before it all hit */
                keep = PyList_New(0);
                kept = PyList_GetSlice(args[2], 0, i);
                if (keep == NULL || kept == NULL) goto done;
                for (Py_ssize_t j = 0; j < i; j++) {
                    PyObject *at = PyLong_FromSsize_t(j);
                    int rc = at == NULL ? -1 : PyList_Append(keep, at);
                    Py_XDECREF(at);
                    if (rc < 0) goto done;
                }
            }
            continue;
        }
        if (PyList_Append(found, hit) < 0) goto done;
        if (keep != NULL) {
            PyObject *at = PyLong_FromSsize_t(i);
            int rc = at == NULL ? -1 : PyList_Append(keep, at);
            Py_XDECREF(at);
            if (rc < 0 || PyList_Append(kept, PyList_GET_ITEM(args[2], i)) < 0) goto done;
        }
    }
    if (keep == NULL)
        result = PyTuple_Pack(3, found, Py_None, args[2]);
    else
        result = PyTuple_Pack(3, found, keep, kept);
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
static PyObject *k_install_new(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
static PyObject *k_probe_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
            if (keep == NULL) {  /* the first row dropped: every row before it was kept */
                keep = PyList_New(0);
                kept = PyList_GetSlice(rows, 0, i);
                if (keep == NULL || kept == NULL) goto done;
                for (Py_ssize_t j = 0; j < i; j++) {
                    PyObject *at = PyLong_FromSsize_t(j);
                    int rc = at == NULL ? -1 : PyList_Append(keep, at);
                    Py_XDECREF(at);
                    if (rc < 0) goto done;
                }
            }
            continue;
        }
        for (Py_ssize_t p = 0; p < m; p++)
            if (PyList_Append(PyList_GET_ITEM(found, p), hits[p]) < 0) goto done;
        if (keep != NULL) {
            PyObject *at = PyLong_FromSsize_t(i);
            int rc = at == NULL ? -1 : PyList_Append(keep, at);
            Py_XDECREF(at);
            if (rc < 0 || PyList_Append(kept, PyList_GET_ITEM(rows, i)) < 0) goto done;
        }
    }
    result = keep == NULL ? PyTuple_Pack(3, found, Py_None, rows) : PyTuple_Pack(3, found, keep, kept);
done:
    PyMem_Free(hits);
    Py_XDECREF(found);
    Py_XDECREF(keep);
    Py_XDECREF(kept);
    return result;
}

/* put_value(seq, payload, ...): the stored value of a (seq, payload) of a float cofactor view: seq as a big-endian u64, then the payload's encoding (CofactorRing.encode): lo and k as
 * little-endian u32, the count's byte length as a u8, the count in its shortest signed little-endian
 * form (no bytes for 0), the sums and the upper triangle as little-endian float64; a rank-one payload
 * (rank_one) sets k's top bit and leaves its products out. A payload of type exactly `row_cls`
 * (RowCofactor) is read from its batch's columns. OverflowError for a count beyond int64 or a block past
 * 2^31, TypeError for arrays that are not float64: the caller encodes in Python. */

/* Whether every product of the upper triangle is, bit for bit, the product s_r·s_c of its sums and none
 * is NaN (one tuple's lift at multiplicity 1 is such a payload): the products then need not be stored,
 * as multiplying the stored sums gives them back exactly on any IEEE machine. */
static int rank_one(const double *sums, const double *quad, Py_ssize_t k) {
    for (Py_ssize_t r = 0; r < k; r++)
        for (Py_ssize_t c = r; c < k; c++) {
            const double p = sums[r] * sums[c];
            if (isnan(p) || memcmp(&p, quad++, sizeof p) != 0) return 0;
        }
    return 1;
}
#define RANK_ONE 0x80000000ULL /* k's top bit: the products are the sums' products */

/* How a value's payloads are read: `cls` the row payload class (or NULL), and, when `direct`, the
 * offsets of its slots lo, count, block and row (slot_offsets), read without a getattr each. */
typedef struct {
    PyTypeObject *cls;
    int direct;
    Py_ssize_t off[4];
} RowSlots;

enum { SLOT_LO, SLOT_COUNT, SLOT_BLOCK, SLOT_ROW };

static void row_slots(RowSlots *rs, PyTypeObject *cls) {
    PyObject *names[4] = {s_lo, s_count, s_block, s_row};
    rs->cls = cls;
    rs->direct = cls != NULL && slot_offsets(cls, names, 4, rs->off);
}

/* Attribute `slot` of payload p (a new reference): its slot when p is of the row class read directly. */
static PyObject *attr_of(PyObject *p, const RowSlots *rs, int slot) {
    static PyObject **const names[4] = {&s_lo, &s_count, &s_block, &s_row};
    if (rs->direct && Py_TYPE(p) == rs->cls) {
        PyObject *v = *(PyObject **)((char *)p + rs->off[slot]);
        if (v != NULL) return Py_NewRef(v);
    }
    return PyObject_GetAttr(p, *names[slot]);
}

static int put_value(PyObject *seqobj, PyObject *p, const RowSlots *rs, Source *src, PyObject **out) {
    PyTypeObject *row_cls = rs->cls;
    unsigned long long seqv = PyLong_AsUnsignedLongLong(seqobj);
    if (seqv == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    PyObject *o = attr_of(p, rs, SLOT_COUNT);
    if (o == NULL) return -1;
    int overflow = 0;
    long long count = PyLong_AsLongLongAndOverflow(o, &overflow);
    Py_DECREF(o);
    if (count == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "view_entries: a count beyond int64");
        return -1;
    }
    o = attr_of(p, rs, SLOT_LO);
    if (o == NULL) return -1;
    long long lo = PyLong_AsLongLong(o);
    Py_DECREF(o);
    if (lo == -1 && PyErr_Occurred()) return -1;
    const double *sums, *quad;
    Py_ssize_t k;
    Buf own[2];
    memset(own, 0, sizeof own);
    if (row_cls != NULL && Py_TYPE(p) == row_cls) {
        PyObject *block = attr_of(p, rs, SLOT_BLOCK);
        if (block == NULL) return -1;
        int rc = source_of(src, block);
        Py_DECREF(block);
        if (rc < 0) return -1;
        PyObject *row = attr_of(p, rs, SLOT_ROW);
        if (row == NULL) return -1;
        Py_ssize_t r = PyLong_AsSsize_t(row);
        Py_DECREF(row);
        if (r == -1 && PyErr_Occurred()) return -1;
        if (r < 0 || r >= dim(&src->cols[0], 0) || r >= dim(&src->cols[1], 0)) {
            PyErr_SetString(PyExc_IndexError, "view_entries: a row payload's row is outside its columns");
            return -1;
        }
        k = dim(&src->cols[0], 1);
        if (dim(&src->cols[1], 1) != k * (k + 1) / 2) return shape_error("view_entries");
        sums = (const double *)src->cols[0].view.buf + r * k;
        quad = (const double *)src->cols[1].view.buf + r * (k * (k + 1) / 2);
    } else {
        PyObject *a = PyObject_GetAttr(p, s_sums);
        if (a == NULL) return -1;
        int rc = take(a, &own[0], 1, 'd', 0, "a payload's sums");
        Py_DECREF(a);
        if (rc < 0) {
            release(own, 2);
            return -1;
        }
        a = PyObject_GetAttr(p, s_quad);
        if (a == NULL) {
            release(own, 2);
            return -1;
        }
        rc = take(a, &own[1], 1, 'd', 0, "a payload's quad");
        Py_DECREF(a);
        if (rc < 0) {
            release(own, 2);
            return -1;
        }
        k = dim(&own[0], 0);
        if (dim(&own[1], 0) != k * (k + 1) / 2) {
            release(own, 2);
            return shape_error("view_entries");
        }
        sums = own[0].view.buf;
        quad = own[1].view.buf;
    }
    if (lo < 0 || lo > 0xFFFFFFFFLL || k > 0x7FFFFFFFLL) {
        release(own, 2);
        PyErr_SetString(PyExc_OverflowError, "view_entries: a block past 2^31");
        return -1;
    }
    /* the count's shortest signed little-endian form: (bit_length(|c|) + 8) // 8 bytes, none for 0 */
    unsigned long long mag = count < 0 ? 0ULL - (unsigned long long)count : (unsigned long long)count;
    int bits = 0;
    while (mag) {
        bits++;
        mag >>= 1;
    }
    const int compact = k > 0 && rank_one(sums, quad, k);
    const Py_ssize_t nc = count ? (bits + 8) / 8 : 0, t = compact ? 0 : k * (k + 1) / 2;
    const Py_ssize_t size = 8 + 9 + nc + 8 * (k + t);
    const unsigned long long kword = (unsigned long long)k | (compact ? RANK_ONE : 0);
    PyObject *value = PyBytes_FromStringAndSize(NULL, size);
    if (value == NULL) {
        release(own, 2);
        return -1;
    }
    unsigned char *b = (unsigned char *)PyBytes_AS_STRING(value);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(seqv >> (56 - 8 * i));
    b += 8;
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)((unsigned long long)lo >> (8 * i));
    for (int i = 0; i < 4; i++) b[4 + i] = (unsigned char)(kword >> (8 * i));
    b[8] = (unsigned char)nc;
    b += 9;
    for (Py_ssize_t i = 0; i < nc; i++) b[i] = (unsigned char)((unsigned long long)count >> (8 * i));
    b += nc;
    memcpy(b, sums, (size_t)k * sizeof(double));  /* x86-64 and the other targets store float64 LE */
    memcpy(b + 8 * k, quad, (size_t)t * sizeof(double));
    release(own, 2);
    *out = value;
    return 0;
}

/* The JSON text of a key tuple whose items are all exact ints within int64 or integral floats below 1e15
 * in magnitude, as orjson writes them ("[1,-2]", "[3.0,-0.0]", "[]"): a new bytes object, or NULL
 * without an exception when an item is anything else (the caller encodes the key in Python). */
static PyObject *key_json(PyObject *key) {
    char buf[256];
    if (!PyTuple_CheckExact(key)) return NULL;
    const Py_ssize_t n = PyTuple_GET_SIZE(key);
    if (24 * n + 2 > (Py_ssize_t)sizeof buf) return NULL;
    Py_ssize_t len = 0;
    buf[len++] = '[';
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(key, i);
        unsigned long long u;
        int negative, is_float = PyFloat_CheckExact(v);
        if (is_float) {
            const double d = PyFloat_AS_DOUBLE(v);
            if (!(d > -1e15 && d < 1e15) || d != (double)(long long)d) return NULL;
            negative = signbit(d) != 0; /* -0.0 too */
            u = (unsigned long long)(negative ? -d : d);
        } else {
            if (!PyLong_CheckExact(v)) return NULL;
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow || (x == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                return NULL;
            }
            negative = x < 0;
            u = negative ? 0ULL - (unsigned long long)x : (unsigned long long)x;
        }
        if (i) buf[len++] = ',';
        if (negative) buf[len++] = '-';
        char digits[24];
        int nd = 0;
        do {
            digits[nd++] = (char)('0' + (int)(u % 10));
            u /= 10;
        } while (u);
        while (nd) buf[len++] = digits[--nd];
        if (is_float) {
            buf[len++] = '.';
            buf[len++] = '0';
        }
    }
    buf[len++] = ']';
    return PyBytes_FromStringAndSize(buf, len);
}

/* view_entries(name, keys, data, seq, row_cls, key_of): the checkpoint entry (name, key bytes, value) of
 * each key of the dict `keys` (a view's change log, or its data for every entry), in its order: the value
 * as put_value writes it from seq[key] and data[key], None where data no longer holds the key. A key of
 * ints within int64 is written as orjson writes it, any other by key_of(key). Each key is hashed once (the
 * dict `keys` holds its hash). The errors of put_value (the caller then encodes in Python). */
static PyObject *k_view_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("view_entries", nargs, 6)) return NULL;
    PyObject *name = args[0], *keys = args[1], *data = args[2], *seq = args[3], *key_of = args[5];
    if (!PyDict_Check(keys) || !PyDict_Check(data) || !PyDict_Check(seq) ||
        (args[4] != Py_None && !PyType_Check(args[4]))) {
        PyErr_SetString(PyExc_TypeError, "view_entries: the keys, data and seq dicts, and a class or None");
        return NULL;
    }
    RowSlots rs;
    row_slots(&rs, args[4] == Py_None ? NULL : (PyTypeObject *)args[4]);
    PyObject *out = PyList_New(PyDict_GET_SIZE(keys));
    if (out == NULL) return NULL;
    Source src;
    memset(&src, 0, sizeof src);
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *ignored;
    Py_hash_t hash;
    while (_PyDict_Next(keys, &pos, &key, &ignored, &hash)) {
        PyObject *payload = _PyDict_GetItem_KnownHash(data, key, hash), *value = NULL;
        if (payload == NULL && PyErr_Occurred()) goto fail;
        if (payload == NULL) {
            value = Py_NewRef(Py_None);
        } else {
            PyObject *number = _PyDict_GetItem_KnownHash(seq, key, hash);
            if (number == NULL) {
                if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
                goto fail;
            }
            if (put_value(number, payload, &rs, &src, &value) < 0) goto fail;
        }
        PyObject *encoded = key_json(key);
        if (encoded == NULL && !PyErr_Occurred()) encoded = PyObject_CallOneArg(key_of, key);
        if (encoded == NULL) {
            Py_DECREF(value);
            goto fail;
        }
        PyObject *entry = PyTuple_New(3);
        if (entry == NULL) {
            Py_DECREF(encoded);
            Py_DECREF(value);
            goto fail;
        }
        PyTuple_SET_ITEM(entry, 0, Py_NewRef(name));
        PyTuple_SET_ITEM(entry, 1, encoded);
        PyTuple_SET_ITEM(entry, 2, value);
        if (i >= PyList_GET_SIZE(out)) {
            Py_DECREF(entry);
            PyErr_SetString(PyExc_RuntimeError, "view_entries: the keys changed size during the pass");
            goto fail;
        }
        PyList_SET_ITEM(out, i++, entry);
    }
    release(src.cols, 2);
    if (i != PyList_GET_SIZE(out)) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_RuntimeError, "view_entries: the keys changed size during the pass");
        return NULL;
    }
    return out;
fail:
    release(src.cols, 2);
    Py_DECREF(out);
    return NULL;
}

/* absorb_run(events, start, relation, columns, batch): the run of `relation`'s events from `start` (up
 * to the first event of another relation; attributes `relation`, `delta`, `row`), an all-float
 * relation, added to `batch` (tuple of the row's values at `columns` -> summed multiplicity), in the
 * order the tuples first appear, -0.0 stored as 0.0. Returns the index after the run; or `start`,
 * leaving `batch` untouched, when the run is shorter than two events or any of its events needs the
 * per-event checks: a delta that is not an exact non-zero int, a row that is not a dict of exactly
 * `columns`, a value that is not a finite float. */
static PyObject *s_delta, *s_event_row, *s_relation;

/* Reads an event's fields (relation, delta, row) from its slots when its class keeps them as plain
 * object slots read by the generic getattr (a msgspec struct's fields, a __slots__ class), the class
 * resolved once per call; any other event, or an empty slot, goes through getattr. */
typedef struct {
    PyTypeObject *cls;
    Py_ssize_t offsets[3];
} EventSlots;

static void event_slots(EventSlots *es, PyObject *event) {
    PyTypeObject *cls = Py_TYPE(event);
    PyObject *names[3] = {s_relation, s_delta, s_event_row};
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
    return PyObject_GetAttr(event, field == 0 ? s_relation : field == 1 ? s_delta : s_event_row);
}

static PyObject *k_absorb_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
static PyObject *k_absorb_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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

static PyMethodDef methods[] = {
    {"mul_rows_into", (PyCFunction)(void (*)(void))k_mul_rows_into, METH_FASTCALL,
     "Row-wise block product of two cofactor columns into preallocated outputs."},
    {"mul_chain_into", (PyCFunction)(void (*)(void))k_mul_chain_into, METH_FASTCALL,
     "Row-wise product of several cofactor columns, in order, into preallocated outputs."},
    {"lift_into", (PyCFunction)(void (*)(void))k_lift_into, METH_FASTCALL,
     "The lifts m·(x, x xᵀ) of a leaf's tuples into preallocated outputs."},
    {"gather_into", (PyCFunction)(void (*)(void))k_gather_into, METH_FASTCALL,
     "The counts, sums and upper triangles of payload objects of one block into preallocated columns."},
    {"payload_rows", (PyCFunction)(void (*)(void))k_payload_rows, METH_FASTCALL,
     "(key, payload) pairs, one new row payload object per row of the columns."},
    {"columns_into", (PyCFunction)(void (*)(void))k_columns_into, METH_FASTCALL,
     "Values at some positions of tuples as float64 columns."},
    {"probe_get", (PyCFunction)(void (*)(void))k_probe_get, METH_FASTCALL,
     "One sibling's point lookups for every join row: the payloads found and the rows kept."},
    {"install_new", (PyCFunction)(void (*)(void))k_install_new, METH_FASTCALL,
     "A view's grouped batch installed where its keys are new; the pairs of held keys returned."},
    {"probe_all", (PyCFunction)(void (*)(void))k_probe_all, METH_FASTCALL,
     "A step's point lookups in all its siblings for every join row: the payloads and the rows kept."},
    {"view_entries", (PyCFunction)(void (*)(void))k_view_entries, METH_FASTCALL,
     "The checkpoint entries (name, key, value) of a float cofactor view's keys."},
    {"absorb_run", (PyCFunction)(void (*)(void))k_absorb_run, METH_FASTCALL,
     "A run of one all-float relation's events consolidated into a batch: the index after it."},
    {"absorb_columns", (PyCFunction)(void (*)(void))k_absorb_columns, METH_FASTCALL,
     "One all-float relation's batch of columns consolidated into a new dict, or None."},
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
    s_relation = PyUnicode_InternFromString("relation");
    if (!s_relation || !s_lo || !s_count || !s_sums || !s_quad || !s_block || !s_row || !s_delta) return NULL;
    return PyModule_Create(&module);
}
