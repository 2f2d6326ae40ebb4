/* The F-IVM kernels' module (_kernels.h lists its sources): the method table, the interned attribute
 * names, and the argument and buffer checks every kernel shares. */
#include "_kernels.h"

PyObject *s_lo, *s_count, *s_sums, *s_quad, *s_block, *s_row, *s_delta, *s_relation;

void release(Buf *bufs, int n) {
    for (int i = 0; i < n; i++)
        if (bufs[i].held) {
            PyBuffer_Release(&bufs[i].view);
            bufs[i].held = 0;
        }
}

int take(PyObject *obj, Buf *buf, int ndim, char kind, int writable, const char *what) {
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

/* Whether two held buffers share memory (an output given as an input too: refused). */
static int overlap(Buf *a, Buf *b) {
    const char *pa = a->view.buf, *pb = b->view.buf;
    return a->view.len > 0 && b->view.len > 0 && pa < pb + b->view.len && pb < pa + a->view.len;
}

int outputs_apart(Buf *outs, int nout, Buf *ins, Py_ssize_t nin, const char *name) {
    for (int o = 0; o < nout; o++)
        for (Py_ssize_t i = 0; i < nin; i++)
            if (overlap(&outs[o], &ins[i]) || (i < o && overlap(&outs[o], &outs[i]))) {
                PyErr_Format(PyExc_ValueError, "%s: an output shares memory with an input or output", name);
                return 0;
            }
    return 1;
}

int positional(const char *name, Py_ssize_t nargs, Py_ssize_t expected) {
    if (nargs == expected) return 1;
    PyErr_Format(PyExc_TypeError, "%s expected %zd arguments, got %zd", name, expected, nargs);
    return 0;
}

int shape_error(const char *name) {
    PyErr_Format(PyExc_ValueError, "%s: array shapes do not match", name);
    return -1;
}

Py_ssize_t take_block(PyObject *sums, PyObject *quad, Buf *b, int writable, Py_ssize_t n, const char *name) {
    if (take(sums, &b[0], 2, 'd', writable, "sums") < 0 || take(quad, &b[1], 2, 'd', writable, "quad") < 0)
        return -1;
    const Py_ssize_t k = dim(&b[0], 1);
    if (dim(&b[0], 0) != n || dim(&b[1], 0) != n || dim(&b[1], 1) != k * (k + 1) / 2) return shape_error(name);
    return k;
}

Py_ssize_t take_rows(PyObject *const *cols, Buf *b, int writable, Py_ssize_t *n, const char *name) {
    if (take(cols[0], &b[0], 1, 'i', writable, "counts") < 0) return -1;
    if (*n < 0) *n = dim(&b[0], 0);
    if (dim(&b[0], 0) != *n) return shape_error(name);
    return take_block(cols[1], cols[2], b + 1, writable, *n, name);
}

int source_of(Source *src, PyObject *block) {
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

int slot_offsets(PyTypeObject *cls, PyObject **names, int n, Py_ssize_t *offsets) {
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
    s_delta = PyUnicode_InternFromString("delta");
    s_relation = PyUnicode_InternFromString("relation");
    if (!s_relation || !s_lo || !s_count || !s_sums || !s_quad || !s_block || !s_row || !s_delta) return NULL;
    return PyModule_Create(&module);
}
