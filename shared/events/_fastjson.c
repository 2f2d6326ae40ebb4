/* Schema-specialised decoder for update events: the worker's per-record hot path, in one C pass.
 *
 * For each record value it parses the JSON text directly into the objects the engine protocol takes
 * (the row dict in the relation's column order, then the UpdateEvent) and groups the events by partition
 * key, with no intermediate objects. It accepts only what it can decide exactly: the canonical shape
 * {"relation": ..., "row": {...}, "delta": ...} with "relation" before "row", strings without escapes,
 * integers of at most 18 digits, no duplicate names, every column present and of its declared type.
 * Decimal values (and exact ones that are not integers) are made by the `decimal_type` the reference
 * decoder uses, from an integer, a float's shortest repr or a plain decimal string ([+-], digits, one
 * point, an exponent of at most 9 digits: text it reads exactly and finite under any context).
 * Anything else (a malformed record, an escape, a null, an odd decimal string, an unusual member order) is
 * "declined" and handed to the Python fallback, which owns the reference semantics and the precise
 * rejection reasons. So this decoder can only make decoding faster, never change a verdict; the test suite
 * checks it against the reference decoder on generated and mutated records.
 *
 * Python API (see shared/events/codec.py):
 *     Decoder(relations, key_field, event_type, error_type, fallback, max_size=-1, refuse=None, max_depth=-1)
 *         relations: sequence of (name: str, ((column: str, typecode: int), ...))
 *         key_field: str or None
 *         fallback(value) -> event or error instance, for every declined value
 *         max_size: values longer than this many bytes are refused as "oversized"; -1: no limit
 *         refuse(value) -> event or error instance: the reference decoder alone, for a declined value the
 *             refusal scan below finds certainly invalid (default: the fallback)
 *         max_depth: values nested deeper than this are refused as "too-deep"; -1: no check here
 *         decimal_type: decimal.Decimal, for decimal and exact columns; None: decimal columns declined
 *         invalid_utf8_detail: the reference decoder's detail for any bytes that are not UTF-8 (its parser
 *             checks the encoding of the whole text first, in one message); None: left to `refuse`
 *         json_loads: the reference decoder's JSON parser, whose error on text that is not JSON the
 *             reference decoder's detail quotes; None: such text goes to `refuse`
 *         json_messages: that parser's messages for a text that ends too soon, a value starting with N or I,
 *             a minus sign before one, a number overflowing a double; None: json_loads is called for them
 *
 * Refusing cheaply. A flood of hostile records must not cost many good ones, so every kind of hostile
 * record is refused here, with the reference decoder's reason and detail, without calling it. A declined
 * value is first scanned without building objects, in the reference decoder's order of checks:
 * - over the size limit, nested too deep, bytes that are not UTF-8 (its parser's first check, with one
 *   message: invalid_utf8_detail): fixed details, made here;
 * - not JSON (NaN and Infinity included): the reason and detail come from the JSON parser's message and
 *   position, as the reference decoder reads them (json_error). For a text that ends too soon (a cut
 *   record), NaN, Infinity and numbers overflowing a double, the scan knows the parser's message and
 *   where it points, so it makes it; for anything else it calls the parser (json_loads) for its error;
 * - an integer beyond 64 bits in otherwise valid JSON: its detail is made here.
 * A null (no event holds one) goes straight to `refuse`, skipping the fallback's faster decoder, which
 * would only fail on it. So does a value the parser found certainly invalid on its way (an unknown
 * relation, field or column, a missing one, a zero or non-integer delta). The scan never decides a verdict
 * the reference decoder would not: where it cannot tell, `refuse` decides. The parser itself refuses a
 * record that is canonical and valid but for nulls or values of the wrong JSON type in its columns
 * (scalars, arrays and objects shown by their size, strings Decimal() cannot read): the reference decoder
 * checks everything else first, then the columns in schema order, so its verdict is the first such
 * column's, with a detail made here the way it makes it (column_error). Errors are error_type instances
 * made as its __init__ makes them, without running it (event_error).
 *     Decoder.decode_grouped(values) -> (decoded, groups, errors)
 *     Decoder.decode_many(values) -> decoded
 *
 * Change records. Decoder.decode_debezium(value, start, stop, relation) -> events or None decodes the
 * common Debezium envelope (op c, r, u or d, rows of exactly the relation's columns) in value[start:stop]
 * (a schema-wrapped record's payload in place) into its one or two events, and declines (None) anything
 * else: the Python decoders (shared/events/debezium_fast.py, debezium.py) decide those and name their
 * reasons, and the tests check the tiers agree. A column may be (name, T_CONNECT_DECIMAL, scale): Kafka
 * Connect's base64 decimal of a wrapped record's schema.
 *
 * Sources: this file holds the module and the Decoder type; _fastjson.h says which file holds the rest.
 */
#include "_fastjson.h"

/* Bytes that end or complicate a JSON string: the quote, a backslash, control characters, non-ASCII. */
unsigned char STRING_SPECIAL[256];

/* Each base64 digit's value; -1: not a digit. */
signed char BASE64[256];

static void init_tables(void) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int ch = 0; ch < 256; ch++) {
        STRING_SPECIAL[ch] = ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x80;
        BASE64[ch] = -1;
    }
    for (int i = 0; i < 64; i++) BASE64[(unsigned char)digits[i]] = (signed char)i;
}

/* error_type's `code` and `detail` slots (member descriptors, as __slots__ makes them), or NULL: set by
 * attribute. Set through the descriptor, a refused record's error costs no attribute lookup. */
static int error_slots(Decoder *self) {
    static const char *const names[2] = {"code", "detail"};
    PyObject **slots[2] = {&self->code_slot, &self->detail_slot};
    for (int i = 0; i < 2; i++) {
        Py_CLEAR(*slots[i]);
        PyObject *d = PyObject_GetAttrString(self->error_type, names[i]);
        if (d == NULL) {
            PyErr_Clear();
            continue;
        }
        if (Py_IS_TYPE(d, &PyMemberDescr_Type) && Py_TYPE(d)->tp_descr_set != NULL)
            *slots[i] = d;
        else
            Py_DECREF(d);
    }
    return 0;
}

static void free_relations(Decoder *self) {
    if (self->relations == NULL) return;
    for (int i = 0; i < self->nrelations; i++) {
        RelationSpec *r = &self->relations[i];
        Py_XDECREF(r->name);
        for (int j = 0; j < r->ncolumns; j++) {
            Column *col = &r->columns[j];
            Py_XDECREF(col->name);
            Py_XDECREF(col->null_detail);
            Py_XDECREF(col->null_args);
            Py_XDECREF(col->wrong_prefix);
            for (int k = 0; k < INT_CACHE; k++) Py_XDECREF(col->ints[k]);
        }
        PyMem_Free(r->columns);
    }
    PyMem_Free(self->relations);
    self->relations = NULL;
    self->nrelations = 0;
}

/* Whether a name holds no quote, backslash or control character, so that scan_name can match it in place
 * (scan_string reads any other byte, non-ASCII ones included, as itself). */
static int plain_name(const char *name, Py_ssize_t len) {
    for (Py_ssize_t b = 0; b < len; b++) {
        unsigned char ch = (unsigned char)name[b];
        if (ch == '"' || ch == '\\' || ch < 0x20) return 0;
    }
    return 1;
}

/* The Quoted form of a name (n = 0 where it is not plain or longer than 14 bytes). */
static void quoted_init(Quoted *q, const char *name, Py_ssize_t len, int plain) {
    memset(q, 0, sizeof(*q));
    if (!plain || len + 2 > (Py_ssize_t)sizeof(q->text)) return;
    q->text[0] = '"';
    memcpy(q->text + 1, name, (size_t)len);
    q->text[len + 1] = '"';
    memset(q->mask, 0xff, (size_t)len + 2);
    q->n = (int)len + 2;
}

static int Decoder_init(Decoder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"relations", "key_field", "event_type", "error_type", "fallback",
                             "max_size", "refuse", "max_depth", "decimal_type", "invalid_utf8_detail",
                             "json_loads", "json_messages", NULL};
    PyObject *relations, *key_field, *event_type, *error_type, *fallback, *refuse = Py_None;
    PyObject *decimal_type = Py_None, *utf8_detail = Py_None, *json_loads = Py_None, *json_messages = Py_None;
    Py_ssize_t max_size = -1;
    int max_depth = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO|nOiOOOO", kwlist, &relations, &key_field, &event_type,
                                     &error_type, &fallback, &max_size, &refuse, &max_depth, &decimal_type,
                                     &utf8_detail, &json_loads, &json_messages))
        return -1;
    if (json_messages != Py_None) {
        int ok = PyTuple_Check(json_messages) && PyTuple_GET_SIZE(json_messages) == 4;
        for (Py_ssize_t i = 0; ok && i < 4; i++) ok = PyUnicode_Check(PyTuple_GET_ITEM(json_messages, i));
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, "json_messages must be a tuple of 4 str or None");
            return -1;
        }
    }
    if (json_loads != Py_None && !PyCallable_Check(json_loads)) {
        PyErr_SetString(PyExc_TypeError, "json_loads must be callable or None");
        return -1;
    }
    if (utf8_detail != Py_None && !PyUnicode_Check(utf8_detail)) {
        PyErr_SetString(PyExc_TypeError, "invalid_utf8_detail must be a str or None");
        return -1;
    }
    if (decimal_type != Py_None && !PyCallable_Check(decimal_type)) {
        PyErr_SetString(PyExc_TypeError, "decimal_type must be callable or None");
        return -1;
    }
    self->max_size = max_size < 0 ? -1 : max_size;
    self->max_depth = max_depth < 0 ? -1 : max_depth;
    if (refuse == Py_None) refuse = fallback;
    if (!PyType_Check(error_type) || !PyCallable_Check(event_type) || !PyCallable_Check(fallback) ||
        !PyCallable_Check(refuse)) {
        PyErr_SetString(PyExc_TypeError, "event_type, fallback and refuse must be callable, error_type a type");
        return -1;
    }
    if (key_field != Py_None && !PyUnicode_Check(key_field)) {
        PyErr_SetString(PyExc_TypeError, "key_field must be a str or None");
        return -1;
    }
    free_relations(self);
    PyObject *seq = PySequence_Fast(relations, "relations must be a sequence");
    if (seq == NULL) return -1;
    Py_ssize_t nrel = PySequence_Fast_GET_SIZE(seq);
    self->relations = PyMem_Calloc(nrel > 0 ? (size_t)nrel : 1, sizeof(RelationSpec));
    if (self->relations == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    self->nrelations = (int)nrel;
    for (Py_ssize_t i = 0; i < nrel; i++) {
        RelationSpec *r = &self->relations[i];
        PyObject *name, *columns;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "UO", &name, &columns)) goto fail;
        Py_INCREF(name);
        r->name = name;
        r->utf8 = PyUnicode_AsUTF8AndSize(name, &r->len);
        if (r->utf8 == NULL) goto fail;
        r->plain = plain_name(r->utf8, r->len);
        quoted_init(&r->quoted, r->utf8, r->len, r->plain);
        PyObject *cols = PySequence_Fast(columns, "columns must be a sequence");
        if (cols == NULL) goto fail;
        Py_ssize_t ncol = PySequence_Fast_GET_SIZE(cols);
        r->columns = PyMem_Calloc(ncol > 0 ? (size_t)ncol : 1, sizeof(Column));
        if (r->columns == NULL) {
            Py_DECREF(cols);
            PyErr_NoMemory();
            goto fail;
        }
        r->ncolumns = (int)ncol;
        r->accepted = ncol <= MAX_COLUMNS;
        for (Py_ssize_t j = 0; j < ncol; j++) {
            Column *col = &r->columns[j];
            PyObject *cname;
            int type, scale = 0;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(cols, j), "Ui|i", &cname, &type, &scale)) {
                Py_DECREF(cols);
                goto fail;
            }
            Py_INCREF(cname);
            col->name = cname;
            col->utf8 = PyUnicode_AsUTF8AndSize(cname, &col->len);
            if (col->utf8 == NULL) {
                Py_DECREF(cols);
                goto fail;
            }
            col->plain = plain_name(col->utf8, col->len);
            quoted_init(&col->quoted, col->utf8, col->len, col->plain);
            col->type = type;
            col->scale = scale;
            if (type < T_INT || type > T_CONNECT_DECIMAL || type == T_DECLINE) r->accepted = 0;
            if ((type == T_DECIMAL || type == T_CONNECT_DECIMAL) && decimal_type == Py_None) r->accepted = 0;
        }
        Py_DECREF(cols);
    }
    Py_DECREF(seq);
    Py_XSETREF(self->key_field, key_field == Py_None ? NULL : Py_NewRef(key_field));
    self->key_utf8 = NULL;
    if (self->key_field != NULL) {
        self->key_utf8 = PyUnicode_AsUTF8AndSize(self->key_field, &self->key_len);
        if (self->key_utf8 == NULL) return -1;
    }
    Py_XSETREF(self->event_type, Py_NewRef(event_type));
    Py_XSETREF(self->error_type, Py_NewRef(error_type));
    Py_XSETREF(self->fallback, Py_NewRef(fallback));
    Py_XSETREF(self->refuse, Py_NewRef(refuse));
    Py_XSETREF(self->decimal_type, decimal_type == Py_None ? NULL : Py_NewRef(decimal_type));
    Py_XSETREF(self->utf8_detail, utf8_detail == Py_None ? NULL : Py_NewRef(utf8_detail));
    Py_XSETREF(self->json_loads, json_loads == Py_None ? NULL : Py_NewRef(json_loads));
    Py_XSETREF(self->json_messages, json_messages == Py_None ? NULL : Py_NewRef(json_messages));
    Py_XSETREF(self->deep_detail, PyUnicode_FromFormat("JSON nested deeper than %d levels", self->max_depth));
    if (self->deep_detail == NULL) return -1;
    Py_CLEAR(self->deep_args);
    Py_CLEAR(self->utf8_args);
    Py_XSETREF(self->size_tail, PyUnicode_FromFormat(" bytes, over the limit of %zd", self->max_size));
    if (self->size_tail == NULL) return -1;
    Py_CLEAR(self->json_details);
    if (self->json_messages != NULL) {
        self->json_details = PyTuple_New(4);
        if (self->json_details == NULL) return -1;
        for (Py_ssize_t i = 0; i < 4; i++) {
            PyObject *head = PyUnicode_FromFormat("not valid JSON: %U: line ", PyTuple_GET_ITEM(self->json_messages, i));
            if (head == NULL) return -1;
            PyTuple_SET_ITEM(self->json_details, i, head);
        }
    }
    if (error_slots(self) < 0) return -1;
    if (self->empty_key == NULL) {
        self->empty_key = PyUnicode_FromStringAndSize("", 0);
        if (self->empty_key == NULL) return -1;
    }
    if (self->cache == NULL) {
        self->cache = PyMem_Calloc(CACHE_SLOTS, sizeof(PyObject *));
        if (self->cache == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
fail:
    Py_DECREF(seq);
    free_relations(self);
    return -1;
}

static int Decoder_traverse(Decoder *self, visitproc visit, void *arg) {
    Py_VISIT(self->event_type);
    Py_VISIT(self->error_type);
    Py_VISIT(self->fallback);
    Py_VISIT(self->refuse);
    Py_VISIT(self->decimal_type);
    Py_VISIT(self->json_loads);
    return 0;
}

static int Decoder_clear(Decoder *self) {
    Py_CLEAR(self->event_type);
    Py_CLEAR(self->error_type);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->refuse);
    Py_CLEAR(self->decimal_type);
    Py_CLEAR(self->json_loads);
    return 0;
}

static void Decoder_dealloc(Decoder *self) {
    PyObject_GC_UnTrack(self);
    Decoder_clear(self);
    free_relations(self);
    if (self->cache != NULL) {
        for (int i = 0; i < CACHE_SLOTS; i++) Py_XDECREF(self->cache[i]);
        PyMem_Free(self->cache);
        self->cache = NULL;
    }
    Py_CLEAR(self->key_field);
    Py_CLEAR(self->empty_key);
    Py_CLEAR(self->utf8_detail);
    Py_CLEAR(self->json_messages);
    Py_CLEAR(self->deep_detail);
    Py_CLEAR(self->code_slot);
    Py_CLEAR(self->detail_slot);
    Py_CLEAR(self->deep_args);
    Py_CLEAR(self->utf8_args);
    Py_CLEAR(self->size_tail);
    Py_CLEAR(self->json_details);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Decoder_methods[] = {
    {"decode_grouped", (PyCFunction)Decoder_decode_grouped, METH_O,
     "decode_grouped(values) -> (decoded, groups, errors): every value decoded (declined ones by the "
     "fallback), the events grouped by partition key in input order, and the number of errors."},
    {"decode_columns", (PyCFunction)Decoder_decode_columns, METH_VARARGS,
     "decode_columns(values, decimal_text=False) -> (errors, groups): the refused values' (index, error), "
     "and every decoded row as columns, groups[key][relation] = [indexes, deltas, column 0, ...], without an "
     "event per row; decimal_text: a decimal written as a plain decimal string stays that string."},
    {"decode_many", (PyCFunction)Decoder_decode_many, METH_O,
     "decode_many(values) -> decoded: every value decoded (declined ones by the fallback), not grouped."},
    {"decode_debezium", (PyCFunction)(void (*)(void))Decoder_decode_debezium, METH_FASTCALL,
     "decode_debezium(value, start, stop, relation) -> events or None: the common Debezium envelope in "
     "value[start:stop] as its events (relation None: the record's source.table); None declines."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ivmstream.events._fastjson.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Schema-specialised update-event decoder (declined records go to the fallback).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Decoder_init,
    .tp_dealloc = (destructor)Decoder_dealloc,
    .tp_traverse = (traverseproc)Decoder_traverse,
    .tp_clear = (inquiry)Decoder_clear,
    .tp_methods = Decoder_methods,
};

static struct PyModuleDef fastjson_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ivmstream.events._fastjson",
    .m_doc = "Compiled update-event decoder; shared/events/codec.py falls back to Python without it.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__fastjson(void) {
    init_tables();
    if (PyType_Ready(&DecoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&fastjson_module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Decoder", (PyObject *)&DecoderType) < 0 ||
        PyModule_AddIntConstant(m, "T_INT", T_INT) < 0 || PyModule_AddIntConstant(m, "T_FLOAT", T_FLOAT) < 0 ||
        PyModule_AddIntConstant(m, "T_NUMBER", T_NUMBER) < 0 || PyModule_AddIntConstant(m, "T_STR", T_STR) < 0 ||
        PyModule_AddIntConstant(m, "T_BOOL", T_BOOL) < 0 || PyModule_AddIntConstant(m, "T_EXACT", T_EXACT) < 0 ||
        PyModule_AddIntConstant(m, "T_DECLINE", T_DECLINE) < 0 || PyModule_AddIntConstant(m, "T_DECIMAL", T_DECIMAL) < 0 ||
        PyModule_AddIntConstant(m, "T_CONNECT_DECIMAL", T_CONNECT_DECIMAL) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

