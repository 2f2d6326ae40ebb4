/* The batch loops: every value decoded, a declined one by the cheap refusal or the Python fallback; as a
 * list of events (decode_many), also grouped by partition key (decode_grouped), or as columns per key and
 * relation without an event per row (decode_columns).
 */
#include "_fastjson.h"

static int group_append(PyObject *groups, PyObject *key, PyObject *event) {
    PyObject *group = PyDict_GetItemWithError(groups, key);
    if (group != NULL) return PyList_Append(group, event);
    if (PyErr_Occurred()) return -1;
    group = PyList_New(1);
    if (group == NULL) return -1;
    Py_INCREF(event);
    PyList_SET_ITEM(group, 0, event);
    int rc = PyDict_SetItem(groups, key, group);
    Py_DECREF(group);
    return rc;
}

/* Every value decoded (declined ones by the fallback); with `grouped`, also the events by partition key
 * and the number of errors, as (decoded, groups, errors); without, just the decoded list. */
static PyObject *decode_batch(Decoder *self, PyObject *values, int grouped) {
    if (self->fallback == NULL || self->refuse == NULL || self->event_type == NULL || self->error_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "Decoder.__init__ was not called");
        return NULL;
    }
    PyObject *it = PyObject_GetIter(values);
    if (it == NULL) return NULL;
    PyObject *decoded = PyList_New(0), *groups = grouped ? PyDict_New() : NULL, *value;
    Py_ssize_t errors = 0;
    if (decoded == NULL || (grouped && groups == NULL)) goto fail;
    while ((value = PyIter_Next(it)) != NULL) {
        PyObject *key = NULL; /* owned */
        PyObject *item = decode_one(self, value, &key);
        if (item == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(value);
                goto fail;
            }
            int refused = self->refused;
            item = refuse_cheaply(self, value);
            if (item == NULL && !PyErr_Occurred())
                item = PyObject_CallOneArg(refused ? self->refuse : self->fallback, value);
            if (item == NULL) {
                Py_DECREF(value);
                goto fail;
            }
            if (PyObject_TypeCheck(item, (PyTypeObject *)self->error_type)) {
                errors++;
            } else if (!grouped) {
                /* no key needed */
            } else if (self->key_field != NULL) {
                key = PyObject_GetAttrString(item, "key");
                if (key == NULL) {
                    Py_DECREF(item);
                    Py_DECREF(value);
                    goto fail;
                }
            } else {
                key = Py_NewRef(self->empty_key);
            }
        } else if (key == NULL && PyObject_TypeCheck(item, (PyTypeObject *)self->error_type)) {
            errors++; /* refused by the parser itself */
        } else if (grouped && self->key_field == NULL) {
            key = Py_NewRef(self->empty_key);
        }
        Py_DECREF(value);
        int rc = PyList_Append(decoded, item);
        if (rc == 0 && grouped && key != NULL) rc = group_append(groups, key, item);
        Py_XDECREF(key);
        Py_DECREF(item);
        if (rc < 0) goto fail;
    }
    if (PyErr_Occurred()) goto fail;
    Py_DECREF(it);
    return grouped ? Py_BuildValue("(NNn)", decoded, groups, errors) : decoded;
fail:
    Py_DECREF(it);
    Py_XDECREF(decoded);
    Py_XDECREF(groups);
    return NULL;
}

/* The lists the last row went to, and its key (a strong reference) and relation: a batch's rows mostly
 * follow one another under one key and relation, so the next row's lists are found without the two
 * dict lookups. */
typedef struct {
    PyObject *key;
    const RelationSpec *rel;
    PyObject *lists;  /* borrowed from groups, which keeps it */
    Py_ssize_t room;  /* the rows the batch's first lists are made to hold without growing (then 0) */
} LastLists;

/* The most rows a batch's first lists are made room for: a bound on what one batch sets aside. */
#define ROOM_MAX 65536

/* PyList_Append into room the list already has, inline: the lists made with room take each row in place. */
static inline int list_push(PyObject *list, PyObject *v) {
    PyListObject *l = (PyListObject *)list;
    Py_ssize_t n = Py_SIZE(l);
    if (n < l->allocated) {
        l->ob_item[n] = Py_NewRef(v);
        Py_SET_SIZE(l, n + 1);
        return 0;
    }
    return PyList_Append(list, v);
}

/* Whether `key` is the last row's key (both str, as parse_key and the fallback's events make them). */
static inline int same_key(const LastLists *last, PyObject *key) {
    if (last->key == key) return 1;
    return last->key != NULL && PyUnicode_CheckExact(key) && PyUnicode_CheckExact(last->key) &&
           PyUnicode_GET_LENGTH(key) == PyUnicode_GET_LENGTH(last->key) &&
           PyUnicode_KIND(key) == PyUnicode_KIND(last->key) &&
           memcmp(PyUnicode_DATA(key), PyUnicode_DATA(last->key),
                  (size_t)(PyUnicode_GET_LENGTH(key) * PyUnicode_KIND(key))) == 0;
}

/* The record indexes below INDEX_INTS as shared ints, made at first use: every batch's index lists hold
 * the same values, so a row's index costs no allocation. */
#define INDEX_INTS 8192
static PyObject *index_ints[INDEX_INTS];

static inline PyObject *index_int(Py_ssize_t index) {
    if (index < 0 || index >= INDEX_INTS) return PyLong_FromSsize_t(index);
    if (index_ints[index] == NULL && (index_ints[index] = PyLong_FromSsize_t(index)) == NULL) return NULL;
    return Py_NewRef(index_ints[index]);
}

/* Append one decoded row to its key's columns: groups[key][relation] is the list [records, deltas,
 * column 0, column 1, ...], records holding each row's index in the batch. Steals `delta` and `vals`. */
static int column_append(PyObject *groups, LastLists *last, PyObject *key, const RelationSpec *rel,
                         Py_ssize_t index, PyObject *delta, PyObject **vals) {
    int rc = -1, ncol = rel->ncolumns;
    PyObject *lists = last->lists;
    if (lists != NULL && last->rel == rel && same_key(last, key)) goto append;
    PyObject *rels = PyDict_GetItemWithError(groups, key);
    if (rels == NULL) {
        if (PyErr_Occurred() || (rels = PyDict_New()) == NULL) goto out;
        int bad = PyDict_SetItem(groups, key, rels);
        Py_DECREF(rels);
        if (bad < 0) goto out;
    }
    lists = PyDict_GetItemWithError(rels, rel->name);
    if (lists == NULL) {
        if (PyErr_Occurred() || (lists = PyList_New(2 + ncol)) == NULL) goto out;
        /* The batch's first lists get room for all its rows (at most ROOM_MAX): most batches hold one
         * key and relation (a keyless view, or a partition's one hot key), whose lists then never grow;
         * where the first key is not the batch's only one, that room is spent once per batch. */
        Py_ssize_t room = last->room;
        last->room = 0;
        for (int j = 0; j < 2 + ncol; j++) {
            PyObject *list = PyList_New(room);
            if (list == NULL) {
                Py_DECREF(lists);
                goto out;
            }
            Py_SET_SIZE(list, 0); /* empty, with room: PyList_New(room) left the items NULL */
            PyList_SET_ITEM(lists, j, list);
        }
        int bad = PyDict_SetItem(rels, rel->name, lists);
        Py_DECREF(lists);
        if (bad < 0) goto out;
    }
    Py_XSETREF(last->key, Py_NewRef(key));
    last->rel = rel;
    last->lists = lists;
append:;
    PyObject *at = index_int(index);
    if (at == NULL) goto out;
    int bad = list_push(PyList_GET_ITEM(lists, 0), at);
    Py_DECREF(at);
    if (bad < 0 || list_push(PyList_GET_ITEM(lists, 1), delta) < 0) goto out;
    for (int j = 0; j < ncol; j++) {
        if (list_push(PyList_GET_ITEM(lists, 2 + j), vals[j]) < 0) goto out;
    }
    rc = 0;
out:
    Py_DECREF(delta);
    for (int j = 0; j < ncol; j++) Py_DECREF(vals[j]);
    return rc;
}

/* An event the fallback decoded, appended to its key's columns as column_append does. */
static int event_append(Decoder *self, PyObject *groups, LastLists *last, PyObject *event, Py_ssize_t index) {
    PyObject *vals[MAX_COLUMNS];
    PyObject *relation = PyObject_GetAttrString(event, "relation");
    if (relation == NULL) return -1;
    const RelationSpec *rel = NULL;
    for (int i = 0; i < self->nrelations && rel == NULL; i++) {
        int same = PyUnicode_Compare(self->relations[i].name, relation);
        if (same == -1 && PyErr_Occurred()) {
            Py_DECREF(relation);
            return -1;
        }
        if (same == 0) rel = &self->relations[i];
    }
    Py_DECREF(relation);
    if (rel == NULL) {
        PyErr_SetString(PyExc_ValueError, "decode_columns: the fallback decoded an undeclared relation");
        return -1;
    }
    PyObject *row = PyObject_GetAttrString(event, "row");
    if (row == NULL) return -1;
    int got = 0;
    for (; got < rel->ncolumns; got++) {
        PyObject *v = PyDict_Check(row) ? PyDict_GetItemWithError(row, rel->columns[got].name) : NULL;
        if (v == NULL) break;
        vals[got] = Py_NewRef(v);
    }
    Py_DECREF(row);
    PyObject *delta = got == rel->ncolumns ? PyObject_GetAttrString(event, "delta") : NULL;
    PyObject *key = NULL;
    if (delta != NULL) key = self->key_field != NULL ? PyObject_GetAttrString(event, "key") : Py_NewRef(self->empty_key);
    if (key == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "decode_columns: an event lacks a column");
        for (int j = 0; j < got; j++) Py_DECREF(vals[j]);
        Py_XDECREF(delta);
        return -1;
    }
    int rc = column_append(groups, last, key, rel, index, delta, vals);
    Py_DECREF(key);
    return rc;
}

/* Every value decoded as columns: (errors, groups), errors the (index, error) of each refused value,
 * groups[key][relation] = [records, deltas, column 0, ...] (column_append), keys and relations in order
 * of first appearance. No event or row dict is made for a value the parser reads itself. */
PyObject *Decoder_decode_columns(Decoder *self, PyObject *args) {
    PyObject *values;
    int decimal_text = 0;
    if (!PyArg_ParseTuple(args, "O|p:decode_columns", &values, &decimal_text)) return NULL;
    if (self->fallback == NULL || self->refuse == NULL || self->event_type == NULL || self->error_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "Decoder.__init__ was not called");
        return NULL;
    }
    PyObject *it = PyObject_GetIter(values);
    if (it == NULL) return NULL;
    PyObject *errors = PyList_New(0), *groups = PyDict_New(), *value;
    PyObject *sink[MAX_COLUMNS];
    Py_ssize_t rows = PyList_CheckExact(values) ? PyList_GET_SIZE(values) : 0;
    LastLists last = {NULL, NULL, NULL, rows < ROOM_MAX ? rows : ROOM_MAX};
    Py_ssize_t index = 0;
    if (errors == NULL || groups == NULL) goto fail;
    while ((value = PyIter_Next(it)) != NULL) {
        PyObject *key = NULL; /* owned */
        self->sink = sink;
        self->decimal_text = decimal_text;
        PyObject *item = decode_one(self, value, &key);
        self->sink = NULL;
        self->decimal_text = 0;
        int rc = 0;
        if (item == Py_True) {
            const RelationSpec *rel = self->sink_rel;
            PyObject *delta = PyLong_FromLongLong(self->sink_delta);
            if (delta == NULL) {
                for (int j = 0; j < rel->ncolumns; j++) Py_DECREF(sink[j]);
                rc = -1;
            } else {
                rc = column_append(groups, &last, key != NULL ? key : self->empty_key, rel, index, delta, sink);
            }
            Py_DECREF(item);
        } else {
            if (item == NULL) {
                if (PyErr_Occurred()) {
                    Py_XDECREF(key);
                    Py_DECREF(value);
                    goto fail;
                }
                int refused = self->refused;
                item = refuse_cheaply(self, value);
                if (item == NULL && !PyErr_Occurred())
                    item = PyObject_CallOneArg(refused ? self->refuse : self->fallback, value);
            }
            if (item == NULL) {
                rc = -1;
            } else if (PyObject_TypeCheck(item, (PyTypeObject *)self->error_type)) {
                PyObject *pair = Py_BuildValue("(nO)", index, item);
                rc = pair == NULL ? -1 : PyList_Append(errors, pair);
                Py_XDECREF(pair);
            } else {
                rc = event_append(self, groups, &last, item, index);
            }
            Py_XDECREF(item);
        }
        Py_XDECREF(key);
        Py_DECREF(value);
        if (rc < 0) goto fail;
        index++;
    }
    if (PyErr_Occurred()) goto fail;
    Py_DECREF(it);
    Py_XDECREF(last.key);
    return Py_BuildValue("(NN)", errors, groups);
fail:
    self->sink = NULL;
    Py_XDECREF(last.key);
    Py_DECREF(it);
    Py_XDECREF(errors);
    Py_XDECREF(groups);
    return NULL;
}

PyObject *Decoder_decode_grouped(Decoder *self, PyObject *values) {
    return decode_batch(self, values, 1);
}

PyObject *Decoder_decode_many(Decoder *self, PyObject *values) {
    return decode_batch(self, values, 0);
}
