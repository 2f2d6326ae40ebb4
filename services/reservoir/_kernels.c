/* The rounded join index's weight updates, compiled (services/reservoir/index.py holds the same steps
 * in Python, `JoinIndex._reweigh` and the methods it calls: the reference these are tested against and
 * the fallback where this is not built).
 *
 * `reweigh(index, e, item, old_f, f)` re-weighs one item of node e in every structure D[e->*]: its
 * weight there is its children's rounded counts times f (was old_f); the item moves between the
 * exponent buckets of its key, the key's count changes, and when the key's rounded count changes the
 * change travels to the parent items with that key, in every parent structure, recursively. It works
 * on the index's own dicts and lists, performing the Python steps' container operations one for one
 * (same insertion and removal positions), so the buckets' order, and so every later sample, is the
 * same. Weights and counts are Python ints of any size.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

static PyObject *S_key_pos, *S_buckets, *S_exps, *S_where, *S_cnt, *S_rcnt, *S_parent, *S_node,
    *S_parents, *S_children, *S_child_pos, *S_idx, *S_by_key, *S_items, *S_ds, *S_nodes, *S_grouped,
    *S_tracking, *S_dirty, *S_places, *S_propagations, *S_out, *S_tuples, *S_next_seq, *S_whole,
    *S_item_pos, *S_neighbours, *S_into, *S_col_map, *S_width, *S_retrieves;
static PyObject *ZERO, *ONE;

typedef struct {
    PyObject *ds;    /* list of Directed */
    PyObject *nodes; /* list of NodeStore */
    int grouped;
    PyObject *dirty; /* the index's set of changed (structure, key), NULL when not tracking */
    long long places, propagations;
} Ctx;

/* Where a class keeps a __slots__ attribute: the index's structures and node stores are read a dozen
 * attributes per placement, and a slot read through the generic attribute lookup costs more than the
 * placement's own dict probes. The offset is taken from the class's member descriptor and trusted
 * while the class is unchanged (its version tag). */
#define SLOT_CACHE 64
static struct {
    PyObject *name;
    PyTypeObject *type;
    unsigned int version;
    Py_ssize_t offset; /* -1: not a plain object slot (read through the generic lookup) */
} slot_cache[SLOT_CACHE];

static Py_ssize_t slot_offset(PyTypeObject *type, PyObject *name) {
    size_t h = ((size_t)(uintptr_t)name >> 4) % SLOT_CACHE;
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
static PyObject *held(PyObject *o, PyObject *name) {
    Py_ssize_t offset = slot_offset(Py_TYPE(o), name);
    if (offset >= 0) {
        PyObject *r = *(PyObject **)((char *)o + offset);
        if (r != NULL) return r;
    }
    PyObject *r = PyObject_GetAttr(o, name);
    if (r != NULL) Py_DECREF(r);
    return r;
}

/* Stop the collector tracking a tuple of atoms (ints, strings, floats, None, untracked tuples). Such a
 * tuple cannot be part of a reference cycle, and a dict whose keys and values are all untracked is
 * itself untracked: a key or value still tracked when it enters one of the index's large dicts puts the
 * whole dict back under watch, and every young collection then walks all of it. CPython untracks such
 * tuples itself, but only once a collection meets them, after the dict has been re-tracked. */
static void settle(PyObject *t) {
    if (!PyTuple_CheckExact(t) || !PyObject_GC_IsTracked(t)) return;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        PyObject *x = PyTuple_GET_ITEM(t, i);
        if (PyObject_IS_GC(x) && (!PyTuple_CheckExact(x) || PyObject_GC_IsTracked(x))) return;
    }
    PyObject_GC_UnTrack(t);
}

/* The index's containers hold only atoms, settled tuples and other such containers (a key's buckets:
 * exponent -> list of items; a node's groups: item -> list of tuples; by_key: key -> item set), so none
 * can be part of a reference cycle. The collector would still walk every one of them in each full
 * collection, and the index holds one per key and per group: the kernel takes the ones it fills off the
 * collector's watch. A dict is watched again as soon as anyone stores a watched value in it. */
static PyObject *atom_list(Py_ssize_t n) {
    PyObject *l = PyList_New(n);
    if (l != NULL) PyObject_GC_UnTrack(l);
    return l;
}

static void unwatch(PyObject *o) {
    if (PyObject_GC_IsTracked(o)) PyObject_GC_UnTrack(o);
}

/* dict.pop(key) as a new reference, raising KeyError when absent: one probe where get and del take two. */
static PyObject *pop_item(PyObject *dict, PyObject *key) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *r = NULL;
    int found = PyDict_Pop(dict, key, &r);
    if (found == 0) PyErr_SetObject(PyExc_KeyError, key);
    return found > 0 ? r : NULL;
#else
    return _PyDict_Pop(dict, key, NULL);
#endif
}

/* tuple(item[i] for i in pos), a new reference. */
static PyObject *key_of(PyObject *item, PyObject *pos) {
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

/* w.bit_length() - 1 as a Python int (w > 0): the exponent of a power-of-two weight. */
static PyObject *exponent(PyObject *w) {
    size_t bits = _PyLong_NumBits(w);
    if (bits == (size_t)-1 && PyErr_Occurred()) return NULL;
    return PyLong_FromSize_t(bits - 1);
}

/* 1 << (c - 1).bit_length(), the smallest power of two >= c (c > 0), a new reference. */
static PyObject *nextpow2(PyObject *c) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(c, &overflow);
    if (!overflow && x > 0 && x <= (1LL << 61)) {
        long long p = 1;
        while (p < x) p <<= 1;
        return PyLong_FromLongLong(p);
    }
    if (PyErr_Occurred()) return NULL;
    PyObject *less = PyNumber_Subtract(c, ONE);
    if (less == NULL) return NULL;
    size_t bits = _PyLong_NumBits(less);
    Py_DECREF(less);
    if (bits == (size_t)-1 && PyErr_Occurred()) return NULL;
    PyObject *shift = PyLong_FromSize_t(bits);
    if (shift == NULL) return NULL;
    PyObject *r = PyNumber_Lshift(ONE, shift);
    Py_DECREF(shift);
    return r;
}

/* dict[key] as a borrowed reference, raising KeyError when absent (as `dict[key]` does). */
static PyObject *item_or_keyerror(PyObject *dict, PyObject *key) {
    PyObject *r = PyDict_GetItemWithError(dict, key);
    if (r == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
    return r;
}

/* dict.get(key, 0) as a borrowed reference. */
static PyObject *get_or_zero(PyObject *dict, PyObject *key) {
    PyObject *r = PyDict_GetItemWithError(dict, key);
    if (r == NULL && !PyErr_Occurred()) return ZERO;
    return r;
}

/* The index in a sorted list of ints where x goes after its equals (append, then sort). */
static Py_ssize_t sorted_slot(PyObject *list, PyObject *x) {
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(list);
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        int lt = PyObject_RichCompareBool(x, PyList_GET_ITEM(list, mid), Py_LT);
        if (lt < 0) return -1;
        if (lt) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

static int bucket_add(PyObject *d, PyObject *v, PyObject *x, PyObject *item) {
    PyObject *buckets = held(d, S_buckets), *where = held(d, S_where);
    if (buckets == NULL || where == NULL) return -1;
    PyObject *per = PyDict_GetItemWithError(buckets, v);
    if (per == NULL) {
        if (PyErr_Occurred()) return -1;
        per = PyDict_New();
        if (per == NULL || PyDict_SetItem(buckets, v, per) < 0) {
            Py_XDECREF(per);
            return -1;
        }
        Py_DECREF(per);
        unwatch(buckets);
    }
    PyObject *arr = PyDict_GetItemWithError(per, x);
    if (arr == NULL) {
        if (PyErr_Occurred()) return -1;
        arr = atom_list(0);
        if (arr == NULL || PyDict_SetItem(per, x, arr) < 0) {
            Py_XDECREF(arr);
            return -1;
        }
        Py_DECREF(arr);
        unwatch(per);
        PyObject *exps_of = held(d, S_exps);
        if (exps_of == NULL) return -1;
        PyObject *exps = PyDict_GetItemWithError(exps_of, v);
        if (exps == NULL) {
            if (PyErr_Occurred()) return -1;
            exps = atom_list(0);
            if (exps == NULL || PyDict_SetItem(exps_of, v, exps) < 0) {
                Py_XDECREF(exps);
                return -1;
            }
            Py_DECREF(exps);
            unwatch(exps_of);
        }
        Py_ssize_t at = sorted_slot(exps, x);
        if (at < 0 || PyList_Insert(exps, at, x) < 0) return -1;
    }
    PyObject *slot = PyLong_FromSsize_t(PyList_GET_SIZE(arr));
    if (slot == NULL) return -1;
    int rc = PyDict_SetItem(where, item, slot);
    Py_DECREF(slot);
    if (rc < 0) return -1;
    return PyList_Append(arr, item);
}

static int bucket_remove(PyObject *d, PyObject *v, PyObject *x, PyObject *item) {
    PyObject *buckets = held(d, S_buckets), *where = held(d, S_where);
    if (buckets == NULL || where == NULL) return -1;
    PyObject *per = item_or_keyerror(buckets, v);
    if (per == NULL) return -1;
    PyObject *arr = item_or_keyerror(per, x);
    if (arr == NULL || !PyList_Check(arr)) return -1;
    PyObject *slot = pop_item(where, item);
    if (slot == NULL) return -1;
    Py_ssize_t i = PyLong_AsSsize_t(slot);
    Py_DECREF(slot);
    if (i == -1 && PyErr_Occurred()) return -1;
    Py_ssize_t n = PyList_GET_SIZE(arr);
    PyObject *last = PyList_GET_ITEM(arr, n - 1);
    Py_INCREF(last);
    if (PyList_SetSlice(arr, n - 1, n, NULL) < 0) {
        Py_DECREF(last);
        return -1;
    }
    if (i < n - 1) {
        PyObject *moved = PyLong_FromSsize_t(i);
        if (moved == NULL) {
            Py_DECREF(last);
            return -1;
        }
        Py_INCREF(last);
        if (PyList_SetItem(arr, i, last) < 0) { /* steals the new reference, releases the item's */
            Py_DECREF(moved);
            Py_DECREF(last);
            return -1;
        }
        int rc = PyDict_SetItem(where, last, moved);
        Py_DECREF(moved);
        Py_DECREF(last);
        if (rc < 0) return -1;
    } else {
        Py_DECREF(last);
    }
    if (PyList_GET_SIZE(arr) == 0) {
        if (PyDict_DelItem(per, x) < 0) return -1;
        PyObject *exps_of = held(d, S_exps);
        PyObject *exps = exps_of == NULL ? NULL : item_or_keyerror(exps_of, v);
        if (exps == NULL) return -1;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(exps); j++) {
            int eq = PyObject_RichCompareBool(PyList_GET_ITEM(exps, j), x, Py_EQ);
            if (eq < 0) return -1;
            if (eq) return PyList_SetSlice(exps, j, j + 1, NULL);
        }
        PyErr_SetString(PyExc_ValueError, "list.remove(x): x not in list");
        return -1;
    }
    return 0;
}

static int place(Ctx *cx, PyObject *d, PyObject *item, PyObject *w_old, PyObject *w_new);

/* The product of the children's rounded counts at this item's keys, skipping child slot `skip`, times
 * `start` (a new reference; 0 as soon as one is 0). */
static PyObject *children_product(Ctx *cx, PyObject *d, PyObject *item, Py_ssize_t skip, PyObject *start) {
    PyObject *children = held(d, S_children), *child_pos = held(d, S_child_pos);
    if (children == NULL || child_pos == NULL) return NULL;
    PyObject *w = start;
    Py_INCREF(w);
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(children); j++) {
        if (j == skip) continue;
        Py_ssize_t c = PyLong_AsSsize_t(PyList_GET_ITEM(children, j));
        if (c == -1 && PyErr_Occurred()) goto fail;
        PyObject *rcnt = held(PyList_GET_ITEM(cx->ds, c), S_rcnt);
        if (rcnt == NULL) goto fail;
        PyObject *k = key_of(item, PyList_GET_ITEM(child_pos, j));
        if (k == NULL) goto fail;
        PyObject *r = get_or_zero(rcnt, k);
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

/* The change of a key's rounded count reaches every parent item with that key (JoinIndex._propagate). */
static int propagate(Ctx *cx, PyObject *d, PyObject *v, PyObject *old, PyObject *new_) {
    Py_ssize_t p = PyLong_AsSsize_t(held(d, S_parent));
    if (p == -1 && PyErr_Occurred()) return -1;
    if (p < 0) return 0;
    PyObject *node = PyList_GET_ITEM(cx->nodes, p);
    PyObject *by_key = held(node, S_by_key), *items = held(node, S_items);
    PyObject *parents = held(d, S_parents);
    if (by_key == NULL || items == NULL || parents == NULL) return -1;
    PyObject *keyed = item_or_keyerror(by_key, held(d, S_node));
    if (keyed == NULL) return -1;
    PyObject *matching = PyDict_GetItemWithError(keyed, v);
    if (matching == NULL) return PyErr_Occurred() ? -1 : 0;
    if (PyDict_GET_SIZE(matching) == 0) return 0;
    for (Py_ssize_t pp = 0; pp < PyList_GET_SIZE(parents); pp++) {
        PyObject *pair = PyList_GET_ITEM(parents, pp);
        Py_ssize_t pi = PyLong_AsSsize_t(PyTuple_GetItem(pair, 0));
        Py_ssize_t slot = PyLong_AsSsize_t(PyTuple_GetItem(pair, 1));
        if ((pi == -1 || slot == -1) && PyErr_Occurred()) return -1;
        PyObject *parent = PyList_GET_ITEM(cx->ds, pi);
        PyObject *snapshot = PyDict_Keys(matching);
        if (snapshot == NULL) return -1;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(snapshot); j++) {
            PyObject *item = PyList_GET_ITEM(snapshot, j);
            cx->propagations++;
            PyObject *f = ONE;
            Py_INCREF(f);
            if (cx->grouped) {
                PyObject *members = item_or_keyerror(items, item);
                Py_ssize_t n = members == NULL ? -1 : PyObject_Size(members);
                PyObject *size = n < 0 ? NULL : PyLong_FromSsize_t(n);
                Py_DECREF(f);
                f = size == NULL ? NULL : nextpow2(size);
                Py_XDECREF(size);
                if (f == NULL) goto fail;
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

/* JoinIndex._place in rounded mode. */
static int place(Ctx *cx, PyObject *d, PyObject *item, PyObject *w_old, PyObject *w_new) {
    cx->places++;
    PyObject *cnt = held(d, S_cnt), *rcnt = held(d, S_rcnt), *key_pos = held(d, S_key_pos);
    if (cnt == NULL || rcnt == NULL || key_pos == NULL) return -1;
    PyObject *v = key_of(item, key_pos);
    if (v == NULL) return -1;
    PyObject *old_r = NULL, *c = NULL, *new_r = NULL, *x = NULL;
    int rc = -1;
    if (cx->dirty != NULL) {
        PyObject *changed = PyTuple_Pack(2, held(d, S_idx), v);
        if (changed == NULL) goto done;
        int added = PySet_Add(cx->dirty, changed);
        Py_DECREF(changed);
        if (added < 0) goto done;
    }
    int old_nz = PyObject_IsTrue(w_old), new_nz = PyObject_IsTrue(w_new);
    if (old_nz < 0 || new_nz < 0) goto done;
    if (old_nz) {
        if ((x = exponent(w_old)) == NULL || bucket_remove(d, v, x, item) < 0) goto done;
        Py_CLEAR(x);
    }
    if (new_nz) {
        if ((x = exponent(w_new)) == NULL || bucket_add(d, v, x, item) < 0) goto done;
        Py_CLEAR(x);
    }
    old_r = get_or_zero(rcnt, v); /* read before cnt changes */
    if (old_r == NULL) goto done;
    Py_INCREF(old_r);
    PyObject *c0 = get_or_zero(cnt, v);
    if (c0 == NULL) goto done;
    PyObject *sum = PyNumber_Add(c0, w_new);
    if (sum == NULL) goto done;
    c = PyNumber_Subtract(sum, w_old);
    Py_DECREF(sum);
    if (c == NULL) goto done;
    int c_nz = PyObject_IsTrue(c);
    if (c_nz < 0) goto done;
    if (c_nz) {
        if (PyDict_SetItem(cnt, v, c) < 0 || (new_r = nextpow2(c)) == NULL) goto done;
    } else { /* the key is gone from this structure (deletes only) */
        PyObject *buckets = held(d, S_buckets), *exps = held(d, S_exps);
        if (buckets == NULL || exps == NULL) goto done;
        if (PyDict_DelItem(cnt, v) < 0 || PyDict_DelItem(rcnt, v) < 0 || PyDict_DelItem(buckets, v) < 0 ||
            PyDict_DelItem(exps, v) < 0)
            goto done;
        new_r = ZERO;
        Py_INCREF(new_r);
    }
    int differ = PyObject_RichCompareBool(new_r, old_r, Py_NE);
    if (differ < 0) goto done;
    if (differ) {
        if (c_nz && PyDict_SetItem(rcnt, v, new_r) < 0) goto done;
        if (propagate(cx, d, v, old_r, new_r) < 0) goto done;
    }
    rc = 0;
done:
    Py_DECREF(v);
    Py_XDECREF(old_r);
    Py_XDECREF(c);
    Py_XDECREF(new_r);
    Py_XDECREF(x);
    return rc;
}

/* Add `extra` to the int attribute `name` of `o`. */
static int bump_counter(PyObject *o, PyObject *name, long long extra) {
    if (extra == 0) return 0;
    PyObject *now = PyObject_GetAttr(o, name);
    if (now == NULL) return -1;
    PyObject *more = PyLong_FromLongLong(extra);
    PyObject *sum = more == NULL ? NULL : PyNumber_Add(now, more);
    Py_DECREF(now);
    Py_XDECREF(more);
    if (sum == NULL) return -1;
    int rc = PyObject_SetAttr(o, name, sum);
    Py_DECREF(sum);
    return rc;
}

/* The context of one call on the index: its structures, node stores and what it tracks. */
static int open_ctx(Ctx *cx, PyObject *ix) {
    cx->ds = held(ix, S_ds);
    cx->nodes = held(ix, S_nodes);
    PyObject *grouped = held(ix, S_grouped), *tracking = held(ix, S_tracking);
    if (cx->ds == NULL || cx->nodes == NULL || grouped == NULL || tracking == NULL) return -1;
    if (!PyList_Check(cx->ds) || !PyList_Check(cx->nodes)) {
        PyErr_SetString(PyExc_TypeError, "the index's ds and nodes are lists");
        return -1;
    }
    cx->grouped = PyObject_IsTrue(grouped);
    int track = PyObject_IsTrue(tracking);
    if (cx->grouped < 0 || track < 0) return -1;
    cx->dirty = NULL;
    if (track && (cx->dirty = held(ix, S_dirty)) == NULL) return -1;
    return 0;
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
        Py_ssize_t di = PyLong_AsSsize_t(PyList_GET_ITEM(mine, j));
        if (di == -1 && PyErr_Occurred()) return -1;
        PyObject *d = PyList_GET_ITEM(cx->ds, di);
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

static int close_ctx(Ctx *cx, PyObject *ix, int rc) {
    if (bump_counter(ix, S_places, cx->places) < 0 || bump_counter(ix, S_propagations, cx->propagations) < 0)
        return -1;
    return rc;
}

/* NodeStore.add: record t (arrival number seq, None: the next) in the node; its item (new reference)
 * and whether the item is new. */
static PyObject *node_add(PyObject *node, PyObject *t, PyObject *seq, int *is_new) {
    PyObject *tuples = held(node, S_tuples), *items = held(node, S_items), *by_key = held(node, S_by_key);
    PyObject *key_pos = held(node, S_key_pos), *whole = held(node, S_whole), *next = held(node, S_next_seq);
    if (tuples == NULL || items == NULL || by_key == NULL || key_pos == NULL || whole == NULL || next == NULL)
        return NULL;
    if (seq == Py_None) seq = next;
    Py_INCREF(seq);
    Py_INCREF(next);
    int later = PyObject_RichCompareBool(seq, next, Py_GE);
    Py_DECREF(next);
    if (later < 0 || PyDict_SetItem(tuples, t, seq) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    if (later) {
        PyObject *after = PyNumber_Add(seq, ONE);
        int rc = after == NULL ? -1 : PyObject_SetAttr(node, S_next_seq, after);
        Py_XDECREF(after);
        if (rc < 0) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    int w = PyObject_IsTrue(whole);
    if (w < 0) return NULL;
    PyObject *item;
    if (w) {
        item = t;
        Py_INCREF(item);
        PyObject *one = PyTuple_Pack(1, t);
        if (one != NULL) settle(one);
        int rc = one == NULL ? -1 : PyDict_SetItem(items, t, one);
        Py_XDECREF(one);
        if (rc < 0) goto fail_item;
    } else {
        PyObject *item_pos = held(node, S_item_pos);
        if (item_pos == NULL || (item = key_of(t, item_pos)) == NULL) return NULL;
        PyObject *members = PyDict_GetItemWithError(items, item);
        if (members != NULL) {
            if (PyList_Append(members, t) < 0) goto fail_item;
            *is_new = 0;
            return item;
        }
        if (PyErr_Occurred()) goto fail_item;
        PyObject *list = atom_list(1);
        if (list == NULL) goto fail_item;
        Py_INCREF(t);
        PyList_SET_ITEM(list, 0, t);
        int rc = PyDict_SetItem(items, item, list);
        Py_DECREF(list);
        if (rc < 0) goto fail_item;
        unwatch(items);
    }
    if (!PyDict_Check(key_pos) || !PyDict_Check(by_key)) {
        PyErr_SetString(PyExc_TypeError, "a node's key_pos and by_key are dicts");
        goto fail_item;
    }
    Py_ssize_t at = 0;
    PyObject *n, *pos;
    while (PyDict_Next(key_pos, &at, &n, &pos)) {
        PyObject *keyed = item_or_keyerror(by_key, n);
        PyObject *v = keyed == NULL ? NULL : key_of(item, pos);
        if (v == NULL) goto fail_item;
        PyObject *inner = PyDict_GetItemWithError(keyed, v);
        if (inner == NULL) {
            if (PyErr_Occurred() || (inner = PyDict_New()) == NULL) {
                Py_DECREF(v);
                goto fail_item;
            }
            int rc = PyDict_SetItem(keyed, v, inner);
            Py_DECREF(inner);
            if (rc < 0) {
                Py_DECREF(v);
                goto fail_item;
            }
            unwatch(keyed);
        }
        Py_DECREF(v);
        if (PyDict_SetItem(inner, item, Py_None) < 0) goto fail_item;
    }
    *is_new = 1;
    return item;
fail_item:
    Py_DECREF(item);
    return NULL;
}

/* JoinIndex.insert in rounded mode with counts: t into node e (arrival number seq or None), the item
 * re-weighed when it is new or its rounded group size changes; False if t was there. */
static PyObject *k_insert(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "insert(index, e, t, seq)");
        return NULL;
    }
    PyObject *ix = args[0], *t = args[2], *seq = args[3];
    Py_ssize_t e = PyLong_AsSsize_t(args[1]);
    if (e == -1 && PyErr_Occurred()) return NULL;
    settle(t);
    Ctx cx = {0};
    if (open_ctx(&cx, ix) < 0) return NULL;
    PyObject *node = PyList_GetItem(cx.nodes, e);
    PyObject *tuples = node == NULL ? NULL : held(node, S_tuples);
    if (tuples == NULL) return NULL;
    int there = PyDict_Contains(tuples, t);
    if (there < 0) return NULL;
    if (there) Py_RETURN_FALSE;
    int is_new = 0;
    PyObject *item = node_add(node, t, seq, &is_new);
    if (item == NULL) return NULL;
    int rc;
    if (is_new) {
        rc = reweigh(&cx, ix, e, item, ZERO, ONE);
    } else {
        PyObject *items = held(node, S_items);
        PyObject *members = items == NULL ? NULL : item_or_keyerror(items, item);
        Py_ssize_t size = members == NULL ? -1 : PyObject_Size(members);
        PyObject *now = size < 0 ? NULL : PyLong_FromSsize_t(size);
        PyObject *before = size < 0 ? NULL : PyLong_FromSsize_t(size - 1);
        PyObject *old_f = before == NULL ? NULL : nextpow2(before), *f = now == NULL ? NULL : nextpow2(now);
        rc = -1;
        if (old_f != NULL && f != NULL) {
            int differ = PyObject_RichCompareBool(f, old_f, Py_NE);
            rc = differ < 0 ? -1 : differ ? reweigh(&cx, ix, e, item, old_f, f) : 0;
        }
        Py_XDECREF(now);
        Py_XDECREF(before);
        Py_XDECREF(old_f);
        Py_XDECREF(f);
    }
    Py_DECREF(item);
    if (close_ctx(&cx, ix, rc) < 0) return NULL;
    Py_RETURN_TRUE;
}

/* JoinIndex.delta_size: |dJ| of t just inserted into node e (the product of the counts of its
 * neighbours' structures at its keys) and those counts, the radices. */
static PyObject *k_delta_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "delta_size(index, e, t)");
        return NULL;
    }
    PyObject *ix = args[0], *e = args[1], *t = args[2];
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
        PyObject *cnt = d == NULL ? NULL : held(d, S_cnt);
        PyObject *pos = item_or_keyerror(key_pos, c);
        if (cnt == NULL || pos == NULL) goto fail;
        PyObject *v = key_of(item, pos);
        if (v == NULL) goto fail;
        PyObject *r = get_or_zero(cnt, v);
        Py_DECREF(v);
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

/* Mixed-radix digits of z, the first radix most significant (new references in out[]). */
static int digits(PyObject *z, PyObject *radices, PyObject **out) {
    Py_ssize_t n = PyList_GET_SIZE(radices);
    Py_INCREF(z);
    for (Py_ssize_t i = n - 1; i >= 0; i--) {
        PyObject *qr = PyNumber_Divmod(z, PyList_GET_ITEM(radices, i));
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
    PyObject *cnt = held(d, S_cnt), *buckets_of = held(d, S_buckets), *exps_of = held(d, S_exps);
    if (cnt == NULL || buckets_of == NULL || exps_of == NULL) return -1;
    PyObject *c = get_or_zero(cnt, v);
    if (c == NULL) return -1;
    int beyond = PyObject_RichCompareBool(z, c, Py_GE);
    if (beyond != 0) return beyond < 0 ? -1 : 0; /* trailing padding of the key batch */
    PyObject *buckets = item_or_keyerror(buckets_of, v), *exps = item_or_keyerror(exps_of, v);
    if (buckets == NULL || exps == NULL) return -1;
    Py_INCREF(z);
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(exps); j++) {
        PyObject *x = PyList_GET_ITEM(exps, j);
        PyObject *arr = item_or_keyerror(buckets, x);
        PyObject *len = arr == NULL ? NULL : PyLong_FromSsize_t(PyList_GET_SIZE(arr));
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
        PyObject *rcnt = held(PyList_GET_ITEM(p->ds, c), S_rcnt);
        PyObject *r = rcnt == NULL ? NULL : item_or_keyerror(rcnt, k);
        if (r == NULL) goto done;
        Py_INCREF(r);
        PyList_SET_ITEM(radices, j, r);
        PyObject *prod = PyNumber_Multiply(h, r);
        if (prod == NULL) goto done;
        Py_SETREF(h, prod);
    }
    if ((qr = PyNumber_Divmod(z, h)) == NULL) goto done;
    PyObject *items = held(PyList_GET_ITEM(p->nodes, e), S_items);
    PyObject *members = items == NULL ? NULL : item_or_keyerror(items, item);
    if (members == NULL) goto done;
    Py_ssize_t size = PyObject_Size(members);
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
    PyObject *member = PySequence_GetItem(members, idx);
    if (member == NULL) goto done;
    Py_DECREF(member); /* the group keeps it */
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
static PyObject *k_delta_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "delta_get(index, e, t, radices, z)");
        return NULL;
    }
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

static PyObject *k_reweigh(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "reweigh(index, e, item, old_f, f)");
        return NULL;
    }
    Py_ssize_t e = PyLong_AsSsize_t(args[1]);
    if (e == -1 && PyErr_Occurred()) return NULL;
    Ctx cx = {0};
    if (open_ctx(&cx, args[0]) < 0) return NULL;
    int rc = reweigh(&cx, args[0], e, args[2], args[3], args[4]);
    if (close_ctx(&cx, args[0], rc) < 0) return NULL;
    Py_RETURN_NONE;
}

/* tuple(row[c] for c in columns), settled: an event's tuple, ready to enter the relations' dicts. */
static PyObject *k_project(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "project(row, columns: tuple)");
        return NULL;
    }
    PyObject *row = args[0], *columns = args[1];
    Py_ssize_t n = PyTuple_GET_SIZE(columns);
    PyObject *t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyObject_GetItem(row, PyTuple_GET_ITEM(columns, i));
        if (x == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    settle(t);
    return t;
}

static PyMethodDef methods[] = {
    {"project", (PyCFunction)(void (*)(void))k_project, METH_FASTCALL,
     "tuple(row[c] for c in columns), untracked by the garbage collector when it holds atoms only."},
    {"reweigh", (PyCFunction)(void (*)(void))k_reweigh, METH_FASTCALL,
     "Re-weigh an item of node e (factor old_f -> f) in every D[e->*], propagating rounded-count changes."},
    {"insert", (PyCFunction)(void (*)(void))k_insert, METH_FASTCALL,
     "Add tuple t to node e (arrival number seq or None) and re-weigh its item; False if t was there."},
    {"delta_get", (PyCFunction)(void (*)(void))k_delta_get, METH_FASTCALL,
     "Entry z of dJ for tuple t just inserted into node e: a result row, or None for a dummy."},
    {"delta_size", (PyCFunction)(void (*)(void))k_delta_size, METH_FASTCALL,
     "|dJ| of tuple t just inserted into node e, and the radices."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The rounded join index's weight updates, compiled.", -1, methods,
    NULL, NULL, NULL, NULL,
};

#define INTERN(var, text)                                  \
    do {                                                   \
        if ((var = PyUnicode_InternFromString(text)) == NULL) \
            return NULL;                                   \
    } while (0)

PyMODINIT_FUNC PyInit__kernels(void) {
    INTERN(S_key_pos, "key_pos");
    INTERN(S_buckets, "buckets");
    INTERN(S_exps, "exps");
    INTERN(S_where, "where");
    INTERN(S_cnt, "cnt");
    INTERN(S_rcnt, "rcnt");
    INTERN(S_parent, "parent");
    INTERN(S_node, "node");
    INTERN(S_parents, "parents");
    INTERN(S_children, "children");
    INTERN(S_child_pos, "child_pos");
    INTERN(S_idx, "idx");
    INTERN(S_by_key, "by_key");
    INTERN(S_items, "items");
    INTERN(S_ds, "ds");
    INTERN(S_nodes, "nodes");
    INTERN(S_grouped, "grouped");
    INTERN(S_tracking, "tracking");
    INTERN(S_dirty, "dirty");
    INTERN(S_places, "places");
    INTERN(S_propagations, "propagations");
    INTERN(S_out, "out");
    INTERN(S_tuples, "tuples");
    INTERN(S_next_seq, "next_seq");
    INTERN(S_whole, "whole");
    INTERN(S_item_pos, "item_pos");
    INTERN(S_neighbours, "neighbours");
    INTERN(S_into, "into");
    INTERN(S_col_map, "col_map");
    INTERN(S_width, "width");
    INTERN(S_retrieves, "retrieves");
    if ((ZERO = PyLong_FromLong(0)) == NULL || (ONE = PyLong_FromLong(1)) == NULL) return NULL;
    return PyModule_Create(&module);
}
