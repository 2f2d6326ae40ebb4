/* The C-API steps both reservoir kernels (_kernels.c with its sources, and _exact_kernels.c) take on the
 * join index's Python objects: reading slots, making and looking up tuple keys, taking containers of
 * atoms off the garbage collector's watch, bumping the index's work counters. Header-only: every
 * function is static inline, so each source gets its own copy (and its own slot-offset cache).
 */
#ifndef IVMSTREAM_RESERVOIR_CAPI_H
#define IVMSTREAM_RESERVOIR_CAPI_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* A vectorcall entry point's argument count, or a TypeError naming its signature. */
#define EXPECT_ARGS(nargs, n, usage)                         \
    do {                                                     \
        if ((nargs) != (n)) {                                \
            PyErr_SetString(PyExc_TypeError, usage);         \
            return NULL;                                     \
        }                                                    \
    } while (0)

/* Where a class keeps a __slots__ attribute: the index's structures and node stores are read a dozen
 * attributes per placement, and a slot read through the generic attribute lookup costs more than the
 * placement's own dict probes. The offset is taken from the class's member descriptor and trusted
 * while the class is unchanged (its version tag). */
#define SLOT_CACHE 256
static struct {
    PyObject *name;
    PyTypeObject *type;
    unsigned int version;
    Py_ssize_t offset; /* -1: not a plain object slot (read through the generic lookup) */
} slot_cache[SLOT_CACHE];

static inline Py_ssize_t slot_offset(PyTypeObject *type, PyObject *name) {
    /* by name and class: one name is read on several classes (a structure's and a node's key_pos) */
    size_t h = (((size_t)(uintptr_t)name >> 4) ^ ((size_t)(uintptr_t)type >> 6)) % SLOT_CACHE;
    if (slot_cache[h].name == name && slot_cache[h].type == type &&
        slot_cache[h].version == type->tp_version_tag && PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG))
        return slot_cache[h].offset;
    PyObject *descr = _PyType_Lookup(type, name); /* borrowed; it also assigns a version tag */
    Py_ssize_t offset = -1;
    if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READ_RESTRICTED)) offset = m->offset;
    }
    if (PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
        slot_cache[h].name = name;
        slot_cache[h].type = type;
        slot_cache[h].version = type->tp_version_tag;
        slot_cache[h].offset = offset;
    }
    return offset;
}

/* An attribute the object keeps holding during the call (a slot that is never reassigned here). */
static inline PyObject *held(PyObject *o, PyObject *name) {
    Py_ssize_t offset = slot_offset(Py_TYPE(o), name);
    if (offset >= 0) {
        PyObject *r = *(PyObject **)((char *)o + offset);
        if (r != NULL) return r;
    }
    PyObject *r = PyObject_GetAttr(o, name);
    if (r != NULL) Py_DECREF(r);
    return r;
}

/* o.name = value, written straight into the slot when it is one (the generic setattr otherwise). */
static inline int set_held(PyObject *o, PyObject *name, PyObject *value) {
    Py_ssize_t offset = slot_offset(Py_TYPE(o), name);
    if (offset < 0) return PyObject_SetAttr(o, name, value);
    PyObject **at = (PyObject **)((char *)o + offset), *old = *at;
    *at = Py_NewRef(value);
    Py_XDECREF(old);
    return 0;
}

static inline int as_index(PyObject *o, Py_ssize_t *out) {
    *out = PyLong_AsSsize_t(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Stop the collector tracking a tuple of atoms (ints, strings, floats, None, untracked tuples). Such a
 * tuple cannot be part of a reference cycle, and a dict whose keys and values are all untracked is
 * itself untracked: a key or value still tracked when it enters one of the index's large dicts puts the
 * whole dict back under watch, and every young collection then walks all of it. CPython untracks such
 * tuples itself, but only once a collection meets them, after the dict has been re-tracked. */
static inline void settle(PyObject *t) {
    if (!PyTuple_CheckExact(t) || !PyObject_GC_IsTracked(t)) return;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        PyObject *x = PyTuple_GET_ITEM(t, i);
        if (PyObject_IS_GC(x) && (!PyTuple_CheckExact(x) || PyObject_GC_IsTracked(x))) return;
    }
    PyObject_GC_UnTrack(t);
}

/* The index's containers hold only atoms, settled tuples and other such containers (a key's record and
 * buckets, a node's groups, by_key: key -> item set), so none can be part of a reference cycle. The
 * collector would still walk every one of them in each full collection, and the index holds one per key
 * and per group: the kernels take the ones they fill off the collector's watch. A container is watched
 * again as soon as anyone stores a watched value in it. */
static inline PyObject *atom_list(Py_ssize_t n) {
    PyObject *l = PyList_New(n);
    if (l != NULL) PyObject_GC_UnTrack(l);
    return l;
}

static inline void unwatch(PyObject *o) {
    if (PyObject_GC_IsTracked(o)) PyObject_GC_UnTrack(o);
}

/* dict.pop(key) as a new reference, raising KeyError when absent: one probe where get and del take two. */
static inline PyObject *pop_item(PyObject *dict, PyObject *key) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *r = NULL;
    int found = PyDict_Pop(dict, key, &r);
    if (found == 0) PyErr_SetObject(PyExc_KeyError, key);
    return found > 0 ? r : NULL;
#else
    return _PyDict_Pop(dict, key, NULL);
#endif
}

/* tuple(item[i] for i in pos), settled, a new reference. */
static inline PyObject *key_of(PyObject *item, PyObject *pos) {
    if (!PyTuple_Check(item) || !PyTuple_Check(pos)) {
        PyErr_SetString(PyExc_TypeError, "items and key positions are tuples");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(pos), width = PyTuple_GET_SIZE(item);
    PyObject *k = PyTuple_New(n);
    if (k == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t j = PyLong_AsSsize_t(PyTuple_GET_ITEM(pos, i));
        if (j < 0 || j >= width) {
            Py_DECREF(k);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "key position out of range");
            return NULL;
        }
        PyObject *x = PyTuple_GET_ITEM(item, j);
        Py_INCREF(x);
        PyTuple_SET_ITEM(k, i, x);
    }
    settle(k);
    return k;
}

/* dict[key] as a borrowed reference, raising KeyError when absent (as `dict[key]` does). */
static inline PyObject *item_or_keyerror(PyObject *dict, PyObject *key) {
    PyObject *r = PyDict_GetItemWithError(dict, key);
    if (r == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
    return r;
}

/* dict.get(key, fallback) as a borrowed reference (NULL only on an error). */
static inline PyObject *get_or(PyObject *dict, PyObject *key, PyObject *fallback) {
    PyObject *r = PyDict_GetItemWithError(dict, key);
    if (r == NULL && !PyErr_Occurred()) return fallback;
    return r;
}

/* Add `extra` to the int attribute `name` of `o` (the index's work counters). */
static inline int bump_counter(PyObject *o, PyObject *name, long long extra) {
    if (extra == 0) return 0;
    PyObject *now = held(o, name);
    if (now == NULL) return -1;
    PyObject *more = PyLong_FromLongLong(extra);
    PyObject *sum = more == NULL ? NULL : PyNumber_Add(now, more);
    Py_XDECREF(more);
    if (sum == NULL) return -1;
    int rc = set_held(o, name, sum);
    Py_DECREF(sum);
    return rc;
}

#endif /* IVMSTREAM_RESERVOIR_CAPI_H */
