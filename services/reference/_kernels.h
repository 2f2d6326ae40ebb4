/* What the reference kernels' sources share: BLAKE2b-128 of a member key, and the byte buffer that
 * member keys are written into (orjson's bytes of [relation, [values]]), and the decimals that
 * _decimals.c reads, writes and sums for _bag_rows.c. */
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

/* _decimals.c: decimals read, written in canonical text, and summed exactly */
#define MAX_DIGITS 64        /* significant digits of a decimal read here (the context's precision is at most 36) */

typedef unsigned __int128 u128;

/* A finite decimal as Decimal holds it: sign, coefficient digits (no leading zeros; none for 0) and
 * exponent. Read from a plain decimal string ([+-], digits with at most one point, at least one digit,
 * an exponent of at most 9 digits), which Decimal() reads exactly, or from str() of a Decimal. */
typedef struct {
    int negative;
    int ndigits;
    long long exponent;
    char digits[MAX_DIGITS];
} Dec;

typedef struct {
    int exact;          /* held as (negative, coefficient, exponent); else in `obj` */
    int negative;
    u128 coefficient;
    long long exponent;
    PyObject *obj;      /* the sum as a Decimal (or whatever `sums` held) when not exact */
} DecSum;

extern u128 POW10[39]; /* 10^0 .. 10^38, filled by init_pow10 */
void init_pow10(void);
/* 1 read, 0 not a plain finite decimal or more than MAX_DIGITS significant digits (left to Python). */
int parse_dec(const char *s, Py_ssize_t n, Dec *d);
/* The canonical text, str((v + 0).normalize()), as a JSON string: 1 written, 0 left to Python, -1 an error. */
int append_canonical(Buffer *b, const Dec *d, Py_ssize_t prec);
/* A coefficient's digits as a number: 1, or 0 when there are more than 36. */
int dec_coefficient(const Dec *d, u128 *out);
/* The exact sum as a Decimal made by decimal_type (a new reference, or NULL with an exception set). */
PyObject *dec_sum_object(const DecSum *sum, PyObject *decimal_type);
/* sum + value * delta for one row, exactly (1), or 0 when that step would round (nothing changed). */
int dec_sum_add(DecSum *sum, int negative, u128 coefficient, long long exponent, long long delta, Py_ssize_t prec);

/* _bag_rows.c */
PyObject *bag_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
#define BAG_ROWS_DOC                                                                                      \
    "bag_rows(relation, columns, decimal_columns, deltas, dirty, clean, allow_negative, sum_columns, sums, " \
    "prec, decimal_type) -> (refused, applied, delta_total, distinct_change, fingerprint_add, sums) | None: " \
    "a relation's rows applied to the bag's resident dicts in one pass (services/reference/bag_rows.py's "   \
    "py_bag_rows is its Python form); None, with nothing changed, for a batch it leaves to Python."

#endif
