/* A run of plain inserts, compiled: `ReservoirEngine.apply`'s steps for the events a sampling engine
 * takes without a question (a new tuple, delta 1, every alias its own index node, no declared key), one
 * call for the run instead of a Python frame per event, alias and sampler update. It stops at the first
 * event it would have to judge (anything else: a duplicate, a delete, a bad delta or row, an alias with a
 * bag) and returns its position: the engine handles that one in Python, rejections and all, then calls
 * again. The steps are the Python ones (engine.py's `_add_rel`, `_insert_alias`, `_insert_node`, and the
 * skip of `Reservoir.update`) in the same order on the same containers, so the relations, the log, the
 * index and every draw of the sampler's generator are those of the Python path.
 */
#include "_kernels.h"

/* The attribute names read here, interned on first use. */
static PyObject *A_relation, *A_row, *A_delta, *A_rel_seq, *A_counters, *A_events, *A_inserts, *A_w,
    *A_sample, *A_k, *A_q, *A_batches, *A_items, *A_update;

static int intern_names(void) {
    if (A_update != NULL) return 0;
#define INTERN(var, text) \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    INTERN(A_relation, "relation")
    INTERN(A_row, "row")
    INTERN(A_delta, "delta")
    INTERN(A_rel_seq, "rel_seq")
    INTERN(A_counters, "counters")
    INTERN(A_events, "events")
    INTERN(A_inserts, "inserts")
    INTERN(A_w, "w")
    INTERN(A_sample, "sample")
    INTERN(A_k, "k")
    INTERN(A_q, "q")
    INTERN(A_batches, "batches")
    INTERN(A_items, "items")
    INTERN(A_update, "update")
#undef INTERN
    return 0;
}

/* `Reservoir.update`'s skip (the sample full and the pending skip passing the whole batch) kept in C
 * while the run lasts: the skip and the batch counters are written back before any Python call that
 * can read them and when the run ends. */
typedef struct {
    PyObject *sampler;
    int skipping; /* 0: Python's update runs every batch (a ReplacementReservoir) */
    int loaded;   /* q and full read from the sampler since it last ran in Python */
    int full;     /* w is set, the sample holds k rows and q fits in 64 bits */
    long long q, batches, items;
} Skip;

static int skip_load(Skip *s) {
    s->loaded = 1;
    s->full = 0;
    PyObject *w = PyObject_GetAttr(s->sampler, A_w);
    if (w == NULL) return -1;
    int unset = w == Py_None;
    Py_DECREF(w);
    if (unset) return 0;
    PyObject *sample = PyObject_GetAttr(s->sampler, A_sample), *k = PyObject_GetAttr(s->sampler, A_k);
    Py_ssize_t held = sample == NULL ? -1 : PyObject_Size(sample);
    Py_ssize_t want = k == NULL ? -1 : PyLong_AsSsize_t(k);
    Py_XDECREF(sample);
    Py_XDECREF(k);
    if (held < 0 || (want == -1 && PyErr_Occurred())) return -1;
    if (held < want) return 0;
    PyObject *q = PyObject_GetAttr(s->sampler, A_q);
    if (q == NULL) return -1;
    int overflow = 0;
    s->q = PyLong_AsLongLongAndOverflow(q, &overflow);
    Py_DECREF(q);
    if (s->q == -1 && PyErr_Occurred()) return -1;
    s->full = !overflow;
    return 0;
}

/* The skip and the counters back into the sampler (what the Python update would have written). */
static int skip_flush(Skip *s) {
    if (s->batches == 0) return 0;
    PyObject *q = PyLong_FromLongLong(s->q);
    int rc = q == NULL ? -1 : PyObject_SetAttr(s->sampler, A_q, q);
    Py_XDECREF(q);
    PyObject *counters = rc < 0 ? NULL : PyObject_GetAttr(s->sampler, A_counters);
    if (counters == NULL) return -1;
    rc = bump_counter(counters, A_batches, s->batches);
    if (rc == 0) rc = bump_counter(counters, A_items, s->items);
    Py_DECREF(counters);
    s->batches = s->items = 0;
    return rc;
}

/* sampler.update(size, get) for the batch of an insert: the skip when it passes the batch, else the
 * Python update over a reader of the batch, functools.partial(delta_get, index, e, t, radices). */
static int feed(Skip *s, PyObject *size, PyObject *radices, PyObject *index, PyObject *e, PyObject *t,
                PyObject *delta_get, PyObject *partial) {
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(size, &overflow);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (!overflow && n == 0) return 0;
    if (s->skipping && !overflow && n > 0) {
        if (!s->loaded && skip_load(s) < 0) return -1;
        if (s->full && n <= s->q) {
            s->q -= n;
            s->batches += 1;
            s->items += n;
            return 0;
        }
    }
    if (skip_flush(s) < 0) return -1;
    s->loaded = 0;
    PyObject *args[] = {delta_get, index, e, t, radices};
    PyObject *get = PyObject_Vectorcall(partial, args, 5, NULL);
    if (get == NULL) return -1;
    PyObject *r = PyObject_CallMethodObjArgs(s->sampler, A_update, size, get, NULL);
    Py_DECREF(get);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* Plan fields, in the order the engine builds the tuple (engine.py `_insert_plan`). */
enum {
    P_BASES,      /* relation -> its columns */
    P_FANOUT,     /* relation -> its aliases */
    P_RELS,       /* alias -> {tuple: arrival number} */
    P_DIRECT,     /* alias -> its index node, for the aliases without a bag */
    P_LOG,        /* the checkpoint log, None when not logging */
    P_REL,        /* the log's map name of the relations */
    P_INDEX,      /* the JoinIndex */
    P_SAMPLER,    /* the sampler */
    P_SKIPPING,   /* whether the sampler is a Reservoir (its skip taken here) */
    P_SIZED,      /* insert_sized(index, e, t, seq) */
    P_DELTA_GET,  /* delta_get(index, e, t, radices, z) */
    P_PARTIAL,    /* functools.partial */
    P_FIELDS,
};

/* The tuple of a plain insert (new in its base, every alias direct), or NULL without an error when the
 * event is one to leave to the engine's Python steps. */
static PyObject *plain_insert(PyObject *ev, PyObject *plan, PyObject **aliases_out) {
    PyObject *delta = PyObject_GetAttr(ev, A_delta);
    if (delta == NULL) return NULL;
    int one = PyLong_CheckExact(delta) && PyLong_AsLong(delta) == 1;
    Py_DECREF(delta);
    if (!one) return NULL;
    PyObject *relation = PyObject_GetAttr(ev, A_relation);
    if (relation == NULL) return NULL;
    PyObject *columns = PyDict_GetItemWithError(PyTuple_GET_ITEM(plan, P_BASES), relation);
    PyObject *aliases = columns == NULL ? NULL : PyDict_GetItemWithError(PyTuple_GET_ITEM(plan, P_FANOUT), relation);
    Py_DECREF(relation);
    if (aliases == NULL || !PyTuple_Check(columns) || !PyTuple_Check(aliases) || PyTuple_GET_SIZE(aliases) == 0)
        return NULL;
    PyObject *direct = PyTuple_GET_ITEM(plan, P_DIRECT);
    for (Py_ssize_t a = 0; a < PyTuple_GET_SIZE(aliases); a++) {
        int has = PyDict_Contains(direct, PyTuple_GET_ITEM(aliases, a));
        if (has <= 0) return NULL;
    }
    PyObject *row = PyObject_GetAttr(ev, A_row);
    if (row == NULL) return NULL;
    Py_ssize_t width = PyTuple_GET_SIZE(columns);
    PyObject *t = PyTuple_New(width);
    for (Py_ssize_t i = 0; t != NULL && i < width; i++) {
        PyObject *x = PyObject_GetItem(row, PyTuple_GET_ITEM(columns, i));
        if (x == NULL) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, x);
    }
    Py_DECREF(row);
    if (t == NULL) return NULL;
    settle(t);
    PyObject *first = PyDict_GetItemWithError(PyTuple_GET_ITEM(plan, P_RELS), PyTuple_GET_ITEM(aliases, 0));
    int present = first == NULL ? -1 : PyDict_Contains(first, t);
    if (present != 0) {
        Py_DECREF(t);
        return NULL;
    }
    *aliases_out = aliases;
    return t;
}

/* One alias's share of an insert: _add_rel (no declared key), the inserts counter, _insert_node. */
static int insert_alias(PyObject *plan, PyObject *alias, PyObject *t, long long seq_no, Skip *skip, int *sized_any) {
    PyObject *rel = PyDict_GetItemWithError(PyTuple_GET_ITEM(plan, P_RELS), alias);
    PyObject *e = rel == NULL ? NULL : PyDict_GetItemWithError(PyTuple_GET_ITEM(plan, P_DIRECT), alias);
    if (e == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, alias);
        return -1;
    }
    PyObject *seq = PyLong_FromLongLong(seq_no);
    if (seq == NULL || PyDict_SetItem(rel, t, seq) < 0) goto fail;
    PyObject *log = PyTuple_GET_ITEM(plan, P_LOG);
    if (log != Py_None) {
        PyObject *key = PyTuple_Pack(3, PyTuple_GET_ITEM(plan, P_REL), alias, t);
        int rc = key == NULL ? -1 : PyDict_SetItem(log, key, seq);
        Py_XDECREF(key);
        if (rc < 0) goto fail;
    }
    PyObject *index = PyTuple_GET_ITEM(plan, P_INDEX);
    PyObject *args[] = {index, e, t, seq};
    PyObject *sized = PyObject_Vectorcall(PyTuple_GET_ITEM(plan, P_SIZED), args, 4, NULL);
    Py_DECREF(seq);
    if (sized == NULL) return -1;
    if (sized == Py_None) {
        Py_DECREF(sized);
        return 0;
    }
    *sized_any = 1;
    int rc = -1;
    if (PyTuple_Check(sized) && PyTuple_GET_SIZE(sized) == 2)
        rc = feed(skip, PyTuple_GET_ITEM(sized, 0), PyTuple_GET_ITEM(sized, 1), index, e, t,
                  PyTuple_GET_ITEM(plan, P_DELTA_GET), PyTuple_GET_ITEM(plan, P_PARTIAL));
    else
        PyErr_SetString(PyExc_TypeError, "insert_sized returns (size, radices) or None");
    Py_DECREF(sized);
    return rc;
fail:
    Py_XDECREF(seq);
    return -1;
}

/* engine.counters[name] += extra. */
static int add_count(PyObject *counters, PyObject *name, long long extra) {
    if (extra == 0) return 0;
    PyObject *now = PyDict_GetItemWithError(counters, name);
    if (now == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, name);
        return -1;
    }
    PyObject *more = PyLong_FromLongLong(extra);
    PyObject *sum = more == NULL ? NULL : PyNumber_Add(now, more);
    Py_XDECREF(more);
    int rc = sum == NULL ? -1 : PyDict_SetItem(counters, name, sum);
    Py_XDECREF(sum);
    return rc;
}

PyObject *k_insert_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    EXPECT_ARGS(nargs, 4, "insert_run(engine, events, start, plan)");
    PyObject *engine = args[0], *plan = args[3];
    if (intern_names() < 0) return NULL;
    if (!PyTuple_Check(plan) || PyTuple_GET_SIZE(plan) != P_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "insert_run: the plan is the engine's tuple of its fields");
        return NULL;
    }
    Py_ssize_t start;
    if (as_index(args[2], &start) < 0) return NULL;
    PyObject *events = PySequence_Fast(args[1], "insert_run: events are a sequence");
    if (events == NULL) return NULL;
    PyObject *seq_obj = PyObject_GetAttr(engine, A_rel_seq);
    long long seq_no = seq_obj == NULL ? -1 : PyLong_AsLongLong(seq_obj);
    Py_XDECREF(seq_obj);
    if (seq_no == -1 && PyErr_Occurred()) {
        Py_DECREF(events);
        return NULL;
    }
    int skipping = PyObject_IsTrue(PyTuple_GET_ITEM(plan, P_SKIPPING));
    Skip skip = {PyTuple_GET_ITEM(plan, P_SAMPLER), skipping > 0, 0, 0, 0, 0, 0};
    long long taken = 0, inserts = 0;
    int sized_any = 0, failed = skipping < 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(events), i = start;
    for (; !failed && i < n; i++) {
        PyObject *aliases = NULL;
        PyObject *t = plain_insert(PySequence_Fast_GET_ITEM(events, i), plan, &aliases);
        if (t == NULL) {
            PyErr_Clear(); /* the engine's Python steps judge it, and raise what they raise */
            break;
        }
        taken += 1;
        for (Py_ssize_t a = 0; a < PyTuple_GET_SIZE(aliases); a++) {
            inserts += 1;
            if (insert_alias(plan, PyTuple_GET_ITEM(aliases, a), t, seq_no++, &skip, &sized_any) < 0) {
                failed = 1;
                break;
            }
        }
        Py_DECREF(t);
    }
    Py_DECREF(events);
    /* what the Python steps would have written, also when a step failed (its exception kept) */
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *seq_after = PyLong_FromLongLong(seq_no);
    int rc = seq_after == NULL ? -1 : PyObject_SetAttr(engine, A_rel_seq, seq_after);
    Py_XDECREF(seq_after);
    PyObject *counters = rc < 0 ? NULL : PyObject_GetAttr(engine, A_counters);
    if (counters == NULL || !PyDict_Check(counters)) rc = -1;
    if (rc == 0) rc = add_count(counters, A_events, taken);
    if (rc == 0) rc = add_count(counters, A_inserts, inserts);
    Py_XDECREF(counters);
    if (rc == 0) rc = skip_flush(&skip);
    if (failed) {
        if (rc < 0) PyErr_Clear();
        PyErr_Restore(exc_type, exc_value, exc_tb);
        return NULL;
    }
    if (rc < 0) return NULL;
    return Py_BuildValue("(nO)", i, sized_any ? Py_True : Py_False);
}
