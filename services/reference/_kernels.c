/* The reference engine's member keys and member hashes (its batch update, bag_rows, is in _bag_rows.c).
 *
 * Member hashes: BLAKE2b with a 16-byte digest (RFC 7693) of each member key, as
 * a 128-bit unsigned integer read big-endian, the same numbers as
 * int.from_bytes(hashlib.blake2b(key, digest_size=16).digest(), "big") (services/reference/engine.py's
 * member_hash, kept as the reference and the fallback). A batch of keys is hashed in one call, without a
 * hashlib object per key. */

#include "_kernels.h"

static const uint64_t IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t rotr64(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

static inline uint64_t load64(const uint8_t *p) { /* little-endian, whatever the machine's order */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
#endif
}

#define G(a, b, c, d, x, y)           \
    do {                              \
        v[a] = v[a] + v[b] + (x);     \
        v[d] = rotr64(v[d] ^ v[a], 32); \
        v[c] = v[c] + v[d];           \
        v[b] = rotr64(v[b] ^ v[c], 24); \
        v[a] = v[a] + v[b] + (y);     \
        v[d] = rotr64(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d];           \
        v[b] = rotr64(v[b] ^ v[c], 63); \
    } while (0)

/* One 128-byte block into the state h; t: bytes hashed so far including this block (below 2^64 here). */
static void compress(uint64_t h[8], const uint8_t block[128], uint64_t t, int last) {
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = load64(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = IV[i];
    }
    v[12] ^= t;
    if (last) v[14] = ~v[14];
#define ROUND(r)                                          \
    do {                                                  \
        const uint8_t *s = SIGMA[r];                      \
        G(0, 4, 8, 12, m[s[0]], m[s[1]]);                 \
        G(1, 5, 9, 13, m[s[2]], m[s[3]]);                 \
        G(2, 6, 10, 14, m[s[4]], m[s[5]]);                \
        G(3, 7, 11, 15, m[s[6]], m[s[7]]);                \
        G(0, 5, 10, 15, m[s[8]], m[s[9]]);                \
        G(1, 6, 11, 12, m[s[10]], m[s[11]]);              \
        G(2, 7, 8, 13, m[s[12]], m[s[13]]);               \
        G(3, 4, 9, 14, m[s[14]], m[s[15]]);               \
    } while (0)
    /* unrolled, so each round's message schedule is known when compiled */
    ROUND(0); ROUND(1); ROUND(2); ROUND(3); ROUND(4); ROUND(5);
    ROUND(6); ROUND(7); ROUND(8); ROUND(9); ROUND(10); ROUND(11);
#undef ROUND
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

/* BLAKE2b-128 of data (no key): the digest's 16 bytes in out. */
void blake2b_128(const uint8_t *data, Py_ssize_t n, uint8_t out[OUT_BYTES]) {
    uint64_t h[8];
    uint8_t block[128];
    memcpy(h, IV, sizeof h);
    h[0] ^= 0x01010000ULL ^ OUT_BYTES; /* depth 1, fanout 1, no key, 16-byte digest */
    uint64_t t = 0;
    while (n > 128) { /* every full block but the last */
        t += 128;
        compress(h, data, t, 0);
        data += 128;
        n -= 128;
    }
    memset(block, 0, sizeof block);
    if (n > 0) memcpy(block, data, (size_t)n);
    t += (uint64_t)n;
    compress(h, block, t, 1);
    for (int i = 0; i < OUT_BYTES; i++) out[i] = (uint8_t)(h[i / 8] >> (8 * (i % 8)));
}

static PyObject *member_hashes(PyObject *self, PyObject *keys) {
    (void)self;
    PyObject *seq = PySequence_Fast(keys, "member_hashes takes a sequence of bytes");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *out = PyList_New(n);
    if (out == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = items[i];
        if (!PyBytes_Check(key)) {
            PyErr_Format(PyExc_TypeError, "a member key is bytes, not %.100s", Py_TYPE(key)->tp_name);
            goto fail;
        }
        uint8_t digest[OUT_BYTES];
        blake2b_128((const uint8_t *)PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), digest);
        PyObject *number = _PyLong_FromByteArray(digest, OUT_BYTES, 0 /* big-endian */, 0 /* unsigned */);
        if (number == NULL) goto fail;
        PyList_SET_ITEM(out, i, number);
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(seq);
    return NULL;
}

/* --- member keys: orjson's bytes of [relation, [v1, v2, ...]] for rows of str, bool and 64-bit int values */

int reserve(Buffer *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more) cap *= 2;
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

int append(Buffer *b, const char *s, Py_ssize_t n) {
    if (reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

/* A JSON string as orjson writes it: '"' and '\\' escaped, control characters as \b \t \n \f \r or
 * \u00xx, everything else (DEL and non-ASCII UTF-8 included) as it is. */
int append_string(Buffer *b, const char *s, Py_ssize_t n) {
    static const char HEX[] = "0123456789abcdef";
    if (reserve(b, 6 * n + 2) < 0) return -1;
    char *out = b->data + b->len;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') {
            *out++ = (char)ch;
            continue;
        }
        *out++ = '\\';
        switch (ch) {
        case '"': *out++ = '"'; break;
        case '\\': *out++ = '\\'; break;
        case '\b': *out++ = 'b'; break;
        case '\t': *out++ = 't'; break;
        case '\n': *out++ = 'n'; break;
        case '\f': *out++ = 'f'; break;
        case '\r': *out++ = 'r'; break;
        default:
            *out++ = 'u';
            *out++ = '0';
            *out++ = '0';
            *out++ = HEX[ch >> 4];
            *out++ = HEX[ch & 15];
        }
    }
    *out++ = '"';
    b->len = out - b->data;
    return 0;
}

/* One value; 1 written, 0 a value this writer leaves to orjson (a float, a decimal, an int beyond 64
 * bits, a string that is not valid UTF-8), -1 an error. */
int append_value(Buffer *b, PyObject *v) {
    if (PyUnicode_CheckExact(v)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(v, &n);
        if (s == NULL) {
            PyErr_Clear();
            return 0;
        }
        return append_string(b, s, n) < 0 ? -1 : 1;
    }
    if (PyBool_Check(v)) return append(b, v == Py_True ? "true" : "false", v == Py_True ? 4 : 5) < 0 ? -1 : 1;
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow) return 0;
        if (x == -1 && PyErr_Occurred()) return -1;
        char text[24], *end = text + sizeof text, *p = end; /* the digits backwards, as %lld writes them */
        unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
        do *--p = (char)('0' + u % 10); while ((u /= 10) != 0);
        if (x < 0) *--p = '-';
        return append(b, p, end - p) < 0 ? -1 : 1;
    }
    return 0;
}

static PyObject *member_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyUnicode_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "member_keys(relation: str, columns: list[list])");
        return NULL;
    }
    PyObject *columns = args[1];
    Py_ssize_t ncol = PyList_GET_SIZE(columns), nrows = -1;
    for (Py_ssize_t j = 0; j < ncol; j++) {
        PyObject *col = PyList_GET_ITEM(columns, j);
        if (!PyList_CheckExact(col) || (nrows >= 0 && PyList_GET_SIZE(col) != nrows)) {
            PyErr_SetString(PyExc_TypeError, "member_keys takes columns as lists of one length");
            return NULL;
        }
        nrows = PyList_GET_SIZE(col);
    }
    if (nrows < 0) nrows = 0;
    Py_ssize_t rel_len;
    const char *rel = PyUnicode_AsUTF8AndSize(args[0], &rel_len);
    if (rel == NULL) return NULL;
    Buffer prefix = {0}, row = {0};
    PyObject *out = NULL;
    if (append(&prefix, "[", 1) < 0 || append_string(&prefix, rel, rel_len) < 0 || append(&prefix, ",[", 2) < 0)
        goto done;
    out = PyList_New(nrows);
    if (out == NULL) goto done;
    for (Py_ssize_t i = 0; i < nrows; i++) {
        row.len = 0;
        if (append(&row, prefix.data, prefix.len) < 0) goto fail;
        for (Py_ssize_t j = 0; j < ncol; j++) {
            if (j > 0 && append(&row, ",", 1) < 0) goto fail;
            int rc = append_value(&row, PyList_GET_ITEM(PyList_GET_ITEM(columns, j), i));
            if (rc < 0) goto fail;
            if (rc == 0) { /* a value for orjson: the caller makes every key */
                Py_CLEAR(out);
                out = Py_NewRef(Py_None);
                goto done;
            }
        }
        if (append(&row, "]]", 2) < 0) goto fail;
        PyObject *key = PyBytes_FromStringAndSize(row.data, row.len);
        if (key == NULL) goto fail;
        PyList_SET_ITEM(out, i, key);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyMem_Free(prefix.data);
    PyMem_Free(row.data);
    return out;
}

static PyMethodDef methods[] = {
    {"member_keys", (PyCFunction)(void (*)(void))member_keys, METH_FASTCALL,
     "member_keys(relation, columns) -> list[bytes] | None: orjson's bytes of [relation, [row values]] for "
     "each row, or None when a value is one this writer leaves to orjson."},
    {"bag_rows", (PyCFunction)(void (*)(void))bag_rows, METH_FASTCALL, BAG_ROWS_DOC},
    {"member_hashes", member_hashes, METH_O,
     "member_hashes(keys) -> list[int]: BLAKE2b-128 of each key, read as a big-endian unsigned integer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
