/* The integer hash tables of _graph_kernels.c: NSet, a node's neighbour set (node indexes), and IdMap,
 * int64 node ids -> node indexes. Both use open addressing with linear probing and backward-shift
 * deletion. Included by _graph_kernels.c alone (static functions: one translation unit, so the
 * probes of the common-neighbour count inline into the batch loop); it needs Python.h for PyMem.
 */
#ifndef IVMSTREAM_TRIANGLES_GRAPH_SETS_H
#define IVMSTREAM_TRIANGLES_GRAPH_SETS_H

#include <Python.h>
#include <stdint.h>

/* --- a set of node ids: linear probing, backward-shift deletion, load between 1/8 and 3/4 ------- */

typedef struct {
    int32_t *slots; /* -1 marks an empty slot; NULL while the set is empty */
    uint32_t n;
    uint8_t bits; /* capacity 1 << bits */
} NSet;

static inline uint32_t home(int32_t x, uint8_t bits) {
    return ((uint32_t)x * 0x9E3779B1u) >> (32 - bits);
}

static int nset_contains(const NSet *s, int32_t x) {
    if (s->n == 0) return 0;
    uint32_t mask = (1u << s->bits) - 1, i = home(x, s->bits);
    for (;;) {
        int32_t v = s->slots[i];
        if (v == x) return 1;
        if (v < 0) return 0;
        i = (i + 1) & mask;
    }
}

static void place(int32_t *slots, uint8_t bits, int32_t x) {
    uint32_t mask = (1u << bits) - 1, i = home(x, bits);
    while (slots[i] >= 0) i = (i + 1) & mask;
    slots[i] = x;
}

static int nset_resize(NSet *s, uint8_t bits) {
    uint32_t cap = 1u << bits;
    int32_t *slots = PyMem_Malloc(sizeof(int32_t) * cap);
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(slots, 0xff, sizeof(int32_t) * cap);
    if (s->slots != NULL) {
        uint32_t old = 1u << s->bits;
        for (uint32_t i = 0; i < old; i++)
            if (s->slots[i] >= 0) place(slots, bits, s->slots[i]);
        PyMem_Free(s->slots);
    }
    s->slots = slots;
    s->bits = bits;
    return 0;
}

/* Adds x, which is absent. */
static int nset_add(NSet *s, int32_t x) {
    if (s->slots == NULL) {
        if (nset_resize(s, 2) < 0) return -1;
    } else if ((s->n + 1) * 4 > (3u << s->bits)) {
        if (nset_resize(s, s->bits + 1) < 0) return -1;
    }
    place(s->slots, s->bits, x);
    s->n++;
    return 0;
}

/* Removes x, which is present. */
static int nset_remove(NSet *s, int32_t x) {
    uint32_t mask = (1u << s->bits) - 1, i = home(x, s->bits);
    while (s->slots[i] != x) i = (i + 1) & mask;
    uint32_t j = i;
    for (;;) { /* shift back every later entry of the run whose home is not in (i, j] */
        j = (j + 1) & mask;
        int32_t v = s->slots[j];
        if (v < 0) break;
        uint32_t k = home(v, s->bits);
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
        s->slots[i] = v;
        i = j;
    }
    s->slots[i] = -1;
    s->n--;
    if (s->n == 0) {
        PyMem_Free(s->slots);
        s->slots = NULL;
        s->bits = 0;
    } else if (s->bits > 2 && s->n * 8 < (1u << s->bits)) {
        uint8_t bits = 2;
        while ((1u << bits) < s->n * 2) bits++;
        return nset_resize(s, bits);
    }
    return 0;
}

/* |a ∩ b|, walking the smaller set and probing the larger. */
static Py_ssize_t nset_common(const NSet *a, const NSet *b) {
    if (a->n > b->n) {
        const NSet *t = a;
        a = b;
        b = t;
    }
    if (a->n == 0) return 0;
    Py_ssize_t d = 0;
    uint32_t cap = 1u << a->bits;
    for (uint32_t i = 0; i < cap; i++) {
        int32_t c = a->slots[i];
        if (c >= 0 && nset_contains(b, c)) d++;
    }
    return d;
}

/* --- node ids -> node indexes ------------------------------------------------------------------ */

/* Int node ids (int64 values) -> node index: open addressing, backward-shift deletion. */
typedef struct {
    long long key;
    int32_t id; /* -1: empty */
} IdSlot;

typedef struct {
    IdSlot *slots;
    uint32_t n;
    uint8_t bits;
} IdMap;

static inline uint32_t id_home(long long key, uint8_t bits) {
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> (64 - bits));
}

static int32_t idmap_get(const IdMap *m, long long key) {
    if (m->n == 0) return -1;
    uint32_t mask = (1u << m->bits) - 1, i = id_home(key, m->bits);
    for (;;) {
        const IdSlot *e = &m->slots[i];
        if (e->id < 0) return -1;
        if (e->key == key) return e->id;
        i = (i + 1) & mask;
    }
}

static void idmap_place(IdSlot *slots, uint8_t bits, long long key, int32_t id) {
    uint32_t mask = (1u << bits) - 1, i = id_home(key, bits);
    while (slots[i].id >= 0) i = (i + 1) & mask;
    slots[i].key = key;
    slots[i].id = id;
}

static int idmap_put(IdMap *m, long long key, int32_t id) { /* key is absent */
    if (m->slots == NULL || (m->n + 1) * 2 > (1u << m->bits)) {
        uint8_t bits = m->slots == NULL ? 6 : m->bits + 1;
        IdSlot *slots = PyMem_Malloc(sizeof(IdSlot) << bits);
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (uint32_t i = 0; i < (1u << bits); i++) slots[i].id = -1;
        if (m->slots != NULL) {
            for (uint32_t i = 0; i < (1u << m->bits); i++)
                if (m->slots[i].id >= 0) idmap_place(slots, bits, m->slots[i].key, m->slots[i].id);
            PyMem_Free(m->slots);
        }
        m->slots = slots;
        m->bits = bits;
    }
    idmap_place(m->slots, m->bits, key, id);
    m->n++;
    return 0;
}

static void idmap_del(IdMap *m, long long key) { /* key is present */
    uint32_t mask = (1u << m->bits) - 1, i = id_home(key, m->bits);
    while (m->slots[i].key != key || m->slots[i].id < 0) i = (i + 1) & mask;
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        IdSlot e = m->slots[j];
        if (e.id < 0) break;
        uint32_t k = id_home(e.key, m->bits);
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
        m->slots[i] = e;
        i = j;
    }
    m->slots[i].id = -1;
    m->n--;
}

#endif /* IVMSTREAM_TRIANGLES_GRAPH_SETS_H */
