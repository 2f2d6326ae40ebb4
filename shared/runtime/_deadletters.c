/* Dead-lettering a batch's refused records in one C loop: the worker's path for a flood of bad input.
 *
 * A dead letter is the refused record's bytes and key with four headers (shared/runtime/output.py
 * Output.dead_letters, which this does the same as): ivmstream.reason (the code), ivmstream.detail,
 * ivmstream.service and ivmstream.source ("topic:partition:offset"). Done in Python, the loop around
 * each produce call (reading the record and the error, building the headers, counting the reasons) costs
 * about a third of the call itself; here it costs little, so a refused record costs one produce: the
 * record's accessors are called through their method descriptors and reasons are counted in a small
 * array. A value longer than max_value (a key longer
 * than max_key) is cut to it, with its full length in the ivmstream.truncated (ivmstream.key-truncated)
 * header, so that every dead letter fits the producer's message size limit.
 *
 * Python API:
 *     produce_refused(produce, retry, topic, callback, service_header, reasons, max_value, max_key,
 *                     source_prefix, msgs, decoded, event_type) -> {code: count}
 *         produce: the producer's produce(topic, value, key, partition, callback, on_delivery, timestamp,
 *             headers), called by position
 *         retry(topic, value, key, headers): called when produce raises BufferError or KafkaException (the
 *             Python path that waits for room, or stops the worker in one line); its exceptions propagate
 *         topic: the dead-letter topic; callback: the delivery callback
 *         service_header: the ("ivmstream.service", bytes) header
 *         reasons: a dict caching each code's header tuple
 *         max_value, max_key: the most bytes of a record's value and key a dead letter carries
 *         source_prefix: b"<topic>:<partition>:" of the records, which are all of one input partition
 *         msgs, decoded: the batch's records and what the decoder made of each (same length); every
 *             item whose type is not event_type is an error with `code` and `detail` (str)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *str_code, *str_detail, *str_offset, *str_value, *str_key;
static PyObject *header_reason, *header_detail, *header_source; /* the header names */
static PyObject *header_truncated, *header_key_truncated;
static PyObject *buffer_error_types; /* (BufferError, KafkaException), set on first use */

/* The header (name, text encoded as UTF-8). */
static PyObject *header(PyObject *name, PyObject *text) {
    PyObject *encoded = PyUnicode_AsUTF8String(text);
    if (encoded == NULL) return NULL;
    PyObject *out = PyTuple_Pack(2, name, encoded);
    Py_DECREF(encoded);
    return out;
}

/* A reason code's header, from `cache` or made and kept there (there are few codes). */
static PyObject *reason_header(PyObject *cache, PyObject *code) {
    PyObject *made = PyDict_GetItemWithError(cache, code);
    if (made != NULL) return Py_NewRef(made);
    if (PyErr_Occurred()) return NULL;
    made = header(header_reason, code);
    if (made == NULL || PyDict_SetItem(cache, code, made) < 0) {
        Py_XDECREF(made);
        return NULL;
    }
    return made;
}

/* The reasons counted so far: a few distinct codes per batch, so a short array searched by identity
 * first (codes are interned or shared), then by value. */
#define COUNTED_CODES 64
typedef struct {
    PyObject *code[COUNTED_CODES]; /* owned */
    Py_ssize_t n[COUNTED_CODES];
    int used;
    PyObject *overflow; /* a dict for codes past COUNTED_CODES, or NULL */
} Counts;

static int count_reason(Counts *c, PyObject *code) {
    for (int i = 0; i < c->used; i++) {
        if (c->code[i] == code) {
            c->n[i]++;
            return 0;
        }
    }
    for (int i = 0; i < c->used; i++) {
        int same = PyUnicode_Compare(c->code[i], code);
        if (same == -1 && PyErr_Occurred()) return -1;
        if (same == 0) {
            c->n[i]++;
            return 0;
        }
    }
    if (c->used < COUNTED_CODES) {
        c->code[c->used] = Py_NewRef(code);
        c->n[c->used++] = 1;
        return 0;
    }
    if (c->overflow == NULL && (c->overflow = PyDict_New()) == NULL) return -1;
    PyObject *had = PyDict_GetItemWithError(c->overflow, code);
    if (had == NULL && PyErr_Occurred()) return -1;
    PyObject *more = PyLong_FromSsize_t(had != NULL ? PyLong_AsSsize_t(had) + 1 : 1);
    if (more == NULL) return -1;
    int rc = PyDict_SetItem(c->overflow, code, more);
    Py_DECREF(more);
    return rc;
}

static void counts_clear(Counts *c) {
    for (int i = 0; i < c->used; i++) Py_DECREF(c->code[i]);
    c->used = 0;
    Py_CLEAR(c->overflow);
}

/* {code: count} of `c`, which it empties. */
static PyObject *counted(Counts *c) {
    PyObject *out = c->overflow != NULL ? Py_NewRef(c->overflow) : PyDict_New();
    for (int i = 0; out != NULL && i < c->used; i++) {
        PyObject *n = PyLong_FromSsize_t(c->n[i]);
        if (n == NULL || PyDict_SetItem(out, c->code[i], n) < 0) Py_CLEAR(out);
        Py_XDECREF(n);
    }
    counts_clear(c);
    return out;
}

/* A record's accessors (offset, value, key): the method descriptors of confluent_kafka's Message type,
 * called with the record as their one argument; for any other type, called by name. */
typedef struct {
    PyTypeObject *type;
    PyObject *offset, *value, *key;
} Accessors;

static PyObject *call_accessor(const Accessors *a, PyObject *msg, PyObject *descriptor, PyObject *name) {
    if (Py_TYPE(msg) == a->type) return PyObject_Vectorcall(descriptor, &msg, 1, NULL);
    return PyObject_CallMethodNoArgs(msg, name);
}

static int accessors_of(Accessors *a, PyTypeObject *type) {
    a->type = NULL;
    a->offset = PyObject_GetAttr((PyObject *)type, str_offset);
    a->value = a->offset != NULL ? PyObject_GetAttr((PyObject *)type, str_value) : NULL;
    a->key = a->value != NULL ? PyObject_GetAttr((PyObject *)type, str_key) : NULL;
    if (a->key == NULL) {
        PyErr_Clear(); /* not accessible on the type: called by name */
        return 0;
    }
    if (Py_IS_TYPE(a->offset, &PyMethodDescr_Type) && Py_IS_TYPE(a->value, &PyMethodDescr_Type) &&
        Py_IS_TYPE(a->key, &PyMethodDescr_Type))
        a->type = type; /* a C type's methods: the descriptor called with the record is the method call */
    return 0;
}

static void accessors_clear(Accessors *a) {
    Py_CLEAR(a->offset);
    Py_CLEAR(a->value);
    Py_CLEAR(a->key);
}

/* One refused record to the dead-letter topic; 0, or -1 with an exception set. */
/* b"<prefix><offset>": the source header's value. */
static PyObject *source_of(PyObject *prefix, PyObject *offset) {
    Py_ssize_t at = PyLong_AsSsize_t(offset);
    if (at == -1 && PyErr_Occurred()) return NULL;
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%zd", at);
    Py_ssize_t head = PyBytes_GET_SIZE(prefix);
    PyObject *out = PyBytes_FromStringAndSize(NULL, head + n);
    if (out == NULL) return NULL;
    memcpy(PyBytes_AS_STRING(out), PyBytes_AS_STRING(prefix), (size_t)head);
    memcpy(PyBytes_AS_STRING(out) + head, digits, (size_t)n);
    return out;
}

/* *bytes cut to `max` bytes if longer, and the header (name, b"<full length>") appended to `extra`. */
static int cut(PyObject **bytes, Py_ssize_t max, PyObject *name, PyObject **extra, int *nextra) {
    if (!PyBytes_Check(*bytes) || PyBytes_GET_SIZE(*bytes) <= max) return 0;
    PyObject *length = PyBytes_FromFormat("%zd", PyBytes_GET_SIZE(*bytes));
    if (length == NULL) return -1;
    extra[*nextra] = PyTuple_Pack(2, name, length);
    Py_DECREF(length);
    if (extra[*nextra] == NULL) return -1;
    (*nextra)++;
    Py_SETREF(*bytes, PyBytes_FromStringAndSize(PyBytes_AS_STRING(*bytes), max));
    return *bytes == NULL ? -1 : 0;
}

typedef struct {
    Py_ssize_t value, key; /* the most bytes of a value and of a key a dead letter carries */
} Limits;

static int dead_letter(PyObject *const *fixed, PyObject *retry, const Accessors *a, const Limits *limits,
                       PyObject *msg, PyObject *reason, PyObject *said, PyObject *service, PyObject *prefix) {
    int rc = -1, nextra = 0;
    PyObject *value = NULL, *key = NULL, *source = NULL, *headers = NULL, *result = NULL, *extra[2] = {NULL, NULL};
    PyObject *offset = call_accessor(a, msg, a->offset, str_offset);
    if (offset == NULL) goto done;
    source = source_of(prefix, offset);
    Py_DECREF(offset);
    if (source == NULL) goto done;
    value = call_accessor(a, msg, a->value, str_value);
    if (value == NULL) goto done;
    if (value == Py_None) Py_SETREF(value, PyBytes_FromStringAndSize("", 0));
    key = value != NULL ? call_accessor(a, msg, a->key, str_key) : NULL;
    if (key == NULL) goto done;
    if (cut(&value, limits->value, header_truncated, extra, &nextra) < 0 ||
        cut(&key, limits->key, header_key_truncated, extra, &nextra) < 0)
        goto done;
    PyObject *source_header = PyTuple_Pack(2, header_source, source);
    if (source_header == NULL) goto done;
    headers = PyList_New(4 + nextra);
    if (headers == NULL) {
        Py_DECREF(source_header);
        goto done;
    }
    PyList_SET_ITEM(headers, 0, Py_NewRef(reason));
    PyList_SET_ITEM(headers, 1, Py_NewRef(said));
    PyList_SET_ITEM(headers, 2, Py_NewRef(service));
    PyList_SET_ITEM(headers, 3, source_header);
    for (int i = 0; i < nextra; i++) PyList_SET_ITEM(headers, 4 + i, Py_NewRef(extra[i]));
    /* produce(topic, value, key, -1, callback, None, 0, headers) */
    PyObject *args[8] = {fixed[1], value, key, fixed[2], fixed[3], Py_None, fixed[4], headers};
    result = PyObject_Vectorcall(fixed[0], args, 8, NULL);
    if (result == NULL) {
        if (!PyErr_ExceptionMatches(buffer_error_types)) goto done;
        PyErr_Clear();
        PyObject *again[4] = {fixed[1], value, key, headers};
        result = PyObject_Vectorcall(retry, again, 4, NULL);
        if (result == NULL) goto done;
    }
    rc = 0;
done:
    for (int i = 0; i < nextra; i++) Py_DECREF(extra[i]);
    Py_XDECREF(result);
    Py_XDECREF(headers);
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(source);
    return rc;
}

static PyObject *produce_refused(PyObject *module, PyObject *args) {
    PyObject *produce, *retry, *topic, *callback, *service, *reasons, *prefix, *msgs, *decoded, *event_type;
    Limits limits;
    (void)module;
    if (!PyArg_ParseTuple(args, "OOUOOO!nnO!O!O!O", &produce, &retry, &topic, &callback, &service, &PyDict_Type,
                          &reasons, &limits.value, &limits.key, &PyBytes_Type, &prefix, &PyList_Type, &msgs,
                          &PyList_Type, &decoded, &event_type))
        return NULL;
    if (limits.value < 0 || limits.key < 0) {
        PyErr_SetString(PyExc_ValueError, "max_value and max_key must not be negative");
        return NULL;
    }
    if (PyList_GET_SIZE(msgs) != PyList_GET_SIZE(decoded)) {
        PyErr_SetString(PyExc_ValueError, "msgs and decoded differ in length");
        return NULL;
    }
    if (buffer_error_types == NULL) {
        PyObject *kafka = PyImport_ImportModule("confluent_kafka");
        PyObject *kafka_exc = kafka != NULL ? PyObject_GetAttrString(kafka, "KafkaException") : NULL;
        Py_XDECREF(kafka);
        if (kafka_exc == NULL) return NULL;
        buffer_error_types = PyTuple_Pack(2, PyExc_BufferError, kafka_exc);
        Py_DECREF(kafka_exc);
        if (buffer_error_types == NULL) return NULL;
    }
    Counts counts = {.used = 0, .overflow = NULL};
    Accessors accessors = {NULL, NULL, NULL, NULL};
    PyObject *minus_one = PyLong_FromLong(-1), *zero = PyLong_FromLong(0);
    if (minus_one == NULL || zero == NULL) goto fail;
    if (PyList_GET_SIZE(msgs) > 0 && accessors_of(&accessors, Py_TYPE(PyList_GET_ITEM(msgs, 0))) < 0) goto fail;
    PyObject *fixed[5] = {produce, topic, minus_one, callback, zero};
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(decoded); i++) {
        PyObject *item = PyList_GET_ITEM(decoded, i);
        if ((PyObject *)Py_TYPE(item) == event_type) continue;
        PyObject *msg = PyList_GET_ITEM(msgs, i);
        PyObject *code = PyObject_GetAttr(item, str_code);
        PyObject *detail = code != NULL ? PyObject_GetAttr(item, str_detail) : NULL;
        PyObject *reason = NULL, *said = NULL;
        int rc = -1;
        if (detail == NULL || !PyUnicode_Check(code) || !PyUnicode_Check(detail)) {
            if (detail != NULL) PyErr_SetString(PyExc_TypeError, "an error's code and detail must be str");
            goto next;
        }
        reason = reason_header(reasons, code);
        said = reason != NULL ? header(header_detail, detail) : NULL;
        if (said == NULL) goto next;
        rc = dead_letter(fixed, retry, &accessors, &limits, msg, reason, said, service, prefix);
        if (rc == 0) rc = count_reason(&counts, code);
    next:
        Py_XDECREF(said);
        Py_XDECREF(reason);
        Py_XDECREF(detail);
        Py_XDECREF(code);
        if (rc < 0) goto fail;
    }
    accessors_clear(&accessors);
    Py_DECREF(minus_one);
    Py_DECREF(zero);
    return counted(&counts);
fail:
    accessors_clear(&accessors);
    counts_clear(&counts);
    Py_XDECREF(minus_one);
    Py_XDECREF(zero);
    return NULL;
}

static PyMethodDef methods[] = {
    {"produce_refused", produce_refused, METH_VARARGS,
     "produce_refused(produce, retry, topic, callback, service_header, reasons, max_value, max_key, "
     "source_prefix, msgs, decoded, event_type) -> {code: count}: dead-letter every error in decoded, in order."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef deadletters_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ivmstream.runtime._deadletters",
    .m_doc = "Dead-lettering a batch's refused records in C; shared/runtime/output.py does it in Python without.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__deadletters(void) {
    str_code = PyUnicode_InternFromString("code");
    str_detail = PyUnicode_InternFromString("detail");
    str_offset = PyUnicode_InternFromString("offset");
    str_value = PyUnicode_InternFromString("value");
    str_key = PyUnicode_InternFromString("key");
    header_reason = PyUnicode_InternFromString("ivmstream.reason");
    header_detail = PyUnicode_InternFromString("ivmstream.detail");
    header_source = PyUnicode_InternFromString("ivmstream.source");
    header_truncated = PyUnicode_InternFromString("ivmstream.truncated");
    header_key_truncated = PyUnicode_InternFromString("ivmstream.key-truncated");
    if (!str_code || !str_detail || !str_offset || !str_value || !str_key || !header_reason || !header_detail ||
        !header_source || !header_truncated || !header_key_truncated)
        return NULL;
    return PyModule_Create(&deadletters_module);
}
