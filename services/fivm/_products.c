/* Block products of cofactor columns and a leaf's lifts (part of the _kernels extension, _kernels.h). */
#include "_kernels.h"

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
PyObject *k_mul_rows_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("mul_rows_into", nargs, 9)) return NULL;
    Buf b[9];
    memset(b, 0, sizeof b);
    Py_ssize_t n = -1, ka, kb, k;
    if ((ka = take_rows(args, b, 0, &n, "mul_rows_into")) < 0 ||
        (kb = take_rows(args + 3, b + 3, 0, &n, "mul_rows_into")) < 0 ||
        (k = take_rows(args + 6, b + 6, 1, &n, "mul_rows_into")) < 0)
        goto fail;
    if (k != ka + kb) {
        shape_error("mul_rows_into");
        goto fail;
    }
    const Py_ssize_t ta = ka * (ka + 1) / 2, tb = kb * (kb + 1) / 2, t = k * (k + 1) / 2;
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
PyObject *k_mul_chain_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
        if ((ks[j] = take_rows(&PyTuple_GET_ITEM(slot, 0), &in[3 * j], 0, &n, "mul_chain_into")) < 0) goto done;
        k += ks[j];
        if (j > 0) {
            int flag = PyObject_IsTrue(PySequence_Fast_GET_ITEM(swaps, j - 1));
            if (flag < 0) goto done;
            swap[j] = (unsigned char)flag;
        }
    }
    const Py_ssize_t t = k * (k + 1) / 2;
    Py_ssize_t kout = take_rows(args + 2, out, 1, &n, "mul_chain_into");
    if (kout < 0) goto done;
    if (kout != k) {
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
PyObject *k_lift_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("lift_into", nargs, 4)) return NULL;
    Buf b[4];
    memset(b, 0, sizeof b);
    if (take(args[0], &b[0], 2, 'd', 0, "x") < 0 || take(args[1], &b[1], 1, 'i', 0, "multiplicities") < 0)
        goto fail;
    const Py_ssize_t n = dim(&b[0], 0), k = dim(&b[0], 1), t = k * (k + 1) / 2;
    if (dim(&b[1], 0) != n || take_block(args[2], args[3], b + 2, 1, n, "lift_into") != k) {
        if (!PyErr_Occurred()) shape_error("lift_into");
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
