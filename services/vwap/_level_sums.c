/* The netting's sums per price level (LevelSums), for _kernels.c's per-event loop: an open-addressing
 * table of 64-bit sums, flushed into the netted dict in the order of each level's first event.
 */
#include "_kernels.h"

#include <string.h>

void sums_free(LevelSums *t) {
    for (Py_ssize_t i = 0; i < t->n; i++) Py_DECREF(t->price[i]);
    PyMem_Free(t->price);
    PyMem_Free(t->key);
    PyMem_Free(t->count);
    PyMem_Free(t->weight);
    PyMem_Free(t->index);
    memset(t, 0, sizeof(*t));
}

/* Room for one more level: the arrays doubled when full, the index rebuilt at twice its size past half
 * full. */
int sums_grow(LevelSums *t) {
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? 2 * t->cap : 64;
        PyObject **price = PyMem_Realloc(t->price, (size_t)cap * sizeof(PyObject *));
        if (price != NULL) t->price = price;
        int64_t *key = PyMem_Realloc(t->key, (size_t)cap * sizeof(int64_t));
        if (key != NULL) t->key = key;
        int64_t *count = PyMem_Realloc(t->count, (size_t)cap * sizeof(int64_t));
        if (count != NULL) t->count = count;
        int64_t *weight = PyMem_Realloc(t->weight, (size_t)cap * sizeof(int64_t));
        if (weight != NULL) t->weight = weight;
        if (price == NULL || key == NULL || count == NULL || weight == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->cap = cap;
    }
    if (t->index == NULL || (uint64_t)(2 * (t->n + 1)) > t->mask + 1) {
        int bits = t->index == NULL ? 7 : t->bits + 1;
        uint64_t size = (uint64_t)1 << bits;
        int32_t *index = PyMem_Calloc((size_t)size, sizeof(int32_t));
        if (index == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        PyMem_Free(t->index);
        t->index = index;
        t->bits = bits;
        t->mask = size - 1;
        for (Py_ssize_t i = 0; i < t->n; i++) {
            uint64_t j = sums_slot(t, t->key[i]);
            while (index[j]) j = (j + 1) & t->mask;
            index[j] = (int32_t)(i + 1);
        }
    }
    return 0;
}

/* Move the sums into the netted dict `levels` and empty the table. */
int sums_flush(LevelSums *t, PyObject *levels) {
    int rc = 0;
    for (Py_ssize_t i = 0; i < t->n && rc == 0; i++) {
        PyObject *c = PyLong_FromLongLong(t->count[i]), *w = c ? PyLong_FromLongLong(t->weight[i]) : NULL;
        PyObject *acc = w ? PyDict_GetItemWithError(levels, t->price[i]) : NULL;
        if (w == NULL || (acc == NULL && PyErr_Occurred())) {
            rc = -1;
        } else if (acc == NULL) {
            PyObject *fresh = PyList_New(2);
            if (fresh == NULL) {
                rc = -1;
            } else {
                PyList_SET_ITEM(fresh, 0, c);
                PyList_SET_ITEM(fresh, 1, w);
                c = w = NULL;
                rc = PyDict_SetItem(levels, t->price[i], fresh);
                Py_DECREF(fresh);
            }
        } else if (!PyList_Check(acc) || PyList_GET_SIZE(acc) != 2) {
            PyErr_SetString(PyExc_TypeError, "a netted level must be a list [count, weight]");
            rc = -1;
        } else {
            Py_INCREF(acc);
            rc = list_add(acc, 0, c) < 0 || list_add(acc, 1, w) < 0 ? -1 : 0;
            Py_DECREF(acc);
        }
        Py_XDECREF(c);
        Py_XDECREF(w);
    }
    for (Py_ssize_t i = 0; i < t->n; i++) Py_DECREF(t->price[i]);
    t->n = 0;
    if (t->index != NULL) memset(t->index, 0, (size_t)(t->mask + 1) * sizeof(int32_t));
    return rc;
}
