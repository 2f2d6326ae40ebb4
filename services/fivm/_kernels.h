/* What the sources of the F-IVM kernels share. They build one extension module, ivmstream.services.fivm._kernels
 * (services/fivm/kernels.py holds the same loops in numpy and Python, the reference they are tested
 * against and the fallback where the extension is not built):
 *
 *   _kernels.c   the module: its method table, the attribute names, and the argument and buffer checks
 *   _products.c  block products of cofactor columns and a leaf's lifts (mul_rows_into, mul_chain_into,
 *                lift_into)
 *   _payloads.c  payload objects to columns and back (gather_into, payload_rows, columns_into)
 *   _views.c     a step's sibling lookups and a batch's installs (probe_get, probe_all, install_new)
 *   _entries.c   a view's checkpoint entries (view_entries)
 *   _intake.c    a batch's events or columns consolidated (absorb_run, absorb_columns)
 *
 * Arrays come in through the buffer protocol (C-contiguous int64 counts, float64 sums and upper
 * triangles), so the extension needs no numpy headers; the caller allocates the outputs. Every output
 * element is the same single IEEE product the numpy expression computes (`c_b * s_a`, `s_a[i] * s_b[j]`,
 * `m * (x_r * x_c)`, ...), so the results are equal bit for bit. Counts multiply in 64-bit
 * two's-complement arithmetic, as numpy's int64 columns do; the caller keeps them far below overflow.
 */
#ifndef IVMSTREAM_FIVM_KERNELS_H
#define IVMSTREAM_FIVM_KERNELS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

/* A buffer taken from an array argument (held: released by `release`). */
typedef struct {
    Py_buffer view;
    int held;
} Buf;

void release(Buf *bufs, int n);
/* A C-contiguous buffer of 8-byte items of kind 'i' (int64) or 'd' (float64) and `ndim` dimensions. */
int take(PyObject *obj, Buf *buf, int ndim, char kind, int writable, const char *what);
static inline Py_ssize_t dim(Buf *buf, int i) { return buf->view.shape[i]; }
/* sums (n x k) and quad (n x k(k+1)/2) float64 columns into b[0], b[1]: k, or -1 with an exception. */
Py_ssize_t take_block(PyObject *sums, PyObject *quad, Buf *b, int writable, Py_ssize_t n, const char *name);
/* counts (n int64), sums and quad at cols[0..2] into b[0..2] (take_block): k, or -1 with an exception;
 * *n < 0 takes n from the counts, else the counts must have *n rows. */
Py_ssize_t take_rows(PyObject *const *cols, Buf *b, int writable, Py_ssize_t *n, const char *name);
/* 0 with a ValueError when an output shares memory with an input or an earlier output. */
int outputs_apart(Buf *outs, int nout, Buf *ins, Py_ssize_t nin, const char *name);
/* 0 with a TypeError unless there are `expected` arguments. */
int positional(const char *name, Py_ssize_t nargs, Py_ssize_t expected);
/* -1 with a ValueError: array shapes do not match. */
int shape_error(const char *name);

/* The columns of a run of row payloads: the block object (borrowed: a payload holds it) and its
 * sums and quad buffers, taken again only when the block changes (source_of). */
typedef struct {
    PyObject *block;
    Buf cols[2];
} Source;

int source_of(Source *src, PyObject *block);
/* The offsets of `cls`'s __slots__ `names` when each is a plain writable object slot (a member
 * descriptor the class itself resolves to); 0 when any is not (or the class has its own __setattr__). */
int slot_offsets(PyTypeObject *cls, PyObject **names, int n, Py_ssize_t *offsets);

/* Interned attribute names (the module's init makes them). */
extern PyObject *s_lo, *s_count, *s_sums, *s_quad, *s_block, *s_row, *s_delta, *s_relation;

#define FIVM_KERNEL(name) PyObject *name(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
FIVM_KERNEL(k_mul_rows_into);
FIVM_KERNEL(k_mul_chain_into);
FIVM_KERNEL(k_lift_into);
FIVM_KERNEL(k_gather_into);
FIVM_KERNEL(k_payload_rows);
FIVM_KERNEL(k_columns_into);
FIVM_KERNEL(k_probe_get);
FIVM_KERNEL(k_install_new);
FIVM_KERNEL(k_probe_all);
FIVM_KERNEL(k_view_entries);
FIVM_KERNEL(k_absorb_run);
FIVM_KERNEL(k_absorb_columns);

#endif /* IVMSTREAM_FIVM_KERNELS_H */
