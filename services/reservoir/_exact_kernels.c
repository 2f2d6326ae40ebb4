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
#include "_exact_kernels.h"

static PyObject *S_key_pos, *S_where, *S_cnt, *S_rcnt, *S_parent, *S_node, *S_parents, *S_children,
    *S_child_pos, *S_idx, *S_by_key, *S_items, *S_ds, *S_nodes, *S_grouped, *S_tracking, *S_dirty,
    *S_places, *S_propagations, *S_out, *S_rows, *S_fen, *S_exact, *S_whole;
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
    PyObject *by_key = held(node, S_by_key), *items = held(node, S_items), *whole = held(node, S_whole);
    if (by_key == NULL || items == NULL || whole == NULL) return -1;
    int alone = PyObject_IsTrue(whole); /* every item its one tuple, not held in `items` */
    if (alone < 0) return -1;
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
            if (cx->grouped && !alone) {
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
        {&S_fen, "fen"},           {&S_exact, "exact"},       {&S_whole, "whole"},
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
