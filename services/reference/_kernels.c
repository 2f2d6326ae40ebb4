/* The reference engine's member hashes: BLAKE2b with a 16-byte digest (RFC 7693) of each member key, as
 * a 128-bit unsigned integer read big-endian, the same numbers as
 * int.from_bytes(hashlib.blake2b(key, digest_size=16).digest(), "big") (services/reference/engine.py's
 * member_hash, kept as the reference and the fallback). A batch of keys is hashed in one call, without a
 * hashlib object per key. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define OUT_BYTES 16

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
static void blake2b_128(const uint8_t *data, Py_ssize_t n, uint8_t out[OUT_BYTES]) {
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

static PyMethodDef methods[] = {
    {"member_hashes", member_hashes, METH_O,
     "member_hashes(keys) -> list[int]: BLAKE2b-128 of each key, read as a big-endian unsigned integer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
