/* What the reference kernels' sources share: BLAKE2b-128 of a member key, and the byte buffer that
 * member keys are written into (orjson's bytes of [relation, [values]]). */
#ifndef IVMSTREAM_REFERENCE_KERNELS_H
#define IVMSTREAM_REFERENCE_KERNELS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define OUT_BYTES 16

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buffer;

/* BLAKE2b-128 of data (no key): the digest's 16 bytes in out. */
void blake2b_128(const uint8_t *data, Py_ssize_t n, uint8_t out[OUT_BYTES]);

int reserve(Buffer *b, Py_ssize_t more);
int append(Buffer *b, const char *s, Py_ssize_t n);
/* A JSON string as orjson writes it. */
int append_string(Buffer *b, const char *s, Py_ssize_t n);
/* One str, bool or 64-bit int value as orjson writes it: 1 written, 0 left to orjson, -1 an error. */
int append_value(Buffer *b, PyObject *v);

/* _bag_rows.c */
PyObject *bag_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
#define BAG_ROWS_DOC                                                                                      \
    "bag_rows(relation, columns, decimal_columns, deltas, dirty, clean, allow_negative, sum_columns, sums, " \
    "prec, decimal_type) -> (refused, applied, delta_total, distinct_change, fingerprint_add, sums) | None: " \
    "a relation's rows applied to the bag's resident dicts in one pass (services/reference/bag_rows.py's "   \
    "py_bag_rows is its Python form); None, with nothing changed, for a batch it leaves to Python."

#endif
