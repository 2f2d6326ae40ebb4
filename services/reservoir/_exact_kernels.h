/* What the exact join index's kernel sources share; they build one extension module: _exact_kernels.c
 * (the module and the re-weighing) and _fenwick.c (the Fenwick type, one key's tree).
 */
#ifndef IVMSTREAM_RESERVOIR_EXACT_KERNELS_H
#define IVMSTREAM_RESERVOIR_EXACT_KERNELS_H

#include "_capi.h"

typedef struct {
    PyObject_HEAD
    Py_ssize_t n, cap;
    long long *w;   /* the nodes, while every one fits in 64 bits */
    PyObject *big;  /* a list of Python ints once one does not (w is then unused) */
} Fenwick;

extern PyTypeObject FenwickType;

/* _fenwick.c: the tree's length, and the steps of index.py's _fen_append, _fen_add, _fen_point and a
 * pop of the last node */
Py_ssize_t fw_len(Fenwick *t);
int fen_append(Fenwick *t, PyObject *w);
int fen_add(Fenwick *t, Py_ssize_t idx, PyObject *delta);
PyObject *fen_point(Fenwick *t, Py_ssize_t idx);
int fw_drop(Fenwick *t);

#endif /* IVMSTREAM_RESERVOIR_EXACT_KERNELS_H */
