/* The exact join index's weight updates (SJoin's counts), compiled. services/reservoir/index.py holds the
 * same steps in Python, `JoinIndex._reweigh` in exact mode and the methods it calls (`_place`,
 * `_propagate`, `_row_remove` and the Fenwick-tree helpers): the reference these are tested against
 * and the fallback where this is not built.
 *
 * `reweigh(index, e, item, old_f, f)` re-weighs one item of node e in every structure D[e->*]: its
 * weight there is its children's exact counts times f (was old_f). The item's entry in its key's
 * Fenwick tree changes (appended when new, removed by moving the key's last item into its place when
 * its weight drops to 0), the key's count changes, and every change of a count travels to the parent
 * items with that key, in every parent structure, recursively. It works on the index's own dicts and
 * lists, performing the Python steps' container operations one for one (same positions), so the rows'
 * order, and so every later sample, is the same. Weights and counts are Python ints of any size.
 *
 * One call caches the attributes of the structures it touches (they are slots that are set once).
 */
#include "_capi.h"

static PyObject *S_key_pos, *S_where, *S_cnt, *S_rcnt, *S_parent, *S_node, *S_parents, *S_children,
    *S_child_pos, *S_idx, *S_by_key, *S_items, *S_ds, *S_nodes, *S_grouped, *S_tracking, *S_dirty,
    *S_places, *S_propagations, *S_out, *S_rows, *S_fen, *S_exact;
static PyObject *ZERO, *ONE;

/* One structure D[node->parent], its attributes borrowed (the structure holds them). */
typedef struct {
    int loaded;
    PyObject *obj, *key_pos, *where, *cnt, *rcnt, *rows, *fen, *idx, *children, *child_pos, *parents,
        *node_name;
    Py_ssize_t parent, node;
} Dir;

typedef struct {
    PyObject *ds;    /* list of Directed */
    PyObject *nodes; /* list of NodeStore */
    Dir *dirs;
    Py_ssize_t n_dirs;
    int grouped;
    PyObject *dirty; /* the index's set of changed (structure, key), NULL when not tracking */
    long long places, propagations;
} Ctx;

static Dir *dir_at(Ctx *cx, Py_ssize_t di) {
    if (di < 0 || di >= cx->n_dirs) {
        PyErr_SetString(PyExc_IndexError, "structure index out of range");
        return NULL;
    }
    Dir *d = &cx->dirs[di];
    if (d->loaded) return d;
    PyObject *o = PyList_GET_ITEM(cx->ds, di);
    d->obj = o;
    if ((d->key_pos = held(o, S_key_pos)) == NULL || (d->where = held(o, S_where)) == NULL ||
        (d->cnt = held(o, S_cnt)) == NULL || (d->rcnt = held(o, S_rcnt)) == NULL ||
        (d->rows = held(o, S_rows)) == NULL || (d->fen = held(o, S_fen)) == NULL ||
        (d->idx = held(o, S_idx)) == NULL || (d->children = held(o, S_children)) == NULL ||
        (d->child_pos = held(o, S_child_pos)) == NULL || (d->parents = held(o, S_parents)) == NULL ||
        (d->node_name = held(o, S_node)) == NULL)
        return NULL;
    PyObject *parent = held(o, S_parent);
    if (parent == NULL || as_index(parent, &d->parent) < 0 || as_index(d->node_name, &d->node) < 0) return NULL;
    if (!PyDict_Check(d->where) || !PyDict_Check(d->cnt) || !PyDict_Check(d->rcnt) || !PyDict_Check(d->rows) ||
        !PyDict_Check(d->fen) || !PyList_Check(d->children) || !PyList_Check(d->child_pos) ||
        !PyList_Check(d->parents) || !PyTuple_Check(d->key_pos)) {
        PyErr_SetString(PyExc_TypeError, "a structure's containers have unexpected types");
        return NULL;
    }
    d->loaded = 1;
    return d;
}

/* dict.get(key, 0) as a borrowed reference. */
static PyObject *get_or_zero(PyObject *dict, PyObject *key) { return get_or(dict, key, ZERO); }

/* dict.setdefault(key, []) as a borrowed reference. */
static PyObject *list_at(PyObject *dict, PyObject *key) {
    PyObject *r = PyDict_GetItemWithError(dict, key);
    if (r != NULL || PyErr_Occurred()) return r;
    r = PyList_New(0);
    if (r == NULL) return NULL;
    int rc = PyDict_SetItem(dict, key, r);
    Py_DECREF(r);
    return rc < 0 ? NULL : r;
}

/* --- Fenwick trees over a key's item weights ------------------------------------------------------
 *
 * `Fenwick`: the nodes of one key's Fenwick tree in a C array of 64-bit ints, as long as every node
 * fits; the first node that does not moves the whole tree into a list of Python ints, so the sums stay
 * exact at any size. To Python it is a sequence of its nodes (len, [i], [i] = x, append, pop), the
 * protocol index.py's _fen_* helpers use on a list, so the Python steps read and write it unchanged. */

typedef struct {
    PyObject_HEAD
    Py_ssize_t n, cap;
    long long *w;   /* the nodes, while every one fits in 64 bits */
    PyObject *big;  /* a list of Python ints once one does not (w is then unused) */
} Fenwick;

static PyTypeObject FenwickType;

/* The tree's nodes move into a list of Python ints, for good. */
static int fw_promote(Fenwick *t) {
    if (t->big != NULL) return 0;
    PyObject *big = PyList_New(t->n);
    if (big == NULL) return -1;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        PyObject *x = PyLong_FromLongLong(t->w[i]);
        if (x == NULL) {
            Py_DECREF(big);
            return -1;
        }
        PyList_SET_ITEM(big, i, x);
    }
    t->big = big;
    PyMem_Free(t->w);
    t->w = NULL;
    t->cap = 0;
    return 0;
}

static Py_ssize_t fw_len(Fenwick *t) { return t->big != NULL ? PyList_GET_SIZE(t->big) : t->n; }

/* The value of a Python int as a C one; 0 with *fits = 0 when it is beyond 64 bits. */
static long long as_ll(PyObject *x, int *fits) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    *fits = !overflow && !(v == -1 && PyErr_Occurred());
    return *fits ? v : 0;
}

/* Node i as a Python int, a new reference. */
static PyObject *fw_get(Fenwick *t, Py_ssize_t i) {
    if (t->big != NULL) return Py_NewRef(PyList_GET_ITEM(t->big, i));
    return PyLong_FromLongLong(t->w[i]);
}

/* Node i = x (a Python int). */
static int fw_set(Fenwick *t, Py_ssize_t i, PyObject *x) {
    if (!PyLong_Check(x)) {
        PyErr_SetString(PyExc_TypeError, "a Fenwick tree holds ints");
        return -1;
    }
    if (t->big == NULL) {
        int fits;
        long long v = as_ll(x, &fits);
        if (PyErr_Occurred()) return -1;
        if (fits) {
            t->w[i] = v;
            return 0;
        }
        if (fw_promote(t) < 0) return -1;
    }
    return PyList_SetItem(t->big, i, Py_NewRef(x));
}

static int fw_push(Fenwick *t, PyObject *x) {
    if (!PyLong_Check(x)) {
        PyErr_SetString(PyExc_TypeError, "a Fenwick tree holds ints");
        return -1;
    }
    if (t->big == NULL) {
        int fits;
        long long v = as_ll(x, &fits);
        if (PyErr_Occurred()) return -1;
        if (fits) {
            if (t->n == t->cap) {
                Py_ssize_t cap = t->cap ? 2 * t->cap : 4;
                long long *w = PyMem_Realloc(t->w, (size_t)cap * sizeof(long long));
                if (w == NULL) {
                    PyErr_NoMemory();
                    return -1;
                }
                t->w = w;
                t->cap = cap;
            }
            t->w[t->n++] = v;
            return 0;
        }
        if (fw_promote(t) < 0) return -1;
    }
    return PyList_Append(t->big, x);
}

/* _fen_append: a new last weight w. */
static int fen_append(Fenwick *t, PyObject *w) {
    Py_ssize_t i = fw_len(t) + 1;
    Py_ssize_t low = i - (i & -i), j = i - 1;
    if (t->big == NULL) {
        int fits;
        long long s = as_ll(w, &fits);
        if (PyErr_Occurred()) return -1;
        for (; fits && j > low; j -= j & -j)
            if (__builtin_add_overflow(s, t->w[j - 1], &s)) fits = 0;
        if (fits) {
            PyObject *sum = PyLong_FromLongLong(s);
            int rc = sum == NULL ? -1 : fw_push(t, sum);
            Py_XDECREF(sum);
            return rc;
        }
        j = i - 1; /* beyond 64 bits: again, on Python ints */
    }
    PyObject *s = Py_NewRef(w);
    for (; j > low; j -= j & -j) {
        PyObject *node = fw_get(t, j - 1);
        PyObject *more = node == NULL ? NULL : PyNumber_Add(s, node);
        Py_XDECREF(node);
        Py_DECREF(s);
        if (more == NULL) return -1;
        s = more;
    }
    int rc = fw_push(t, s);
    Py_DECREF(s);
    return rc;
}

/* _fen_add: weight idx += delta. */
static int fen_add(Fenwick *t, Py_ssize_t idx, PyObject *delta) {
    Py_ssize_t n = fw_len(t), i = idx + 1;
    if (t->big == NULL) {
        int fits;
        long long d = as_ll(delta, &fits);
        if (PyErr_Occurred()) return -1;
        for (; fits && i <= n; i += i & -i) {
            long long s;
            if (__builtin_add_overflow(t->w[i - 1], d, &s)) break; /* node i - 1 left as it was */
            t->w[i - 1] = s;
        }
        if (i > n) return 0;
        if (fw_promote(t) < 0) return -1; /* the rest on Python ints */
    }
    for (; i <= n; i += i & -i) {
        PyObject *sum = PyNumber_Add(PyList_GET_ITEM(t->big, i - 1), delta);
        if (sum == NULL || PyList_SetItem(t->big, i - 1, sum) < 0) return -1;
    }
    return 0;
}

/* The sum of the first i weights, a new reference. */
static PyObject *fen_prefix(Fenwick *t, Py_ssize_t i) {
    if (t->big == NULL) {
        long long s = 0;
        Py_ssize_t j = i;
        for (; j > 0; j -= j & -j)
            if (__builtin_add_overflow(s, t->w[j - 1], &s)) break;
        if (j == 0) return PyLong_FromLongLong(s);
    }
    PyObject *s = Py_NewRef(ZERO);
    for (; i > 0; i -= i & -i) {
        PyObject *node = fw_get(t, i - 1);
        PyObject *more = node == NULL ? NULL : PyNumber_Add(s, node);
        Py_XDECREF(node);
        Py_DECREF(s);
        if (more == NULL) return NULL;
        s = more;
    }
    return s;
}

/* _fen_point: the single weight at idx, a new reference. */
static PyObject *fen_point(Fenwick *t, Py_ssize_t idx) {
    PyObject *a = fen_prefix(t, idx + 1);
    if (a == NULL) return NULL;
    PyObject *b = fen_prefix(t, idx);
    if (b == NULL) {
        Py_DECREF(a);
        return NULL;
    }
    PyObject *r = PyNumber_Subtract(a, b);
    Py_DECREF(a);
    Py_DECREF(b);
    return r;
}

/* Drop the last node (a Fenwick tree's others do not depend on it). */
static int fw_drop(Fenwick *t) {
    if (t->big != NULL) return PyList_SetSlice(t->big, PyList_GET_SIZE(t->big) - 1, PyList_GET_SIZE(t->big), NULL);
    t->n--;
    return 0;
}

/* The Python face: a sequence of nodes. */

static PyObject *Fenwick_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if ((args != NULL && PyTuple_GET_SIZE(args)) || (kwds != NULL && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Fenwick() takes no arguments (append the nodes)");
        return NULL;
    }
    return type->tp_alloc(type, 0);
}

static void Fenwick_dealloc(Fenwick *t) {
    PyMem_Free(t->w);
    Py_XDECREF(t->big);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static Py_ssize_t Fenwick_length(PyObject *self) { return fw_len((Fenwick *)self); }

static PyObject *Fenwick_item(PyObject *self, Py_ssize_t i) {
    Fenwick *t = (Fenwick *)self;
    if (i < 0 || i >= fw_len(t)) {
        PyErr_SetString(PyExc_IndexError, "Fenwick tree index out of range");
        return NULL;
    }
    return fw_get(t, i);
}

static int Fenwick_ass_item(PyObject *self, Py_ssize_t i, PyObject *x) {
    Fenwick *t = (Fenwick *)self;
    if (x == NULL) {
        PyErr_SetString(PyExc_TypeError, "a Fenwick tree's nodes are not deleted (pop the last)");
        return -1;
    }
    if (i < 0 || i >= fw_len(t)) {
        PyErr_SetString(PyExc_IndexError, "Fenwick tree index out of range");
        return -1;
    }
    return fw_set(t, i, x);
}

static PyObject *Fenwick_append(PyObject *self, PyObject *x) {
    if (fw_push((Fenwick *)self, x) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Fenwick_pop(PyObject *self, PyObject *Py_UNUSED(ignored)) {
    Fenwick *t = (Fenwick *)self;
    Py_ssize_t n = fw_len(t);
    if (n == 0) {
        PyErr_SetString(PyExc_IndexError, "pop from an empty Fenwick tree");
        return NULL;
    }
    PyObject *last = fw_get(t, n - 1);
    if (last == NULL || fw_drop(t) < 0) {
        Py_XDECREF(last);
        return NULL;
    }
    return last;
}

static PyObject *Fenwick_wide(PyObject *self, void *Py_UNUSED(closure)) {
    return PyBool_FromLong(((Fenwick *)self)->big != NULL);
}

static PyObject *Fenwick_repr(PyObject *self) {
    PyObject *nodes = PySequence_List(self);
    if (nodes == NULL) return NULL;
    PyObject *r = PyUnicode_FromFormat("Fenwick(%R)", nodes);
    Py_DECREF(nodes);
    return r;
}

static PySequenceMethods Fenwick_as_sequence = {
    .sq_length = Fenwick_length,
    .sq_item = Fenwick_item,
    .sq_ass_item = Fenwick_ass_item,
};

static PyMethodDef Fenwick_methods[] = {
    {"append", Fenwick_append, METH_O, "append(x): a new last node"},
    {"pop", Fenwick_pop, METH_NOARGS, "pop(): remove and return the last node"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Fenwick_getset[] = {
    {"wide", Fenwick_wide, NULL, "whether the nodes are Python ints (one went beyond 64 bits)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FenwickType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ivmstream.services.reservoir._exact_kernels.Fenwick",
    .tp_basicsize = sizeof(Fenwick),
    .tp_dealloc = (destructor)Fenwick_dealloc,
    .tp_repr = Fenwick_repr,
    .tp_as_sequence = &Fenwick_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The nodes of one key's Fenwick tree: 64-bit ints while they fit, Python ints after.",
    .tp_methods = Fenwick_methods,
    .tp_getset = Fenwick_getset,
    .tp_new = Fenwick_new,
};

/* dict.setdefault(key, Fenwick()) as a borrowed reference; a tree of another type is refused. */
static Fenwick *tree_at(PyObject *dict, PyObject *key, int create) {
    PyObject *r = PyDict_GetItemWithError(dict, key);
    if (r == NULL) {
        if (PyErr_Occurred()) return NULL;
        if (!create) {
            PyErr_SetObject(PyExc_KeyError, key);
            return NULL;
        }
        r = FenwickType.tp_alloc(&FenwickType, 0);
        if (r == NULL) return NULL;
        int rc = PyDict_SetItem(dict, key, r);
        Py_DECREF(r);
        if (rc < 0) return NULL;
    }
    if (!PyObject_TypeCheck(r, &FenwickType)) {
        PyErr_SetString(PyExc_TypeError, "the compiled exact kernels keep their Fenwick trees as Fenwick objects");
        return NULL;
    }
    return (Fenwick *)r;
}

/* JoinIndex._row_remove: drop item (weight w, at idx) from key v's rows by moving the last item into its
 * place; popping a Fenwick tree's last node leaves the others intact. */
static int row_remove(Dir *d, PyObject *v, Py_ssize_t idx, PyObject *item, PyObject *w) {
    PyObject *rows = item_or_keyerror(d->rows, v);
    Fenwick *tree = rows == NULL ? NULL : tree_at(d->fen, v, 0);
    if (tree == NULL) return -1;
    if (!PyList_Check(rows) || PyList_GET_SIZE(rows) == 0 || fw_len(tree) != PyList_GET_SIZE(rows)) {
        PyErr_SetString(PyExc_TypeError, "a key's rows and Fenwick tree are lists of one length");
        return -1;
    }
    if (PyDict_DelItem(d->where, item) < 0) return -1;
    Py_ssize_t n = PyList_GET_SIZE(rows) - 1; /* len(rows) after the pop */
    PyObject *last = PyList_GET_ITEM(rows, n);
    Py_INCREF(last);
    if (PyList_SetSlice(rows, n, n + 1, NULL) < 0) {
        Py_DECREF(last);
        return -1;
    }
    if (idx < n) {
        PyObject *moved_w = fen_point(tree, n);
        PyObject *delta = moved_w == NULL ? NULL : PyNumber_Subtract(moved_w, w);
        Py_XDECREF(moved_w);
        PyObject *at = delta == NULL ? NULL : PyLong_FromSsize_t(idx);
        int rc = at == NULL ? -1 : fen_add(tree, idx, delta);
        Py_XDECREF(delta);
        if (rc == 0) {
            Py_INCREF(last);
            rc = PyList_SetItem(rows, idx, last);
        }
        if (rc == 0) rc = PyDict_SetItem(d->where, last, at);
        Py_XDECREF(at);
        if (rc < 0) {
            Py_DECREF(last);
            return -1;
        }
    }
    Py_DECREF(last);
    if (fw_drop(tree) < 0) return -1;
    if (n == 0 && (PyDict_DelItem(d->rows, v) < 0 || PyDict_DelItem(d->fen, v) < 0)) return -1;
    return 0;
}

static int place(Ctx *cx, Dir *d, PyObject *item, PyObject *w_old, PyObject *w_new);

/* start times the product of the children's counts at this item's keys, skipping child slot `skip`
 * (a new reference; 0 as soon as one is 0). */
static PyObject *children_product(Ctx *cx, Dir *d, PyObject *item, Py_ssize_t skip, PyObject *start) {
    PyObject *w = start;
    Py_INCREF(w);
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(d->children); j++) {
        if (j == skip) continue;
        Py_ssize_t c;
        if (as_index(PyList_GET_ITEM(d->children, j), &c) < 0) goto fail;
        Dir *child = dir_at(cx, c);
        if (child == NULL) goto fail;
        PyObject *k = key_of(item, PyList_GET_ITEM(d->child_pos, j));
        if (k == NULL) goto fail;
        PyObject *r = get_or_zero(child->rcnt, k);
        Py_DECREF(k);
        if (r == NULL) goto fail;
        PyObject *prod = PyNumber_Multiply(w, r);
        Py_DECREF(w);
        if (prod == NULL) return NULL;
        w = prod;
        int nz = PyObject_IsTrue(w);
        if (nz < 0) goto fail;
        if (!nz) break;
    }
    return w;
fail:
    Py_DECREF(w);
    return NULL;
}

/* JoinIndex._propagate: a key's count changed from old to new; every parent item with that key is
 * re-weighed in every parent structure. */
static int propagate(Ctx *cx, Dir *d, PyObject *v, PyObject *old, PyObject *new_) {
    if (d->parent < 0) return 0;
    if (d->parent >= PyList_GET_SIZE(cx->nodes)) {
        PyErr_SetString(PyExc_IndexError, "node index out of range");
        return -1;
    }
    PyObject *node = PyList_GET_ITEM(cx->nodes, d->parent);
    PyObject *by_key = held(node, S_by_key), *items = held(node, S_items);
    if (by_key == NULL || items == NULL) return -1;
    PyObject *keyed = item_or_keyerror(by_key, d->node_name);
    if (keyed == NULL) return -1;
    PyObject *matching = PyDict_GetItemWithError(keyed, v);
    if (matching == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!PyDict_Check(matching)) {
        PyErr_SetString(PyExc_TypeError, "a node's by_key holds dicts");
        return -1;
    }
    if (PyDict_GET_SIZE(matching) == 0) return 0;
    for (Py_ssize_t pp = 0; pp < PyList_GET_SIZE(d->parents); pp++) {
        PyObject *pair = PyList_GET_ITEM(d->parents, pp);
        Py_ssize_t pi, slot;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || as_index(PyTuple_GET_ITEM(pair, 0), &pi) < 0 ||
            as_index(PyTuple_GET_ITEM(pair, 1), &slot) < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a structure's parents are pairs");
            return -1;
        }
        Dir *parent = dir_at(cx, pi);
        if (parent == NULL) return -1;
        PyObject *snapshot = PyDict_Keys(matching);
        if (snapshot == NULL) return -1;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(snapshot); j++) {
            PyObject *item = PyList_GET_ITEM(snapshot, j);
            cx->propagations++;
            PyObject *f;
            if (cx->grouped) {
                PyObject *members = item_or_keyerror(items, item);
                Py_ssize_t n = members == NULL ? -1 : PyObject_Size(members);
                f = n < 0 ? NULL : PyLong_FromSsize_t(n);
                if (f == NULL) goto fail;
            } else {
                f = ONE;
                Py_INCREF(f);
            }
            PyObject *o = children_product(cx, parent, item, slot, f);
            Py_DECREF(f);
            if (o == NULL) goto fail;
            int nz = PyObject_IsTrue(o);
            int rc = nz;
            if (nz > 0) {
                PyObject *a = PyNumber_Multiply(old, o), *b = PyNumber_Multiply(new_, o);
                rc = (a == NULL || b == NULL) ? -1 : place(cx, parent, item, a, b);
                Py_XDECREF(a);
                Py_XDECREF(b);
            }
            Py_DECREF(o);
            if (rc < 0) goto fail;
        }
        Py_DECREF(snapshot);
        continue;
    fail:
        Py_DECREF(snapshot);
        return -1;
    }
    return 0;
}

/* JoinIndex._place in exact mode. */
static int place(Ctx *cx, Dir *d, PyObject *item, PyObject *w_old, PyObject *w_new) {
    cx->places++;
    PyObject *v = key_of(item, d->key_pos);
    if (v == NULL) return -1;
    PyObject *old = NULL, *new_ = NULL;
    int rc = -1;
    if (cx->dirty != NULL) {
        PyObject *changed = PyTuple_Pack(2, d->idx, v);
        if (changed == NULL) goto done;
        int added = PySet_Add(cx->dirty, changed);
        Py_DECREF(changed);
        if (added < 0) goto done;
    }
    PyObject *at = PyDict_GetItemWithError(d->where, item);
    if (at == NULL) {
        if (PyErr_Occurred()) goto done;
        PyObject *rows = list_at(d->rows, v);
        if (rows == NULL) goto done;
        PyObject *slot = PyLong_FromSsize_t(PyList_GET_SIZE(rows));
        if (slot == NULL) goto done;
        int set = PyDict_SetItem(d->where, item, slot);
        Py_DECREF(slot);
        Fenwick *tree = set < 0 ? NULL : tree_at(d->fen, v, 1);
        if (tree == NULL || PyList_Append(rows, item) < 0 || fen_append(tree, w_new) < 0) goto done;
    } else {
        Py_ssize_t idx;
        if (as_index(at, &idx) < 0) goto done;
        int new_nz = PyObject_IsTrue(w_new);
        if (new_nz < 0) goto done;
        if (new_nz) {
            Fenwick *tree = tree_at(d->fen, v, 0);
            if (tree == NULL) goto done;
            if (idx < 0 || idx >= fw_len(tree)) {
                PyErr_SetString(PyExc_IndexError, "an item's row is outside its key's Fenwick tree");
                goto done;
            }
            PyObject *delta = PyNumber_Subtract(w_new, w_old);
            int added = delta == NULL ? -1 : fen_add(tree, idx, delta);
            Py_XDECREF(delta);
            if (added < 0) goto done;
        } else if (row_remove(d, v, idx, item, w_old) < 0) {
            goto done;
        }
    }
    old = get_or_zero(d->cnt, v);
    if (old == NULL) goto done;
    Py_INCREF(old);
    PyObject *sum = PyNumber_Add(old, w_new);
    if (sum == NULL) goto done;
    new_ = PyNumber_Subtract(sum, w_old);
    Py_DECREF(sum);
    if (new_ == NULL) goto done;
    int nz = PyObject_IsTrue(new_);
    if (nz < 0) goto done;
    if (nz) {
        if (PyDict_SetItem(d->cnt, v, new_) < 0 || PyDict_SetItem(d->rcnt, v, new_) < 0) goto done;
    } else if (PyDict_DelItem(d->cnt, v) < 0 || PyDict_DelItem(d->rcnt, v) < 0) {
        goto done;
    }
    int differ = PyObject_RichCompareBool(new_, old, Py_NE);
    if (differ < 0) goto done;
    if (differ && propagate(cx, d, v, old, new_) < 0) goto done;
    rc = 0;
done:
    Py_DECREF(v);
    Py_XDECREF(old);
    Py_XDECREF(new_);
    return rc;
}

/* The loop of JoinIndex._reweigh over the structures D[e->*]. */
static int reweigh(Ctx *cx, PyObject *ix, Py_ssize_t e, PyObject *item, PyObject *old_f, PyObject *f) {
    PyObject *out = held(ix, S_out);
    if (out == NULL) return -1;
    PyObject *mine = PyList_Check(out) ? PyList_GetItem(out, e) : NULL;
    if (mine == NULL || !PyList_Check(mine)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "the index's out is a list of lists");
        return -1;
    }
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(mine); j++) {
        Py_ssize_t di;
        if (as_index(PyList_GET_ITEM(mine, j), &di) < 0) return -1;
        Dir *d = dir_at(cx, di);
        if (d == NULL) return -1;
        PyObject *base = children_product(cx, d, item, -1, ONE);
        if (base == NULL) return -1;
        int nz = PyObject_IsTrue(base);
        int rc = nz < 0 ? -1 : 0;
        if (nz > 0) {
            PyObject *a = PyNumber_Multiply(old_f, base), *b = PyNumber_Multiply(f, base);
            rc = (a == NULL || b == NULL) ? -1 : place(cx, d, item, a, b);
            Py_XDECREF(a);
            Py_XDECREF(b);
        }
        Py_DECREF(base);
        if (rc < 0) return -1;
    }
    return 0;
}

#define MAX_STACK_DIRS 64

static PyObject *py_reweigh(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    EXPECT_ARGS(nargs, 5, "reweigh(index, e, item, old_f, f)");
    PyObject *ix = args[0];
    Py_ssize_t e;
    if (as_index(args[1], &e) < 0) return NULL;
    Ctx cx = {0};
    cx.ds = held(ix, S_ds);
    cx.nodes = held(ix, S_nodes);
    PyObject *grouped = held(ix, S_grouped), *tracking = held(ix, S_tracking), *exact = held(ix, S_exact);
    if (cx.ds == NULL || cx.nodes == NULL || grouped == NULL || tracking == NULL || exact == NULL) return NULL;
    if (!PyList_Check(cx.ds) || !PyList_Check(cx.nodes)) {
        PyErr_SetString(PyExc_TypeError, "the index's ds and nodes are lists");
        return NULL;
    }
    int is_exact = PyObject_IsTrue(exact);
    cx.grouped = PyObject_IsTrue(grouped);
    int track = PyObject_IsTrue(tracking);
    if (is_exact < 0 || cx.grouped < 0 || track < 0) return NULL;
    if (!is_exact) {
        PyErr_SetString(PyExc_ValueError, "the exact kernels run on an exact index only");
        return NULL;
    }
    if (track && (cx.dirty = held(ix, S_dirty)) == NULL) return NULL;
    Dir on_stack[MAX_STACK_DIRS];
    cx.n_dirs = PyList_GET_SIZE(cx.ds);
    cx.dirs = cx.n_dirs <= MAX_STACK_DIRS ? on_stack : PyMem_Calloc((size_t)cx.n_dirs, sizeof(Dir));
    if (cx.dirs == NULL) return PyErr_NoMemory();
    if (cx.dirs == on_stack) memset(on_stack, 0, sizeof(Dir) * (size_t)cx.n_dirs);
    int rc = reweigh(&cx, ix, e, args[2], args[3], args[4]);
    if (cx.dirs != on_stack) PyMem_Free(cx.dirs);
    /* the counters as far as the steps went, as the Python methods leave them */
    if (bump_counter(ix, S_places, cx.places) < 0 || bump_counter(ix, S_propagations, cx.propagations) < 0)
        return NULL;
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"reweigh", (PyCFunction)(void (*)(void))py_reweigh, METH_FASTCALL,
     "reweigh(index, e, item, old_f, f): JoinIndex._reweigh in exact mode"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_exact_kernels",
                                    "The exact join index's compiled weight updates (SJoin).", -1, methods};

PyMODINIT_FUNC PyInit__exact_kernels(void) {
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {
        {&S_key_pos, "key_pos"},   {&S_where, "where"},       {&S_cnt, "cnt"},
        {&S_rcnt, "rcnt"},         {&S_parent, "parent"},     {&S_node, "node"},
        {&S_parents, "parents"},   {&S_children, "children"}, {&S_child_pos, "child_pos"},
        {&S_idx, "idx"},           {&S_by_key, "by_key"},     {&S_items, "items"},
        {&S_ds, "ds"},             {&S_nodes, "nodes"},       {&S_grouped, "grouped"},
        {&S_tracking, "tracking"}, {&S_dirty, "dirty"},       {&S_places, "places"},
        {&S_propagations, "propagations"}, {&S_out, "out"},   {&S_rows, "rows"},
        {&S_fen, "fen"},           {&S_exact, "exact"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*names[i].slot = PyUnicode_InternFromString(names[i].name)) == NULL) return NULL;
    if ((ZERO = PyLong_FromLong(0)) == NULL || (ONE = PyLong_FromLong(1)) == NULL) return NULL;
    if (PyType_Ready(&FenwickType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Fenwick", (PyObject *)&FenwickType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
