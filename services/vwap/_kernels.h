/* What the vwap kernels' sources share; they build one extension module: _kernels.c (the per-event
 * loop, the module), _level_tree.c (the crosscheck plan's LevelTree), _bag_entries.c (checkpoint entries).
 */
#ifndef IVMSTREAM_VWAP_KERNELS_H
#define IVMSTREAM_VWAP_KERNELS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Exact ints that fit in 64 bits (any other number: 0, and the caller uses the number protocol). An int
 * of one digit is read from its digit, without the general conversion. */
static inline int as_small(PyObject *v, long long *out) {
    if (!PyLong_CheckExact(v)) return 0;
#if PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)v)) {
        *out = (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
        return 1;
    }
#else
    Py_ssize_t size = Py_SIZE(v);
    if (size >= -1 && size <= 1) {
        *out = (long long)size * (long long)((PyLongObject *)v)->ob_digit[0];
        return 1;
    }
#endif
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

/* The LevelTree type (_level_tree.c); level_tree_ready() readies it once, before the module adds it. */
extern PyTypeObject LevelTreeType;
int level_tree_ready(void);

/* bag_entries(ledger, touched, tag, prefix, key_of, value_of) (_bag_entries.c). */
PyObject *bag_entries(PyObject *self, PyObject *args);

#endif /* IVMSTREAM_VWAP_KERNELS_H */
