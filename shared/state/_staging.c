/* One key's checkpoint entries staged into a write batch in one pass (ivmstream.state.staging).
 *
 * stage_entries(put, delete, prefix, changes) -> int walks a key's entry changes, (map name, entry,
 * value or None), as py_stage_entries does: each run of puts of one map (consecutive changes of that
 * map up to its next delete) is put in stored-key order, stable, so a memtable inserts each entry next
 * to the previous one; a delete is issued where it stands. The stored key is prefix + the map name's
 * UTF-8 + NUL + the entry. It returns the bytes of the keys and values put. Every put's key is built in
 * C in that order and handed to put at once, so no list of keys, values or sort order is made.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define PREFETCH_AHEAD 8
#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

typedef struct {
    /* 16 bytes of the entry past the run's common prefix, big-endian (zero past its end): most
     * comparisons end here, without reading the entry's bytes (scattered across the heap) */
    uint64_t head[2];
    const char *data;
    Py_ssize_t len;
    Py_ssize_t index; /* position in the run: ties (an entry put twice) keep their order */
    PyObject *value;
} Staged;

static int staged_order(const void *a, const void *b) {
    const Staged *x = a, *y = b;
    if (x->head[0] != y->head[0]) return x->head[0] < y->head[0] ? -1 : 1;
    if (x->head[1] != y->head[1]) return x->head[1] < y->head[1] ? -1 : 1;
    Py_ssize_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->data, y->data, (size_t)n) : 0;
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1; /* a prefix sorts first, as bytes do */
    return x->index < y->index ? -1 : (x->index > y->index);
}

/* Up to 8 bytes of data from offset at, big-endian, zero past the end. */
static uint64_t word_at(const char *data, Py_ssize_t len, Py_ssize_t at) {
    uint64_t w = 0;
    for (int i = 0; i < 8; i++) {
        w <<= 8;
        if (at + i < len) w |= (uint8_t)data[at + i];
    }
    return w;
}

/* A stored key: the map's prefix and the entry, as a new bytes object. */
static PyObject *stored_key(const char *map_prefix, Py_ssize_t map_len, const char *entry, Py_ssize_t len) {
    PyObject *key = PyBytes_FromStringAndSize(NULL, map_len + len);
    if (key == NULL) return NULL;
    char *out = PyBytes_AS_STRING(key);
    memcpy(out, map_prefix, (size_t)map_len);
    if (len) memcpy(out + map_len, entry, (size_t)len);
    return key;
}

/* Calls fn(key, value) (value NULL: fn(key)) and drops the key and the result; -1 on an error. */
static int call_with(PyObject *fn, PyObject *key, PyObject *value) {
    PyObject *args[2] = {key, value};
    PyObject *r = PyObject_Vectorcall(fn, args, value ? 2 : 1, NULL);
    Py_DECREF(key);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* The change at i, checked: a 3-tuple of a str, bytes and bytes or None. */
static int read_change(PyObject *changes, Py_ssize_t i, PyObject **name, PyObject **entry, PyObject **value) {
    PyObject *item = PyTuple_GET_ITEM(changes, i);
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
        PyErr_Format(PyExc_TypeError, "entry change %zd is not a (map, entry, value) tuple", i);
        return -1;
    }
    *name = PyTuple_GET_ITEM(item, 0);
    *entry = PyTuple_GET_ITEM(item, 1);
    *value = PyTuple_GET_ITEM(item, 2);
    if (!PyUnicode_Check(*name)) {
        PyErr_Format(PyExc_TypeError, "entry change %zd: the map name is not a str", i);
        return -1;
    }
    if (!PyBytes_Check(*entry) || (*value != Py_None && !PyBytes_Check(*value))) {
        PyErr_Format(PyExc_TypeError, "entry change %zd: the entry and value must be bytes (value: or None)", i);
        return -1;
    }
    return 0;
}

/* A map's stored-key prefix in buf (grown as needed): prefix + name's UTF-8 + NUL. */
static Py_ssize_t map_prefix(PyObject *prefix, PyObject *name, char **buf, Py_ssize_t *cap) {
    Py_ssize_t name_len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(name, &name_len);
    if (utf8 == NULL) return -1;
    Py_ssize_t n = PyBytes_GET_SIZE(prefix) + name_len + 1;
    if (n > *cap) {
        char *grown = PyMem_Realloc(*buf, (size_t)n);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *buf = grown;
        *cap = n;
    }
    memcpy(*buf, PyBytes_AS_STRING(prefix), (size_t)PyBytes_GET_SIZE(prefix));
    memcpy(*buf + PyBytes_GET_SIZE(prefix), utf8, (size_t)name_len);
    (*buf)[n - 1] = '\0';
    return n;
}

static PyObject *stage_entries(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "stage_entries(put, delete, prefix, changes) takes 4 arguments");
        return NULL;
    }
    PyObject *put = args[0], *delete = args[1], *prefix = args[2];
    if (!PyBytes_Check(prefix)) {
        PyErr_SetString(PyExc_TypeError, "stage_entries: the key prefix must be bytes");
        return NULL;
    }
    /* a tuple of the changes: it holds every change (and so its bytes) while put and delete run */
    PyObject *changes = PySequence_Tuple(args[3]);
    if (changes == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(changes), size = 0, cap = 0, staged_cap = 0;
    char *mp = NULL;
    Staged *staged = NULL;
    Py_ssize_t i = 0;
    while (i < n) {
        PyObject *name, *entry, *value;
        if (read_change(changes, i, &name, &entry, &value) < 0) goto fail;
        Py_ssize_t mp_len = map_prefix(prefix, name, &mp, &cap);
        if (mp_len < 0) goto fail;
        if (value == Py_None) {
            PyObject *key = stored_key(mp, mp_len, PyBytes_AS_STRING(entry), PyBytes_GET_SIZE(entry));
            if (key == NULL || call_with(delete, key, NULL) < 0) goto fail;
            i++;
            continue;
        }
        /* the run: this map's puts up to another map's change or a delete */
        Py_ssize_t end = i + 1;
        while (end < n) {
            PyObject *next_name, *next_entry, *next_value;
            if (read_change(changes, end, &next_name, &next_entry, &next_value) < 0) goto fail;
            if (next_value == Py_None) break;
            if (next_name != name) {
                int same = PyObject_RichCompareBool(next_name, name, Py_EQ);
                if (same < 0) goto fail;
                if (!same) break;
            }
            end++;
        }
        Py_ssize_t run = end - i;
        if (run > staged_cap) {
            Staged *grown = PyMem_Realloc(staged, (size_t)run * sizeof(Staged));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            staged = grown;
            staged_cap = run;
        }
        Py_ssize_t common = PY_SSIZE_T_MAX; /* the bytes every entry of the run starts with */
        for (Py_ssize_t j = 0; j < run; j++) {
            PyObject *item = PyTuple_GET_ITEM(changes, i + j);
            PyObject *e = PyTuple_GET_ITEM(item, 1);
            staged[j].data = PyBytes_AS_STRING(e);
            staged[j].len = PyBytes_GET_SIZE(e);
            staged[j].index = j;
            staged[j].value = PyTuple_GET_ITEM(item, 2);
            Py_ssize_t limit = common < staged[j].len ? common : staged[j].len, c = 0;
            while (c < limit && staged[j].data[c] == staged[0].data[c]) c++;
            common = c;
        }
        for (Py_ssize_t j = 0; j < run; j++) {
            staged[j].head[0] = word_at(staged[j].data, staged[j].len, common);
            staged[j].head[1] = word_at(staged[j].data, staged[j].len, common + 8);
        }
        if (run > 1) qsort(staged, (size_t)run, sizeof(Staged), staged_order);
        for (Py_ssize_t j = 0; j < run; j++) {
            /* in key order the entries are read across the heap: fetch a few ahead of their turn */
            if (j + PREFETCH_AHEAD < run) {
                PREFETCH(staged[j + PREFETCH_AHEAD].data);
                PREFETCH(staged[j + PREFETCH_AHEAD].value);
            }
            PyObject *key = stored_key(mp, mp_len, staged[j].data, staged[j].len);
            if (key == NULL) goto fail;
            size += mp_len + staged[j].len + PyBytes_GET_SIZE(staged[j].value);
            if (call_with(put, key, staged[j].value) < 0) goto fail;
        }
        i = end;
    }
    PyMem_Free(staged);
    PyMem_Free(mp);
    Py_DECREF(changes);
    return PyLong_FromSsize_t(size);
fail:
    PyMem_Free(staged);
    PyMem_Free(mp);
    Py_DECREF(changes);
    return NULL;
}

static PyMethodDef methods[] = {
    {"stage_entries", (PyCFunction)(void (*)(void))stage_entries, METH_FASTCALL,
     "stage_entries(put, delete, prefix, changes) -> bytes put: one key's entry changes staged in one pass"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_staging", NULL, -1, methods};

PyMODINIT_FUNC PyInit__staging(void) { return PyModule_Create(&module); }
