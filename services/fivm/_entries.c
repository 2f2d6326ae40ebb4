/* A float cofactor view's checkpoint entries (part of the _kernels extension, _kernels.h). */
#include "_kernels.h"

/* Whether every product of the upper triangle is, bit for bit, the product s_r·s_c of its sums and none
 * is NaN (one tuple's lift at multiplicity 1 is such a payload): the products then need not be stored,
 * as multiplying the stored sums gives them back exactly on any IEEE machine. */
static int rank_one(const double *sums, const double *quad, Py_ssize_t k) {
    for (Py_ssize_t r = 0; r < k; r++)
        for (Py_ssize_t c = r; c < k; c++) {
            const double p = sums[r] * sums[c];
            if (isnan(p) || memcmp(&p, quad++, sizeof p) != 0) return 0;
        }
    return 1;
}

#define RANK_ONE 0x80000000ULL /* k's top bit: the products are the sums' products */

/* How a value's payloads are read: `cls` the row payload class (or NULL), and, when `direct`, the
 * offsets of its slots lo, count, block and row (slot_offsets), read without a getattr each. */
typedef struct {
    PyTypeObject *cls;
    int direct;
    Py_ssize_t off[4];
} RowSlots;

enum { SLOT_LO, SLOT_COUNT, SLOT_BLOCK, SLOT_ROW };

static void row_slots(RowSlots *rs, PyTypeObject *cls) {
    PyObject *names[4] = {s_lo, s_count, s_block, s_row};
    rs->cls = cls;
    rs->direct = cls != NULL && slot_offsets(cls, names, 4, rs->off);
}

/* Attribute `slot` of payload p (a new reference): its slot when p is of the row class read directly. */
static PyObject *attr_of(PyObject *p, const RowSlots *rs, int slot) {
    static PyObject **const names[4] = {&s_lo, &s_count, &s_block, &s_row};
    if (rs->direct && Py_TYPE(p) == rs->cls) {
        PyObject *v = *(PyObject **)((char *)p + rs->off[slot]);
        if (v != NULL) return Py_NewRef(v);
    }
    return PyObject_GetAttr(p, *names[slot]);
}

/* put_value(seq, payload, rs, src, out): the stored value of a (seq, payload) of a float cofactor view:
 * seq as a big-endian u64, then the payload's encoding (CofactorRing.encode): lo and k as little-endian
 * u32, the count's byte length as a u8, the count in its shortest signed little-endian form (no bytes
 * for 0), the sums and the upper triangle as little-endian float64; a rank-one payload (rank_one) sets
 * k's top bit and leaves its products out. A payload of type exactly `rs->cls` (RowCofactor) is read
 * from its batch's columns. OverflowError for a count beyond int64 or a block past 2^31, TypeError for
 * arrays that are not float64: the caller encodes in Python. */
static int put_value(PyObject *seqobj, PyObject *p, const RowSlots *rs, Source *src, PyObject **out) {
    PyTypeObject *row_cls = rs->cls;
    unsigned long long seqv = PyLong_AsUnsignedLongLong(seqobj);
    if (seqv == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    PyObject *o = attr_of(p, rs, SLOT_COUNT);
    if (o == NULL) return -1;
    int overflow = 0;
    long long count = PyLong_AsLongLongAndOverflow(o, &overflow);
    Py_DECREF(o);
    if (count == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "view_entries: a count beyond int64");
        return -1;
    }
    o = attr_of(p, rs, SLOT_LO);
    if (o == NULL) return -1;
    long long lo = PyLong_AsLongLong(o);
    Py_DECREF(o);
    if (lo == -1 && PyErr_Occurred()) return -1;
    const double *sums, *quad;
    Py_ssize_t k;
    Buf own[2];
    memset(own, 0, sizeof own);
    if (row_cls != NULL && Py_TYPE(p) == row_cls) {
        PyObject *block = attr_of(p, rs, SLOT_BLOCK);
        if (block == NULL) return -1;
        int rc = source_of(src, block);
        Py_DECREF(block);
        if (rc < 0) return -1;
        PyObject *row = attr_of(p, rs, SLOT_ROW);
        if (row == NULL) return -1;
        Py_ssize_t r = PyLong_AsSsize_t(row);
        Py_DECREF(row);
        if (r == -1 && PyErr_Occurred()) return -1;
        if (r < 0 || r >= dim(&src->cols[0], 0) || r >= dim(&src->cols[1], 0)) {
            PyErr_SetString(PyExc_IndexError, "view_entries: a row payload's row is outside its columns");
            return -1;
        }
        k = dim(&src->cols[0], 1);
        if (dim(&src->cols[1], 1) != k * (k + 1) / 2) return shape_error("view_entries");
        sums = (const double *)src->cols[0].view.buf + r * k;
        quad = (const double *)src->cols[1].view.buf + r * (k * (k + 1) / 2);
    } else {
        PyObject *a = PyObject_GetAttr(p, s_sums);
        if (a == NULL) return -1;
        int rc = take(a, &own[0], 1, 'd', 0, "a payload's sums");
        Py_DECREF(a);
        if (rc < 0) {
            release(own, 2);
            return -1;
        }
        a = PyObject_GetAttr(p, s_quad);
        if (a == NULL) {
            release(own, 2);
            return -1;
        }
        rc = take(a, &own[1], 1, 'd', 0, "a payload's quad");
        Py_DECREF(a);
        if (rc < 0) {
            release(own, 2);
            return -1;
        }
        k = dim(&own[0], 0);
        if (dim(&own[1], 0) != k * (k + 1) / 2) {
            release(own, 2);
            return shape_error("view_entries");
        }
        sums = own[0].view.buf;
        quad = own[1].view.buf;
    }
    if (lo < 0 || lo > 0xFFFFFFFFLL || k > 0x7FFFFFFFLL) {
        release(own, 2);
        PyErr_SetString(PyExc_OverflowError, "view_entries: a block past 2^31");
        return -1;
    }
    /* the count's shortest signed little-endian form: (bit_length(|c|) + 8) // 8 bytes, none for 0 */
    unsigned long long mag = count < 0 ? 0ULL - (unsigned long long)count : (unsigned long long)count;
    int bits = 0;
    while (mag) {
        bits++;
        mag >>= 1;
    }
    const int compact = k > 0 && rank_one(sums, quad, k);
    const Py_ssize_t nc = count ? (bits + 8) / 8 : 0, t = compact ? 0 : k * (k + 1) / 2;
    const Py_ssize_t size = 8 + 9 + nc + 8 * (k + t);
    const unsigned long long kword = (unsigned long long)k | (compact ? RANK_ONE : 0);
    PyObject *value = PyBytes_FromStringAndSize(NULL, size);
    if (value == NULL) {
        release(own, 2);
        return -1;
    }
    unsigned char *b = (unsigned char *)PyBytes_AS_STRING(value);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(seqv >> (56 - 8 * i));
    b += 8;
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)((unsigned long long)lo >> (8 * i));
    for (int i = 0; i < 4; i++) b[4 + i] = (unsigned char)(kword >> (8 * i));
    b[8] = (unsigned char)nc;
    b += 9;
    for (Py_ssize_t i = 0; i < nc; i++) b[i] = (unsigned char)((unsigned long long)count >> (8 * i));
    b += nc;
    memcpy(b, sums, (size_t)k * sizeof(double));  /* x86-64 and the other targets store float64 LE */
    memcpy(b + 8 * k, quad, (size_t)t * sizeof(double));
    release(own, 2);
    *out = value;
    return 0;
}

/* The JSON text of a key tuple whose items are all exact ints within int64 or integral floats below 1e15
 * in magnitude, as orjson writes them ("[1,-2]", "[3.0,-0.0]", "[]"): a new bytes object, or NULL
 * without an exception when an item is anything else (the caller encodes the key in Python). */
static PyObject *key_json(PyObject *key) {
    char buf[256];
    if (!PyTuple_CheckExact(key)) return NULL;
    const Py_ssize_t n = PyTuple_GET_SIZE(key);
    if (24 * n + 2 > (Py_ssize_t)sizeof buf) return NULL;
    Py_ssize_t len = 0;
    buf[len++] = '[';
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(key, i);
        unsigned long long u;
        int negative, is_float = PyFloat_CheckExact(v);
        if (is_float) {
            const double d = PyFloat_AS_DOUBLE(v);
            if (!(d > -1e15 && d < 1e15) || d != (double)(long long)d) return NULL;
            negative = signbit(d) != 0; /* -0.0 too */
            u = (unsigned long long)(negative ? -d : d);
        } else {
            if (!PyLong_CheckExact(v)) return NULL;
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow || (x == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                return NULL;
            }
            negative = x < 0;
            u = negative ? 0ULL - (unsigned long long)x : (unsigned long long)x;
        }
        if (i) buf[len++] = ',';
        if (negative) buf[len++] = '-';
        char digits[24];
        int nd = 0;
        do {
            digits[nd++] = (char)('0' + (int)(u % 10));
            u /= 10;
        } while (u);
        while (nd) buf[len++] = digits[--nd];
        if (is_float) {
            buf[len++] = '.';
            buf[len++] = '0';
        }
    }
    buf[len++] = ']';
    return PyBytes_FromStringAndSize(buf, len);
}

/* view_entries(name, keys, data, seq, row_cls, key_of): the checkpoint entry (name, key bytes, value) of
 * each key of the dict `keys` (a view's change log, or its data for every entry), in its order: the value
 * as put_value writes it from seq[key] and data[key], None where data no longer holds the key. A key of
 * ints within int64 is written as orjson writes it, any other by key_of(key). Each key is hashed once (the
 * dict `keys` holds its hash). The errors of put_value (the caller then encodes in Python). */
PyObject *k_view_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!positional("view_entries", nargs, 6)) return NULL;
    PyObject *name = args[0], *keys = args[1], *data = args[2], *seq = args[3], *key_of = args[5];
    if (!PyDict_Check(keys) || !PyDict_Check(data) || !PyDict_Check(seq) ||
        (args[4] != Py_None && !PyType_Check(args[4]))) {
        PyErr_SetString(PyExc_TypeError, "view_entries: the keys, data and seq dicts, and a class or None");
        return NULL;
    }
    RowSlots rs;
    row_slots(&rs, args[4] == Py_None ? NULL : (PyTypeObject *)args[4]);
    PyObject *out = PyList_New(PyDict_GET_SIZE(keys));
    if (out == NULL) return NULL;
    Source src;
    memset(&src, 0, sizeof src);
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *ignored;
    Py_hash_t hash;
    while (_PyDict_Next(keys, &pos, &key, &ignored, &hash)) {
        /* the key, payload and sequence number are held while Python code (a payload's attributes,
         * key_of) runs, which may change the dicts and drop their references */
        Py_INCREF(key);
        PyObject *payload = _PyDict_GetItem_KnownHash(data, key, hash), *value = NULL;
        if (payload == NULL && PyErr_Occurred()) goto fail_key;
        if (payload == NULL) {
            value = Py_NewRef(Py_None);
        } else {
            PyObject *number = _PyDict_GetItem_KnownHash(seq, key, hash);
            if (number == NULL) {
                if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
                goto fail_key;
            }
            Py_INCREF(payload);
            Py_INCREF(number);
            int rc = put_value(number, payload, &rs, &src, &value);
            Py_DECREF(number);
            Py_DECREF(payload);
            if (rc < 0) goto fail_key;
        }
        PyObject *encoded = key_json(key);
        if (encoded == NULL && !PyErr_Occurred()) encoded = PyObject_CallOneArg(key_of, key);
        Py_DECREF(key);
        if (encoded == NULL) {
            Py_DECREF(value);
            goto fail;
        }
        PyObject *entry = PyTuple_New(3);
        if (entry == NULL) {
            Py_DECREF(encoded);
            Py_DECREF(value);
            goto fail;
        }
        PyTuple_SET_ITEM(entry, 0, Py_NewRef(name));
        PyTuple_SET_ITEM(entry, 1, encoded);
        PyTuple_SET_ITEM(entry, 2, value);
        if (i >= PyList_GET_SIZE(out)) {
            Py_DECREF(entry);
            PyErr_SetString(PyExc_RuntimeError, "view_entries: the keys changed size during the pass");
            goto fail;
        }
        PyList_SET_ITEM(out, i++, entry);
    }
    release(src.cols, 2);
    if (i != PyList_GET_SIZE(out)) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_RuntimeError, "view_entries: the keys changed size during the pass");
        return NULL;
    }
    return out;
fail_key:
    Py_DECREF(key);
fail:
    release(src.cols, 2);
    Py_DECREF(out);
    return NULL;
}
