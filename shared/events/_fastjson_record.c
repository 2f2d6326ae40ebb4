/* One update event's record parsed into its event (decode_one): the canonical shape only, every column of
 * its declared type; anything else declined, with `refused` set when no decoder accepts it. The module's
 * comment (_fastjson.c) says what is accepted and why.
 */
#include "_fastjson.h"

#include <float.h>

static inline uint32_t hash_bytes(const char *s, Py_ssize_t n) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* A str for the ASCII bytes [s, s + n), from the cache when it holds the same text. */
static PyObject *ascii_str(Decoder *self, const char *s, Py_ssize_t n) {
    PyObject **slot = NULL;
    if (n <= CACHE_MAX_LEN && self->cache != NULL) {
        slot = &self->cache[hash_bytes(s, n) & (CACHE_SLOTS - 1)];
        PyObject *hit = *slot;
        if (hit != NULL && PyUnicode_GET_LENGTH(hit) == n && memcmp(PyUnicode_1BYTE_DATA(hit), s, (size_t)n) == 0)
            return Py_NewRef(hit);
    }
    PyObject *out = PyUnicode_New(n, 127);
    if (out == NULL) return NULL;
    memcpy(PyUnicode_1BYTE_DATA(out), s, (size_t)n);
    if (slot != NULL) Py_XSETREF(*slot, Py_NewRef(out));
    return out;
}

/* A JSON string value as a str; NULL declines (no exception set) or failed (exception set). */
PyObject *parse_str(Decoder *self, Cursor *c) {
    const char *s;
    Py_ssize_t n;
    int ascii;
    if (!scan_string(c, &s, &n, &ascii)) return NULL;
    if (ascii) return ascii_str(self, s, n);
    if (!valid_utf8((const unsigned char *)s, n)) return NULL; /* declined without the decoder's exception */
    PyObject *out = PyUnicode_DecodeUTF8(s, n, "strict");
    if (out == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear(); /* invalid UTF-8: the reference decoder reports it */
    return out;
}

/* Clinger's fast path for the text of a JSON number (the grammar scan_number checked): when its digits
 * make an integer w <= 2^53 and its value is w * 10^e with |e| <= 22, both w and 10^|e| are doubles
 * exactly, so one IEEE multiplication or division rounds the exact value correctly, as strtod does.
 * 1 with *out set, or 0 where the text needs the general parser. */
static int fast_decimal(const char *s, Py_ssize_t n, double *out) {
#if FLT_EVAL_METHOD == 0 /* double arithmetic in double precision (not x87's extended one) */
    static const double powers[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                      1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char *p = s, *end = s + n;
    const int negative = p < end && *p == '-';
    p += negative;
    uint64_t w = 0;
    long e = 0;
    int fraction = 0;
    for (; p < end; p++) {
        if (*p == '.') {
            fraction = 1;
            continue;
        }
        if (*p < '0' || *p > '9') break;
        w = w * 10 + (uint64_t)(*p - '0');
        if (w > (1ULL << 53)) return 0;
        e -= fraction;
    }
    if (p < end) { /* the exponent: [eE][+-]?digits */
        p++;
        const int minus = p < end && *p == '-';
        p += p < end && (*p == '-' || *p == '+');
        long x = 0;
        for (; p < end; p++) {
            x = x * 10 + (*p - '0');
            if (x > 1000) return 0;
        }
        e += minus ? -x : x;
    }
    double d = (double)w;
    if (e > 22 || e < -22) {
        if (w != 0) return 0;
    } else if (e > 0) {
        d *= powers[e];
    } else if (e < 0) {
        d /= powers[-e];
    }
    *out = negative ? -d : d;
    return 1;
#else
    (void)s;
    (void)n;
    (void)out;
    return 0;
#endif
}

/* Correctly rounded, as the reference decoder's parser; NULL (no exception) declines, e.g. overflow. */
PyObject *float_from_text(const char *s, Py_ssize_t n) {
    double fast;
    if (fast_decimal(s, n, &fast)) return PyFloat_FromDouble(fast);
    char buf[MAX_FLOAT_TEXT + 1];
    if (n > MAX_FLOAT_TEXT) return NULL;
    memcpy(buf, s, (size_t)n);
    buf[n] = '\0';
    char *endp = NULL;
    double d = PyOS_string_to_double(buf, &endp, NULL);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return NULL;
    }
    if (endp != buf + n || isinf(d) || isnan(d)) return NULL;
    return PyFloat_FromDouble(d);
}

/* A Decimal from a str or int object (stolen), by the reference decoder's own constructor; NULL declines. */
static PyObject *decimal_of(Decoder *self, PyObject *arg) {
    if (arg == NULL) return NULL;
    PyObject *out = PyObject_CallOneArg(self->decimal_type, arg);
    Py_DECREF(arg);
    if (out == NULL && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear(); /* the reference decides */
    return out;
}

/* Whether [s, s + n) is a plain decimal literal ([+-], digits with at most one point, an exponent of at
 * most 9 digits): text Decimal() reads exactly, as a finite number, under any context. */
static int plain_decimal(const char *s, Py_ssize_t n) {
    const char *p = s, *end = s + n;
    if (p < end && (*p == '+' || *p == '-')) p++;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9') p++, digits++;
    if (p < end && *p == '.') {
        p++;
        while (p < end && *p >= '0' && *p <= '9') p++, digits++;
    }
    if (!digits) return 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const char *exp = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == exp || p - exp > 9) return 0;
    }
    return p == end;
}

/* An exact number as the reference decoder's decimal check makes it: an int, the float's shortest repr,
 * or a plain decimal string, through Decimal(). NULL (no exception) declines. */
static PyObject *parse_decimal(Decoder *self, Cursor *c) {
    int64_t iv;
    const char *s;
    Py_ssize_t n;
    int ascii;
    skip_ws(c);
    if (c->p < c->end && *c->p == '"') {
        if (!scan_string(c, &s, &n, &ascii) || !ascii || !plain_decimal(s, n)) return NULL;
        return decimal_of(self, PyUnicode_FromStringAndSize(s, n));
    }
    int kind = scan_number(c, &iv, &s, &n);
    if (kind == NUM_INT) return decimal_of(self, PyLong_FromLongLong(iv));
    if (kind != NUM_FLOAT) return NULL;
    PyObject *f = float_from_text(s, n);
    if (f == NULL) return NULL;
    PyObject *text = PyObject_Repr(f);
    Py_DECREF(f);
    return decimal_of(self, text);
}

/* Whether a value this decoder declined for a column of `type` is one no decoder accepts there: its JSON
 * kind (read from its first byte) is not the column's, or it is a float for an integer column, or a
 * string with no digit for an exact number. Only routing depends on it (the reference decoder decides). */
static int certainly_wrong(const char *at, const char *end, int type) {
    Cursor c = {at, end};
    int64_t iv;
    const char *s;
    Py_ssize_t n;
    int ascii;
    skip_ws(&c);
    if (c.p >= c.end) return 0;
    char ch = *c.p;
    int number = ch == '-' || (ch >= '0' && ch <= '9');
    switch (type) {
        case T_INT:
            return number ? scan_number(&c, &iv, &s, &n) == NUM_FLOAT : 1;
        case T_FLOAT:
        case T_NUMBER:
            return !number;
        case T_STR:
            return ch != '"';
        case T_BOOL:
            return ch != 't' && ch != 'f';
        case T_EXACT:
        case T_DECIMAL:
            if (number) return 0;
            if (ch != '"') return 1;
            if (!scan_string(&c, &s, &n, &ascii) || !ascii) return 0;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (s[i] >= '0' && s[i] <= '9') return 0;
            }
            return 1; /* Decimal() refuses it or makes a NaN or an infinity of it: a wrong type */
        default:
            return 0;
    }
}

/* The int iv read from column col: the column's cached object where it read the same value last in its
 * slot, else a new int that takes the slot. A new reference. */
static inline PyObject *column_int(Column *col, int64_t iv) {
    if (iv >= -5 && iv <= 256) return PyLong_FromLongLong(iv); /* CPython's shared small ints */
    unsigned slot = (unsigned)(((uint64_t)iv * 0x9E3779B97F4A7C15ULL) >> (64 - INT_CACHE_BITS));
    PyObject *hit = col->ints[slot];
    if (hit != NULL && col->int_values[slot] == iv) return Py_NewRef(hit);
    PyObject *v = PyLong_FromLongLong(iv);
    if (v != NULL) {
        Py_XSETREF(col->ints[slot], Py_NewRef(v));
        col->int_values[slot] = iv;
    }
    return v;
}

/* One value of column col as a new reference; NULL (no exception) declines. */
static PyObject *parse_value(Decoder *self, Cursor *c, Column *col) {
    int type = col->type;
    int64_t iv;
    const char *s;
    Py_ssize_t n;
    int kind;
    switch (type) {
        case T_INT:
            return scan_number(c, &iv, &s, &n) == NUM_INT ? column_int(col, iv) : NULL;
        case T_EXACT: { /* exact: integers stay ints; anything else becomes a Decimal */
            Cursor at = *c;
            if (scan_number(c, &iv, &s, &n) == NUM_INT) return column_int(col, iv);
            *c = at;
            return self->decimal_type != NULL ? parse_decimal(self, c) : NULL;
        }
        case T_DECIMAL:
            if (self->decimal_text) { /* decode_columns(values, decimal_text=True): a plain decimal string as it is */
                Cursor at = *c;
                int ascii;
                skip_ws(c);
                if (c->p < c->end && *c->p == '"') {
                    if (!scan_string(c, &s, &n, &ascii) || !ascii || !plain_decimal(s, n)) return NULL;
                    return PyUnicode_FromStringAndSize(s, n);
                }
                *c = at;
            }
            return parse_decimal(self, c);
        case T_FLOAT:
            kind = scan_number(c, &iv, &s, &n);
            if (kind == NUM_INT) return PyFloat_FromDouble((double)iv); /* exact below 2**53; rounds as float(int) */
            return kind == NUM_FLOAT ? float_from_text(s, n) : NULL;
        case T_NUMBER:
            kind = scan_number(c, &iv, &s, &n);
            if (kind == NUM_INT) return column_int(col, iv);
            return kind == NUM_FLOAT ? float_from_text(s, n) : NULL;
        case T_STR:
            return parse_str(self, c);
        case T_BOOL:
            if (scan_literal(c, "true", 4)) Py_RETURN_TRUE;
            if (scan_literal(c, "false", 5)) Py_RETURN_FALSE;
            return NULL;
        default:
            return NULL;
    }
}

/* The partition key: a string, or an integer as its decimal text. */
static PyObject *parse_key(Decoder *self, Cursor *c) {
    skip_ws(c);
    if (c->p < c->end && *c->p == '"') return parse_str(self, c);
    int64_t iv;
    const char *s;
    Py_ssize_t n;
    if (scan_number(c, &iv, &s, &n) != NUM_INT) return NULL;
    return PyUnicode_FromFormat("%lld", (long long)iv);
}

/* Whether a member's name (len bytes at name) is column col's: compared inline, the names being short. */
static inline int same_name(const Column *col, const char *name, Py_ssize_t len) {
    if (col->len != len) return 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        if (col->utf8[i] != name[i]) return 0;
    }
    return 1;
}

/* The row object of relation r: a dict in column order and, with a key field, the key. 0 declines.
 * 2: the row is otherwise valid, but a column holds a null or a value of the wrong JSON type, which
 * the reference decoder refuses for the first such column in schema order: *fail_col, and in *fail_shown
 * the value as its detail shows it (a new reference; NULL for a null). *container: some such value is an
 * array or an object (read_wrong_value). */
int parse_row(Decoder *self, const RelationSpec *r, Cursor *c, PyObject **row_out, PyObject **key_out,
                     int *fail_col, PyObject **fail_shown, int *container) {
    PyObject *values[MAX_COLUMNS];
    PyObject *key = NULL;
    uint64_t seen = 0, failed = 0;
    int ncol = r->ncolumns, ok = 0, count = 0;
    const uint64_t key_bit = (uint64_t)1 << MAX_COLUMNS;
    if (!expect(c, '{')) return 0;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
    } else {
        for (;;) {
            const char *name;
            Py_ssize_t len;
            int ascii, j = count;
            /* Records mostly list the columns in schema order: the next one is matched in place first. */
            const Column *next = count < ncol ? &r->columns[count] : NULL;
            skip_ws(c);
            if (next != NULL && scan_quoted(c, &next->quoted, next->utf8, next->len, next->plain)) {
                name = r->columns[count].utf8;
                len = r->columns[count].len;
            } else {
                if (!scan_string(c, &name, &len, &ascii)) goto done;
                for (j = 0; j < ncol; j++) {
                    if (same_name(&r->columns[j], name, len)) break;
                }
            }
            if (!expect(c, ':')) goto done;
            if (j < ncol) {
                uint64_t bit = (uint64_t)1 << j;
                if (seen & bit) goto done; /* a duplicate: the reference decoder decides */
                const char *at = c->p;
                int type = r->columns[j].type;
                values[j] = type == T_CONNECT_DECIMAL ? parse_connect_decimal(self, c, r->columns[j].scale)
                                                      : parse_value(self, c, &r->columns[j]);
                if (values[j] == NULL) {
                    if (PyErr_Occurred() || self->changes || !(self->refused = certainly_wrong(at, c->end, type))) goto done;
                    /* a null or a value of the wrong kind: read on, the first in schema order is the verdict */
                    PyObject *shown;
                    c->p = at;
                    if (read_wrong_value(self, c, type, &shown, container) != 1) goto done;
                    if (*fail_col < 0 || j < *fail_col) {
                        *fail_col = j;
                        Py_XSETREF(*fail_shown, shown);
                    } else {
                        Py_XDECREF(shown);
                    }
                    failed |= bit;
                }
                seen |= bit;
                count++;
            } else if (self->key_utf8 != NULL && self->key_len == len &&
                       memcmp(self->key_utf8, name, (size_t)len) == 0) {
                if (seen & key_bit) goto done;
                const char *at = c->p;
                key = parse_key(self, c);
                if (key == NULL) {
                    if (!PyErr_Occurred()) self->refused = certainly_wrong(at, c->end, T_INT) && certainly_wrong(at, c->end, T_STR);
                    goto done;
                }
                seen |= key_bit;
            } else {
                self->refused = 1; /* an unknown column */
                goto done;
            }
            skip_ws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                continue;
            }
            if (c->p < c->end && *c->p == '}') {
                c->p++;
                break;
            }
            goto done;
        }
    }
    if (count != ncol || (self->key_utf8 != NULL && key == NULL)) {
        self->refused = 1; /* a column or the key is missing */
        goto done;
    }
    if (failed) {
        ok = 2;
        goto done;
    }
    if (self->sink != NULL) { /* decode_columns: the values move to the sink, no row dict is made */
        for (int j = 0; j < ncol; j++) self->sink[j] = values[j];
        seen &= key_bit;
        *row_out = Py_NewRef(Py_None);
        *key_out = key;
        key = NULL;
        ok = 1;
        goto done;
    }
    PyObject *row = _PyDict_NewPresized(ncol);
    if (row == NULL) goto done;
    for (int j = 0; j < ncol; j++) {
        if (PyDict_SetItem(row, r->columns[j].name, values[j]) < 0) {
            Py_DECREF(row);
            goto done;
        }
    }
    *row_out = row;
    *key_out = key;
    key = NULL;
    ok = 1;
done:
    for (int j = 0; j < ncol; j++) {
        if ((seen & ~failed) & ((uint64_t)1 << j)) Py_DECREF(values[j]);
    }
    Py_XDECREF(key);
    return ok;
}

static inline int is_ws(char ch) {
    return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t';
}

/* Whether the text ends in a "delta" member the parser would decline (anything but an integer literal of
 * at most 18 digits: NaN, 1e999, an integer beyond 64 bits, ...), read backwards from the closing brace:
 * the record is then declined before its row is built. *certain: the value is certainly not an integer
 * (what decode_one sets `refused` for). */
static int declined_delta(const char *text, const char *end, int *certain) {
    const char *p = end;
    *certain = 0;
    while (p > text && is_ws(p[-1])) p--;
    if (p == text || p[-1] != '}') return 0;
    p--;
    while (p > text && is_ws(p[-1])) p--;
    const char *value_end = p, *q = p;
    while (q > text && q[-1] != ':' && q[-1] != ',' && q[-1] != '"' && value_end - q <= 400) q--;
    if (q == text || q[-1] != ':' || q == value_end) return 0;
    const char *r = q - 1;
    while (r > text && is_ws(r[-1])) r--;
    if (r - text < 7 || memcmp(r - 7, "\"delta\"", 7) != 0) return 0;
    while (q < value_end && is_ws(*q)) q++;
    const char *digits = q < value_end && *q == '-' ? q + 1 : q;
    Py_ssize_t n = value_end - digits;
    int integer = n >= 1 && n <= 18 && (n == 1 || *digits != '0');
    for (const char *d = digits; integer && d < value_end; d++) integer = *d >= '0' && *d <= '9';
    if (integer) return 0;
    *certain = certainly_wrong(q, value_end, T_INT);
    return 1;
}

/* One record value as a new UpdateEvent (a new reference to its key in *key_out); NULL declines.
 * A NULL with an exception set is a real error (out of memory), not a decline. */
PyObject *decode_one(Decoder *self, PyObject *value, PyObject **key_out) {
    if (!PyBytes_CheckExact(value)) return NULL;
    if (self->max_size >= 0 && PyBytes_GET_SIZE(value) > self->max_size) return NULL;
    Cursor c = {PyBytes_AS_STRING(value), PyBytes_AS_STRING(value) + PyBytes_GET_SIZE(value)};
    if (declined_delta(c.p, c.end, &self->refused)) return NULL;
    const RelationSpec *rel = NULL;
    PyObject *row = NULL, *key = NULL, *event = NULL;
    int have_delta = 0, fail_col = -1, container = 0;
    PyObject *fail_shown = NULL;
    int64_t delta = 0;
    self->refused = 0;
    if (!expect(&c, '{')) return NULL;
    for (;;) {
        const char *name;
        Py_ssize_t len;
        int ascii;
        /* The three fields' names matched in place (in the order records mostly give them) before reading
         * any other string. */
        if (scan_name(&c, "relation", 8)) {
            name = "relation";
            len = 8;
        } else if (scan_name(&c, "row", 3)) {
            name = "row";
            len = 3;
        } else if (scan_name(&c, "delta", 5)) {
            name = "delta";
            len = 5;
        } else if (!scan_string(&c, &name, &len, &ascii)) {
            goto decline;
        }
        if (!expect(&c, ':')) goto decline;
        if (len == 8 && memcmp(name, "relation", 8) == 0) {
            if (rel != NULL || row != NULL) goto decline; /* a duplicate, or the row came first */
            const char *s;
            Py_ssize_t n;
            for (int i = 0; i < self->nrelations && rel == NULL; i++) { /* a relation's name in place */
                const RelationSpec *r = &self->relations[i];
                if (scan_quoted(&c, &r->quoted, r->utf8, r->len, r->plain)) rel = r;
            }
            if (rel == NULL) {
                if (!scan_string(&c, &s, &n, &ascii)) goto decline;
                for (int i = 0; i < self->nrelations; i++) {
                    if (self->relations[i].len == n && memcmp(self->relations[i].utf8, s, (size_t)n) == 0) {
                        rel = &self->relations[i];
                        break;
                    }
                }
            }
            if (rel == NULL) self->refused = 1; /* an unknown relation */
            if (rel == NULL || !rel->accepted) goto decline;
        } else if (len == 3 && memcmp(name, "row", 3) == 0) {
            if (rel == NULL || row != NULL || fail_col >= 0) goto decline;
            if (!parse_row(self, rel, &c, &row, &key, &fail_col, &fail_shown, &container)) goto decline;
        } else if (len == 5 && memcmp(name, "delta", 5) == 0) {
            const char *s;
            Py_ssize_t n;
            if (have_delta) goto decline;
            const char *at = c.p;
            int kind = scan_number(&c, &delta, &s, &n);
            if (kind != NUM_INT || delta == 0) { /* zero, or not an integer (refused), or too long (unsure) */
                self->refused = kind == NUM_INT || certainly_wrong(at, c.end, T_INT);
                goto decline;
            }
            have_delta = 1;
        } else {
            self->refused = 1; /* an unknown field */
            goto decline;
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
        goto decline;
    }
    skip_ws(&c);
    if (c.p != c.end) goto decline;
    if ((row == NULL && fail_col < 0) || !have_delta) {
        self->refused = 1; /* a field is missing */
        goto decline;
    }
    if (fail_col >= 0) { /* valid JSON, every check before the columns passed: the reference's verdict */
        if (container && (self->max_depth < 0 || nesting_exceeds(PyBytes_AS_STRING(value), c.end, self->max_depth) != 0)) {
            self->refused = 1; /* too deep, or undecided: the refusal scan decides */
            goto decline;
        }
        event = column_error(self, rel, fail_col, fail_shown);
        Py_XDECREF(fail_shown);
        return event;
    }
    if (self->sink != NULL) { /* decode_columns: the row's values are in the sink */
        Py_DECREF(row);
        self->sink_rel = rel;
        self->sink_delta = delta;
        *key_out = key;
        return Py_NewRef(Py_True);
    }
    PyObject *d = PyLong_FromLongLong(delta);
    if (d == NULL) goto decline;
    PyObject *args[4] = {rel->name, row, d, key != NULL ? key : Py_None};
    event = PyObject_Vectorcall(self->event_type, args, 4, NULL);
    Py_DECREF(d);
    Py_DECREF(row);
    if (event != NULL) {
        *key_out = key;
    } else {
        Py_XDECREF(key);
    }
    return event;
decline:
    if (self->sink != NULL && row != NULL) { /* the values the sink took are not used */
        for (int j = 0; j < rel->ncolumns; j++) Py_CLEAR(self->sink[j]);
    }
    Py_XDECREF(row);
    Py_XDECREF(key);
    Py_XDECREF(fail_shown);
    return NULL;
}
