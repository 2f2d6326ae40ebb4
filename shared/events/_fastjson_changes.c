/* Debezium change records: the common envelope read in place into its one or two events
 * (decode_debezium), and Kafka Connect's base64 decimal of a wrapped record's schema.
 */
#include "_fastjson.h"

/* A Kafka Connect decimal (org.apache.kafka.connect.data.Decimal as the JSON converter writes it: the
 * canonical base64 of the unscaled big-endian two's-complement integer) of `scale` as decimal_type makes
 * it from its text ("-12.34"), which is the number Decimal(unscaled).scaleb(-scale) is, digits and
 * exponent alike. Declined: anything but canonical base64 of 1 to 8 bytes, a scale outside [0, 30]. */
PyObject *parse_connect_decimal(Decoder *self, Cursor *c, int scale) {
    const char *s;
    Py_ssize_t n;
    int ascii;
    if (self->decimal_type == NULL || scale < 0 || scale > 30) return NULL;
    if (!scan_string(c, &s, &n, &ascii) || !ascii || n == 0 || n % 4 != 0 || n > 12) return NULL;
    unsigned char raw[9] = {0};
    int len = 0;
    for (Py_ssize_t i = 0; i < n; i += 4) {
        const unsigned char *q = (const unsigned char *)s + i;
        int a = BASE64[q[0]], b = BASE64[q[1]], last = i + 4 == n;
        if (a < 0 || b < 0) return NULL;
        raw[len++] = (unsigned char)(a << 2 | b >> 4);
        if (q[2] == '=') { /* one byte in this quantum: the rest padding, its unused bits zero */
            if (!last || q[3] != '=' || (b & 0x0f)) return NULL;
            break;
        }
        int d2 = BASE64[q[2]];
        if (d2 < 0) return NULL;
        raw[len++] = (unsigned char)((b & 0x0f) << 4 | d2 >> 2);
        if (q[3] == '=') {
            if (!last || (d2 & 0x03)) return NULL;
            break;
        }
        int d3 = BASE64[q[3]];
        if (d3 < 0) return NULL;
        raw[len++] = (unsigned char)((d2 & 0x03) << 6 | d3);
    }
    if (len > 8) return NULL;
    uint64_t u = 0;
    for (int i = 0; i < len; i++) u = u << 8 | raw[i];
    if (len < 8 && (raw[0] & 0x80)) u |= ~(uint64_t)0 << (8 * len); /* sign-extended */
    int negative = (int64_t)u < 0;
    uint64_t magnitude = negative ? (uint64_t)0 - u : u;
    char digits[40], text[64];
    int ndigits = 0;
    do {
        digits[ndigits++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    while (ndigits <= scale) digits[ndigits++] = '0'; /* at least one digit before the point */
    int at = 0;
    if (negative) text[at++] = '-';
    for (int i = ndigits - 1; i >= 0; i--) {
        text[at++] = digits[i];
        if (i == scale && scale > 0) text[at++] = '.';
    }
    PyObject *str = PyUnicode_FromStringAndSize(text, at);
    if (str == NULL) return NULL;
    PyObject *out = PyObject_CallOneArg(self->decimal_type, str);
    Py_DECREF(str);
    return out;
}

#define UNAVAILABLE_TEXT "__debezium_unavailable_value"

/* The JSON value at c->p read past as the refusal scan reads it (not built). 0 declines: not JSON there,
 * or holding what the reference parser may refuse (an integer beyond 64 bits, a surrogate escape). */
static int skip_value(Cursor *c) {
    Scan s;
    memset(&s, 0, sizeof(s));
    s.p = (const unsigned char *)c->p;
    s.end = (const unsigned char *)c->end;
    scan_value(&s, 1);
    if (s.bad || s.unsure || s.big != NULL) return 0;
    c->p = (const char *)s.p;
    return 1;
}

/* A member name as its bytes (ASCII only; anything else declines) followed by its colon. */
static int member_name(Cursor *c, const char **name, Py_ssize_t *len) {
    int ascii;
    return scan_string(c, name, len, &ascii) && ascii && expect(c, ':');
}

static inline int named(const char *name, Py_ssize_t len, const char *word) {
    return (size_t)len == strlen(word) && memcmp(name, word, (size_t)len) == 0;
}

/* `source.table` of a Debezium envelope: the object at c->p read past, its "table" string in *table. */
static int source_table(Cursor *c, const char **table, Py_ssize_t *table_len) {
    if (!expect(c, '{')) return 0;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 1;
    }
    for (;;) {
        const char *name;
        Py_ssize_t len;
        int ascii;
        if (!member_name(c, &name, &len)) return 0;
        if (named(name, len, "table")) {
            if (*table != NULL || !scan_string(c, table, table_len, &ascii) || !ascii) return 0;
        } else if (!skip_value(c)) {
            return 0;
        }
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return 1;
        }
        return 0;
    }
}

/* The event of one row image (the object at `at`, ending at `end`) of relation r; NULL declines. */
static PyObject *image_event(Decoder *self, const RelationSpec *r, const char *at, const char *end, PyObject *delta) {
    Cursor c = {at, end};
    PyObject *row = NULL, *key = NULL, *shown = NULL;
    int fail_col = -1, container = 0;
    int ok = parse_row(self, r, &c, &row, &key, &fail_col, &shown, &container);
    Py_XDECREF(shown);
    if (ok != 1 || c.p != end) {
        Py_XDECREF(row);
        Py_XDECREF(key);
        return NULL;
    }
    PyObject *args[4] = {r->name, row, delta, key != NULL ? key : Py_None};
    PyObject *event = PyObject_Vectorcall(self->event_type, args, 4, NULL);
    Py_DECREF(row);
    Py_XDECREF(key);
    return event;
}

/* The events of one Debezium envelope (the text [start, stop) of `value`), or None: the common record
 * only (op c, r, u or d; the images it needs objects holding exactly the relation's columns and the key
 * field, each of its type; valid JSON with no duplicate envelope member and no unreadable value anywhere).
 * Every other record is declined for the Python decoders, which decide it and name its reason.
 *     decode_debezium(value, start, stop, relation) -> list of events | None
 * relation: the input's relation (str), or None for the record's source.table. */
PyObject *Decoder_decode_debezium(Decoder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyBytes_CheckExact(args[0]) || !PyLong_CheckExact(args[1]) || !PyLong_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "decode_debezium(value: bytes, start: int, stop: int, relation)");
        return NULL;
    }
    if (self->event_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "Decoder.__init__ was not called");
        return NULL;
    }
    const char *text = PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), stop = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (start < 0 || stop > size || start >= stop) Py_RETURN_NONE;
    const char *end = text + stop;
    if (memmem(text + start, (size_t)(stop - start), UNAVAILABLE_TEXT, strlen(UNAVAILABLE_TEXT)) != NULL)
        Py_RETURN_NONE;
    Cursor c = {text + start, end};
    const char *image_at[2] = {NULL, NULL}, *image_end[2] = {NULL, NULL};
    const char *op = NULL, *table = NULL;
    Py_ssize_t op_len = 0, table_len = 0;
    int have_source = 0;
    if (!expect(&c, '{')) Py_RETURN_NONE;
    for (;;) {
        const char *name;
        Py_ssize_t len;
        int ascii;
        if (!member_name(&c, &name, &len)) Py_RETURN_NONE;
        int side = named(name, len, "before") ? 0 : named(name, len, "after") ? 1 : -1;
        if (side >= 0) {
            if (image_at[side] != NULL) Py_RETURN_NONE; /* a duplicate */
            skip_ws(&c);
            image_at[side] = c.p;
            if (!skip_value(&c)) Py_RETURN_NONE;
            image_end[side] = c.p;
        } else if (named(name, len, "op")) {
            if (op != NULL || !scan_string(&c, &op, &op_len, &ascii)) Py_RETURN_NONE;
        } else if (named(name, len, "source") && args[3] == Py_None) {
            if (have_source || !source_table(&c, &table, &table_len)) Py_RETURN_NONE;
            have_source = 1;
        } else if (!skip_value(&c)) {
            Py_RETURN_NONE;
        }
        skip_ws(&c);
        if (c.p < c.end && *c.p == ',') {
            c.p++;
            continue;
        }
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        Py_RETURN_NONE;
    }
    skip_ws(&c);
    if (c.p != c.end || op == NULL || op_len != 1) Py_RETURN_NONE;
    int first, last; /* the images the op takes: before (0), after (1) */
    switch (op[0]) {
        case 'c':
        case 'r':
            first = last = 1;
            break;
        case 'u':
            first = 0, last = 1;
            break;
        case 'd':
            first = last = 0;
            break;
        default:
            Py_RETURN_NONE;
    }
    const char *rel_name = table;
    Py_ssize_t rel_len = table_len;
    if (args[3] != Py_None) {
        if (!PyUnicode_Check(args[3]) || (rel_name = PyUnicode_AsUTF8AndSize(args[3], &rel_len)) == NULL) return NULL;
    }
    if (rel_name == NULL) Py_RETURN_NONE;
    const RelationSpec *rel = NULL;
    for (int i = 0; i < self->nrelations; i++) {
        if (self->relations[i].len == rel_len && memcmp(self->relations[i].utf8, rel_name, (size_t)rel_len) == 0) {
            rel = &self->relations[i];
            break;
        }
    }
    if (rel == NULL || !rel->accepted) Py_RETURN_NONE;
    for (int side = first; side <= last; side++) {
        if (image_at[side] == NULL || *image_at[side] != '{') Py_RETURN_NONE;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    self->changes = 1;
    for (int side = first; side <= last; side++) {
        PyObject *delta = PyLong_FromLong(side == 0 ? -1 : 1);
        PyObject *event = delta == NULL ? NULL : image_event(self, rel, image_at[side], image_end[side], delta);
        Py_XDECREF(delta);
        if (event == NULL || PyList_Append(out, event) < 0) {
            Py_XDECREF(event);
            Py_DECREF(out);
            self->changes = 0;
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        Py_DECREF(event);
    }
    self->changes = 0;
    return out;
}
