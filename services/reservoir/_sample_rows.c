/* The sample as a result carries it, compiled: `ReservoirEngine.result`'s rows of ints sorted and each
 * made a dict of the result's columns, in one pass where the Python form makes a set of the values'
 * types, a sorted copy and a zip and a dict per row. The same list.sort (so the same order) and the same
 * insertions in column order (so the same dicts, keys in the same order); any other sample (a value
 * that is not an int, a row of another width) is left to the Python form.
 */
#include "_kernels.h"

/* sample_dicts(columns: tuple, rows: list): [dict(zip(columns, r)) for r in sorted(rows)] when every
 * row is a tuple of len(columns) ints (not bools), else None. */
PyObject *k_sample_dicts(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    EXPECT_ARGS(nargs, 2, "sample_dicts(columns: tuple, rows: list)");
    PyObject *cols = args[0], *rows = args[1];
    if (!PyTuple_Check(cols) || !PyList_Check(rows)) {
        PyErr_SetString(PyExc_TypeError, "sample_dicts(columns: tuple, rows: list)");
        return NULL;
    }
    Py_ssize_t width = PyTuple_GET_SIZE(cols), n = PyList_GET_SIZE(rows);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(rows, i);
        if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != width) Py_RETURN_NONE;
        for (Py_ssize_t j = 0; j < width; j++)
            if (!PyLong_CheckExact(PyTuple_GET_ITEM(r, j))) Py_RETURN_NONE;
    }
    PyObject *order = PyList_GetSlice(rows, 0, n);
    if (order == NULL) return NULL;
    if (PyList_Sort(order) < 0) {
        Py_DECREF(order);
        return NULL;
    }
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *r = PyList_GET_ITEM(order, i), *d = PyDict_New();
        for (Py_ssize_t j = 0; d != NULL && j < width; j++)
            if (PyDict_SetItem(d, PyTuple_GET_ITEM(cols, j), PyTuple_GET_ITEM(r, j)) < 0) Py_CLEAR(d);
        if (d == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, d);
    }
    Py_DECREF(order);
    return out;
}
