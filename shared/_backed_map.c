/* A store-backed map's changes listed for a checkpoint in one pass (ivmstream.backed_map's
 * StoreBackedMap.changes; its Python form there, used under IVMSTREAM_PURE_PYTHON=1 or without a
 * compiler, makes equal lists).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* entry_changes(name, dirty, encode) -> list: (name, key, encode(value)) per item of the dict dirty in
 * its order, (name, key, None) for a None value (a delete), as StoreBackedMap.changes makes them in
 * Python. encode is called once per run of the same value object (a map of multiplicities holds few
 * distinct ints), the encoded bytes shared by the run. A tuple of a str, bytes and bytes or None can
 * hold no reference cycle, so it is made untracked by the cyclic collector, which would otherwise walk
 * it and then untrack it itself. */
static PyObject *entry_changes(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "entry_changes(name, dirty, encode) takes 3 arguments");
        return NULL;
    }
    PyObject *name = args[0], *dirty = args[1], *encode = args[2];
    if (!PyUnicode_CheckExact(name) || !PyDict_CheckExact(dirty)) {
        PyErr_SetString(PyExc_TypeError, "entry_changes: the map name must be a str and the changes a dict");
        return NULL;
    }
    PyObject *out = PyList_New(PyDict_GET_SIZE(dirty));
    if (out == NULL) return NULL;
    PyObject *key, *value, *last_value = NULL, *last_encoded = NULL;
    Py_ssize_t pos = 0, i = 0;
    while (PyDict_Next(dirty, &pos, &key, &value)) {
        if (i >= PyList_GET_SIZE(out)) {
            PyErr_SetString(PyExc_RuntimeError, "entry_changes: the dict changed size during the pass");
            goto fail;
        }
        PyObject *encoded;
        Py_INCREF(key); /* held across encode, which runs Python code */
        if (value == Py_None) {
            encoded = Py_NewRef(Py_None);
        } else if (value == last_value) {
            encoded = Py_NewRef(last_encoded);
        } else {
            Py_INCREF(value); /* encode may drop the dict's reference */
            encoded = PyObject_CallOneArg(encode, value);
            if (encoded == NULL) {
                Py_DECREF(value);
                Py_DECREF(key);
                goto fail;
            }
            Py_XSETREF(last_value, value);
            Py_XSETREF(last_encoded, Py_NewRef(encoded));
        }
        PyObject *change = PyTuple_New(3);
        if (change == NULL) {
            Py_DECREF(encoded);
            Py_DECREF(key);
            goto fail;
        }
        PyTuple_SET_ITEM(change, 0, Py_NewRef(name));
        PyTuple_SET_ITEM(change, 1, key);
        PyTuple_SET_ITEM(change, 2, encoded);
        if (PyBytes_CheckExact(key) && (encoded == Py_None || PyBytes_CheckExact(encoded))) PyObject_GC_UnTrack(change);
        PyList_SET_ITEM(out, i++, change);
    }
    if (i != PyList_GET_SIZE(out)) {
        PyErr_SetString(PyExc_RuntimeError, "entry_changes: the dict changed size during the pass");
        goto fail;
    }
    Py_XDECREF(last_value);
    Py_XDECREF(last_encoded);
    return out;
fail:
    Py_XDECREF(last_value);
    Py_XDECREF(last_encoded);
    Py_DECREF(out); /* the unset slots are NULL, which a list's deallocation skips */
    return NULL;
}

static PyMethodDef methods[] = {
    {"entry_changes", (PyCFunction)(void (*)(void))entry_changes, METH_FASTCALL,
     "entry_changes(name, dirty, encode) -> list of (name, key, encoded value or None)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_backed_map", NULL, -1, methods};

PyMODINIT_FUNC PyInit__backed_map(void) { return PyModule_Create(&module); }
