/* The rounded join index's weight updates, compiled (services/reservoir/index.py holds the same steps
 * in Python, `JoinIndex._reweigh` and the methods it calls: the reference these are tested against and
 * the fallback where this is not built).
 *
 * `reweigh` re-weighs one item of node e in every structure D[e->*]: its weight there is its children's
 * rounded counts times f (was old_f); the item moves between the exponent buckets of its key, the key's
 * count changes, and when the key's rounded count changes the change travels to the parent items with
 * that key, in every parent structure, recursively. It works on the index's own dicts and lists,
 * performing the Python steps' container operations one for one (same insertion and removal
 * positions), so the buckets' order, and so every later sample, is the same. Weights and counts are
 * Python ints of any size.
 */
#include "_kernels.h"

/* w.bit_length() - 1 (w > 0): the exponent of a power-of-two weight, its bucket's position; -1 on an
 * error. */
static Py_ssize_t exponent(PyObject *w) {
    size_t bits = _PyLong_NumBits(w);
    if (bits == (size_t)-1 && PyErr_Occurred()) return -1;
    if (bits == 0 || bits > (size_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_ValueError, "a weight is a positive power of two");
        return -1;
    }
    return (Py_ssize_t)(bits - 1);
}

/* 1 << (c - 1).bit_length(), the smallest power of two >= c (c > 0), a new reference. */
PyObject *nextpow2(PyObject *c) {
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

/* Key v's record in a structure's recs (borrowed), NULL without an error when the key is not held. */
static PyObject *record(PyObject *recs, PyObject *v) {
    PyObject *rec = PyDict_GetItemWithError(recs, v);
    if (rec != NULL && (!PyList_CheckExact(rec) || PyList_GET_SIZE(rec) != REC_FIELDS)) {
        PyErr_SetString(PyExc_TypeError, "a key's record is a list [cnt, rcnt, buckets, exps, where]");
        return NULL;
    }
    return rec;
}

/* A new key's record [0, 0, [], [], {}], untracked, stored in recs (borrowed). */
static PyObject *new_record(PyObject *recs, PyObject *v) {
    PyObject *rec = atom_list(REC_FIELDS), *per = atom_list(0), *exps = atom_list(0), *where = PyDict_New();
    if (rec == NULL || per == NULL || exps == NULL || where == NULL) {
        Py_XDECREF(rec);
        Py_XDECREF(per);
        Py_XDECREF(exps);
        Py_XDECREF(where);
        return NULL;
    }
    unwatch(where);
    PyList_SET_ITEM(rec, REC_CNT, Py_NewRef(ZERO));
    PyList_SET_ITEM(rec, REC_RCNT, Py_NewRef(ZERO));
    PyList_SET_ITEM(rec, REC_BUCKETS, per);
    PyList_SET_ITEM(rec, REC_EXPS, exps);
    PyList_SET_ITEM(rec, REC_WHERE, where);
    int rc = PyDict_SetItem(recs, v, rec);
    Py_DECREF(rec);
    if (rc < 0) return NULL;
    unwatch(recs);
    return rec;
}

/* Replace a record's field with a new reference to x. */
static void set_field(PyObject *rec, Py_ssize_t i, PyObject *x) {
    PyObject *old = PyList_GET_ITEM(rec, i);
    PyList_SET_ITEM(rec, i, Py_NewRef(x));
    Py_DECREF(old);
}

/* The index in a sorted list of exponents (small Python ints) where x goes after its equals (append,
 * then sort); -1 on an error. */
static Py_ssize_t sorted_slot(PyObject *list, Py_ssize_t x) {
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(list);
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        Py_ssize_t at = PyLong_AsSsize_t(PyList_GET_ITEM(list, mid));
        if (at == -1 && PyErr_Occurred()) return -1;
        if (x < at) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* JoinIndex._bucket_add: the item at the end of bucket x of its key's record (the buckets' list grown to
 * hold position x, a new bucket's exponent entered in order). */
static int bucket_add(PyObject *rec, Py_ssize_t x, PyObject *item) {
    PyObject *per = PyList_GET_ITEM(rec, REC_BUCKETS), *where = PyList_GET_ITEM(rec, REC_WHERE);
    if (!PyList_CheckExact(per)) {
        PyErr_SetString(PyExc_TypeError, "a key's buckets are a list indexed by exponent");
        return -1;
    }
    while (PyList_GET_SIZE(per) <= x)
        if (PyList_Append(per, Py_None) < 0) return -1;
    PyObject *arr = PyList_GET_ITEM(per, x);
    if (arr == Py_None) {
        arr = atom_list(0);
        if (arr == NULL) return -1;
        PyList_SET_ITEM(per, x, arr); /* steals arr; the reference to None it replaces is released */
        Py_DECREF(Py_None);
        PyObject *exps = PyList_GET_ITEM(rec, REC_EXPS);
        Py_ssize_t at = sorted_slot(exps, x);
        PyObject *xo = at < 0 ? NULL : PyLong_FromSsize_t(x);
        int rc = xo == NULL ? -1 : PyList_Insert(exps, at, xo);
        Py_XDECREF(xo);
        if (rc < 0) return -1;
    } else if (!PyList_CheckExact(arr)) {
        PyErr_SetString(PyExc_TypeError, "a bucket is a list of items");
        return -1;
    }
    PyObject *slot = PyLong_FromSsize_t(PyList_GET_SIZE(arr));
    if (slot == NULL) return -1;
    int rc = PyDict_SetItem(where, item, slot);
    Py_DECREF(slot);
    if (rc < 0) return -1;
    return PyList_Append(arr, item);
}

/* JoinIndex._bucket_remove: the item out of bucket x, the bucket's last item moved into its place; an
 * emptied bucket's position goes back to None and its exponent leaves the sorted ones. `moving`: the
 * item's position entry stays, for the bucket it moves to to overwrite. */
static int bucket_remove(PyObject *rec, Py_ssize_t x, PyObject *item, int moving) {
    PyObject *per = PyList_GET_ITEM(rec, REC_BUCKETS), *where = PyList_GET_ITEM(rec, REC_WHERE);
    PyObject *arr = PyList_CheckExact(per) && x < PyList_GET_SIZE(per) ? PyList_GET_ITEM(per, x) : NULL;
    if (arr == NULL || !PyList_CheckExact(arr) || PyList_GET_SIZE(arr) == 0) {
        PyErr_SetString(PyExc_KeyError, "no such bucket");
        return -1;
    }
    PyObject *slot = moving ? Py_XNewRef(item_or_keyerror(where, item)) : pop_item(where, item);
    if (slot == NULL) return -1;
    Py_ssize_t i = PyLong_AsSsize_t(slot);
    Py_DECREF(slot);
    if (i == -1 && PyErr_Occurred()) return -1;
    Py_ssize_t n = PyList_GET_SIZE(arr);
    if (i < 0 || i >= n) {
        PyErr_SetString(PyExc_IndexError, "an item's position beyond its bucket");
        return -1;
    }
    /* arr.pop(), then arr[i] = last when i was not the last: the list's own slots, written in place */
    PyObject **slots = ((PyListObject *)arr)->ob_item, *last = slots[n - 1];
    slots[n - 1] = NULL;
    Py_SET_SIZE(arr, n - 1);
    if (i < n - 1) {
        PyObject *moved = PyLong_FromSsize_t(i);
        if (moved == NULL) {
            slots[n - 1] = last; /* put back as it was */
            Py_SET_SIZE(arr, n);
            return -1;
        }
        PyObject *gone = slots[i];
        slots[i] = last; /* the list takes the reference the pop handed out */
        Py_DECREF(gone);
        int rc = PyDict_SetItem(where, last, moved);
        Py_DECREF(moved);
        if (rc < 0) return -1;
    } else {
        Py_DECREF(last);
    }
    if (PyList_GET_SIZE(arr) == 0) {
        if (PyList_SetItem(per, x, Py_NewRef(Py_None)) < 0) return -1; /* releases the empty bucket */
        PyObject *exps = PyList_GET_ITEM(rec, REC_EXPS);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(exps); j++) {
            Py_ssize_t at = PyLong_AsSsize_t(PyList_GET_ITEM(exps, j));
            if (at == -1 && PyErr_Occurred()) return -1;
            if (at == x) return PyList_SetSlice(exps, j, j + 1, NULL);
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
        PyObject *recs = held(PyList_GET_ITEM(cx->ds, c), S_recs);
        if (recs == NULL) goto fail;
        PyObject *pos = PyList_GET_ITEM(child_pos, j);
        PyObject *k = key_at(cx->keys, item, pos);
        if (k == NULL) goto fail;
        PyObject *rec = record(recs, k);
        Py_DECREF(k);
        if (rec != NULL || !PyErr_Occurred()) keys_keep_record(cx->keys, item, recs, pos, rec);
        if (rec == NULL) {
            if (PyErr_Occurred()) goto fail;
            Py_SETREF(w, Py_NewRef(ZERO));
            break;
        }
        PyObject *prod = PyNumber_Multiply(w, PyList_GET_ITEM(rec, REC_RCNT));
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
    PyObject *by_key = held(node, S_by_key), *items = held(node, S_items), *whole = held(node, S_whole);
    PyObject *parents = held(d, S_parents);
    if (by_key == NULL || items == NULL || whole == NULL || parents == NULL) return -1;
    int alone = PyObject_IsTrue(whole); /* every item its one tuple, not held in `items` */
    if (alone < 0) return -1;
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
        /* the matching items in order, read in place: a placement changes structures, never a node store
         * (a change of the set under the walk is refused, as Python's dict iteration refuses it) */
        Py_INCREF(matching);
        Py_ssize_t at = 0, size_before = PyDict_GET_SIZE(matching);
        PyObject *item, *ignored;
        while (PyDict_Next(matching, &at, &item, &ignored)) {
            cx->propagations++;
            PyObject *f = ONE;
            Py_INCREF(f);
            if (cx->grouped && !alone) {
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
            long long ov = 0;
            int nz = small_count(o, &ov) ? ov != 0 : PyObject_IsTrue(o);
            int rc = nz;
            if (nz > 0) {
                PyObject *a = ov == 1 ? Py_NewRef(old) : PyNumber_Multiply(old, o);
                PyObject *b = ov == 1 ? Py_NewRef(new_) : PyNumber_Multiply(new_, o);
                rc = (a == NULL || b == NULL) ? -1 : place(cx, parent, item, a, b);
                Py_XDECREF(a);
                Py_XDECREF(b);
            }
            Py_DECREF(o);
            if (rc < 0) goto fail;
            if (PyDict_GET_SIZE(matching) != size_before) {
                PyErr_SetString(PyExc_RuntimeError, "a node's key -> items map changed during a propagation");
                goto fail;
            }
        }
        Py_DECREF(matching);
        continue;
    fail:
        Py_DECREF(matching);
        return -1;
    }
    return 0;
}

/* JoinIndex._place in rounded mode: the item's weight under its key goes from w_old to w_new. */
static int place(Ctx *cx, PyObject *d, PyObject *item, PyObject *w_old, PyObject *w_new) {
    cx->places++;
    PyObject *recs = held(d, S_recs), *key_pos = held(d, S_key_pos);
    if (recs == NULL || key_pos == NULL) return -1;
    PyObject *v = key_at(cx->keys, item, key_pos);
    if (v == NULL) return -1;
    PyObject *old_r = NULL, *c = NULL, *new_r = NULL;
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
    PyObject *rec = record(recs, v); /* the key's one record: its counts and buckets */
    if (rec == NULL && PyErr_Occurred()) goto done;
    /* the record stays alive through the call: recs holds it until the key goes, and then so do we */
    Py_XINCREF(rec);
    if (old_nz) {
        if (rec == NULL) {
            PyErr_SetObject(PyExc_KeyError, v);
            goto done;
        }
        Py_ssize_t x = exponent(w_old);
        if (x < 0 || bucket_remove(rec, x, item, new_nz) < 0) goto done_rec;
    }
    if (new_nz) {
        if (rec == NULL) {
            if ((rec = new_record(recs, v)) == NULL) goto done;
            Py_INCREF(rec);
        }
        Py_ssize_t x = exponent(w_new);
        if (x < 0 || bucket_add(rec, x, item) < 0) goto done_rec;
    }
    if (rec == NULL) {
        PyErr_SetString(PyExc_AssertionError, "a placement of weight 0 over weight 0");
        goto done;
    }
    old_r = Py_NewRef(PyList_GET_ITEM(rec, REC_RCNT)); /* read before the count changes */
    long long n0, a, b, r0;
    if (small_count(PyList_GET_ITEM(rec, REC_CNT), &n0) && small_count(w_old, &a) && small_count(w_new, &b) &&
        small_count(old_r, &r0) && n0 + b - a >= 0 && n0 + b - a <= SMALL_COUNT_MAX) {
        /* the same steps on C integers: no Python int made for a count whose rounding stays */
        long long cl = n0 + b - a, p = 1;
        if (cl) {
            if ((c = PyLong_FromLongLong(cl)) == NULL) goto done_rec;
            set_field(rec, REC_CNT, c);
            while (p < cl) p <<= 1;
            if (p == r0) {
                rc = 0;
                goto done_rec;
            }
            if ((new_r = PyLong_FromLongLong(p)) == NULL) goto done_rec;
        } else { /* the key is gone from this structure (deletes only) */
            if (PyDict_DelItem(recs, v) < 0) goto done_rec;
            if (r0 == 0) {
                rc = 0;
                goto done_rec;
            }
            new_r = Py_NewRef(ZERO);
        }
        set_field(rec, REC_RCNT, new_r);
        if (propagate(cx, d, v, old_r, new_r) < 0) goto done_rec;
        rc = 0;
        goto done_rec;
    }
    PyObject *sum = PyNumber_Add(PyList_GET_ITEM(rec, REC_CNT), w_new);
    if (sum == NULL) goto done_rec;
    c = PyNumber_Subtract(sum, w_old);
    Py_DECREF(sum);
    if (c == NULL) goto done_rec;
    int c_nz = PyObject_IsTrue(c);
    if (c_nz < 0) goto done_rec;
    if (c_nz) {
        set_field(rec, REC_CNT, c);
        if ((new_r = nextpow2(c)) == NULL) goto done_rec;
    } else { /* the key is gone from this structure (deletes only) */
        if (PyDict_DelItem(recs, v) < 0) goto done_rec;
        new_r = Py_NewRef(ZERO);
    }
    int differ = PyObject_RichCompareBool(new_r, old_r, Py_NE);
    if (differ < 0) goto done_rec;
    if (differ) {
        set_field(rec, REC_RCNT, new_r);
        if (propagate(cx, d, v, old_r, new_r) < 0) goto done_rec;
    }
    rc = 0;
done_rec:
    Py_XDECREF(rec);
done:
    Py_DECREF(v);
    Py_XDECREF(old_r);
    Py_XDECREF(c);
    Py_XDECREF(new_r);
    return rc;
}

/* The context of one call on the index: its structures, node stores and what it tracks. */
int open_ctx(Ctx *cx, PyObject *ix) {
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

int close_ctx(Ctx *cx, PyObject *ix, int rc) {
    if (bump_counter(ix, S_places, cx->places) < 0 || bump_counter(ix, S_propagations, cx->propagations) < 0)
        return -1;
    return rc;
}

/* The loop of JoinIndex._reweigh over the structures D[e->*]. */
int reweigh(Ctx *cx, PyObject *ix, Py_ssize_t e, PyObject *item, PyObject *old_f, PyObject *f) {
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
