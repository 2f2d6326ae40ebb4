/* Fenwick trees over a key's item weights, one per key of the exact index (_exact_kernels.c).
 *
 * `Fenwick`: the nodes of one key's Fenwick tree in a C array of 64-bit ints, as long as every node
 * fits; the first node that does not moves the whole tree into a list of Python ints, so the sums stay
 * exact at any size. To Python it is a sequence of its nodes (len, [i], [i] = x, append, pop), the
 * protocol index.py's _fen_* helpers use on a list, so the Python steps read and write it unchanged. */

#include "_exact_kernels.h"

/* The tree's nodes move into a list of Python ints, for good. */
static int fw_promote(Fenwick *t) {
    if (t->big != NULL) return 0;
    PyObject *big = PyList_New(t->n);
    if (big == NULL) return -1;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        PyObject *x = PyLong_FromLongLong(t->w[i]);
        if (x == NULL) {
            Py_DECREF(big);
            return -1;
        }
        PyList_SET_ITEM(big, i, x);
    }
    t->big = big;
    PyMem_Free(t->w);
    t->w = NULL;
    t->cap = 0;
    return 0;
}

Py_ssize_t fw_len(Fenwick *t) { return t->big != NULL ? PyList_GET_SIZE(t->big) : t->n; }

/* The value of a Python int as a C one; 0 with *fits = 0 when it is beyond 64 bits. */
static long long as_ll(PyObject *x, int *fits) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    *fits = !overflow && !(v == -1 && PyErr_Occurred());
    return *fits ? v : 0;
}

/* Node i as a Python int, a new reference. */
static PyObject *fw_get(Fenwick *t, Py_ssize_t i) {
    if (t->big != NULL) return Py_NewRef(PyList_GET_ITEM(t->big, i));
    return PyLong_FromLongLong(t->w[i]);
}

/* Node i = x (a Python int). */
static int fw_set(Fenwick *t, Py_ssize_t i, PyObject *x) {
    if (!PyLong_Check(x)) {
        PyErr_SetString(PyExc_TypeError, "a Fenwick tree holds ints");
        return -1;
    }
    if (t->big == NULL) {
        int fits;
        long long v = as_ll(x, &fits);
        if (PyErr_Occurred()) return -1;
        if (fits) {
            t->w[i] = v;
            return 0;
        }
        if (fw_promote(t) < 0) return -1;
    }
    return PyList_SetItem(t->big, i, Py_NewRef(x));
}

static int fw_push(Fenwick *t, PyObject *x) {
    if (!PyLong_Check(x)) {
        PyErr_SetString(PyExc_TypeError, "a Fenwick tree holds ints");
        return -1;
    }
    if (t->big == NULL) {
        int fits;
        long long v = as_ll(x, &fits);
        if (PyErr_Occurred()) return -1;
        if (fits) {
            if (t->n == t->cap) {
                Py_ssize_t cap = t->cap ? 2 * t->cap : 4;
                long long *w = PyMem_Realloc(t->w, (size_t)cap * sizeof(long long));
                if (w == NULL) {
                    PyErr_NoMemory();
                    return -1;
                }
                t->w = w;
                t->cap = cap;
            }
            t->w[t->n++] = v;
            return 0;
        }
        if (fw_promote(t) < 0) return -1;
    }
    return PyList_Append(t->big, x);
}

/* _fen_append: a new last weight w. */
int fen_append(Fenwick *t, PyObject *w) {
    Py_ssize_t i = fw_len(t) + 1;
    Py_ssize_t low = i - (i & -i), j = i - 1;
    if (t->big == NULL) {
        int fits;
        long long s = as_ll(w, &fits);
        if (PyErr_Occurred()) return -1;
        for (; fits && j > low; j -= j & -j)
            if (__builtin_add_overflow(s, t->w[j - 1], &s)) fits = 0;
        if (fits) {
            PyObject *sum = PyLong_FromLongLong(s);
            int rc = sum == NULL ? -1 : fw_push(t, sum);
            Py_XDECREF(sum);
            return rc;
        }
        j = i - 1; /* beyond 64 bits: again, on Python ints */
    }
    PyObject *s = Py_NewRef(w);
    for (; j > low; j -= j & -j) {
        PyObject *node = fw_get(t, j - 1);
        PyObject *more = node == NULL ? NULL : PyNumber_Add(s, node);
        Py_XDECREF(node);
        Py_DECREF(s);
        if (more == NULL) return -1;
        s = more;
    }
    int rc = fw_push(t, s);
    Py_DECREF(s);
    return rc;
}

/* _fen_add: weight idx += delta. */
int fen_add(Fenwick *t, Py_ssize_t idx, PyObject *delta) {
    Py_ssize_t n = fw_len(t), i = idx + 1;
    if (t->big == NULL) {
        int fits;
        long long d = as_ll(delta, &fits);
        if (PyErr_Occurred()) return -1;
        for (; fits && i <= n; i += i & -i) {
            long long s;
            if (__builtin_add_overflow(t->w[i - 1], d, &s)) break; /* node i - 1 left as it was */
            t->w[i - 1] = s;
        }
        if (i > n) return 0;
        if (fw_promote(t) < 0) return -1; /* the rest on Python ints */
    }
    for (; i <= n; i += i & -i) {
        PyObject *sum = PyNumber_Add(PyList_GET_ITEM(t->big, i - 1), delta);
        if (sum == NULL || PyList_SetItem(t->big, i - 1, sum) < 0) return -1;
    }
    return 0;
}

/* The sum of the first i weights, a new reference. */
static PyObject *fen_prefix(Fenwick *t, Py_ssize_t i) {
    if (t->big == NULL) {
        long long s = 0;
        Py_ssize_t j = i;
        for (; j > 0; j -= j & -j)
            if (__builtin_add_overflow(s, t->w[j - 1], &s)) break;
        if (j == 0) return PyLong_FromLongLong(s);
    }
    PyObject *s = PyLong_FromLong(0);
    for (; i > 0; i -= i & -i) {
        PyObject *node = fw_get(t, i - 1);
        PyObject *more = node == NULL ? NULL : PyNumber_Add(s, node);
        Py_XDECREF(node);
        Py_DECREF(s);
        if (more == NULL) return NULL;
        s = more;
    }
    return s;
}

/* _fen_point: the single weight at idx, a new reference. */
PyObject *fen_point(Fenwick *t, Py_ssize_t idx) {
    PyObject *a = fen_prefix(t, idx + 1);
    if (a == NULL) return NULL;
    PyObject *b = fen_prefix(t, idx);
    if (b == NULL) {
        Py_DECREF(a);
        return NULL;
    }
    PyObject *r = PyNumber_Subtract(a, b);
    Py_DECREF(a);
    Py_DECREF(b);
    return r;
}

/* Drop the last node (a Fenwick tree's others do not depend on it). */
int fw_drop(Fenwick *t) {
    if (t->big != NULL) return PyList_SetSlice(t->big, PyList_GET_SIZE(t->big) - 1, PyList_GET_SIZE(t->big), NULL);
    t->n--;
    return 0;
}

/* The Python face: a sequence of nodes. */

static PyObject *Fenwick_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if ((args != NULL && PyTuple_GET_SIZE(args)) || (kwds != NULL && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Fenwick() takes no arguments (append the nodes)");
        return NULL;
    }
    return type->tp_alloc(type, 0);
}

static void Fenwick_dealloc(Fenwick *t) {
    PyMem_Free(t->w);
    Py_XDECREF(t->big);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static Py_ssize_t Fenwick_length(PyObject *self) { return fw_len((Fenwick *)self); }

static PyObject *Fenwick_item(PyObject *self, Py_ssize_t i) {
    Fenwick *t = (Fenwick *)self;
    if (i < 0 || i >= fw_len(t)) {
        PyErr_SetString(PyExc_IndexError, "Fenwick tree index out of range");
        return NULL;
    }
    return fw_get(t, i);
}

static int Fenwick_ass_item(PyObject *self, Py_ssize_t i, PyObject *x) {
    Fenwick *t = (Fenwick *)self;
    if (x == NULL) {
        PyErr_SetString(PyExc_TypeError, "a Fenwick tree's nodes are not deleted (pop the last)");
        return -1;
    }
    if (i < 0 || i >= fw_len(t)) {
        PyErr_SetString(PyExc_IndexError, "Fenwick tree index out of range");
        return -1;
    }
    return fw_set(t, i, x);
}

static PyObject *Fenwick_append(PyObject *self, PyObject *x) {
    if (fw_push((Fenwick *)self, x) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Fenwick_pop(PyObject *self, PyObject *Py_UNUSED(ignored)) {
    Fenwick *t = (Fenwick *)self;
    Py_ssize_t n = fw_len(t);
    if (n == 0) {
        PyErr_SetString(PyExc_IndexError, "pop from an empty Fenwick tree");
        return NULL;
    }
    PyObject *last = fw_get(t, n - 1);
    if (last == NULL || fw_drop(t) < 0) {
        Py_XDECREF(last);
        return NULL;
    }
    return last;
}

static PyObject *Fenwick_wide(PyObject *self, void *Py_UNUSED(closure)) {
    return PyBool_FromLong(((Fenwick *)self)->big != NULL);
}

static PyObject *Fenwick_repr(PyObject *self) {
    PyObject *nodes = PySequence_List(self);
    if (nodes == NULL) return NULL;
    PyObject *r = PyUnicode_FromFormat("Fenwick(%R)", nodes);
    Py_DECREF(nodes);
    return r;
}

static PySequenceMethods Fenwick_as_sequence = {
    .sq_length = Fenwick_length,
    .sq_item = Fenwick_item,
    .sq_ass_item = Fenwick_ass_item,
};

static PyMethodDef Fenwick_methods[] = {
    {"append", Fenwick_append, METH_O, "append(x): a new last node"},
    {"pop", Fenwick_pop, METH_NOARGS, "pop(): remove and return the last node"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Fenwick_getset[] = {
    {"wide", Fenwick_wide, NULL, "whether the nodes are Python ints (one went beyond 64 bits)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject FenwickType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ivmstream.services.reservoir._exact_kernels.Fenwick",
    .tp_basicsize = sizeof(Fenwick),
    .tp_dealloc = (destructor)Fenwick_dealloc,
    .tp_repr = Fenwick_repr,
    .tp_as_sequence = &Fenwick_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The nodes of one key's Fenwick tree: 64-bit ints while they fit, Python ints after.",
    .tp_methods = Fenwick_methods,
    .tp_getset = Fenwick_getset,
    .tp_new = Fenwick_new,
};

