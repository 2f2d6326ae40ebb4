/* What the vwap kernels' sources share; they build one extension module: _kernels.c (the per-event
 * loop, the module), _level_sums.c (the netting's sums per price level), _level_tree.c (the crosscheck
 * plan's LevelTree), _bag_entries.c (checkpoint entries). What one file lends another is declared with
 * hidden visibility: only PyInit__kernels leaves the module, so the calls between the files are direct.
 */
#ifndef IVMSTREAM_VWAP_KERNELS_H
#define IVMSTREAM_VWAP_KERNELS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

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

/* The number protocol with a shortcut for ints in 64 bits (the same values), for the loop and the sums. */

static inline PyObject *add(PyObject *a, PyObject *b) {
    long long x, y, s;
    if (as_small(a, &x) && as_small(b, &y) && !__builtin_add_overflow(x, y, &s)) return PyLong_FromLongLong(s);
    return PyNumber_Add(a, b);
}

static inline PyObject *in_place_add(PyObject *a, PyObject *b) {
    long long x, y, s;
    if (as_small(a, &x) && as_small(b, &y) && !__builtin_add_overflow(x, y, &s)) return PyLong_FromLongLong(s);
    return PyNumber_InPlaceAdd(a, b);
}

static inline PyObject *mul(PyObject *a, PyObject *b) {
    long long x, y, p;
    if (as_small(a, &x) && as_small(b, &y) && !__builtin_mul_overflow(x, y, &p)) return PyLong_FromLongLong(p);
    return PyNumber_Multiply(a, b);
}

/* `acc[k] += v` on a list. */
static inline int list_add(PyObject *acc, Py_ssize_t k, PyObject *v) {
    PyObject *old = PyList_GET_ITEM(acc, k);
    PyObject *sum = in_place_add(old, v);
    if (sum == NULL) return -1;
    PyList_SET_ITEM(acc, k, sum);
    Py_DECREF(old);
    return 0;
}

/* `acc[k] += a * b` on a list: in 64 bits where the operands, the product and the sum fit, else as
 * the Python loop computes it (the product, then the in-place sum). */
static inline int list_add_product(PyObject *acc, Py_ssize_t k, PyObject *a, PyObject *b) {
    PyObject *old = PyList_GET_ITEM(acc, k);
    long long x, y, z, p, s;
    if (as_small(a, &x) && as_small(b, &y) && as_small(old, &z) && !__builtin_mul_overflow(x, y, &p) &&
        !__builtin_add_overflow(z, p, &s)) {
        PyObject *sum = PyLong_FromLongLong(s);
        if (sum == NULL) return -1;
        PyList_SET_ITEM(acc, k, sum);
        Py_DECREF(old);
        return 0;
    }
    PyObject *prod = mul(a, b);
    if (prod == NULL) return -1;
    int rc = list_add(acc, k, prod);
    Py_DECREF(prod);
    return rc;
}

/* A batch's netting per price level, summed in C while prices, volumes, deltas and sums are ints held
 * in 64 bits: price -> (Σ delta, Σ delta·volume), the levels in the order of their first event. Flushed
 * into the netted dict (`levels.get(price)`, then a new list or the two sums added to the one there, in
 * that order) before anything else may read the dict: when the loop meets a value outside that range,
 * moves to another relation, hands a refusal to Python, and at its end. Int sums are exact whatever the
 * grouping, so the dict ends with the same keys, in the same order, and the same values as from adding
 * event by event. */
typedef struct {
    PyObject **price; /* the first price object of each level (new references) */
    int64_t *key, *count, *weight;
    Py_ssize_t n, cap;
    int32_t *index; /* open addressing over `mask + 1` slots: a level's position + 1, 0 when empty */
    uint64_t mask;
    int bits;
} LevelSums;

/* The table's life (_level_sums.c): sums_grow makes room for a level, sums_flush moves the sums into the
 * netted dict and empties the table, sums_free lets it go. */
int sums_grow(LevelSums *t);
int sums_flush(LevelSums *t, PyObject *levels);
void sums_free(LevelSums *t);

static inline uint64_t sums_slot(const LevelSums *t, int64_t k) {
    return ((uint64_t)k * 0x9E3779B97F4A7C15ULL) >> (64 - t->bits);
}

/* Add (d, dw) to level k: 1 when added, 0 when a sum would leave 64 bits (nothing changed), -1 on an
 * exception. */
static inline int sums_add(LevelSums *t, PyObject *price, int64_t k, int64_t d, int64_t dw) {
    if (t->index != NULL) {
        for (uint64_t j = sums_slot(t, k); t->index[j]; j = (j + 1) & t->mask) {
            Py_ssize_t i = t->index[j] - 1;
            if (t->key[i] == k) {
                int64_t c, w;
                if (__builtin_add_overflow(t->count[i], d, &c) || __builtin_add_overflow(t->weight[i], dw, &w))
                    return 0;
                t->count[i] = c;
                t->weight[i] = w;
                return 1;
            }
        }
    }
    if (sums_grow(t) < 0) return -1;
    uint64_t j = sums_slot(t, k);
    while (t->index[j]) j = (j + 1) & t->mask;
    Py_ssize_t i = t->n++;
    t->index[j] = (int32_t)(i + 1);
    Py_INCREF(price);
    t->price[i] = price;
    t->key[i] = k;
    t->count[i] = d;
    t->weight[i] = dw;
    return 1;
}

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* IVMSTREAM_VWAP_KERNELS_H */
