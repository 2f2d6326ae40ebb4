/* An insert's virtual batch in the rounded index (JoinIndex.delta_size, and JoinIndex.delta_get with the
 * _key / _item / assemble steps it calls): its size and radices, and entry z read by walking down the
 * structures' buckets, without materialising the batch.
 */
#include "_kernels.h"

/* Field i of key v's record in recs (borrowed), 0 when the key is not held; NULL only on an error. */
static PyObject *field_or_zero(PyObject *recs, PyObject *v, Py_ssize_t i) {
    PyObject *rec = PyDict_GetItemWithError(recs, v);
    if (rec == NULL) return PyErr_Occurred() ? NULL : ZERO;
    if (!PyList_CheckExact(rec) || PyList_GET_SIZE(rec) != REC_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "a key's record is a list [cnt, rcnt, buckets, exps, where]");
        return NULL;
    }
    return PyList_GET_ITEM(rec, i);
}

/* JoinIndex.delta_size: |dJ| of t just inserted into node e (the product of the counts of its
 * neighbours' structures at its keys) and those counts, the radices. */
PyObject *delta_size(PyObject *ix, PyObject *e, PyObject *t, Keys *ks) {
    PyObject *ds = held(ix, S_ds), *nodes = held(ix, S_nodes), *neighbours = held(ix, S_neighbours);
    PyObject *into = held(ix, S_into);
    if (ds == NULL || nodes == NULL || neighbours == NULL || into == NULL) return NULL;
    Py_ssize_t ei = PyLong_AsSsize_t(e);
    if (ei == -1 && PyErr_Occurred()) return NULL;
    PyObject *node = PyList_GetItem(nodes, ei), *mine = PyList_GetItem(neighbours, ei);
    if (node == NULL || mine == NULL) return NULL;
    PyObject *whole = held(node, S_whole), *key_pos = held(node, S_key_pos);
    if (whole == NULL || key_pos == NULL) return NULL;
    int w = PyObject_IsTrue(whole);
    if (w < 0) return NULL;
    PyObject *item;
    if (w) {
        item = t;
        Py_INCREF(item);
    } else if (ks != NULL && ks->item != NULL) { /* the item the insert made, held by the node */
        item = Py_NewRef(ks->item);
    } else {
        PyObject *item_pos = held(node, S_item_pos);
        if (item_pos == NULL || (item = key_of(t, item_pos)) == NULL) return NULL;
    }
    PyObject *radices = PyList_New(0), *size = ONE;
    Py_INCREF(size);
    if (radices == NULL) goto fail;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(mine); j++) {
        PyObject *c = PyList_GET_ITEM(mine, j);
        PyObject *edge = PyTuple_Pack(2, c, e);
        if (edge == NULL) goto fail;
        PyObject *di = item_or_keyerror(into, edge);
        Py_DECREF(edge);
        if (di == NULL) goto fail;
        PyObject *d = PyList_GetItem(ds, PyLong_AsSsize_t(di));
        PyObject *recs = d == NULL ? NULL : held(d, S_recs);
        PyObject *pos = item_or_keyerror(key_pos, c);
        if (recs == NULL || pos == NULL) goto fail;
        PyObject *rec, *r;
        if (keys_record(ks, item, recs, pos, &rec)) { /* found by the re-weighing */
            r = rec == NULL ? ZERO : PyList_GET_ITEM(rec, REC_CNT);
        } else {
            PyObject *v = key_at(ks, item, pos);
            if (v == NULL) goto fail;
            r = field_or_zero(recs, v, REC_CNT);
            Py_DECREF(v);
        }
        if (r == NULL || PyList_Append(radices, r) < 0) goto fail;
        PyObject *prod = PyNumber_Multiply(size, r);
        if (prod == NULL) goto fail;
        Py_SETREF(size, prod);
    }
    Py_DECREF(item);
    PyObject *pair = PyTuple_Pack(2, size, radices);
    Py_DECREF(size);
    Py_DECREF(radices);
    return pair;
fail:
    Py_DECREF(item);
    Py_XDECREF(radices);
    Py_DECREF(size);
    return NULL;
}

PyObject *k_delta_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    EXPECT_ARGS(nargs, 3, "delta_size(index, e, t)");
    return delta_size(args[0], args[1], args[2], NULL);
}

/* --- virtual batches (JoinIndex.delta_get and the _key / _item / assemble it calls) ------------- */

/* The pieces of one join result: (node, tuple), the tuples borrowed from the node stores. */
typedef struct {
    PyObject *ds, *nodes;
    Py_ssize_t n, cap;
    Py_ssize_t *node;
    PyObject **tup;
} Parts;

static int parts_add(Parts *p, Py_ssize_t node, PyObject *t) {
    if (p->n == p->cap) {
        PyErr_SetString(PyExc_RuntimeError, "a join result with more pieces than nodes");
        return -1;
    }
    p->node[p->n] = node;
    p->tup[p->n] = t;
    p->n++;
    return 0;
}

/* divmod(z, r), on C integers when both are small and r > 0 (the same quotient and remainder). */
static PyObject *divmod_of(PyObject *z, PyObject *r) {
    long long a, b;
    if (small_count(z, &a) && small_count(r, &b) && b > 0) {
        PyObject *q = PyLong_FromLongLong(a / b), *m = q == NULL ? NULL : PyLong_FromLongLong(a % b);
        PyObject *qr = m == NULL ? NULL : PyTuple_Pack(2, q, m);
        Py_XDECREF(q);
        Py_XDECREF(m);
        return qr;
    }
    return PyNumber_Divmod(z, r);
}

/* Mixed-radix digits of z, the first radix most significant (new references in out[]). */
static int digits(PyObject *z, PyObject *radices, PyObject **out) {
    Py_ssize_t n = PyList_GET_SIZE(radices);
    Py_INCREF(z);
    for (Py_ssize_t i = n - 1; i >= 0; i--) {
        PyObject *qr = divmod_of(z, PyList_GET_ITEM(radices, i));
        Py_DECREF(z);
        if (qr == NULL) {
            for (Py_ssize_t j = i + 1; j < n; j++) Py_CLEAR(out[j]);
            return -1;
        }
        z = PyTuple_GET_ITEM(qr, 0);
        out[i] = PyTuple_GET_ITEM(qr, 1);
        Py_INCREF(z);
        Py_INCREF(out[i]);
        Py_DECREF(qr);
    }
    Py_DECREF(z);
    return 0;
}

static int walk_item(Parts *p, PyObject *d, PyObject *item, PyObject *z);

/* JoinIndex._key (rounded): entry z of key v's batch in structure d; 1 found, 0 a dummy, -1 error. */
static int walk_key(Parts *p, PyObject *d, PyObject *v, PyObject *z) {
    PyObject *recs = held(d, S_recs);
    if (recs == NULL) return -1;
    PyObject *rec = PyDict_GetItemWithError(recs, v);
    if (rec == NULL) return PyErr_Occurred() ? -1 : 0; /* no such key: all padding */
    if (!PyList_CheckExact(rec) || PyList_GET_SIZE(rec) != REC_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "a key's record is a list [cnt, rcnt, buckets, exps, where]");
        return -1;
    }
    int beyond = PyObject_RichCompareBool(z, PyList_GET_ITEM(rec, REC_CNT), Py_GE);
    if (beyond != 0) return beyond < 0 ? -1 : 0; /* trailing padding of the key batch */
    PyObject *buckets = PyList_GET_ITEM(rec, REC_BUCKETS), *exps = PyList_GET_ITEM(rec, REC_EXPS);
    long long zl;
    if (small_count(z, &zl) && PyList_CheckExact(buckets)) { /* the same walk on C integers */
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(exps); j++) {
            Py_ssize_t xi = PyLong_AsSsize_t(PyList_GET_ITEM(exps, j));
            if (xi == -1 && PyErr_Occurred()) return -1;
            PyObject *arr = xi >= 0 && xi < PyList_GET_SIZE(buckets) ? PyList_GET_ITEM(buckets, xi) : NULL;
            if (arr == NULL || !PyList_CheckExact(arr)) {
                PyErr_SetString(PyExc_KeyError, "a sorted exponent without its bucket");
                return -1;
            }
            long long len = PyList_GET_SIZE(arr);
            /* z < len << x, also when the block is beyond 2^61 >= z */
            if (xi >= 62 || len > (SMALL_COUNT_MAX >> xi) || zl < (len << xi)) {
                long long k = xi >= 62 ? 0 : zl >> xi;
                PyObject *rest = PyLong_FromLongLong(zl - (xi >= 62 ? 0 : k << xi));
                if (rest == NULL) return -1;
                int rc = walk_item(p, d, PyList_GET_ITEM(arr, k), rest);
                Py_DECREF(rest);
                return rc;
            }
            zl -= len << xi;
        }
        PyErr_SetString(PyExc_AssertionError, "cnt and buckets disagree");
        return -1;
    }
    Py_INCREF(z);
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(exps); j++) {
        PyObject *x = PyList_GET_ITEM(exps, j);
        Py_ssize_t xi = PyLong_AsSsize_t(x);
        if (xi == -1 && PyErr_Occurred()) goto fail;
        PyObject *arr = PyList_CheckExact(buckets) && xi >= 0 && xi < PyList_GET_SIZE(buckets)
                            ? PyList_GET_ITEM(buckets, xi)
                            : NULL;
        if (arr == NULL || !PyList_CheckExact(arr)) {
            PyErr_SetString(PyExc_KeyError, "a sorted exponent without its bucket");
            goto fail;
        }
        PyObject *len = PyLong_FromSsize_t(PyList_GET_SIZE(arr));
        PyObject *block = len == NULL ? NULL : PyNumber_Lshift(len, x);
        Py_XDECREF(len);
        if (block == NULL) goto fail;
        int inside = PyObject_RichCompareBool(z, block, Py_LT);
        if (inside < 0) {
            Py_DECREF(block);
            goto fail;
        }
        if (inside) {
            Py_DECREF(block);
            PyObject *at = PyNumber_Rshift(z, x);
            Py_ssize_t k = at == NULL ? -1 : PyLong_AsSsize_t(at);
            PyObject *start = k < 0 ? NULL : PyNumber_Lshift(at, x);
            PyObject *rest = start == NULL ? NULL : PyNumber_Subtract(z, start);
            Py_XDECREF(at);
            Py_XDECREF(start);
            if (rest == NULL) goto fail;
            int rc = walk_item(p, d, PyList_GET_ITEM(arr, k), rest);
            Py_DECREF(rest);
            Py_DECREF(z);
            return rc;
        }
        PyObject *less = PyNumber_Subtract(z, block);
        Py_DECREF(block);
        if (less == NULL) goto fail;
        Py_SETREF(z, less);
    }
    PyErr_SetString(PyExc_AssertionError, "cnt and buckets disagree");
fail:
    Py_DECREF(z);
    return -1;
}

/* JoinIndex._item: position z under one item: a member of its group, then its children's entries. */
static int walk_item(Parts *p, PyObject *d, PyObject *item, PyObject *z) {
    PyObject *children = held(d, S_children), *child_pos = held(d, S_child_pos), *node = held(d, S_node);
    if (children == NULL || child_pos == NULL || node == NULL) return -1;
    Py_ssize_t n = PyList_GET_SIZE(children), e = PyLong_AsSsize_t(node);
    if (e == -1 && PyErr_Occurred()) return -1;
    PyObject *keys = PyList_New(n), *radices = PyList_New(n);
    PyObject **digit = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    PyObject *h = ONE, *qr = NULL;
    Py_INCREF(h);
    int rc = -1;
    if (digit == NULL) PyErr_NoMemory();
    if (keys == NULL || radices == NULL || digit == NULL) goto done;
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_ssize_t c = PyLong_AsSsize_t(PyList_GET_ITEM(children, j));
        if (c == -1 && PyErr_Occurred()) goto done;
        PyObject *k = key_of(item, PyList_GET_ITEM(child_pos, j));
        if (k == NULL) goto done;
        PyList_SET_ITEM(keys, j, k);
        PyObject *recs = held(PyList_GET_ITEM(p->ds, c), S_recs);
        PyObject *r = recs == NULL ? NULL : field_or_zero(recs, k, REC_RCNT);
        if (r == NULL) goto done;
        Py_INCREF(r);
        PyList_SET_ITEM(radices, j, r);
        PyObject *prod = PyNumber_Multiply(h, r);
        if (prod == NULL) goto done;
        Py_SETREF(h, prod);
    }
    if ((qr = divmod_of(z, h)) == NULL) goto done;
    PyObject *store = PyList_GET_ITEM(p->nodes, e), *whole = held(store, S_whole);
    int alone = whole == NULL ? -1 : PyObject_IsTrue(whole); /* the item is its one tuple */
    if (alone < 0) goto done;
    PyObject *items = alone ? NULL : held(store, S_items);
    PyObject *members = alone ? item : items == NULL ? NULL : item_or_keyerror(items, item);
    if (members == NULL) goto done;
    Py_ssize_t size = alone ? 1 : PyObject_Size(members);
    if (size < 0) goto done;
    Py_ssize_t idx = PyLong_AsSsize_t(PyTuple_GET_ITEM(qr, 0));
    if (idx == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* an index beyond Py_ssize_t is beyond the group too */
        idx = PY_SSIZE_T_MAX;
    }
    if (idx >= size) { /* a dummy slot of a group (its rounded size) */
        rc = 0;
        goto done;
    }
    PyObject *member = alone ? Py_NewRef(item) : PySequence_GetItem(members, idx);
    if (member == NULL) goto done;
    Py_DECREF(member); /* the node keeps it */
    if (parts_add(p, e, member) < 0 || digits(PyTuple_GET_ITEM(qr, 1), radices, digit) < 0) goto done;
    rc = 1;
    for (Py_ssize_t j = 0; j < n && rc == 1; j++) {
        Py_ssize_t c = PyLong_AsSsize_t(PyList_GET_ITEM(children, j));
        rc = walk_key(p, PyList_GET_ITEM(p->ds, c), PyList_GET_ITEM(keys, j), digit[j]);
    }
done:
    if (digit != NULL) {
        for (Py_ssize_t j = 0; j < n; j++) Py_XDECREF(digit[j]);
        PyMem_Free(digit);
    }
    Py_XDECREF(keys);
    Py_XDECREF(radices);
    Py_XDECREF(qr);
    Py_DECREF(h);
    return rc;
}

/* JoinIndex.assemble: the result row of the pieces (a new tuple). */
static PyObject *assemble(PyObject *ix, Parts *p) {
    PyObject *col_map = held(ix, S_col_map), *width_of = held(ix, S_width);
    if (col_map == NULL || width_of == NULL) return NULL;
    Py_ssize_t width = PyLong_AsSsize_t(width_of);
    if (width == -1 && PyErr_Occurred()) return NULL;
    PyObject *row = PyTuple_New(width);
    if (row == NULL) return NULL;
    for (Py_ssize_t i = 0; i < width; i++) {
        Py_INCREF(Py_None);
        PyTuple_SET_ITEM(row, i, Py_None);
    }
    for (Py_ssize_t j = 0; j < p->n; j++) {
        PyObject *cols = PyList_GetItem(col_map, p->node[j]);
        if (cols == NULL) goto fail;
        for (Py_ssize_t m = 0; m < PyList_GET_SIZE(cols); m++) {
            PyObject *pair = PyList_GET_ITEM(cols, m);
            Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0));
            Py_ssize_t col = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 1));
            if (i < 0 || col < 0 || col >= width || i >= PyTuple_GET_SIZE(p->tup[j])) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "a column out of range");
                goto fail;
            }
            PyObject *value = PyTuple_GET_ITEM(p->tup[j], i);
            Py_INCREF(value);
            Py_SETREF(((PyTupleObject *)row)->ob_item[col], value);
        }
    }
    settle(row);
    return row;
fail:
    Py_DECREF(row);
    return NULL;
}

/* JoinIndex.delta_get (rounded): entry z of dJ for t just inserted into node e, a row or None. */
PyObject *k_delta_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    EXPECT_ARGS(nargs, 5, "delta_get(index, e, t, radices, z)");
    PyObject *ix = args[0], *e = args[1], *t = args[2], *radices = args[3], *z = args[4];
    if (!PyList_Check(radices) || !PyTuple_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "radices are a list, t a tuple");
        return NULL;
    }
    if (bump_counter(ix, S_retrieves, 1) < 0) return NULL;
    Parts p = {0};
    p.ds = held(ix, S_ds);
    p.nodes = held(ix, S_nodes);
    PyObject *neighbours = held(ix, S_neighbours), *into = held(ix, S_into);
    if (p.ds == NULL || p.nodes == NULL || neighbours == NULL || into == NULL) return NULL;
    Py_ssize_t ei = PyLong_AsSsize_t(e);
    if (ei == -1 && PyErr_Occurred()) return NULL;
    PyObject *node = PyList_GetItem(p.nodes, ei), *mine = PyList_GetItem(neighbours, ei);
    if (node == NULL || mine == NULL) return NULL;
    PyObject *whole = held(node, S_whole), *key_pos = held(node, S_key_pos);
    if (whole == NULL || key_pos == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(mine);
    if (PyList_GET_SIZE(radices) != n) {
        PyErr_SetString(PyExc_ValueError, "one radix per neighbour");
        return NULL;
    }
    p.cap = PyList_GET_SIZE(p.nodes);
    p.node = PyMem_Malloc((p.cap ? p.cap : 1) * sizeof(Py_ssize_t));
    p.tup = PyMem_Malloc((p.cap ? p.cap : 1) * sizeof(PyObject *));
    PyObject **digit = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    PyObject *item = NULL, *result = NULL;
    int w = PyObject_IsTrue(whole), rc = -1;
    if (p.node == NULL || p.tup == NULL || digit == NULL) PyErr_NoMemory();
    if (p.node == NULL || p.tup == NULL || digit == NULL || w < 0) goto done;
    if (w) {
        item = t;
        Py_INCREF(item);
    } else {
        PyObject *item_pos = held(node, S_item_pos);
        if (item_pos == NULL || (item = key_of(t, item_pos)) == NULL) goto done;
    }
    if (parts_add(&p, ei, t) < 0 || digits(z, radices, digit) < 0) goto done;
    rc = 1;
    for (Py_ssize_t j = 0; j < n && rc == 1; j++) {
        PyObject *c = PyList_GET_ITEM(mine, j);
        PyObject *edge = PyTuple_Pack(2, c, e);
        PyObject *di = edge == NULL ? NULL : item_or_keyerror(into, edge);
        Py_XDECREF(edge);
        PyObject *d = di == NULL ? NULL : PyList_GetItem(p.ds, PyLong_AsSsize_t(di));
        PyObject *pos = d == NULL ? NULL : item_or_keyerror(key_pos, c);
        PyObject *v = pos == NULL ? NULL : key_of(item, pos);
        if (v == NULL) {
            rc = -1;
            break;
        }
        rc = walk_key(&p, d, v, digit[j]);
        Py_DECREF(v);
    }
    if (rc == 1) result = assemble(ix, &p);
    else if (rc == 0) result = Py_NewRef(Py_None);
done:
    if (digit != NULL) {
        for (Py_ssize_t j = 0; j < n; j++) Py_XDECREF(digit[j]);
        PyMem_Free(digit);
    }
    PyMem_Free(p.node);
    PyMem_Free(p.tup);
    Py_XDECREF(item);
    return result;
}
