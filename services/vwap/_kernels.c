/* The vwap engine's per-event loop, compiled: the bag ledger's checks and updates and the netting of a
 * batch per price level (services/vwap/kernels.py holds the same loop in Python, the reference this is
 * tested against and the fallback where this is not built).
 *
 * The loop makes the Python loop's container operations on the ledger and the change log one for one,
 * in the same order (dict lookups, stores and deletes), so the bag and the change log come out identical,
 * iteration order included. The netting per price level is summed in C while its values are
 * 64-bit ints and reaches the netted dict in the order of each level's first event (LevelSums), so the
 * netted levels come out identical too. Arithmetic goes through Python's number protocol (ints and exact
 * Decimals alike); integers that fit in 64 bits take a shortcut that gives the same values.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <structmember.h>

static PyObject *s_relation, *s_row, *s_delta, *s_volume, *s_price, *s_broker_id, *zero;

/* The event's fields. An event type whose fields are plain object slots (a msgspec Struct, a class with
 * __slots__) is read at the slots' offsets, found once per type from its member descriptors; any other
 * object, or a slot that is unset, goes through getattr. */
typedef struct {
    PyTypeObject *type; /* the type the offsets belong to (borrowed, compared by identity), or NULL */
    Py_ssize_t off[3];  /* relation, row, delta; -1 where the field is not an object slot */
} Fields;

static Py_ssize_t slot_offset(PyTypeObject *type, PyObject *name) {
    PyObject *d = _PyType_Lookup(type, name); /* borrowed */
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    return (m->type == T_OBJECT_EX || m->type == T_OBJECT) && !(m->flags & PY_AUDIT_READ) ? m->offset : -1;
}

static PyObject **field_names[3] = {&s_relation, &s_row, &s_delta};

/* Make `f` hold the offsets of ev's type (found once per type). */
static inline void fields_of(Fields *f, PyObject *ev) {
    PyTypeObject *type = Py_TYPE(ev);
    if (f->type != type) {
        for (int j = 0; j < 3; j++) f->off[j] = slot_offset(type, *field_names[j]);
        f->type = type;
    }
}

/* ev.<field k> as a new reference (`f` holds the offsets of ev's type). */
static inline PyObject *field(const Fields *f, PyObject *ev, int k) {
    if (f->off[k] >= 0) {
        PyObject *v = *(PyObject **)((char *)ev + f->off[k]);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(ev, *field_names[k]);
}

/* Exact ints that fit in 64 bits (any other number: 0, and the caller uses the number protocol). An int
 * of one digit is read from its digit, without the general conversion. */
static inline int as_small(PyObject *v, long long *out) {
    if (!PyLong_CheckExact(v)) return 0;
#if PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)v)) {
        *out = (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
        return 1;
    }
#else
    Py_ssize_t size = Py_SIZE(v);
    if (size >= -1 && size <= 1) {
        *out = (long long)size * (long long)((PyLongObject *)v)->ob_digit[0];
        return 1;
    }
#endif
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

static PyObject *add(PyObject *a, PyObject *b) {
    long long x, y, s;
    if (as_small(a, &x) && as_small(b, &y) && !__builtin_add_overflow(x, y, &s)) return PyLong_FromLongLong(s);
    return PyNumber_Add(a, b);
}

static PyObject *in_place_add(PyObject *a, PyObject *b) {
    long long x, y, s;
    if (as_small(a, &x) && as_small(b, &y) && !__builtin_add_overflow(x, y, &s)) return PyLong_FromLongLong(s);
    return PyNumber_InPlaceAdd(a, b);
}

static PyObject *mul(PyObject *a, PyObject *b) {
    long long x, y, p;
    if (as_small(a, &x) && as_small(b, &y) && !__builtin_mul_overflow(x, y, &p)) return PyLong_FromLongLong(p);
    return PyNumber_Multiply(a, b);
}

/* `acc[k] += v` on a list. */
static int list_add(PyObject *acc, Py_ssize_t k, PyObject *v) {
    PyObject *old = PyList_GET_ITEM(acc, k);
    PyObject *sum = in_place_add(old, v);
    if (sum == NULL) return -1;
    PyList_SET_ITEM(acc, k, sum);
    Py_DECREF(old);
    return 0;
}

/* `acc[k] += a * b` on a list: in 64 bits where the operands, the product and the sum fit, else as
 * the Python loop computes it (the product, then the in-place sum). */
static int list_add_product(PyObject *acc, Py_ssize_t k, PyObject *a, PyObject *b) {
    PyObject *old = PyList_GET_ITEM(acc, k);
    long long x, y, z, p, s;
    if (as_small(a, &x) && as_small(b, &y) && as_small(old, &z) && !__builtin_mul_overflow(x, y, &p) &&
        !__builtin_add_overflow(z, p, &s)) {
        PyObject *sum = PyLong_FromLongLong(s);
        if (sum == NULL) return -1;
        PyList_SET_ITEM(acc, k, sum);
        Py_DECREF(old);
        return 0;
    }
    PyObject *prod = mul(a, b);
    if (prod == NULL) return -1;
    int rc = list_add(acc, k, prod);
    Py_DECREF(prod);
    return rc;
}

static int call_reject(PyObject *reject, Py_ssize_t i, PyObject *ev, PyObject *have) {
    PyObject *r = PyObject_CallFunction(reject, "nOO", i, ev, have == NULL ? Py_None : have);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* A batch's netting per price level, summed in C while prices, volumes, deltas and sums are ints held
 * in 64 bits: price -> (Σ delta, Σ delta·volume), the levels in the order of their first event. Flushed
 * into the netted dict (`levels.get(price)`, then a new list or the two sums added to the one there, in
 * that order) before anything else may read the dict: when the loop meets a value outside that range,
 * moves to another relation, hands a refusal to Python, and at its end. Int sums are exact whatever the
 * grouping, so the dict ends with the same keys, in the same order, and the same values as from adding
 * event by event. */
typedef struct {
    PyObject **price; /* the first price object of each level (new references) */
    int64_t *key, *count, *weight;
    Py_ssize_t n, cap;
    int32_t *index; /* open addressing over `mask + 1` slots: a level's position + 1, 0 when empty */
    uint64_t mask;
    int bits;
} LevelSums;

static void sums_free(LevelSums *t) {
    for (Py_ssize_t i = 0; i < t->n; i++) Py_DECREF(t->price[i]);
    PyMem_Free(t->price);
    PyMem_Free(t->key);
    PyMem_Free(t->count);
    PyMem_Free(t->weight);
    PyMem_Free(t->index);
    memset(t, 0, sizeof(*t));
}

static inline uint64_t sums_slot(const LevelSums *t, int64_t k) {
    return ((uint64_t)k * 0x9E3779B97F4A7C15ULL) >> (64 - t->bits);
}

static int sums_grow(LevelSums *t) {
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? 2 * t->cap : 64;
        PyObject **price = PyMem_Realloc(t->price, (size_t)cap * sizeof(PyObject *));
        if (price != NULL) t->price = price;
        int64_t *key = PyMem_Realloc(t->key, (size_t)cap * sizeof(int64_t));
        if (key != NULL) t->key = key;
        int64_t *count = PyMem_Realloc(t->count, (size_t)cap * sizeof(int64_t));
        if (count != NULL) t->count = count;
        int64_t *weight = PyMem_Realloc(t->weight, (size_t)cap * sizeof(int64_t));
        if (weight != NULL) t->weight = weight;
        if (price == NULL || key == NULL || count == NULL || weight == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->cap = cap;
    }
    if (t->index == NULL || (uint64_t)(2 * (t->n + 1)) > t->mask + 1) {
        int bits = t->index == NULL ? 7 : t->bits + 1;
        uint64_t size = (uint64_t)1 << bits;
        int32_t *index = PyMem_Calloc((size_t)size, sizeof(int32_t));
        if (index == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        PyMem_Free(t->index);
        t->index = index;
        t->bits = bits;
        t->mask = size - 1;
        for (Py_ssize_t i = 0; i < t->n; i++) {
            uint64_t j = sums_slot(t, t->key[i]);
            while (index[j]) j = (j + 1) & t->mask;
            index[j] = (int32_t)(i + 1);
        }
    }
    return 0;
}

/* Add (d, dw) to level k: 1 when added, 0 when a sum would leave 64 bits (nothing changed), -1 on an
 * exception. */
static int sums_add(LevelSums *t, PyObject *price, int64_t k, int64_t d, int64_t dw) {
    if (t->index != NULL) {
        for (uint64_t j = sums_slot(t, k); t->index[j]; j = (j + 1) & t->mask) {
            Py_ssize_t i = t->index[j] - 1;
            if (t->key[i] == k) {
                int64_t c, w;
                if (__builtin_add_overflow(t->count[i], d, &c) || __builtin_add_overflow(t->weight[i], dw, &w))
                    return 0;
                t->count[i] = c;
                t->weight[i] = w;
                return 1;
            }
        }
    }
    if (sums_grow(t) < 0) return -1;
    uint64_t j = sums_slot(t, k);
    while (t->index[j]) j = (j + 1) & t->mask;
    Py_ssize_t i = t->n++;
    t->index[j] = (int32_t)(i + 1);
    Py_INCREF(price);
    t->price[i] = price;
    t->key[i] = k;
    t->count[i] = d;
    t->weight[i] = dw;
    return 1;
}

static int list_add(PyObject *acc, Py_ssize_t k, PyObject *v);

/* Move the sums into the netted dict `levels` and empty the table. */
static int sums_flush(LevelSums *t, PyObject *levels) {
    int rc = 0;
    for (Py_ssize_t i = 0; i < t->n && rc == 0; i++) {
        PyObject *c = PyLong_FromLongLong(t->count[i]), *w = c ? PyLong_FromLongLong(t->weight[i]) : NULL;
        PyObject *acc = w ? PyDict_GetItemWithError(levels, t->price[i]) : NULL;
        if (w == NULL || (acc == NULL && PyErr_Occurred())) {
            rc = -1;
        } else if (acc == NULL) {
            PyObject *fresh = PyList_New(2);
            if (fresh == NULL) {
                rc = -1;
            } else {
                PyList_SET_ITEM(fresh, 0, c);
                PyList_SET_ITEM(fresh, 1, w);
                c = w = NULL;
                rc = PyDict_SetItem(levels, t->price[i], fresh);
                Py_DECREF(fresh);
            }
        } else if (!PyList_Check(acc) || PyList_GET_SIZE(acc) != 2) {
            PyErr_SetString(PyExc_TypeError, "a netted level must be a list [count, weight]");
            rc = -1;
        } else {
            Py_INCREF(acc);
            rc = list_add(acc, 0, c) < 0 || list_add(acc, 1, w) < 0 ? -1 : 0;
            Py_DECREF(acc);
        }
        Py_XDECREF(c);
        Py_XDECREF(w);
    }
    for (Py_ssize_t i = 0; i < t->n; i++) Py_DECREF(t->price[i]);
    t->n = 0;
    if (t->index != NULL) memset(t->index, 0, (size_t)(t->mask + 1) * sizeof(int32_t));
    return rc;
}

/* What the loop needs of one relation, looked up once per run of events of that relation. */
typedef struct {
    PyObject *rel;    /* the relation name these fields belong to (a new reference), NULL: none yet */
    PyObject *ledger; /* bag[rel] (borrowed: the bag is not changed while the loop runs) */
    PyObject *cols;   /* columns[rel] as a fast sequence (a new reference) */
    Py_ssize_t iv;    /* position of "volume" and "price" in the columns, -1 where absent */
    Py_ssize_t ip;
    int reads;        /* rel in reads */
    PyObject *levels; /* netted[rel] (a new reference) where rel is read and netted is given */
    LevelSums sums;   /* the levels' sums not yet in `levels` */
    PyObject *touched; /* changed[rel] (a new reference) once an event of rel was valid, with `changed` */
} Rel;

/* Flush the level sums into the netted dict (keeping an exception already raised). */
static int rel_flush(Rel *r) {
    if (r->sums.n == 0) return 0;
    if (!PyErr_Occurred()) return sums_flush(&r->sums, r->levels);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int rc = sums_flush(&r->sums, r->levels);
    if (rc < 0) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    } else {
        PyErr_Restore(type, value, tb);
    }
    return rc;
}

/* Let go of the relation, its level sums flushed first. */
static int rel_clear(Rel *r) {
    int rc = rel_flush(r);
    Py_CLEAR(r->rel);
    Py_CLEAR(r->cols);
    Py_CLEAR(r->levels);
    Py_CLEAR(r->touched);
    r->ledger = NULL;
    return rc;
}

static Py_ssize_t position(PyObject *cols, PyObject *name) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(cols);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *c = PySequence_Fast_GET_ITEM(cols, k);
        if (c == name || (PyUnicode_Check(c) && PyUnicode_Compare(c, name) == 0)) return k;
    }
    return -1;
}

/* Point `r` at relation `rel`: 1 when it is one of the bag's, 0 when not, -1 on an exception. */
static int rel_load(Rel *r, PyObject *rel, PyObject *bag, PyObject *columns, PyObject *reads, PyObject *netted) {
    if (r->rel != NULL) {
        if (r->rel == rel) return 1;
        int same = PyObject_RichCompareBool(r->rel, rel, Py_EQ);
        if (same < 0) return -1;
        if (same) return 1;
    }
    if (rel_clear(r) < 0) return -1;
    PyObject *ledger = PyDict_GetItemWithError(bag, rel);
    if (ledger == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!PyDict_Check(ledger)) {
        PyErr_SetString(PyExc_TypeError, "a ledger must be a dict");
        return -1;
    }
    PyObject *cols = PyObject_GetItem(columns, rel);
    if (cols == NULL) return -1;
    r->cols = PySequence_Fast(cols, "columns must be a sequence");
    Py_DECREF(cols);
    if (r->cols == NULL) return -1;
    r->iv = position(r->cols, s_volume);
    r->ip = position(r->cols, s_price);
    if (PyErr_Occurred()) goto fail;
    r->reads = PySequence_Contains(reads, rel);
    if (r->reads < 0) goto fail;
    if (r->reads && netted != Py_None) {
        r->levels = PyObject_GetItem(netted, rel);
        if (r->levels == NULL) goto fail;
        if (!PyDict_Check(r->levels)) {
            PyErr_SetString(PyExc_TypeError, "netted levels must be dicts");
            goto fail;
        }
    }
    r->ledger = ledger;
    Py_INCREF(rel);
    r->rel = rel;
    return 1;
fail:
    (void)rel_clear(r);
    return -1;
}

/* row[name], or vals[k] where the columns hold it at k (the same object): a new reference. */
static PyObject *column(PyObject *row, PyObject *vals, Py_ssize_t k, PyObject *name) {
    if (vals != NULL && k >= 0) {
        PyObject *v = PyTuple_GET_ITEM(vals, k);
        Py_INCREF(v);
        return v;
    }
    return PyObject_GetItem(row, name);
}

/* Whether a book row passes: volume > 0 and, with `brokers`, 0 <= broker_id < brokers (1 yes, 0 no). */
static int book_row_ok(PyObject *row, PyObject *vals, Py_ssize_t iv, PyObject *brokers) {
    PyObject *vol = column(row, vals, iv, s_volume);
    if (vol == NULL) return -1;
    long long x;
    int ok = as_small(vol, &x) ? x > 0 : PyObject_RichCompareBool(vol, zero, Py_GT);
    Py_DECREF(vol);
    if (ok <= 0 || brokers == Py_None) return ok;
    PyObject *g = PyObject_GetItem(row, s_broker_id);
    if (g == NULL) return -1;
    ok = PyObject_RichCompareBool(zero, g, Py_LE);
    if (ok > 0) ok = PyObject_RichCompareBool(g, brokers, Py_LT);
    Py_DECREF(g);
    return ok;
}

/* The row's values in the order of `cols`, as a tuple (the ledger's key). A dict row whose keys come in
 * the columns' order, as the same string objects, is read by walking its entries; from the first key that
 * is not the column's, the rest are looked up. A key tuple of numbers and strings cannot be part of a
 * reference cycle, so the garbage collector is not made to track it (as it would stop doing itself). */
static PyObject *row_values(PyObject *row, PyObject *cols) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(cols);
    PyObject *vals = PyTuple_New(n);
    if (vals == NULL) return NULL;
    int walk = PyDict_CheckExact(row), atomic = 1;
    Py_ssize_t pos = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *c = PySequence_Fast_GET_ITEM(cols, k), *v, *key;
        if (walk && !(PyDict_Next(row, &pos, &key, &v) && key == c)) walk = 0;
        if (walk) {
            Py_INCREF(v);
        } else if (PyDict_CheckExact(row)) {
            v = PyDict_GetItemWithError(row, c);
            if (v == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, c);
            Py_XINCREF(v);
        } else {
            v = PyObject_GetItem(row, c);
        }
        if (v == NULL) {
            Py_DECREF(vals);
            return NULL;
        }
        atomic &= !PyType_IS_GC(Py_TYPE(v));
        PyTuple_SET_ITEM(vals, k, v);
    }
    if (atomic) PyObject_GC_UnTrack(vals);
    return vals;
}

/* levels[price] += [delta, delta·volume]: in the level sums where every value is an int in 64 bits,
 * else (the sums flushed first) on the dict. */
static int net_level(Rel *r, PyObject *row, PyObject *vals, PyObject *delta) {
    PyObject *price = column(row, vals, r->ip, s_price);
    if (price == NULL) return -1;
    int rc = -1;
    PyObject *vol = NULL, *dw = NULL;
    long long k, d, v, w;
    if (vals != NULL && r->iv >= 0 && as_small(price, &k) && as_small(delta, &d) &&
        as_small(PyTuple_GET_ITEM(vals, r->iv), &v) && !__builtin_mul_overflow(d, v, &w)) {
        rc = sums_add(&r->sums, price, k, d, w);
        if (rc != 0) {
            Py_DECREF(price);
            return rc < 0 ? -1 : 0;
        }
        rc = -1;
    }
    if (rel_flush(r) < 0) goto done;
    PyObject *acc = PyDict_GetItemWithError(r->levels, price);
    if (acc == NULL && PyErr_Occurred()) goto done;
    if (acc != NULL && (!PyList_Check(acc) || PyList_GET_SIZE(acc) != 2)) {
        PyErr_SetString(PyExc_TypeError, "a netted level must be a list [count, weight]");
        goto done;
    }
    if (acc == NULL) {
        vol = column(row, vals, r->iv, s_volume);
        if (vol == NULL || (dw = mul(delta, vol)) == NULL) goto done;
        PyObject *fresh = PyList_New(2);
        if (fresh == NULL) goto done;
        Py_INCREF(delta);
        PyList_SET_ITEM(fresh, 0, delta);
        PyList_SET_ITEM(fresh, 1, dw);
        dw = NULL;
        rc = PyDict_SetItem(r->levels, price, fresh);
        Py_DECREF(fresh);
        goto done;
    }
    Py_INCREF(acc);
    if (list_add(acc, 0, delta) == 0 && (vol = column(row, vals, r->iv, s_volume)) != NULL)
        rc = list_add_product(acc, 1, delta, vol);
    Py_DECREF(acc);
done:
    Py_XDECREF(dw);
    Py_XDECREF(vol);
    Py_DECREF(price);
    return rc;
}

typedef struct {
    PyObject *bag, *columns, *reads, *netted, *update, *changed, *brokers, *reject;
    int book;
    Fields *fields;
} Pass;

/* The running Σ delta: int deltas summed in 64 bits (`small`) while they fit, into `obj` otherwise; once
 * `obj` is not an int (a decimal delta), every delta is added to it in order, as the Python loop does. */
typedef struct {
    PyObject *obj;
    long long small;
} Net;

static int fold_net(Net *net) {
    if (net->small == 0) return 0;
    PyObject *s = PyLong_FromLongLong(net->small);
    if (s == NULL) return -1;
    PyObject *sum = PyNumber_Add(net->obj, s);
    Py_DECREF(s);
    if (sum == NULL) return -1;
    Py_SETREF(net->obj, sum);
    net->small = 0;
    return 0;
}

static int add_net(Net *net, PyObject *delta) {
    long long d, s;
    if (PyLong_CheckExact(net->obj) && as_small(delta, &d) && !__builtin_add_overflow(net->small, d, &s)) {
        net->small = s;
        return 0;
    }
    if (fold_net(net) < 0) return -1;
    PyObject *sum = add(net->obj, delta);
    if (sum == NULL) return -1;
    Py_SETREF(net->obj, sum);
    return 0;
}

/* changed[rel], made empty where absent: a new reference. */
static PyObject *touched_of(PyObject *changed, PyObject *rel) {
    PyObject *t = PyDict_GetItemWithError(changed, rel);
    if (t == NULL) {
        if (PyErr_Occurred() || (t = PyDict_New()) == NULL) return NULL;
        if (PyDict_SetItem(changed, rel, t) < 0) Py_CLEAR(t);
        return t;
    }
    if (!PyDict_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "changed must map each relation to a dict");
        return NULL;
    }
    Py_INCREF(t);
    return t;
}

/* One event; 0 when applied or rejected, -1 on an exception. */
static int apply_one(const Pass *p, Rel *r, Py_ssize_t i, PyObject *ev, Net *net) {
    PyObject *row = NULL, *delta = NULL, *vals = NULL, *new = NULL;
    int rc = -1;
    fields_of(p->fields, ev);
    PyObject *rel = field(p->fields, ev, 0);
    if (rel == NULL) return -1;
    int known = rel_load(r, rel, p->bag, p->columns, p->reads, p->netted);
    if (known <= 0) {
        rc = known < 0 ? -1 : call_reject(p->reject, i, ev, NULL);
        goto done;
    }
    row = field(p->fields, ev, 1);
    if (row == NULL) goto done;
    delta = field(p->fields, ev, 2);
    if (delta == NULL) goto done;
    vals = row_values(row, r->cols);
    if (vals == NULL) goto done;
    if (p->book) {
        int ok = book_row_ok(row, vals, r->iv, p->brokers);
        if (ok < 0) goto done;
        if (!ok) {
            rc = rel_flush(r) < 0 ? -1 : call_reject(p->reject, i, ev, NULL);
            goto done;
        }
    }
    /* The tuple is hashed once, for the lookup and the store or delete. */
    Py_hash_t hash = PyObject_Hash(vals);
    if (hash == -1) goto done;
    PyObject *have = _PyDict_GetItem_KnownHash(r->ledger, vals, hash);
    int was_live = have != NULL; /* the ledger holds live tuples only */
    if (have == NULL) {
        if (PyErr_Occurred()) goto done;
        have = zero;
    }
    Py_INCREF(have);
    long long h, d, m;
    int neg, live;
    if (as_small(have, &h) && as_small(delta, &d) && !__builtin_add_overflow(h, d, &m)) {
        neg = m < 0;
        live = m != 0;
        new = neg ? NULL : PyLong_FromLongLong(m);
        if (new == NULL && !neg) neg = -1;
    } else {
        new = add(have, delta);
        neg = new == NULL ? -1 : PyObject_RichCompareBool(new, zero, Py_LT);
        live = neg == 0 ? PyObject_IsTrue(new) : 0;
    }
    if (neg != 0) {
        rc = neg < 0 || rel_flush(r) < 0 ? -1 : call_reject(p->reject, i, ev, have);
        Py_DECREF(have);
        goto done;
    }
    Py_DECREF(have);
    if (live < 0) goto done;
    if ((live ? _PyDict_SetItem_KnownHash(r->ledger, vals, new, hash)
              : _PyDict_DelItem_KnownHash(r->ledger, vals, hash)) < 0)
        goto done;
    if (p->changed != Py_None) { /* changed.setdefault(rel, {}).setdefault(vals, was_live), hash known */
        if (r->touched == NULL && (r->touched = touched_of(p->changed, rel)) == NULL) goto done;
        PyObject *first = _PyDict_GetItem_KnownHash(r->touched, vals, hash);
        if (first == NULL &&
            (PyErr_Occurred() ||
             _PyDict_SetItem_KnownHash(r->touched, vals, was_live ? Py_True : Py_False, hash) < 0))
            goto done;
    }
    if (add_net(net, delta) < 0) goto done;
    if (r->reads) {
        if (r->levels != NULL) {
            if (net_level(r, row, vals, delta) < 0) goto done;
        } else if (p->update != Py_None) {
            PyObject *res = PyObject_CallFunctionObjArgs(p->update, rel, row, delta, NULL);
            if (res == NULL) goto done;
            Py_DECREF(res);
        }
    }
    rc = 0;
done:
    Py_XDECREF(new);
    Py_XDECREF(vals);
    Py_XDECREF(delta);
    Py_XDECREF(row);
    Py_DECREF(rel);
    return rc;
}

static PyObject *ledger_pass(PyObject *self, PyObject *args) {
    (void)self;
    Pass p;
    PyObject *events;
    if (!PyArg_ParseTuple(args, "OO!OOOOOpOO:ledger_pass", &events, &PyDict_Type, &p.bag, &p.columns, &p.reads,
                          &p.netted, &p.update, &p.changed, &p.book, &p.brokers, &p.reject))
        return NULL;
    if (p.changed != Py_None && !PyDict_Check(p.changed)) {
        PyErr_SetString(PyExc_TypeError, "changed must be a dict or None");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(events, "events must be a sequence");
    if (fast == NULL) return NULL;
    Rel r;
    memset(&r, 0, sizeof(r));
    r.iv = r.ip = -1;
    Fields fields = {NULL, {-1, -1, -1}};
    p.fields = &fields;
    Net net = {zero, 0};
    Py_INCREF(zero);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) rc = apply_one(&p, &r, i, PySequence_Fast_GET_ITEM(fast, i), &net);
    if (rc == 0) rc = fold_net(&net);
    if (rel_clear(&r) < 0) rc = -1;
    sums_free(&r.sums);
    if (rc < 0) Py_CLEAR(net.obj);
    Py_DECREF(fast);
    return net.obj;
}

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

static PyTypeObject LevelTreeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ivmstream.services.vwap._kernels.LevelTree",
    .tp_basicsize = sizeof(LevelTree),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Price levels (price -> W, PV) with prefix and suffix sums, integers within 2^62.",
    .tp_new = lt_new,
    .tp_dealloc = (destructor)lt_dealloc,
    .tp_methods = lt_methods,
    .tp_as_sequence = &lt_as_sequence,
};

/* The decimal text of x at out (at least 20 bytes); its length. */
static Py_ssize_t put_ll(char *out, long long x) {
    char tmp[24];
    Py_ssize_t n = 0, len = 0;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    do {
        tmp[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (x < 0) out[len++] = '-';
    while (n) out[len++] = tmp[--n];
    return len;
}

/* JSON bytes of the int v when it fits in 64 bits (a new reference), else value_of(v). */
static PyObject *int_json(PyObject *v, PyObject *value_of) {
    long long x;
    if (as_small(v, &x)) {
        char buf[24];
        return PyBytes_FromStringAndSize(buf, put_ll(buf, x));
    }
    return PyObject_CallOneArg(value_of, v);
}

/* One ledger tuple's state key: prefix (`["<rel>",`), its values and `]` when every value is an int in 64
 * bits (the text orjson gives such a list), else key_of(vals). A new reference. */
static PyObject *entry_key(PyObject *vals, const char *prefix, Py_ssize_t plen, PyObject *key_of) {
    char buf[512];
    Py_ssize_t n = PyTuple_Check(vals) ? PyTuple_GET_SIZE(vals) : 0;
    if (n == 0 || plen + 21 * n + 1 > (Py_ssize_t)sizeof(buf)) return PyObject_CallOneArg(key_of, vals);
    memcpy(buf, prefix, (size_t)plen);
    Py_ssize_t len = plen;
    for (Py_ssize_t k = 0; k < n; k++) {
        long long x;
        if (!as_small(PyTuple_GET_ITEM(vals, k), &x)) return PyObject_CallOneArg(key_of, vals);
        if (k) buf[len++] = ',';
        len += put_ll(buf + len, x);
    }
    buf[len++] = ']';
    return PyBytes_FromStringAndSize(buf, len);
}

/* bag_entries(ledger, touched, tag, prefix, key_of, value_of): kernels.py_bag_entries, compiled. */
static PyObject *bag_entries(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ledger, *touched, *tag, *prefix, *key_of, *value_of;
    if (!PyArg_ParseTuple(args, "O!OOO!OO:bag_entries", &PyDict_Type, &ledger, &touched, &tag, &PyBytes_Type,
                          &prefix, &key_of, &value_of))
        return NULL;
    const char *pre = PyBytes_AS_STRING(prefix);
    Py_ssize_t plen = PyBytes_GET_SIZE(prefix);
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    PyObject *keys = touched == Py_None ? ledger : touched;
    if (!PyDict_Check(keys)) {
        PyErr_SetString(PyExc_TypeError, "touched must be a dict or None");
        goto fail;
    }
    Py_ssize_t pos = 0;
    PyObject *vals, *m, *was = NULL;
    Py_hash_t hash;
    while (_PyDict_Next(keys, &pos, &vals, &m, &hash)) {
        if (touched != Py_None) { /* the change log holds the tuple's hash: it is not computed again */
            was = m;                                           /* live at the checkpoint */
            m = _PyDict_GetItem_KnownHash(ledger, vals, hash); /* borrowed; NULL: no longer live */
            if (m == NULL && PyErr_Occurred()) goto fail;
        }
        int truth = m == NULL ? 0 : PyObject_IsTrue(m);
        if (truth < 0) goto fail;
        if (!truth && touched != Py_None) { /* no longer live: skipped where not live at the checkpoint either */
            int stored = PyObject_IsTrue(was);
            if (stored < 0) goto fail;
            if (!stored) continue;
        }
        PyObject *key = entry_key(vals, pre, plen, key_of);
        if (key == NULL) goto fail;
        PyObject *value = Py_None;
        if (truth && (value = int_json(m, value_of)) == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        if (!truth) Py_INCREF(value);
        PyObject *entry = PyTuple_Pack(3, tag, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (entry == NULL) goto fail;
        int rc = PyList_Append(out, entry);
        Py_DECREF(entry);
        if (rc < 0) goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"ledger_pass", ledger_pass, METH_VARARGS,
     "ledger_pass(events, bag, columns, reads, netted, update, changed, book, brokers, reject) -> net: "
     "the compiled kernels.py_ledger_pass."},
    {"bag_entries", bag_entries, METH_VARARGS,
     "bag_entries(ledger, touched, tag, prefix, key_of, value_of) -> [(tag, key, value)]: the compiled "
     "kernels.py_bag_entries."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kernels(void) {
    s_relation = PyUnicode_InternFromString("relation");
    s_row = PyUnicode_InternFromString("row");
    s_delta = PyUnicode_InternFromString("delta");
    s_volume = PyUnicode_InternFromString("volume");
    s_price = PyUnicode_InternFromString("price");
    s_broker_id = PyUnicode_InternFromString("broker_id");
    zero = PyLong_FromLong(0);
    if (!s_relation || !s_row || !s_delta || !s_volume || !s_price || !s_broker_id || !zero) return NULL;
    if (PyType_Ready(&LevelTreeType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&LevelTreeType);
    if (PyModule_AddObject(m, "LevelTree", (PyObject *)&LevelTreeType) < 0) {
        Py_DECREF(&LevelTreeType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
