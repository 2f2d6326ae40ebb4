/* What the rounded join index's kernel sources share; they build one extension module: _kernels.c (the
 * module, an insert into a node store, an event's projection), _weights.c (the re-weighing: buckets,
 * counts and propagation), _batches.c (an insert's virtual batch: its size and its entries), and the
 * engine's steps around the index: _arrivals.c (a run of plain inserts) and _sample_rows.c (a result's
 * sample rows).
 *
 * A rounded structure keeps one record per key, a list [count, rounded count, the buckets (a list
 * indexed by exponent, None where empty), the exponents present in increasing order, item -> its index
 * in its bucket] (index.py's CNT, RCNT, BUCKETS, EXPS, WHERE), so an update reaches all of it with one
 * dict lookup, and a bucket by its position.
 */
#ifndef IVMSTREAM_RESERVOIR_KERNELS_H
#define IVMSTREAM_RESERVOIR_KERNELS_H

#include "_capi.h"

enum { REC_CNT = 0, REC_RCNT = 1, REC_BUCKETS = 2, REC_EXPS = 3, REC_WHERE = 4, REC_FIELDS = 5 };

/* The attribute names the kernels read, interned once by the module (_kernels.c). */
#define RESERVOIR_NAMES(X)                                                                              \
    X(key_pos) X(recs) X(parent) X(node) X(parents) X(children) X(child_pos) X(idx) X(by_key) \
    X(items) X(ds) X(nodes) X(grouped) X(tracking) X(dirty) X(places) X(propagations) X(out) X(tuples) \
    X(next_seq) X(whole) X(item_pos) X(neighbours) X(into) X(col_map) X(width) X(retrieves)
#define RESERVOIR_DECLARE_NAME(n) extern PyObject *S_##n;
RESERVOIR_NAMES(RESERVOIR_DECLARE_NAME)
extern PyObject *ZERO, *ONE;

/* A new item's key by each neighbour, made once by the insert's node step and read again by its
 * re-weighing (the structure's own key, its children's keys) and its batch's size, where each made it
 * anew. A key is found by its positions (node.key_pos's tuples; a structure's key_pos and child_pos are
 * equal ones): any other item, or positions not held, make their key as before. */
#define KEYS_MAX 8
typedef struct {
    PyObject *item; /* borrowed: the item the keys are of, NULL when none are held */
    Py_ssize_t n;
    PyObject *pos[KEYS_MAX]; /* borrowed from the node store */
    PyObject *key[KEYS_MAX]; /* owned */
    /* the records its re-weighing found in the structures toward the node (D[c->e], by their recs and
     * the key's positions; NULL: the key is not held), which the batch's size reads again: no step of
     * an insert changes a structure toward its own node */
    Py_ssize_t nrec;
    PyObject *rec_recs[KEYS_MAX], *rec_pos[KEYS_MAX], *rec[KEYS_MAX]; /* borrowed */
} Keys;

static inline void keys_clear(Keys *ks) {
    for (Py_ssize_t i = 0; i < ks->n; i++) Py_CLEAR(ks->key[i]);
    ks->n = ks->nrec = 0;
    ks->item = NULL;
}

/* Positions a and b are the same (tuples of the same small ints, which are shared objects). */
static inline int same_positions(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b) || PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(a); i++)
        if (PyTuple_GET_ITEM(a, i) != PyTuple_GET_ITEM(b, i)) return 0;
    return 1;
}

/* tuple(item[i] for i in pos) as key_of makes it, a new reference: the held one when ks has it. */
static inline PyObject *key_at(Keys *ks, PyObject *item, PyObject *pos) {
    if (ks != NULL && ks->item == item)
        for (Py_ssize_t i = 0; i < ks->n; i++)
            if (same_positions(ks->pos[i], pos)) return Py_NewRef(ks->key[i]);
    return key_of(item, pos);
}

/* The record found at key positions pos of the item in recs: 1 and *rec (NULL when absent) if held. */
static inline int keys_record(Keys *ks, PyObject *item, PyObject *recs, PyObject *pos, PyObject **rec) {
    if (ks == NULL || ks->item != item) return 0;
    for (Py_ssize_t i = 0; i < ks->nrec; i++)
        if (ks->rec_recs[i] == recs && same_positions(ks->rec_pos[i], pos)) {
            *rec = ks->rec[i];
            return 1;
        }
    return 0;
}

static inline void keys_keep_record(Keys *ks, PyObject *item, PyObject *recs, PyObject *pos, PyObject *rec) {
    if (ks == NULL || ks->item != item || ks->nrec >= KEYS_MAX) return;
    ks->rec_recs[ks->nrec] = recs;
    ks->rec_pos[ks->nrec] = pos;
    ks->rec[ks->nrec++] = rec;
}

typedef struct {
    PyObject *ds;    /* list of Directed */
    PyObject *nodes; /* list of NodeStore */
    int grouped;
    PyObject *dirty; /* the index's set of changed (structure, key), NULL when not tracking */
    long long places, propagations;
    Keys *keys; /* the inserted item's keys, or NULL */
} Ctx;

/* _weights.c */
PyObject *nextpow2(PyObject *c);
int open_ctx(Ctx *cx, PyObject *ix);
int close_ctx(Ctx *cx, PyObject *ix, int rc);
int reweigh(Ctx *cx, PyObject *ix, Py_ssize_t e, PyObject *item, PyObject *old_f, PyObject *f);

/* An exact int in [0, 2^61] as a C integer (0 for any other number: the caller then takes Python's
 * arithmetic): sums of two such counts, their next power of two, and a bucket's length shifted by an
 * exponent below 62 and checked against it, stay within 63 bits. */
#define SMALL_COUNT_MAX (1LL << 61)
static inline int small_count(PyObject *x, long long *out) {
    if (!PyLong_CheckExact(x)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow || v < 0 || v > SMALL_COUNT_MAX) return 0;
    *out = v;
    return 1;
}

/* _batches.c: (|dJ|, radices) of t just inserted into node e, and the module's entry points */
PyObject *delta_size(PyObject *ix, PyObject *e, PyObject *t, Keys *ks);
PyObject *k_delta_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *k_delta_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* _arrivals.c: a run of plain inserts, the engine's steps for each */
PyObject *k_insert_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* _sample_rows.c: the sample of ints as a result's rows, sorted */
PyObject *k_sample_dicts(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif /* IVMSTREAM_RESERVOIR_KERNELS_H */
