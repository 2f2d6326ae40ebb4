/* The vwap crosscheck plan's ordered map of price levels, compiled (part of the _kernels extension;
 * services/vwap/trees/ holds the Python trees the plan falls back to).
 */
#include "_kernels.h"

#include <stdint.h>

static PyObject *zero;

/* --- LevelTree: price levels in a treap over arrays ------------------------------------------------
 *
 * The crosscheck plan's ordered map (docs/vwap/algorithm.md §5.3): price -> (W, PV) with subtree sums,
 * for integer prices, weights and payloads held in 64 bits. Nodes live in one growable array and link
 * by index (a free list recycles deleted slots); priorities come from a fixed-seed generator, so the
 * shape is a function of the operations. Every sum is kept below 2^62 in magnitude: an update that
 * would leave that range, or a value that is not an int, raises OverflowError and changes nothing, and
 * the plan moves to its Python trees (services/vwap/plans/finance_native.py). Prices, levels and
 * payloads are non-negative, so every prefix and suffix sum is bounded by the root's. */

#define LIMIT ((int64_t)1 << 62)

typedef struct {
    int64_t key, w, pv, sw, spv;
    uint64_t pri;
    int32_t l, r;
} TNode;

typedef struct {
    PyObject_HEAD
    TNode *n;
    int32_t cap, used, free, root, size;
    uint64_t seed;
} LevelTree;

static uint64_t next_pri(LevelTree *t) {
    uint64_t x = t->seed += 0x9E3779B97F4A7C15ULL; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static void pull(TNode *n, int32_t i) {
    TNode *x = &n[i];
    x->sw = x->w + (x->l >= 0 ? n[x->l].sw : 0) + (x->r >= 0 ? n[x->r].sw : 0);
    x->spv = x->pv + (x->l >= 0 ? n[x->l].spv : 0) + (x->r >= 0 ? n[x->r].spv : 0);
}

/* Split subtree i into keys < k (*a) and keys >= k (*b). */
static void split(TNode *n, int32_t i, int64_t k, int32_t *a, int32_t *b) {
    if (i < 0) {
        *a = *b = -1;
        return;
    }
    if (n[i].key < k) {
        split(n, n[i].r, k, &n[i].r, b);
        *a = i;
    } else {
        split(n, n[i].l, k, a, &n[i].l);
        *b = i;
    }
    pull(n, i);
}

static int32_t merge(TNode *n, int32_t a, int32_t b) {
    if (a < 0) return b;
    if (b < 0) return a;
    if (n[a].pri > n[b].pri) {
        n[a].r = merge(n, n[a].r, b);
        pull(n, a);
        return a;
    }
    n[b].l = merge(n, a, n[b].l);
    pull(n, b);
    return b;
}

static int32_t find(const LevelTree *t, int64_t k) {
    int32_t i = t->root;
    while (i >= 0 && t->n[i].key != k) i = k < t->n[i].key ? t->n[i].l : t->n[i].r;
    return i;
}

static int small_arg(PyObject *v, int64_t *out) {
    long long x;
    if (!as_small(v, &x) || x >= LIMIT || x <= -LIMIT) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_OverflowError, "not an int held in the level tree's range");
        return -1;
    }
    *out = x;
    return 0;
}

static int in_range(int64_t a, int64_t b, int64_t *s) {
    return !__builtin_add_overflow(a, b, s) && *s < LIMIT && *s > -LIMIT;
}

/* add(price, dw, dpv): W and PV of a level change by dw and dpv (a new level is inserted). */
static PyObject *lt_add(LevelTree *t, PyObject *args) {
    PyObject *pk, *pw, *ppv;
    int64_t k, dw, dpv, s;
    if (!PyArg_ParseTuple(args, "OOO:add", &pk, &pw, &ppv)) return NULL;
    if (small_arg(pk, &k) < 0 || small_arg(pw, &dw) < 0 || small_arg(ppv, &dpv) < 0) return NULL;
    if (k < 0) return PyErr_Format(PyExc_OverflowError, "the level tree holds non-negative prices");
    int32_t root = t->root;
    if (root >= 0 && (!in_range(t->n[root].sw, dw, &s) || !in_range(t->n[root].spv, dpv, &s)))
        return PyErr_Format(PyExc_OverflowError, "the level tree's sums would leave its range");
    int32_t i = find(t, k);
    if (i < 0 && (dw < 0 || dpv < 0)) return PyErr_Format(PyExc_OverflowError, "a level would leave the tree's range");
    if (i >= 0) {
        if (!in_range(t->n[i].w, dw, &s) || s < 0 || !in_range(t->n[i].pv, dpv, &s) || s < 0)
            return PyErr_Format(PyExc_OverflowError, "a level would leave the tree's range");
        t->n[i].w += dw;
        t->n[i].pv += dpv;
        for (int32_t j = t->root; j >= 0; j = k < t->n[j].key ? t->n[j].l : (k > t->n[j].key ? t->n[j].r : -1)) {
            t->n[j].sw += dw;
            t->n[j].spv += dpv;
        }
        Py_RETURN_NONE;
    }
    if (t->free >= 0) {
        i = t->free;
        t->free = t->n[i].l;
    } else {
        if (t->used == t->cap) {
            int32_t cap = t->cap ? 2 * t->cap : 64;
            TNode *grown = PyMem_Realloc(t->n, (size_t)cap * sizeof(TNode));
            if (grown == NULL) return PyErr_NoMemory();
            t->n = grown;
            t->cap = cap;
        }
        i = t->used++;
    }
    TNode *x = &t->n[i];
    x->key = k;
    x->w = x->sw = dw;
    x->pv = x->spv = dpv;
    x->pri = next_pri(t);
    x->l = x->r = -1;
    int32_t a, b;
    split(t->n, t->root, k, &a, &b);
    t->root = merge(t->n, merge(t->n, a, i), b);
    t->size++;
    Py_RETURN_NONE;
}

/* delete(price): the level leaves (KeyError when it is absent). */
static PyObject *lt_delete(LevelTree *t, PyObject *pk) {
    int64_t k;
    if (small_arg(pk, &k) < 0) return NULL;
    if (find(t, k) < 0) {
        PyErr_SetObject(PyExc_KeyError, pk);
        return NULL;
    }
    int32_t a, m, b;
    split(t->n, t->root, k, &a, &b);
    split(t->n, b, k + 1, &m, &b);
    t->n[m].l = t->free; /* m is the one node of key k */
    t->free = m;
    t->root = merge(t->n, a, b);
    t->size--;
    Py_RETURN_NONE;
}

/* One call of add or delete on the tree with Python arguments (NULL with an exception on failure). */
static PyObject *lt_add3(LevelTree *t, PyObject *p, PyObject *dw, PyObject *dpv) {
    PyObject *args = PyTuple_Pack(3, p, dw, dpv);
    if (args == NULL) return NULL;
    PyObject *res = lt_add(t, args);
    Py_DECREF(args);
    return res;
}

/* apply_netted(cnt, changes, total) -> (applied, total): the plan's apply_levels loop over a netted
 * batch (price -> [Δcount, ΔW]), in the dict's order: per level, old = cnt.get(p, 0), c = old + Δcount;
 * a level neither live before nor after, or with no change, is skipped; else add(p, ΔW, p·ΔW) if c,
 * delete(p) if not, total += ΔW, cnt[p] = c or deleted. At an OverflowError of the tree it stops, the
 * tree and cnt as they are before that level: `applied` is that level's position (the caller moves the
 * plan to Python and continues there), else the number of levels. */
static PyObject *lt_apply_netted(LevelTree *t, PyObject *args) {
    PyObject *cnt, *changes, *total;
    if (!PyArg_ParseTuple(args, "O!O!O:apply_netted", &PyDict_Type, &cnt, &PyDict_Type, &changes, &total))
        return NULL;
    Py_INCREF(total);
    Py_ssize_t pos = 0, i = 0;
    PyObject *p, *acc;
    while (PyDict_Next(changes, &pos, &p, &acc)) {
        if (!PyList_Check(acc) || PyList_GET_SIZE(acc) != 2) {
            PyErr_SetString(PyExc_TypeError, "a netted level must be a list [count, weight]");
            goto fail;
        }
        PyObject *dc = PyList_GET_ITEM(acc, 0), *dw = PyList_GET_ITEM(acc, 1);
        Py_INCREF(dc);
        Py_INCREF(dw);
        PyObject *old = PyDict_GetItemWithError(cnt, p); /* borrowed */
        PyObject *c = NULL, *res = NULL;
        int ok = -1, c_true = 0, old_true = 0, dc_true = 0, dw_true = 0;
        if (old == NULL && PyErr_Occurred()) goto level_done;
        if (old == NULL) old = zero;
        Py_INCREF(old);
        if ((c = PyNumber_Add(old, dc)) == NULL) goto level_done;
        if ((c_true = PyObject_IsTrue(c)) < 0 || (old_true = PyObject_IsTrue(old)) < 0 ||
            (dc_true = PyObject_IsTrue(dc)) < 0 || (dw_true = PyObject_IsTrue(dw)) < 0)
            goto level_done;
        if ((!c_true && !old_true) || (!dc_true && !dw_true)) {
            ok = 1;
            goto level_done;
        }
        if (c_true) {
            PyObject *dpv = PyNumber_Multiply(p, dw);
            if (dpv == NULL) goto level_done;
            res = lt_add3(t, p, dw, dpv);
            Py_DECREF(dpv);
        } else {
            res = lt_delete(t, p);
        }
        if (res == NULL) {
            if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
                PyErr_Clear();
                ok = 0;
            }
            goto level_done;
        }
        Py_DECREF(res);
        PyObject *sum = PyNumber_Add(total, dw);
        if (sum == NULL) goto level_done;
        Py_SETREF(total, sum);
        ok = (c_true ? PyDict_SetItem(cnt, p, c) : PyDict_DelItem(cnt, p)) < 0 ? -1 : 1;
    level_done:
        Py_XDECREF(c);
        Py_XDECREF(old);
        Py_DECREF(dc);
        Py_DECREF(dw);
        if (ok < 0) goto fail;
        if (ok == 0) break;
        i++;
    }
    return Py_BuildValue("(nN)", i, total);
fail:
    Py_DECREF(total);
    return NULL;
}

/* min_key_prefix_gt(x): the smallest price whose Σ W over prices <= it exceeds x, or None. */
static PyObject *lt_min_key_prefix_gt(LevelTree *t, PyObject *px) {
    long long x;
    int overflow = 0;
    if (!PyLong_Check(px)) return PyErr_Format(PyExc_TypeError, "the bound must be an int");
    x = PyLong_AsLongLongAndOverflow(px, &overflow);
    if (x == -1 && PyErr_Occurred()) return NULL;
    if (overflow) { /* beyond every sum the tree can hold: none (x > 0) or the smallest price (x < 0) */
        if (overflow > 0 || t->root < 0) Py_RETURN_NONE;
        int32_t i = t->root;
        while (t->n[i].l >= 0) i = t->n[i].l;
        return PyLong_FromLongLong(t->n[i].key);
    }
    const TNode *n = t->n;
    int64_t acc = 0;
    int32_t i = t->root;
    if (x < 0 && i >= 0) { /* the empty prefix already exceeds x: the smallest price */
        while (n[i].l >= 0) i = n[i].l;
        return PyLong_FromLongLong(n[i].key);
    }
    while (i >= 0) {
        int64_t la = acc + (n[i].l >= 0 ? n[n[i].l].sw : 0);
        if (la > x) {
            i = n[i].l;
            continue;
        }
        acc = la + n[i].w;
        if (acc > x) return PyLong_FromLongLong(n[i].key);
        i = n[i].r;
    }
    Py_RETURN_NONE;
}

/* suffix_ge(price): Σ PV over prices >= price. */
static PyObject *lt_suffix_ge(LevelTree *t, PyObject *pk) {
    long long k;
    int overflow = 0;
    if (!PyLong_Check(pk)) return PyErr_Format(PyExc_TypeError, "the price must be an int");
    k = PyLong_AsLongLongAndOverflow(pk, &overflow);
    if (k == -1 && PyErr_Occurred()) return NULL;
    if (overflow) return PyLong_FromLongLong(overflow < 0 && t->root >= 0 ? t->n[t->root].spv : 0);
    const TNode *n = t->n;
    int64_t acc = 0;
    int32_t i = t->root;
    while (i >= 0) {
        if (n[i].key >= k) {
            acc += n[i].pv + (n[i].r >= 0 ? n[n[i].r].spv : 0);
            i = n[i].l;
        } else {
            i = n[i].r;
        }
    }
    return PyLong_FromLongLong(acc);
}

/* One live level of a netted batch, for load_netted. */
typedef struct {
    int64_t price, w, pv;
    PyObject *key, *count; /* borrowed from the netted dict */
} Live;

static int live_cmp(const void *a, const void *b) {
    int64_t x = ((const Live *)a)->price, y = ((const Live *)b)->price;
    return (x > y) - (x < y);
}

static void pull_all(TNode *n, int32_t i) {
    if (i < 0) return;
    pull_all(n, n[i].l);
    pull_all(n, n[i].r);
    pull(n, i);
}

/* load_netted(changes): an empty tree takes the live levels of a batch netted from an empty book
 * (changes: price -> [count, W]; a level is live where its count is not 0), PV = price·W, and returns
 * ({price: count} in ascending price, Σ W). The levels are sorted in C and the treap is built over them
 * in one pass (each node's priority drawn in ascending price, the nodes linked as a Cartesian tree, which
 * is the treap any order of inserts with those priorities gives). OverflowError, the tree unchanged, where
 * a value is not an int the tree holds (a decimal, a negative price or W, a sum of 2^62 or more). */
static PyObject *lt_load_netted(LevelTree *t, PyObject *changes) {
    if (!PyDict_Check(changes)) return PyErr_Format(PyExc_TypeError, "load_netted takes a dict of netted levels");
    if (t->size != 0 || t->used != 0) return PyErr_Format(PyExc_ValueError, "load_netted fills an empty tree");
    Py_ssize_t m = PyDict_GET_SIZE(changes), n = 0, pos = 0;
    Live *live = PyMem_Malloc((size_t)(m ? m : 1) * sizeof(Live));
    if (live == NULL) return PyErr_NoMemory();
    PyObject *key, *acc, *cnt = NULL, *out = NULL;
    int64_t sw = 0, spv = 0;
    while (PyDict_Next(changes, &pos, &key, &acc)) {
        if (!PyList_Check(acc) || PyList_GET_SIZE(acc) != 2) {
            PyErr_SetString(PyExc_TypeError, "a netted level must be a list [count, weight]");
            goto done;
        }
        PyObject *count = PyList_GET_ITEM(acc, 0);
        int nonzero = PyObject_IsTrue(count);
        if (nonzero < 0) goto done;
        if (!nonzero) continue;
        long long c;
        Live *x = &live[n];
        if (small_arg(key, &x->price) < 0 || small_arg(PyList_GET_ITEM(acc, 1), &x->w) < 0 || !as_small(count, &c))
            goto overflow;
        if (x->price < 0 || x->w < 0 || __builtin_mul_overflow(x->price, x->w, &x->pv) || !in_range(sw, x->w, &sw) ||
            !in_range(spv, x->pv, &spv))
            goto overflow;
        x->key = key;
        x->count = count;
        n++;
    }
    qsort(live, (size_t)n, sizeof(Live), live_cmp);
    cnt = PyDict_New();
    if (cnt == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyDict_SetItem(cnt, live[i].key, live[i].count) < 0) goto done;
    if (n > 0) {
        TNode *nodes = PyMem_Realloc(t->n, (size_t)n * sizeof(TNode));
        int32_t *stack = PyMem_Malloc((size_t)n * sizeof(int32_t));
        if (nodes == NULL || stack == NULL) {
            PyMem_Free(stack);
            if (nodes != NULL) t->n = nodes;
            PyErr_NoMemory();
            goto done;
        }
        t->n = nodes;
        t->cap = (int32_t)n;
        Py_ssize_t top = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            TNode *x = &nodes[i];
            x->key = live[i].price;
            x->w = live[i].w;
            x->pv = live[i].pv;
            x->pri = next_pri(t);
            x->l = x->r = -1;
            int32_t last = -1;
            while (top > 0 && nodes[stack[top - 1]].pri < x->pri) last = stack[--top];
            x->l = last;
            if (top > 0) nodes[stack[top - 1]].r = (int32_t)i;
            stack[top++] = (int32_t)i;
        }
        t->root = stack[0];
        PyMem_Free(stack);
        pull_all(nodes, t->root);
        t->used = t->size = (int32_t)n;
    }
    out = Py_BuildValue("(OL)", cnt, (long long)sw);
    goto done;
overflow:
    if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        PyErr_SetString(PyExc_OverflowError, "a netted level outside the level tree's range");
    }
done:
    Py_XDECREF(cnt);
    PyMem_Free(live);
    return out;
}

static int items_into(const TNode *n, int32_t i, PyObject *out) {
    if (i < 0) return 0;
    if (items_into(n, n[i].l, out) < 0) return -1;
    PyObject *item = Py_BuildValue("(LLL)", (long long)n[i].key, (long long)n[i].w, (long long)n[i].pv);
    if (item == NULL || PyList_Append(out, item) < 0) {
        Py_XDECREF(item);
        return -1;
    }
    Py_DECREF(item);
    return items_into(n, n[i].r, out);
}

/* items(): [(price, W, PV)] in ascending price. */
static PyObject *lt_items(LevelTree *t, PyObject *unused) {
    (void)unused;
    PyObject *out = PyList_New(0);
    if (out != NULL && items_into(t->n, t->root, out) < 0) Py_CLEAR(out);
    return out;
}

static int depth(const TNode *n, int32_t i) {
    if (i < 0) return 0;
    int a = depth(n, n[i].l), b = depth(n, n[i].r);
    return 1 + (a > b ? a : b);
}

static PyObject *lt_depth(LevelTree *t, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(depth(t->n, t->root));
}

static Py_ssize_t lt_len(LevelTree *t) { return t->size; }

static PyObject *lt_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (!PyArg_ParseTuple(args, ":LevelTree") || (kwds && PyDict_Size(kwds))) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "LevelTree() takes no arguments");
        return NULL;
    }
    LevelTree *t = (LevelTree *)type->tp_alloc(type, 0);
    if (t == NULL) return NULL;
    t->n = NULL;
    t->cap = t->used = t->size = 0;
    t->free = t->root = -1;
    t->seed = 0x5EED;
    return (PyObject *)t;
}

static void lt_dealloc(LevelTree *t) {
    PyMem_Free(t->n);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyMethodDef lt_methods[] = {
    {"add", (PyCFunction)lt_add, METH_VARARGS, "add(price, dw, dpv): a level's W and PV change (inserted when new)"},
    {"delete", (PyCFunction)lt_delete, METH_O, "delete(price): the level leaves"},
    {"min_key_prefix_gt", (PyCFunction)lt_min_key_prefix_gt, METH_O,
     "min_key_prefix_gt(x): the smallest price whose prefix Σ W exceeds x, or None"},
    {"suffix_ge", (PyCFunction)lt_suffix_ge, METH_O, "suffix_ge(price): Σ PV over prices >= price"},
    {"items", (PyCFunction)lt_items, METH_NOARGS, "items(): [(price, W, PV)] ascending"},
    {"depth", (PyCFunction)lt_depth, METH_NOARGS, "depth(): the treap's height"},
    {"apply_netted", (PyCFunction)lt_apply_netted, METH_VARARGS,
     "apply_netted(cnt, changes, total) -> (applied, total): the plan's loop over a netted batch"},
    {"load_netted", (PyCFunction)lt_load_netted, METH_O,
     "load_netted(changes): an empty tree takes a netted batch's live levels; returns ({price: count}, Σ W)"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods lt_as_sequence = {.sq_length = (lenfunc)lt_len};

PyTypeObject LevelTreeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ivmstream.services.vwap._kernels.LevelTree",
    .tp_basicsize = sizeof(LevelTree),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Price levels (price -> W, PV) with prefix and suffix sums, integers within 2^62.",
    .tp_new = lt_new,
    .tp_dealloc = (destructor)lt_dealloc,
    .tp_methods = lt_methods,
    .tp_as_sequence = &lt_as_sequence,
};

int level_tree_ready(void) {
    if (zero == NULL && (zero = PyLong_FromLong(0)) == NULL) return -1;
    return PyType_Ready(&LevelTreeType);
}
