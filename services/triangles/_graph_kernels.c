/* First-order triangle maintenance of a simple undirected graph, a whole batch of edge events per call
 * (services/triangles/simple_graph.py says when it applies; the engines' Python path is the reference
 * it is tested against and the fallback where this is not built).
 *
 * A SimpleGraph holds E as integer adjacency sets: each node is interned to a small index (an int64
 * node through an int hash map, any other through a dict) and its neighbours are an open-addressing
 * hash set of indexes, so the common-neighbour count of an edge's endpoints probes int arrays instead
 * of dicts. `run` applies edge events in order, each one seeing the state the previous one left: it
 * validates the event, counts |N(u) ∩ N(v)|, adds 6·m·|N(u) ∩ N(v)| to Q (the two directed
 * first-order updates of docs/triangles/algorithm.md §2.11 on a graph without self-loops) and
 * updates the sets. The engine's dict indexes (fwd[x][y] = 1, bwd[y][x] = 1) are emptied while
 * batches run and rewritten by `materialize` when something reads them. `run` stops at the first
 * event it does not apply (the Python path then rejects it or applies it) and, when `stride` > 0,
 * after each event that strategy `auto` prices, so the caller can price it and possibly switch plans
 * before the next event is applied.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#include "_graph_sets.h"

/* --- the graph ---------------------------------------------------------------------------------- */

/* A node: its neighbours and the node itself (a reference; NULL: a free index). */
typedef struct {
    NSet adj;
    PyObject *obj;
} Node;

typedef struct {
    PyObject_HEAD
    PyObject *fwd, *bwd; /* the engine's index of E by first and by second variable (see materialize) */
    IdMap ints;          /* int node -> its index */
    PyObject *others;    /* any other node -> its index (a Python int) */
    Node *nodes;
    int32_t *free_ids; /* indexes of nodes whose last edge was deleted, for reuse */
    Py_ssize_t nfree, used, cap; /* free indexes, indexes handed out so far, room in nodes/free_ids */
    Py_ssize_t tuples;           /* directed tuples (two per edge) */
} Graph;

static PyObject *s_relation, *s_row, *s_delta, *s_edges, *s_src, *s_dst, *one, *zero, *minus_one;

/* A node as the index keys it: an int in int64 (is_int, value v) or any other object. */
typedef struct {
    PyObject *obj;
    long long v;
    int is_int;
} Key;

static int make_key(PyObject *x, Key *k) { /* 0 and an exception only when x is unhashable */
    k->obj = x;
    k->is_int = 0;
    if (PyLong_CheckExact(x)) {
        int overflow = 0;
        k->v = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (k->v == -1 && PyErr_Occurred()) return -1;
        k->is_int = !overflow;
    }
    return 0;
}

/* The index of node k, -1 when it has none, -2 on error. */
static int32_t node_id(Graph *g, const Key *k) {
    if (k->is_int) return idmap_get(&g->ints, k->v);
    PyObject *id = PyDict_GetItemWithError(g->others, k->obj);
    if (id == NULL) return PyErr_Occurred() ? -2 : -1;
    return (int32_t)PyLong_AsLong(id);
}

static int32_t intern(Graph *g, const Key *k) {
    int32_t i = node_id(g, k);
    if (i != -1) return i;
    if (g->nfree) {
        i = g->free_ids[--g->nfree];
    } else {
        if (g->used == g->cap) {
            Py_ssize_t cap = g->cap ? 2 * g->cap : 64;
            if (cap > INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError, "too many nodes");
                return -2;
            }
            Node *nodes = PyMem_Realloc(g->nodes, sizeof(Node) * cap);
            if (nodes == NULL) goto nomem;
            g->nodes = nodes;
            int32_t *free_ids = PyMem_Realloc(g->free_ids, sizeof(int32_t) * cap);
            if (free_ids == NULL) goto nomem;
            g->free_ids = free_ids;
            g->cap = cap;
        }
        i = (int32_t)g->used++;
        g->nodes[i].obj = NULL;
    }
    if (k->is_int) {
        if (idmap_put(&g->ints, k->v, i) < 0) goto undo;
    } else {
        PyObject *id = PyLong_FromLong(i);
        if (id == NULL || PyDict_SetItem(g->others, k->obj, id) < 0) {
            Py_XDECREF(id);
            goto undo;
        }
        Py_DECREF(id);
    }
    Py_INCREF(k->obj);
    g->nodes[i] = (Node){{NULL, 0, 0}, k->obj};
    return i;
nomem:
    PyErr_NoMemory();
    return -2;
undo:
    g->free_ids[g->nfree++] = i;
    return -2;
}

/* Forget node i, which has no edges left. */
static int release(Graph *g, int32_t i) {
    Node *node = &g->nodes[i];
    PyObject *x = node->obj;
    int rc = 0;
    Key k;
    if (make_key(x, &k) < 0) return -1;
    if (k.is_int)
        idmap_del(&g->ints, k.v);
    else
        rc = PyDict_DelItem(g->others, x);
    node->obj = NULL;
    Py_DECREF(x);
    g->free_ids[g->nfree++] = i;
    return rc;
}

static void graph_clear(Graph *g) {
    for (Py_ssize_t i = 0; i < g->used; i++) {
        Node *node = &g->nodes[i];
        if (node->obj != NULL) {
            Py_DECREF(node->obj);
            PyMem_Free(node->adj.slots);
        }
    }
    PyMem_Free(g->nodes);
    PyMem_Free(g->free_ids);
    PyMem_Free(g->ints.slots);
    g->nodes = NULL;
    g->free_ids = NULL;
    g->ints = (IdMap){NULL, 0, 0};
    g->used = g->cap = g->nfree = g->tuples = 0;
    Py_CLEAR(g->fwd);
    Py_CLEAR(g->bwd);
    Py_CLEAR(g->others);
}

static void graph_dealloc(Graph *g) {
    graph_clear(g);
    Py_TYPE(g)->tp_free((PyObject *)g);
}

static int not_simple(const char *why) {
    PyErr_Format(PyExc_ValueError, "not a simple undirected graph: %s", why);
    return -1;
}

static int32_t intern_obj(Graph *g, PyObject *x) {
    Key k;
    if (make_key(x, &k) < 0) return -2;
    return intern(g, &k);
}

/* SimpleGraph(fwd, bwd): the mirror of a symmetric E with every multiplicity 1 and no self-loop
 * (ValueError otherwise); bwd must hold a row of the same size for every row of fwd. */
static int graph_init(Graph *g, PyObject *args, PyObject *kwds) {
    PyObject *fwd, *bwd;
    static char *kwlist[] = {"fwd", "bwd", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!", kwlist, &PyDict_Type, &fwd, &PyDict_Type, &bwd))
        return -1;
    graph_clear(g);
    g->others = PyDict_New();
    if (g->others == NULL) return -1;
    Py_INCREF(fwd);
    g->fwd = fwd;
    Py_INCREF(bwd);
    g->bwd = bwd;
    if (PyDict_GET_SIZE(fwd) != PyDict_GET_SIZE(bwd)) return not_simple("the two indexes differ");
    Py_ssize_t pos = 0;
    PyObject *x, *row;
    while (PyDict_Next(fwd, &pos, &x, &row)) {
        if (!PyDict_CheckExact(row)) return not_simple("a row is not a dict");
        int32_t ix = intern_obj(g, x);
        if (ix < 0) return -1;
        PyObject *brow = PyDict_GetItemWithError(bwd, x);
        if (brow == NULL) return PyErr_Occurred() ? -1 : not_simple("a row is missing from the second index");
        if (!PyDict_CheckExact(brow) || PyDict_GET_SIZE(brow) != PyDict_GET_SIZE(row))
            return not_simple("the two indexes differ");
        Py_ssize_t rpos = 0;
        PyObject *y, *m;
        while (PyDict_Next(row, &rpos, &y, &m)) {
            if (!PyLong_CheckExact(m) || PyLong_AsLong(m) != 1) {
                if (PyErr_Occurred()) PyErr_Clear();
                return not_simple("a multiplicity is not 1");
            }
            int32_t iy = intern_obj(g, y);
            if (iy < 0) return -1;
            if (iy == ix) return not_simple("a self-loop");
            if (nset_add(&g->nodes[ix].adj, iy) < 0) return -1;
            g->tuples++;
        }
    }
    for (Py_ssize_t i = 0; i < g->used; i++) {
        NSet *s = &g->nodes[i].adj;
        if (s->n == 0) return not_simple("an edge's reverse is missing");
        for (uint32_t k = 0; k < (1u << s->bits); k++)
            if (s->slots[k] >= 0 && !nset_contains(&g->nodes[s->slots[k]].adj, (int32_t)i))
                return not_simple("an edge's reverse is missing");
    }
    return 0;
}

/* An id the service accepts: an int in int64 or a string. */
static int valid_id(PyObject *x, Key *k) {
    k->obj = x;
    k->is_int = 0;
    if (PyLong_CheckExact(x)) {
        int overflow = 0;
        k->v = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow || (k->v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        k->is_int = 1;
        return 1;
    }
    return PyUnicode_CheckExact(x);
}

/* -1: x before y, 0: equal, 1: after (ints before strings, each ordered as Python orders them). */
static int order(const Key *x, const Key *y) {
    if (x->is_int != y->is_int) return x->is_int ? -1 : 1;
    if (x->is_int) return x->v < y->v ? -1 : x->v > y->v;
    int c = PyUnicode_Compare(x->obj, y->obj);
    return c < 0 ? -1 : c > 0;
}

enum { DONE = 0, PYTHON = 1, PRICE = 2 };

/* run(events, start, changes, skip, stride, cheap_pair) -> (next, status, dq, dsize, dwork, devents,
 * work_last, skip, u, v, price_work, weight). Applies events[start:] until the end (status DONE), an
 * event this does not apply (PYTHON: events[next] is left to the caller) or an event to price
 * (PRICE: events[next - 1] was applied; u, v, its work and weight are returned). `changes`: a dict
 * that gets {(a, b): 1 or 0} per applied edge (its stored direction), or None. */
static PyObject *graph_run(Graph *g, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "run expects 6 arguments");
        return NULL;
    }
    PyObject *events = args[0], *changes = args[2];
    if (!PyList_CheckExact(events) || (changes != Py_None && !PyDict_CheckExact(changes))) {
        PyErr_SetString(PyExc_TypeError, "run expects a list of events and a dict or None");
        return NULL;
    }
    if (g->fwd == NULL) {
        PyErr_SetString(PyExc_ValueError, "SimpleGraph is not initialised");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    long skip = PyLong_AsLong(args[3]), stride = PyLong_AsLong(args[4]);
    long long cheap = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(events), i;
    long long dq = 0, dwork = 0, work_last = 0, price_work = 0;
    Py_ssize_t dsize = 0, devents = 0;
    long weight = 0;
    int status = DONE;
    PyObject *pu = Py_None, *pv = Py_None;
    for (i = start; i < n; i++) {
        PyObject *ev = PyList_GET_ITEM(events, i);
        PyObject *rel = PyObject_GetAttr(ev, s_relation);
        if (rel == NULL) return NULL;
        int is_edges = rel == s_edges || (PyUnicode_CheckExact(rel) && PyUnicode_Compare(rel, s_edges) == 0);
        Py_DECREF(rel);
        if (!is_edges) break;
        PyObject *row = PyObject_GetAttr(ev, s_row);
        if (row == NULL) return NULL;
        PyObject *u = PyDict_CheckExact(row) ? PyDict_GetItemWithError(row, s_src) : NULL;
        PyObject *v = u != NULL ? PyDict_GetItemWithError(row, s_dst) : NULL;
        Py_XINCREF(u);
        Py_XINCREF(v);
        Py_DECREF(row);
        if (PyErr_Occurred()) goto fail_uv;
        Key ku, kv;
        if (u == NULL || v == NULL || !valid_id(u, &ku) || !valid_id(v, &kv)) goto python_uv;
        PyObject *delta = PyObject_GetAttr(ev, s_delta);
        if (delta == NULL) goto fail_uv;
        long m = PyLong_CheckExact(delta) ? PyLong_AsLong(delta) : 0;
        Py_DECREF(delta);
        if (m == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            m = 0;
        }
        if ((m != 1 && m != -1) || order(&ku, &kv) == 0) goto python_uv;
        if (PyErr_Occurred()) goto fail_uv;
        int32_t iu = node_id(g, &ku), iv = node_id(g, &kv);
        if (iu == -2 || iv == -2) goto fail_uv;
        int present = iu >= 0 && iv >= 0 && nset_contains(&g->nodes[iu].adj, iv);
        if ((m == 1) == present) goto python_uv; /* a duplicate insert or an absent delete */
        if (m == 1) {
            iu = intern(g, &ku);
            if (iu < 0) goto fail_uv;
            iv = intern(g, &kv);
            if (iv < 0) goto fail_uv;
        }
        Node *nu = &g->nodes[iu], *nv = &g->nodes[iv];
        long long du = nu->adj.n, dv = nv->adj.n;
        long long d = nset_common(&nu->adj, &nv->adj);
        /* the two directed updates' work: min of the degrees before the first and after it */
        long long work = (du < dv ? du : dv) + (du + m < dv + m ? du + m : dv + m);
        if (m == 1) {
            if (nset_add(&nu->adj, iv) < 0 || nset_add(&nv->adj, iu) < 0) goto fail_uv;
        } else {
            if (nset_remove(&nu->adj, iv) < 0 || nset_remove(&nv->adj, iu) < 0) goto fail_uv;
            if (nu->adj.n == 0 && release(g, iu) < 0) goto fail_uv;
            if (nv->adj.n == 0 && release(g, iv) < 0) goto fail_uv;
        }
        g->tuples += 2 * m;
        dq += 6 * m * d;
        dsize += 2 * m;
        dwork += work;
        devents++;
        work_last = work;
        if (changes != Py_None) {
            PyObject *key = order(&ku, &kv) < 0 ? PyTuple_Pack(2, u, v) : PyTuple_Pack(2, v, u);
            if (key == NULL) goto fail_uv;
            int rc = PyDict_SetItem(changes, key, m == 1 ? one : zero);
            Py_DECREF(key);
            if (rc < 0) goto fail_uv;
        }
        if (stride > 0) {
            if (work < cheap) {
                if (--skip == 0) {
                    skip = stride;
                    weight = 2 * stride;
                }
            } else {
                weight = 2;
            }
            if (weight) {
                status = PRICE;
                pu = u;
                pv = v;
                price_work = work;
                i++;
                break;
            }
        }
        Py_DECREF(u);
        Py_DECREF(v);
        continue;
    python_uv:
        Py_XDECREF(u);
        Py_XDECREF(v);
        break;
    fail_uv:
        Py_XDECREF(u);
        Py_XDECREF(v);
        return NULL;
    }
    if (status != PRICE && i < n) status = PYTHON;
    PyObject *out = Py_BuildValue("(niLnLnLlOOLl)", i, status, dq, dsize, dwork, devents, work_last, skip, pu,
                                  pv, price_work, weight);
    if (status == PRICE) {
        Py_DECREF(pu);
        Py_DECREF(pv);
    }
    return out;
}

static PyObject *graph_has_edge(Graph *g, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || g->others == NULL) {
        PyErr_SetString(PyExc_TypeError, "has_edge expects 2 arguments (on an initialised graph)");
        return NULL;
    }
    Key ku, kv;
    if (make_key(args[0], &ku) < 0 || make_key(args[1], &kv) < 0) return NULL;
    int32_t iu = node_id(g, &ku), iv = node_id(g, &kv);
    if (iu == -2 || iv == -2) return NULL;
    return PyBool_FromLong(iu >= 0 && iv >= 0 && nset_contains(&g->nodes[iu].adj, iv));
}

static PyObject *graph_degree(Graph *g, PyObject *x) {
    if (g->others == NULL) {
        PyErr_SetString(PyExc_ValueError, "SimpleGraph is not initialised");
        return NULL;
    }
    Key k;
    if (make_key(x, &k) < 0) return NULL;
    int32_t i = node_id(g, &k);
    if (i == -2) return NULL;
    return PyLong_FromLong(i < 0 ? 0 : (long)g->nodes[i].adj.n);
}

/* materialize's order: nodes by key, ints before strings (the order _edge uses). */
static const Key *sort_keys;

static int by_key(const void *a, const void *b) {
    const Key *x = &sort_keys[*(const int32_t *)a], *y = &sort_keys[*(const int32_t *)b];
    if (x->is_int != y->is_int) return x->is_int ? -1 : 1;
    if (x->is_int) return x->v < y->v ? -1 : x->v > y->v;
    int c = PyUnicode_Compare(x->obj, y->obj);
    return c < 0 ? -1 : c > 0;
}

/* Rewrite the engine's two indexes from the adjacency sets: row x of each is {y: 1 for y in N(x)}.
 * Rows and their entries come in key order when every node is an int64 or a string (always, for
 * nodes from events), so two engines holding the same edges write the same indexes whatever their
 * histories; otherwise in the order of the node indexes. */
static PyObject *graph_materialize(Graph *g, PyObject *Py_UNUSED(ignored)) {
    if (g->fwd == NULL) {
        PyErr_SetString(PyExc_ValueError, "SimpleGraph is not initialised");
        return NULL;
    }
    Py_ssize_t live = 0, widest = 0;
    int sortable = 1;
    Key *keys = PyMem_Malloc(sizeof(Key) * (g->used ? g->used : 1));
    int32_t *order_ids = PyMem_Malloc(sizeof(int32_t) * (g->used ? g->used : 1));
    int32_t *row_ids = NULL;
    PyObject *row = NULL;
    if (keys == NULL || order_ids == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < g->used; i++) {
        Node *node = &g->nodes[i];
        if (node->obj == NULL) continue;
        if (make_key(node->obj, &keys[i]) < 0) goto fail;
        sortable = sortable && (keys[i].is_int || PyUnicode_CheckExact(node->obj));
        order_ids[live++] = (int32_t)i;
        if ((Py_ssize_t)node->adj.n > widest) widest = node->adj.n;
    }
    row_ids = PyMem_Malloc(sizeof(int32_t) * (widest ? widest : 1));
    if (row_ids == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    sort_keys = keys;
    if (sortable) qsort(order_ids, live, sizeof(int32_t), by_key);
    PyDict_Clear(g->fwd);
    PyDict_Clear(g->bwd);
    for (Py_ssize_t r = 0; r < live; r++) {
        Node *node = &g->nodes[order_ids[r]];
        Py_ssize_t n = 0;
        for (uint32_t k = 0; k < (1u << node->adj.bits); k++)
            if (node->adj.slots[k] >= 0) row_ids[n++] = node->adj.slots[k];
        sort_keys = keys;
        if (sortable) qsort(row_ids, n, sizeof(int32_t), by_key);
        row = PyDict_New();
        if (row == NULL) goto fail;
        for (Py_ssize_t k = 0; k < n; k++)
            if (PyDict_SetItem(row, g->nodes[row_ids[k]].obj, one) < 0) goto fail;
        PyObject *col = PyDict_Copy(row);
        if (col == NULL) goto fail;
        int rc = PyDict_SetItem(g->fwd, node->obj, row) < 0 || PyDict_SetItem(g->bwd, node->obj, col) < 0;
        Py_DECREF(col);
        Py_CLEAR(row);
        if (rc) goto fail;
    }
    PyMem_Free(keys);
    PyMem_Free(order_ids);
    PyMem_Free(row_ids);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(row);
    PyMem_Free(keys);
    PyMem_Free(order_ids);
    PyMem_Free(row_ids);
    return NULL;
}

/* Every edge once, as (a, b) with a before b (ints before strings, each in Python's order). */
static PyObject *graph_edges(Graph *g, PyObject *Py_UNUSED(ignored)) {
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < g->used; i++) {
        Node *node = &g->nodes[i];
        if (node->obj == NULL) continue;
        Key kx;
        if (make_key(node->obj, &kx) < 0) goto fail;
        for (uint32_t k = 0; k < (1u << node->adj.bits); k++) {
            int32_t c = node->adj.slots[k];
            if (c < 0) continue;
            Key ky;
            if (make_key(g->nodes[c].obj, &ky) < 0) goto fail;
            int before = order(&kx, &ky);
            if (PyErr_Occurred()) goto fail;
            if (before > 0) continue;
            PyObject *pair = PyTuple_Pack(2, node->obj, g->nodes[c].obj);
            if (pair == NULL) goto fail;
            int rc = PyList_Append(out, pair);
            Py_DECREF(pair);
            if (rc < 0) goto fail;
        }
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *graph_nodes(Graph *g, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromSsize_t(g->used - g->nfree);
}

static PyObject *graph_get_tuples(Graph *g, void *Py_UNUSED(closure)) { return PyLong_FromSsize_t(g->tuples); }

static PyObject *graph_get_fwd(Graph *g, void *Py_UNUSED(closure)) {
    PyObject *out = g->fwd ? g->fwd : Py_None;
    Py_INCREF(out);
    return out;
}

static PyMethodDef graph_methods[] = {
    {"run", (PyCFunction)(void (*)(void))graph_run, METH_FASTCALL,
     "Apply a batch's edge events from `start` on (see the module comment)."},
    {"has_edge", (PyCFunction)(void (*)(void))graph_has_edge, METH_FASTCALL, "Whether u-v is an edge."},
    {"node_count", (PyCFunction)graph_nodes, METH_NOARGS, "Nodes with at least one edge."},
    {"degree", (PyCFunction)graph_degree, METH_O, "|N(x)|: 0 for a node without edges."},
    {"edges", (PyCFunction)graph_edges, METH_NOARGS, "Every edge once, as (a, b) with a before b."},
    {"materialize", (PyCFunction)graph_materialize, METH_NOARGS,
     "Rewrite the engine's indexes from the adjacency sets (run() leaves them behind)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef graph_getset[] = {
    {"tuples", (getter)graph_get_tuples, NULL, "Directed tuples of E (two per edge).", NULL},
    {"fwd", (getter)graph_get_fwd, NULL, "The engine index this graph mirrors (by first variable).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject GraphType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ivmstream.services.triangles._graph_kernels.SimpleGraph",
    .tp_basicsize = sizeof(Graph),
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A simple undirected graph's adjacency as int sets, mirroring an engine's E index.",
    .tp_methods = graph_methods,
    .tp_getset = graph_getset,
    .tp_init = (initproc)graph_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_graph_kernels",
    "First-order triangle maintenance of a simple graph, a batch of edge events per call.", -1, NULL,
};

PyMODINIT_FUNC PyInit__graph_kernels(void) {
    if (PyType_Ready(&GraphType) < 0) return NULL;
    s_relation = PyUnicode_InternFromString("relation");
    s_row = PyUnicode_InternFromString("row");
    s_delta = PyUnicode_InternFromString("delta");
    s_edges = PyUnicode_InternFromString("edges");
    s_src = PyUnicode_InternFromString("src");
    s_dst = PyUnicode_InternFromString("dst");
    one = PyLong_FromLong(1);
    zero = PyLong_FromLong(0);
    minus_one = PyLong_FromLong(-1);
    if (!s_relation || !s_row || !s_delta || !s_edges || !s_src || !s_dst || !one || !zero || !minus_one)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&GraphType);
    if (PyModule_AddObject(m, "SimpleGraph", (PyObject *)&GraphType) < 0) {
        Py_DECREF(&GraphType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
