/* The reference engine's batch update: one relation's rows (columns, deltas) applied to the bag in one
 * pass. Each row's member key is written (decimals in their canonical text, as _canonical writes them),
 * hashed (BLAKE2b-128), looked up in the bag's resident dicts and its multiplicity updated in event order
 * (a delete below zero refused unless negatives are allowed); the fingerprint and the column sums are
 * accumulated over the applied rows. services/reference/bag_rows.py's py_bag_rows is the Python form,
 * and the differential tests hold the two to the same results.
 *
 * The dicts are a StoreBackedMap's while nothing is attached: `dirty` (written since the last
 * checkpoint; None a delete) and `clean`; a key is in one of them at most, as put and delete keep it.
 *
 * The kernel first writes and hashes every key; a value it does not write (a float, an int beyond 64
 * bits, a decimal beyond the context's precision or far from 1) or a delta beyond 2^40 makes it
 * return None before anything is changed, and the engine applies the batch in Python. */

#include "_kernels.h"

#define MAX_DELTA (1LL << 40)
#define MAX_ROWS (1LL << 22) /* MAX_ROWS * MAX_DELTA fits an int64: the applied deltas' total */

static u128 read_digest(const uint8_t digest[OUT_BYTES]) { /* big-endian, as int.from_bytes(.., "big") */
    u128 h = 0;
    for (int i = 0; i < OUT_BYTES; i++) h = (h << 8) | digest[i];
    return h;
}

static PyObject *u128_to_long(u128 x) {
    uint8_t bytes[16];
    for (int i = 15; i >= 0; i--, x >>= 8) bytes[i] = (uint8_t)x;
    return _PyLong_FromByteArray(bytes, 16, 0 /* big-endian */, 0 /* unsigned */);
}

/* sum += value * delta for an int column: in C while it fits, else through Python ints (exact either way). */
static int add_int(PyObject **sum, long long *part, PyObject *value, long long delta, PyObject *delta_obj) {
    if (PyLong_CheckExact(value)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(value, &overflow), p, s;
        if (!overflow && !(x == -1 && PyErr_Occurred()) && !__builtin_mul_overflow(x, delta, &p) &&
            !__builtin_add_overflow(*part, p, &s)) {
            *part = s;
            return 0;
        }
        PyErr_Clear();
    }
    PyObject *term = PyNumber_Multiply(value, delta_obj);
    if (term == NULL) return -1;
    PyObject *next = PyNumber_Add(*sum, term);
    Py_DECREF(term);
    if (next == NULL) return -1;
    Py_SETREF(*sum, next);
    return 0;
}

/* sum + value * delta for a decimal column, in row order as Python's reduce does it (v * 1 is v). */
static int add_decimal(PyObject **sum, PyObject *value, int same, PyObject *delta_obj) {
    PyObject *term = same ? Py_NewRef(value) : PyNumber_Multiply(value, delta_obj);
    if (term == NULL) return -1;
    PyObject *next = PyNumber_Add(*sum, term);
    Py_DECREF(term);
    if (next == NULL) return -1;
    Py_SETREF(*sum, next);
    return 0;
}

typedef struct {
    Py_ssize_t nrows, ncol;
    PyObject **keys;       /* each row's member key (new references) */
    u128 *hashes;          /* each key's BLAKE2b-128 */
    long long *deltas;     /* each row's delta */
    /* [row * ncol + col] of a decimal column: its coefficient (when DEC_FITS), exponent and flags */
    u128 *dcoef;
    long long *dexp;
    unsigned char *dflags;
} Rows;

#define DEC_NEGATIVE 1
#define DEC_FITS 2 /* at most 36 significant digits: dcoef holds the coefficient */
#define DEC_SAME 4 /* at most prec digits: v * 1 is v itself */

static void rows_free(Rows *r) {
    if (r->keys != NULL)
        for (Py_ssize_t i = 0; i < r->nrows; i++) Py_XDECREF(r->keys[i]);
    PyMem_Free(r->keys);
    PyMem_Free(r->hashes);
    PyMem_Free(r->deltas);
    PyMem_Free(r->dcoef);
    PyMem_Free(r->dexp);
    PyMem_Free(r->dflags);
}

/* Every row's key, hash and delta: 1 done, 0 a row left to Python, -1 an error. */
static int write_rows(Rows *r, PyObject *relation, PyObject *columns, const char *decimal, PyObject *deltas,
                      Py_ssize_t prec, PyObject *decimal_type) {
    Py_ssize_t rel_len;
    const char *rel = PyUnicode_AsUTF8AndSize(relation, &rel_len);
    if (rel == NULL) return -1;
    Py_ssize_t n = r->nrows, ncol = r->ncol;
    r->keys = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(PyObject *));
    r->hashes = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(u128));
    r->deltas = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(long long));
    size_t cells = (size_t)(n > 0 ? n * ncol : 1);
    r->dcoef = PyMem_Calloc(cells, sizeof(u128));
    r->dexp = PyMem_Calloc(cells, sizeof(long long));
    r->dflags = PyMem_Calloc(cells, 1);
    if (r->keys == NULL || r->hashes == NULL || r->deltas == NULL || r->dcoef == NULL || r->dexp == NULL ||
        r->dflags == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Buffer prefix = {0}, row = {0};
    int rc = -1;
    if (append(&prefix, "[", 1) < 0 || append_string(&prefix, rel, rel_len) < 0 || append(&prefix, ",[", 2) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyList_GET_ITEM(deltas, i);
        if (!PyLong_CheckExact(d)) {
            rc = 0;
            goto done;
        }
        int overflow;
        long long delta = PyLong_AsLongLongAndOverflow(d, &overflow);
        if (delta == -1 && PyErr_Occurred()) goto done;
        if (overflow || delta > MAX_DELTA || delta < -MAX_DELTA) {
            rc = 0;
            goto done;
        }
        r->deltas[i] = delta;
        row.len = 0;
        if (append(&row, prefix.data, prefix.len) < 0) goto done;
        for (Py_ssize_t j = 0; j < ncol; j++) {
            if (j > 0 && append(&row, ",", 1) < 0) goto done;
            PyObject *v = PyList_GET_ITEM(PyList_GET_ITEM(columns, j), i);
            int written;
            if (decimal[j]) { /* a Decimal, or the plain decimal string it was written as */
                PyObject *text = NULL;
                const char *s;
                Py_ssize_t len;
                if (PyUnicode_CheckExact(v)) {
                    s = PyUnicode_AsUTF8AndSize(v, &len);
                } else if (Py_TYPE(v) == (PyTypeObject *)decimal_type) {
                    text = PyObject_Str(v);
                    if (text == NULL) goto done;
                    s = PyUnicode_AsUTF8AndSize(text, &len);
                } else {
                    rc = 0;
                    goto done;
                }
                Dec d;
                int parsed = s != NULL ? parse_dec(s, len, &d) : -1;
                Py_XDECREF(text);
                if (parsed <= 0) {
                    rc = parsed;
                    goto done;
                }
                written = append_canonical(&row, &d, prec);
                size_t at = (size_t)(i * ncol + j);
                unsigned char flags = d.negative ? DEC_NEGATIVE : 0;
                if (dec_coefficient(&d, &r->dcoef[at])) flags |= DEC_FITS;
                if (d.ndigits <= prec) flags |= DEC_SAME;
                r->dexp[at] = d.exponent;
                r->dflags[at] = flags;
            } else {
                written = append_value(&row, v);
            }
            if (written <= 0) {
                rc = written;
                goto done;
            }
        }
        if (append(&row, "]]", 2) < 0) goto done;
        uint8_t digest[OUT_BYTES];
        blake2b_128((const uint8_t *)row.data, row.len, digest);
        r->hashes[i] = read_digest(digest);
        r->keys[i] = PyBytes_FromStringAndSize(row.data, row.len);
        if (r->keys[i] == NULL) goto done;
    }
    rc = 1;
done:
    PyMem_Free(prefix.data);
    PyMem_Free(row.data);
    return rc;
}

/* A multiplicity as an int64 (0 for absent or None); 0 returned when it does not fit one. */
static int small_count(PyObject *m, long long *out) {
    if (m == NULL || m == Py_None) {
        *out = 0;
        return 1;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(m, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

/* One row's count change, old (borrowed, NULL or None: none) found in clean (in_clean) or dirty: 1 applied
 * (the key written to dirty, and dropped from clean), 0 refused (its (row, old count) appended), -1 an error. */
static int update_count(PyObject *dirty, PyObject *clean, PyObject *key, PyObject *old, int in_clean, long long delta,
                        PyObject *delta_obj, int allow_negative, Py_ssize_t i, PyObject *refused, Py_ssize_t *distinct) {
    PyObject *old_count = (old == NULL || old == Py_None) ? NULL : old;
    long long before, after;
    PyObject *after_obj;
    int below, zero_after, zero_before;
    if (small_count(old_count, &before) && !__builtin_add_overflow(before, delta, &after)) {
        below = after < 0;
        zero_after = after == 0;
        zero_before = before == 0;
        after_obj = NULL; /* made below, if it is stored */
    } else { /* beyond 64 bits: Python ints */
        PyObject *zero = PyLong_FromLong(0);
        if (zero == NULL) return -1;
        after_obj = PyNumber_Add(old_count != NULL ? old_count : zero, delta_obj);
        if (after_obj == NULL) {
            Py_DECREF(zero);
            return -1;
        }
        below = PyObject_RichCompareBool(after_obj, zero, Py_LT);
        zero_after = PyObject_RichCompareBool(after_obj, zero, Py_EQ);
        zero_before = old_count == NULL ? 1 : PyObject_RichCompareBool(old_count, zero, Py_EQ);
        Py_DECREF(zero);
        if (below < 0 || zero_after < 0 || zero_before < 0) {
            Py_DECREF(after_obj);
            return -1;
        }
    }
    if (below && !allow_negative) {
        PyObject *item = old_count != NULL ? Py_BuildValue("(nO)", i, old_count) : Py_BuildValue("(ni)", i, 0);
        Py_XDECREF(after_obj);
        if (item == NULL || PyList_Append(refused, item) < 0) {
            Py_XDECREF(item);
            return -1;
        }
        Py_DECREF(item);
        return 0;
    }
    int rc = 0;
    if (zero_after) {
        Py_XDECREF(after_obj);
        if (!zero_before) { /* delete */
            if (in_clean) rc = PyDict_DelItem(clean, key);
            if (rc == 0) rc = PyDict_SetItem(dirty, key, Py_None);
            (*distinct)--;
        }
    } else {
        if (after_obj == NULL) after_obj = PyLong_FromLongLong(after);
        if (after_obj == NULL) return -1;
        if (in_clean) rc = PyDict_DelItem(clean, key);
        if (rc == 0) rc = PyDict_SetItem(dirty, key, after_obj);
        Py_DECREF(after_obj);
        if (zero_before) (*distinct)++;
    }
    return rc < 0 ? -1 : 1;
}

PyObject *bag_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 11 || !PyUnicode_CheckExact(args[0]) || !PyList_CheckExact(args[1]) || !PyBytes_CheckExact(args[2]) ||
        !PyList_CheckExact(args[3]) || !PyDict_CheckExact(args[4]) || !PyDict_CheckExact(args[5]) ||
        !PyList_CheckExact(args[7]) || !PyList_CheckExact(args[8]) || !PyType_Check(args[10])) {
        PyErr_SetString(PyExc_TypeError, "bag_rows(relation: str, columns: list[list], decimal_columns: bytes, "
                                         "deltas: list[int], dirty: dict, clean: dict, allow_negative: bool, "
                                         "sum_columns: list[int], sums: list, prec: int, decimal_type: type)");
        return NULL;
    }
    PyObject *columns = args[1], *deltas = args[3], *dirty = args[4], *clean = args[5];
    PyObject *sum_columns = args[7], *sums_in = args[8];
    int allow_negative = PyObject_IsTrue(args[6]);
    Py_ssize_t prec = PyLong_AsSsize_t(args[9]);
    if (allow_negative < 0 || (prec == -1 && PyErr_Occurred())) return NULL;
    if (prec > 36 || prec < 0) prec = 0; /* every decimal left to Python */
    init_pow10();
    Rows r = {0};
    r.nrows = PyList_GET_SIZE(deltas);
    r.ncol = PyList_GET_SIZE(columns);
    Py_ssize_t nsums = PyList_GET_SIZE(sum_columns);
    if (PyBytes_GET_SIZE(args[2]) != r.ncol || PyList_GET_SIZE(sums_in) != nsums) {
        PyErr_SetString(PyExc_ValueError, "bag_rows: one decimal flag per column, one sum per summed column");
        return NULL;
    }
    for (Py_ssize_t j = 0; j < r.ncol; j++) {
        PyObject *col = PyList_GET_ITEM(columns, j);
        if (!PyList_CheckExact(col) || PyList_GET_SIZE(col) != r.nrows) {
            PyErr_SetString(PyExc_ValueError, "bag_rows: columns are lists as long as the deltas");
            return NULL;
        }
    }
    if (r.ncol == 0 || r.nrows > MAX_ROWS) Py_RETURN_NONE;
    Py_ssize_t *sum_at = PyMem_Malloc((size_t)(nsums > 0 ? nsums : 1) * sizeof(Py_ssize_t));
    PyObject **sums = PyMem_Calloc((size_t)(nsums > 0 ? nsums : 1), sizeof(PyObject *));
    long long *parts = PyMem_Calloc((size_t)(nsums > 0 ? nsums : 1), sizeof(long long));
    DecSum *exact = PyMem_Calloc((size_t)(nsums > 0 ? nsums : 1), sizeof(DecSum)); /* decimal columns' sums */
    PyObject *refused = NULL, *out = NULL;
    if (sum_at == NULL || sums == NULL || parts == NULL || exact == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const char *decimal = PyBytes_AS_STRING(args[2]);
    for (Py_ssize_t k = 0; k < nsums; k++) {
        sum_at[k] = PyLong_AsSsize_t(PyList_GET_ITEM(sum_columns, k));
        if (sum_at[k] == -1 && PyErr_Occurred()) goto done;
        if (sum_at[k] < 0 || sum_at[k] >= r.ncol) {
            PyErr_SetString(PyExc_ValueError, "bag_rows: a summed column out of range");
            goto done;
        }
        sums[k] = Py_NewRef(PyList_GET_ITEM(sums_in, k));
        if (decimal[sum_at[k]] && prec > 0 && Py_TYPE(sums[k]) == (PyTypeObject *)args[10]) {
            PyObject *text = PyObject_Str(sums[k]);
            if (text == NULL) goto done;
            Py_ssize_t len;
            const char *s = PyUnicode_AsUTF8AndSize(text, &len);
            Dec d;
            int parsed = s != NULL ? parse_dec(s, len, &d) : -1;
            Py_DECREF(text);
            if (parsed < 0) goto done;
            if (parsed && dec_coefficient(&d, &exact[k].coefficient) && exact[k].coefficient < POW10[prec]) {
                exact[k].exact = 1;
                exact[k].negative = d.negative;
                exact[k].exponent = d.exponent;
            }
        }
    }
    int written = write_rows(&r, args[0], columns, decimal, deltas, prec, args[10]);
    if (written < 0) goto done;
    if (written == 0) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    refused = PyList_New(0);
    if (refused == NULL) goto done;
    long long total = 0;
    Py_ssize_t applied = 0, distinct = 0;
    u128 fingerprint = 0;
    for (Py_ssize_t i = 0; i < r.nrows; i++) {
        PyObject *key = r.keys[i], *delta_obj = PyList_GET_ITEM(deltas, i);
        long long delta = r.deltas[i];
        /* a key is in one of the dicts at most: clean first, then dirty */
        PyObject *old = NULL; /* borrowed */
        int in_clean = 0, status;
        if (PyDict_GET_SIZE(clean) > 0) {
            old = PyDict_GetItemWithError(clean, key);
            if (old == NULL && PyErr_Occurred()) goto done;
            in_clean = old != NULL;
        }
        if (!in_clean && delta > 0) { /* one probe of dirty: its count, or delta set where it had none */
            Py_ssize_t size = PyDict_GET_SIZE(dirty);
            PyObject *fresh = PyLong_FromLongLong(delta);
            if (fresh == NULL) goto done;
            old = PyDict_SetDefault(dirty, key, fresh);
            Py_DECREF(fresh);
            if (old == NULL) goto done;
            if (PyDict_GET_SIZE(dirty) > size) {
                distinct++;
                status = 1;
            } else {
                status = update_count(dirty, clean, key, old, 0, delta, delta_obj, allow_negative, i, refused, &distinct);
            }
        } else {
            if (!in_clean) {
                old = PyDict_GetItemWithError(dirty, key);
                if (old == NULL && PyErr_Occurred()) goto done;
            }
            status = update_count(dirty, clean, key, old, in_clean, delta, delta_obj, allow_negative, i, refused, &distinct);
        }
        if (status < 0) goto done;
        if (status == 0) continue; /* refused */
        total += delta;
        applied++;
        fingerprint += (u128)(__int128)delta * r.hashes[i];
        for (Py_ssize_t k = 0; k < nsums; k++) {
            Py_ssize_t j = sum_at[k];
            PyObject *v = PyList_GET_ITEM(PyList_GET_ITEM(columns, j), i);
            if (!decimal[j]) {
                if (add_int(&sums[k], &parts[k], v, delta, delta_obj) < 0) goto done;
                continue;
            }
            size_t at = (size_t)(i * r.ncol + j);
            unsigned char flags = r.dflags[at];
            if (exact[k].exact && (flags & DEC_FITS) &&
                dec_sum_add(&exact[k], flags & DEC_NEGATIVE, r.dcoef[at], r.dexp[at], delta, prec))
                continue;
            if (exact[k].exact) { /* this step rounds: the sum as a Decimal from here on */
                PyObject *sum = dec_sum_object(&exact[k], args[10]);
                if (sum == NULL) goto done;
                Py_SETREF(sums[k], sum);
                exact[k].exact = 0;
            }
            PyObject *value = PyUnicode_CheckExact(v) ? PyObject_CallOneArg(args[10], v) : Py_NewRef(v);
            if (value == NULL) goto done;
            int ok = add_decimal(&sums[k], value, delta == 1 && (flags & DEC_SAME), delta_obj);
            Py_DECREF(value);
            if (ok < 0) goto done;
        }
    }
    PyObject *sums_out = PyList_New(nsums);
    if (sums_out == NULL) goto done;
    for (Py_ssize_t k = 0; k < nsums; k++) {
        if (exact[k].exact) {
            PyObject *sum = dec_sum_object(&exact[k], args[10]);
            if (sum == NULL) {
                Py_DECREF(sums_out);
                goto done;
            }
            Py_SETREF(sums[k], sum);
        }
        PyObject *sum = sums[k];
        if (parts[k] != 0) {
            PyObject *part = PyLong_FromLongLong(parts[k]);
            sum = part == NULL ? NULL : PyNumber_Add(sums[k], part);
            Py_XDECREF(part);
            if (sum == NULL) {
                Py_DECREF(sums_out);
                goto done;
            }
        } else {
            Py_INCREF(sum);
        }
        PyList_SET_ITEM(sums_out, k, sum);
    }
    PyObject *fp = u128_to_long(fingerprint);
    if (fp == NULL) {
        Py_DECREF(sums_out);
        goto done;
    }
    out = Py_BuildValue("(OnLnNN)", refused, applied, total, distinct, fp, sums_out);
done:
    Py_XDECREF(refused);
    if (sums != NULL)
        for (Py_ssize_t k = 0; k < nsums; k++) Py_XDECREF(sums[k]);
    PyMem_Free(sums);
    PyMem_Free(sum_at);
    PyMem_Free(parts);
    PyMem_Free(exact);
    rows_free(&r);
    return out;
}
