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
 * rejection reasons. So this file can only make decoding faster, never change a verdict; the test suite
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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { T_INT = 0, T_FLOAT = 1, T_NUMBER = 2, T_STR = 3, T_BOOL = 4, T_EXACT = 5, T_DECLINE = 6, T_DECIMAL = 7,
       T_CONNECT_DECIMAL = 8 /* change records only: Kafka Connect's base64 decimal, Column.scale */ };

#define MAX_COLUMNS 62 /* one bit per column plus the key field in a 64-bit "seen" mask */
#define MAX_FLOAT_TEXT 63
/* Short ASCII strings (keys, symbols, ids) repeat: a direct-mapped cache of recent ones saves the
 * allocation, and the cached str keeps its hash, so grouping by key does not rehash it. */
#define CACHE_SLOTS 4096
#define CACHE_MAX_LEN 32

typedef struct {
    PyObject *name;     /* str, the dict key */
    const char *utf8;   /* its UTF-8 bytes, owned by name */
    Py_ssize_t len;
    int type;
    int scale; /* T_CONNECT_DECIMAL: the schema's scale */
    /* made on the first refusal of a record for this column (column_error): */
    PyObject *null_detail;  /* "R.C is null" */
    PyObject *null_args;    /* its error's args, ("null-value: R.C is null",) */
    PyObject *wrong_prefix; /* "R.C must be <what> (<type>), got " */
} Column;

typedef struct {
    PyObject *name;
    const char *utf8;
    Py_ssize_t len;
    Column *columns;
    int ncolumns;
    int accepted; /* 0: every record of this relation goes to the fallback */
} RelationSpec;

typedef struct {
    PyObject_HEAD
    RelationSpec *relations;
    int nrelations;
    PyObject *key_field; /* str or NULL */
    const char *key_utf8;
    Py_ssize_t key_len;
    PyObject *event_type;
    PyObject *error_type;
    PyObject *fallback;
    PyObject *empty_key; /* "" : the one group of a service without key_field */
    PyObject **cache;    /* CACHE_SLOTS recent short ASCII strings (owned references) or NULL */
    Py_ssize_t max_size; /* longer values are refused as oversized; -1: no limit */
    PyObject *refuse;    /* the reference decoder, for values the refusal scan finds invalid */
    int max_depth;       /* deeper values are refused as too-deep; -1: not checked here */
    PyObject *decimal_type; /* decimal.Decimal, for decimal and exact columns; NULL: those are declined */
    PyObject *utf8_detail;  /* the reference decoder's detail for bytes that are not UTF-8; NULL: its call */
    int changes; /* set while decode_debezium runs: a column that does not parse declines the record */
    int refused; /* set by decode_one: it declined a value no decoder accepts (goes to `refuse`) */
    PyObject *json_loads; /* the reference decoder's JSON parser, for its error on text that is not JSON; NULL: `refuse` */
    PyObject *json_messages; /* its messages for FAIL_END, FAIL_VALUE, FAIL_SIGN, FAIL_INFINITY; NULL: it is called */
    PyObject *json_details;  /* for each, the start of its detail: "not valid JSON: <message>: line " */
    PyObject *deep_detail;   /* the detail of every too-deep refusal (max_depth is fixed) */
    PyObject *deep_args, *utf8_args; /* the args of their errors, made on first use */
    PyObject *size_tail; /* " bytes, over the limit of <max_size>": the end of every oversized detail */
    PyObject *code_slot, *detail_slot; /* error_type's slot descriptors, or NULL (error_slots) */
    /* set while decode_columns runs: a parsed row's values go to `sink` (owned references) instead of
     * a row dict, and decode_one answers Py_True with the relation and delta here */
    PyObject **sink;
    const RelationSpec *sink_rel;
    int64_t sink_delta;
} Decoder;

/* --- the parser ------------------------------------------------------------------------------------ */

/* The text of a bytes object, which CPython always follows with a NUL byte: no character class the
 * scanning loops continue on (whitespace, digits, plain string bytes) contains NUL, so those loops stop
 * at the end without a bounds check, and the position is compared with `end` afterwards. */
typedef struct {
    const char *p;
    const char *end;
} Cursor;

static inline void skip_ws(Cursor *c) {
    if ((unsigned char)*c->p > ' ') return; /* the common case: no whitespace */
    while (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t') c->p++;
}

static inline int expect(Cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* Bytes that end or complicate a JSON string: the quote, a backslash, control characters, non-ASCII. */
static unsigned char STRING_SPECIAL[256];

/* Each base64 digit's value; -1: not a digit. */
static signed char BASE64[256];

static void init_tables(void) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int ch = 0; ch < 256; ch++) {
        STRING_SPECIAL[ch] = ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x80;
        BASE64[ch] = -1;
    }
    for (int i = 0; i < 64; i++) BASE64[(unsigned char)digits[i]] = (signed char)i;
}

/* A string without escapes or control characters: its raw bytes in [*s, *s + *n). 0 declines. */
static inline int scan_string(Cursor *c, const char **s, Py_ssize_t *n, int *ascii) {
    skip_ws(c);
    if (c->p >= c->end || *c->p != '"') return 0;
    const unsigned char *start = (const unsigned char *)++c->p, *end = (const unsigned char *)c->end;
    const unsigned char *p = start;
    int only_ascii = 1;
    for (;;) {
        while (!STRING_SPECIAL[*p]) p++; /* stops at the NUL after the text at the latest */
        if (p >= end) return 0;
        if (*p == '"') break;
        if (*p < 0x80) return 0; /* a backslash or a control character */
        only_ascii = 0;
        p++;
    }
    *s = (const char *)start;
    *n = (const char *)p - (const char *)start;
    *ascii = only_ascii;
    c->p = (const char *)p + 1;
    return 1;
}

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

static int valid_utf8(const unsigned char *p, Py_ssize_t n);

/* A JSON string value as a str; NULL declines (no exception set) or failed (exception set). */
static PyObject *parse_str(Decoder *self, Cursor *c) {
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

enum { NUM_NONE = 0, NUM_INT = 1, NUM_FLOAT = 2 };

/* A JSON number by the JSON grammar. NUM_INT: *iv holds it (at most 18 digits, so it fits int64);
 * NUM_FLOAT: the text is [*s, *s + *n). NUM_NONE declines. */
static inline int scan_number(Cursor *c, int64_t *iv, const char **s, Py_ssize_t *n) {
    skip_ws(c);
    const char *start = c->p, *p = c->p, *end = c->end;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p >= end || *p < '0' || *p > '9') return NUM_NONE;
    const char *digits = p;
    uint64_t v = 0;
    if (*p == '0') {
        p++;
    } else {
        while (p < end && *p >= '0' && *p <= '9') {
            v = v * 10 + (uint64_t)(*p - '0');
            p++;
            if (p - digits > 18) return NUM_NONE;
        }
    }
    int is_float = 0;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return NUM_NONE;
        while (p < end && *p >= '0' && *p <= '9') p++;
        is_float = 1;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return NUM_NONE;
        while (p < end && *p >= '0' && *p <= '9') p++;
        is_float = 1;
    }
    c->p = p;
    if (is_float) {
        *s = start;
        *n = p - start;
        return NUM_FLOAT;
    }
    *iv = negative ? -(int64_t)v : (int64_t)v;
    return NUM_INT;
}

/* Correctly rounded, as the reference decoder's parser; NULL (no exception) declines, e.g. overflow. */
static PyObject *float_from_text(const char *s, Py_ssize_t n) {
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

static inline int scan_literal(Cursor *c, const char *word, Py_ssize_t n) {
    skip_ws(c);
    if (c->end - c->p >= n && memcmp(c->p, word, (size_t)n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
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

/* One column value of the given type as a new reference; NULL (no exception) declines. */
static PyObject *parse_value(Decoder *self, Cursor *c, int type) {
    int64_t iv;
    const char *s;
    Py_ssize_t n;
    int kind;
    switch (type) {
        case T_INT:
            return scan_number(c, &iv, &s, &n) == NUM_INT ? PyLong_FromLongLong(iv) : NULL;
        case T_EXACT: { /* exact: integers stay ints; anything else becomes a Decimal */
            Cursor at = *c;
            if (scan_number(c, &iv, &s, &n) == NUM_INT) return PyLong_FromLongLong(iv);
            *c = at;
            return self->decimal_type != NULL ? parse_decimal(self, c) : NULL;
        }
        case T_DECIMAL:
            return parse_decimal(self, c);
        case T_FLOAT:
            kind = scan_number(c, &iv, &s, &n);
            if (kind == NUM_INT) return PyFloat_FromDouble((double)iv); /* exact below 2**53; rounds as float(int) */
            return kind == NUM_FLOAT ? float_from_text(s, n) : NULL;
        case T_NUMBER:
            kind = scan_number(c, &iv, &s, &n);
            if (kind == NUM_INT) return PyLong_FromLongLong(iv);
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

/* A Kafka Connect decimal (org.apache.kafka.connect.data.Decimal as the JSON converter writes it: the
 * canonical base64 of the unscaled big-endian two's-complement integer) of `scale` as decimal_type makes
 * it from its text ("-12.34"), which is the number Decimal(unscaled).scaleb(-scale) is, digits and
 * exponent alike. Declined: anything but canonical base64 of 1 to 8 bytes, a scale outside [0, 30]. */
static PyObject *parse_connect_decimal(Decoder *self, Cursor *c, int scale) {
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

/* --- the refusal scan: what a declined value certainly is, without building objects ---------------- */

/* Whether the text nests arrays and objects deeper than `limit`, read as the reference decoder reads it
 * (shared/events/reasons.py too_deep): brackets outside strings, a backslash in a string escaping the
 * next byte. 1: deeper; 0: not; -1: undecided (a string runs to the end, which that reading treats
 * differently, so the reference decoder decides; unless there are too few brackets to nest that deep). */
static int nesting_exceeds(const char *p, const char *end, int limit) {
    int depth = 0, opening = 0;
    for (const char *q = p; q < end; q++) opening += *q == '[' || *q == '{';
    if (opening <= limit) return 0; /* too shallow however strings are read (as too_deep's first test) */
    while (p < end) {
        char ch = *p++;
        if (ch == '"') {
            for (;;) {
                if (p >= end) return -1;
                char in = *p++;
                if (in == '"') break;
                if (in == '\\') {
                    if (p >= end) return -1;
                    p++;
                }
            }
        } else if (ch == '[' || ch == '{') {
            if (++depth > limit) return 1;
        } else if (ch == ']' || ch == '}') {
            depth--;
        }
    }
    return 0;
}

/* Where a text stops being JSON, for the failures whose message from the reference decoder's parser is
 * known (json_error): the text ends too soon; a value starts with N or I (NaN, Infinity); a minus sign is
 * followed by N or I; a number overflows a double. FAIL_OTHER: any other, that parser says what. */
enum { FAIL_OTHER = 0, FAIL_END = 1, FAIL_VALUE = 2, FAIL_SIGN = 3, FAIL_INFINITY = 4 };

/* A strict JSON reader that only notes what no update event may hold. `bad`: the text is not JSON (NaN
 * and Infinity included) or not UTF-8; the reader stops there, noting how (`fail`) and where (`fail_at`).
 * Otherwise, read to the end: `null` (a null anywhere), `big` (the first integer literal outside
 * [-2**63, 2**64 - 1], the reference decoder's first check after parsing) and `unsure` (an escaped
 * surrogate, a number literal too long to judge here: whether the reference parser reads the text is
 * then left to it). */
typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    int bad;
    int null;
    int unsure;
    const unsigned char *big;
    Py_ssize_t big_len;
    int fail;
    const unsigned char *fail_at;
} Scan;

static void fail(Scan *s, int kind, const unsigned char *at) {
    s->bad = 1;
    s->fail = kind;
    s->fail_at = at;
}

/* Not JSON at the reader's position: the end of the text, or a failure of another kind. */
static void fail_here(Scan *s) {
    fail(s, s->p >= s->end ? FAIL_END : FAIL_OTHER, s->p);
}

#define MAX_JUDGED_DIGITS 300 /* longer integers may overflow the reference parser's double */

static void scan_ws(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}

static int is_hex(unsigned char ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* The length of the UTF-8 sequence at p (RFC 3629: no overlongs, no surrogates, at most U+10FFFF); 0: invalid. */
static int utf8_sequence(const unsigned char *p, const unsigned char *end) {
    unsigned char b = p[0];
    int n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
        n = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (end - p < n || p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    }
    return n;
}

/* Whether the n bytes at p are UTF-8 (RFC 3629). */
static int valid_utf8(const unsigned char *p, Py_ssize_t n) {
    const unsigned char *end = p + n;
    while (p < end) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        int len = utf8_sequence(p, end);
        if (len == 0) return 0;
        p += len;
    }
    return 1;
}

static void scan_string_value(Scan *s) {
    s->p++; /* the opening quote */
    while (s->p < s->end) {
        unsigned char ch = *s->p;
        if (ch == '"') {
            s->p++;
            return;
        }
        if (ch < 0x20) break;
        if (ch == '\\') {
            if (s->end - s->p < 2) break;
            unsigned char esc = s->p[1];
            if (esc == 'u') {
                if (s->end - s->p < 6) { /* the text ends in the escape, or is not JSON before that */
                    for (const unsigned char *q = s->p + 2; q < s->end; q++) {
                        if (!is_hex(*q)) {
                            fail(s, FAIL_OTHER, s->p);
                            return;
                        }
                    }
                    fail(s, FAIL_END, s->end);
                    return;
                }
                if (!is_hex(s->p[2]) || !is_hex(s->p[3]) || !is_hex(s->p[4]) || !is_hex(s->p[5])) break;
                if ((s->p[2] == 'd' || s->p[2] == 'D') && strchr("89abcdefABCDEF", s->p[3]) != NULL && s->p[3] != 0)
                    s->unsure = 1; /* a surrogate: whether it is paired is the reference parser's call */
                s->p += 6;
            } else if (strchr("\"\\/bfnrt", esc) != NULL && esc != 0) {
                s->p += 2;
            } else {
                break;
            }
            continue;
        }
        if (ch < 0x80) {
            s->p++;
            continue;
        }
        int n = utf8_sequence(s->p, s->end);
        if (n == 0) break;
        s->p += n;
    }
    if (s->p < s->end && *s->p == '\\' && s->end - s->p < 2) {
        fail(s, FAIL_END, s->end); /* the text ends in an escape */
        return;
    }
    fail_here(s);
}

/* Whether the integer literal of `ndigits` digits at `digits` lies outside [-2**63, 2**64 - 1]. */
static int integer_out_of_range(const unsigned char *digits, Py_ssize_t ndigits, int negative) {
    const char *bound = negative ? "9223372036854775808" : "18446744073709551615";
    Py_ssize_t blen = (Py_ssize_t)strlen(bound);
    if (ndigits != blen) return ndigits > blen;
    return memcmp(digits, bound, (size_t)blen) > 0;
}

static void scan_number_value(Scan *s) {
    const unsigned char *start = s->p;
    int negative = 0;
    if (*s->p == '-') {
        negative = 1;
        s->p++;
    }
    const unsigned char *digits = s->p;
    if (negative && s->p < s->end && (*s->p == 'N' || *s->p == 'I')) { /* -NaN, -Infinity */
        fail(s, FAIL_SIGN, s->p);
        return;
    }
    if (s->p >= s->end || *s->p < '0' || *s->p > '9') goto bad;
    if (*s->p == '0') {
        s->p++;
    } else {
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
    }
    Py_ssize_t ndigits = s->p - digits;
    int is_float = 0;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (s->p >= s->end || *s->p < '0' || *s->p > '9') goto bad;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
        is_float = 1;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-')) s->p++;
        if (s->p >= s->end || *s->p < '0' || *s->p > '9') goto bad;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
        is_float = 1;
    }
    if (!is_float) {
        if (ndigits > MAX_JUDGED_DIGITS) {
            s->unsure = 1;
        } else if (s->big == NULL && integer_out_of_range(digits, ndigits, negative)) {
            s->big = start;
            s->big_len = s->p - start;
        }
        return;
    }
    if (s->p - start > MAX_FLOAT_TEXT) {
        s->unsure = 1;
        return;
    }
    char buf[MAX_FLOAT_TEXT + 1];
    memcpy(buf, start, (size_t)(s->p - start));
    buf[s->p - start] = '\0';
    double d = PyOS_string_to_double(buf, NULL, NULL);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        goto bad;
    }
    if (isinf(d)) { /* a float no double holds (1e999) */
        fail(s, FAIL_INFINITY, start);
        return;
    }
    if (d == 0.0 && strpbrk(buf, "123456789") != NULL) s->unsure = 1; /* underflow: the parser's call */
    return;
bad:
    fail_here(s);
}

static void scan_value(Scan *s, int depth);

static void scan_container(Scan *s, int depth, int object) {
    unsigned char close = object ? '}' : ']';
    s->p++;
    scan_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return;
    }
    for (;;) {
        if (object) {
            scan_ws(s);
            if (s->p >= s->end || *s->p != '"') break;
            scan_string_value(s);
            if (s->bad) return;
            scan_ws(s);
            if (s->p >= s->end || *s->p != ':') break;
            s->p++;
        }
        scan_value(s, depth + 1);
        if (s->bad) return;
        scan_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return;
        }
        break;
    }
    fail_here(s);
}

static void scan_value(Scan *s, int depth) {
    scan_ws(s);
    if (s->p >= s->end || depth > 64) { /* deeper texts were refused or left undecided before */
        if (s->p >= s->end) fail(s, FAIL_END, s->p);
        return;
    }
    unsigned char ch = *s->p;
    if (ch == '{' || ch == '[') {
        scan_container(s, depth, ch == '{');
    } else if (ch == '"') {
        scan_string_value(s);
    } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
        scan_number_value(s);
    } else if (s->end - s->p >= 4 && memcmp(s->p, "true", 4) == 0) {
        s->p += 4;
    } else if (s->end - s->p >= 5 && memcmp(s->p, "false", 5) == 0) {
        s->p += 5;
    } else if (s->end - s->p >= 4 && memcmp(s->p, "null", 4) == 0) {
        s->p += 4;
        s->null = 1;
    } else if (ch == 'N' || ch == 'I') {
        fail(s, FAIL_VALUE, s->p); /* NaN, Infinity */
    } else {
        const char *word = ch == 't' ? "true" : ch == 'f' ? "false" : ch == 'n' ? "null" : NULL;
        Py_ssize_t left = s->end - s->p;
        int cut = word != NULL && left < (Py_ssize_t)strlen(word) && memcmp(s->p, word, (size_t)left) == 0;
        fail(s, cut ? FAIL_END : FAIL_OTHER, cut ? s->end : s->p); /* a literal the text ends in, or not JSON */
    }
}

static void scan_text(Scan *s, const char *text, Py_ssize_t n) {
    memset(s, 0, sizeof(*s));
    s->p = (const unsigned char *)text;
    s->end = s->p + n;
    scan_value(s, 0);
    if (!s->bad) {
        scan_ws(s);
        if (s->p != s->end) fail(s, FAIL_OTHER, s->p);
    }
}

/* The array or object at s->p read past as scan_value reads it, and its size as the parsed value has it:
 * an array's elements, an object's members. -1: not counted here, because the text is not JSON there, or
 * holds an integer beyond 64 bits or something the scan is unsure of (the reference decoder refuses those
 * before it looks at columns), or it is an object of two or more members (names may repeat, and the
 * parsed dict keeps one of each). */
static Py_ssize_t container_size(Scan *s) {
    int object = *s->p == '{';
    unsigned char close = object ? '}' : ']';
    Py_ssize_t count = 0;
    s->p++;
    scan_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 0;
    }
    for (;;) {
        if (object) {
            scan_ws(s);
            if (s->p >= s->end || *s->p != '"') return -1;
            scan_string_value(s);
            if (s->bad) return -1;
            scan_ws(s);
            if (s->p >= s->end || *s->p != ':') return -1;
            s->p++;
        }
        scan_value(s, 1);
        if (s->bad) return -1;
        count++;
        scan_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == close) {
            s->p++;
            break;
        }
        return -1;
    }
    if (s->unsure || s->big != NULL || (object && count > 1)) return -1;
    return count;
}

/* A null, a string without escapes, a number or a boolean: *v its value (NULL for null), 1. A value of
 * another kind, or one the parser does not read: 0, the cursor anywhere. -1: failed (exception set). */
static int read_scalar(Decoder *self, Cursor *c, PyObject **v) {
    int64_t iv;
    const char *s;
    Py_ssize_t n;
    *v = NULL;
    skip_ws(c);
    if (c->p >= c->end) return 0;
    char ch = *c->p;
    if (ch == 'n') return scan_literal(c, "null", 4);
    if (ch == 't' || ch == 'f') {
        if (scan_literal(c, "true", 4)) *v = Py_NewRef(Py_True);
        else if (scan_literal(c, "false", 5)) *v = Py_NewRef(Py_False);
        return *v != NULL;
    }
    if (ch == '"') {
        *v = parse_str(self, c);
    } else {
        int kind = scan_number(c, &iv, &s, &n);
        if (kind == NUM_INT) *v = PyLong_FromLongLong(iv);
        else if (kind == NUM_FLOAT) *v = float_from_text(s, n);
    }
    if (*v != NULL) return 1;
    return PyErr_Occurred() ? -1 : 0;
}

/* A value as the reference decoder's rejection shows it (shared/events/reasons.py shown): its repr, cut to
 * 80 characters. */
static PyObject *shown_repr(PyObject *v) {
    PyObject *text = PyObject_Repr(v);
    if (text == NULL || PyUnicode_GET_LENGTH(text) <= 80) return text;
    PyObject *cut = PyUnicode_Substring(text, 0, 77);
    Py_DECREF(text);
    if (cut == NULL) return NULL;
    text = PyUnicode_FromFormat("%U...", cut);
    Py_DECREF(cut);
    return text;
}

/* A value certainly_wrong found of the wrong kind for a column of `type`, read past: 1, and in *shown
 * how the reference decoder's rejection shows it (NULL for a null): a scalar by its repr, a container by
 * its kind and size (then *container is set: the caller checks the nesting of the whole text, which the
 * reference decoder refuses first). A string in a decimal column is read here when it is ASCII without
 * a digit or an n: Decimal() refuses it (every infinity and NaN it reads is spelled with an n). 0: not read
 * here, the reference decoder decides; -1: failed (exception set). */
static int read_wrong_value(Decoder *self, Cursor *c, int type, PyObject **shown, int *container) {
    PyObject *v = NULL;
    *shown = NULL;
    skip_ws(c);
    if (c->p >= c->end) return 0;
    char ch = *c->p;
    if (ch == '[' || ch == '{') {
        Scan s;
        memset(&s, 0, sizeof(s));
        s.p = (const unsigned char *)c->p;
        s.end = (const unsigned char *)c->end;
        Py_ssize_t size = container_size(&s);
        if (size < 0) return 0;
        c->p = (const char *)s.p;
        *container = 1;
        *shown = ch == '[' ? PyUnicode_FromFormat("an array of %zd element(s)", size)
                           : PyUnicode_FromFormat("an object of %zd member(s)", size);
        return *shown != NULL ? 1 : -1;
    }
    if (ch == '"' && (type == T_DECIMAL || type == T_EXACT)) {
        const char *s;
        Py_ssize_t n;
        int ascii;
        if (!scan_string(c, &s, &n, &ascii) || !ascii) return 0;
        if (memchr(s, 'n', (size_t)n) != NULL || memchr(s, 'N', (size_t)n) != NULL) return 0;
        v = PyUnicode_FromStringAndSize(s, n);
        if (v == NULL) return -1;
    } else {
        int rc = read_scalar(self, c, &v);
        if (rc != 1 || v == NULL) return rc; /* v NULL: a null */
    }
    *shown = shown_repr(v);
    Py_DECREF(v);
    return *shown != NULL ? 1 : -1;
}

/* The row object of relation r: a dict in column order and, with a key field, the key. 0 declines.
 * 2: the row is otherwise valid, but a column holds a null or a value of the wrong JSON type, which
 * the reference decoder refuses for the first such column in schema order: *fail_col, and in *fail_shown
 * the value as its detail shows it (a new reference; NULL for a null). *container: some such value is an
 * array or an object (read_wrong_value). */
static int parse_row(Decoder *self, const RelationSpec *r, Cursor *c, PyObject **row_out, PyObject **key_out,
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
            int ascii;
            if (!scan_string(c, &name, &len, &ascii) || !expect(c, ':')) goto done;
            int j;
            for (j = 0; j < ncol; j++) {
                if (r->columns[j].len == len && memcmp(r->columns[j].utf8, name, (size_t)len) == 0) break;
            }
            if (j < ncol) {
                uint64_t bit = (uint64_t)1 << j;
                if (seen & bit) goto done; /* a duplicate: the reference decoder decides */
                const char *at = c->p;
                int type = r->columns[j].type;
                values[j] = type == T_CONNECT_DECIMAL ? parse_connect_decimal(self, c, r->columns[j].scale)
                                                      : parse_value(self, c, type);
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

static PyObject *event_error(Decoder *self, const char *code, PyObject *detail);
static PyObject *event_error_cached(Decoder *self, const char *code, PyObject *detail, PyObject **args);

/* The reference decoder's error for column j of relation r holding a value it shows as `shown` (NULL: a
 * null), detail and all: "R.C is null", or "R.C must be <what> (<type>), got <shown>". */
static PyObject *column_error(Decoder *self, const RelationSpec *r, int j, PyObject *shown) {
    static const char *const expected[] = {"an integer", "a number", "a number", "a string", "a boolean",
                                           "a decimal number or decimal string", "", "a decimal number or decimal string"};
    static const char *const names[] = {"int", "float", "number", "str", "bool", "exact", "", "decimal"};
    Column *col = &r->columns[j];
    if (shown == NULL) {
        if (col->null_detail == NULL &&
            (col->null_detail = PyUnicode_FromFormat("%U.%U is null", r->name, col->name)) == NULL)
            return NULL;
        return event_error_cached(self, "null-value", col->null_detail, &col->null_args);
    }
    if (col->wrong_prefix == NULL &&
        (col->wrong_prefix = PyUnicode_FromFormat("%U.%U must be %s (%s), got ", r->name, col->name,
                                                  expected[col->type], names[col->type])) == NULL)
        return NULL;
    return event_error(self, "wrong-type", PyUnicode_Concat(col->wrong_prefix, shown));
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
static PyObject *decode_one(Decoder *self, PyObject *value, PyObject **key_out) {
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
        if (!scan_string(&c, &name, &len, &ascii) || !expect(&c, ':')) goto decline;
        if (len == 8 && memcmp(name, "relation", 8) == 0) {
            if (rel != NULL || row != NULL) goto decline; /* a duplicate, or the row came first */
            const char *s;
            Py_ssize_t n;
            if (!scan_string(&c, &s, &n, &ascii)) goto decline;
            for (int i = 0; i < self->nrelations; i++) {
                if (self->relations[i].len == n && memcmp(self->relations[i].utf8, s, (size_t)n) == 0) {
                    rel = &self->relations[i];
                    break;
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

/* --- Debezium change records --------------------------------------------------------------------------- */

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
static PyObject *Decoder_decode_debezium(Decoder *self, PyObject *const *args, Py_ssize_t nargs) {
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

/* The reason codes this file refuses records with, each with its str and the "<code>: " that starts
 * an error's message; made once per process (the codes are string literals, told apart by address). */
#define MAX_CODES 16
static struct {
    const char *code;
    PyObject *str;
    PyObject *prefix;
} codes[MAX_CODES];

static int code_strings(const char *code, PyObject **str, PyObject **prefix) {
    int i = 0;
    for (; i < MAX_CODES && codes[i].code != NULL; i++) {
        if (codes[i].code == code) {
            *str = codes[i].str;
            *prefix = codes[i].prefix;
            return 0;
        }
    }
    PyObject *made = PyUnicode_InternFromString(code);
    PyObject *start = made != NULL ? PyUnicode_FromFormat("%s: ", code) : NULL;
    if (start == NULL) {
        Py_XDECREF(made);
        return -1;
    }
    *str = made;
    *prefix = start;
    if (i < MAX_CODES) { /* kept for the process; past MAX_CODES made every time (and leaked: never reached) */
        codes[i].code = code;
        codes[i].str = made;
        codes[i].prefix = start;
    }
    return 0;
}

/* A new error_type instance with `args`, `code` and `detail`. */
static PyObject *make_error(Decoder *self, PyObject *args, PyObject *code_str, PyObject *detail) {
    static PyObject *code_name = NULL, *detail_name = NULL;
    PyTypeObject *type = (PyTypeObject *)self->error_type;
    PyObject *err = type->tp_new(type, args, NULL);
    if (err == NULL) return NULL;
    if (self->code_slot != NULL && self->detail_slot != NULL) {
        if (Py_TYPE(self->code_slot)->tp_descr_set(self->code_slot, err, code_str) < 0 ||
            Py_TYPE(self->detail_slot)->tp_descr_set(self->detail_slot, err, detail) < 0)
            Py_CLEAR(err);
        return err;
    }
    if (code_name == NULL) code_name = PyUnicode_InternFromString("code");
    if (detail_name == NULL) detail_name = PyUnicode_InternFromString("detail");
    if (code_name == NULL || detail_name == NULL || PyObject_SetAttr(err, code_name, code_str) < 0 ||
        PyObject_SetAttr(err, detail_name, detail) < 0)
        Py_CLEAR(err);
    return err;
}

/* The args of an error: ("<code>: <detail>",). */
static PyObject *error_args(PyObject *prefix, PyObject *detail) {
    PyObject *message = PyUnicode_Concat(prefix, detail);
    if (message == NULL) return NULL;
    PyObject *args = PyTuple_Pack(1, message);
    Py_DECREF(message);
    if (args != NULL) PyObject_GC_UnTrack(args); /* it holds one str: no cycle to find */
    return args;
}

/* An error_type instance as EventError.__init__ makes it (shared/events/codec.py): its one argument
 * "<code>: <detail>", and the attributes code and detail; made without running that __init__ (a Python
 * frame per refused record), which tests/unit/hostile/test_cheap_refusal.py checks this matches. Steals
 * `detail`. */
static PyObject *event_error(Decoder *self, const char *code, PyObject *detail) {
    if (detail == NULL) return NULL;
    PyObject *err = NULL, *args = NULL, *code_str, *prefix;
    if (code_strings(code, &code_str, &prefix) < 0) goto done;
    args = error_args(prefix, detail);
    if (args != NULL) err = make_error(self, args, code_str, detail);
done:
    Py_XDECREF(args);
    Py_DECREF(detail);
    return err;
}

/* The same for a detail that never changes (kept by the decoder, not stolen), whose args are made once
 * and kept in *args. */
static PyObject *event_error_cached(Decoder *self, const char *code, PyObject *detail, PyObject **args) {
    PyObject *code_str, *prefix;
    if (code_strings(code, &code_str, &prefix) < 0) return NULL;
    if (*args == NULL && (*args = error_args(prefix, detail)) == NULL) return NULL;
    return make_error(self, *args, code_str, detail);
}

/* Whether `text` contains `word` (lower case), ignoring the case of ASCII letters. */
static int contains_folded(const char *text, const char *word) {
    size_t n = strlen(word);
    for (; *text; text++) {
        size_t i = 0;
        while (i < n && text[i] != '\0' && (text[i] | 0x20) == word[i]) i++;
        if (i == n) return 1;
    }
    return 0;
}

/* Whether an integer literal starts at byte p of the text, not part of a float: -?\d+ not followed by a
 * digit, a point or an exponent (shared/events/reasons.py _INTEGER_LITERAL). */
static int integer_literal_at(const char *t, Py_ssize_t n, Py_ssize_t p) {
    if (p < n && t[p] == '-') p++;
    Py_ssize_t digits = p;
    while (p < n && t[p] >= '0' && t[p] <= '9') p++;
    return p > digits && !(p < n && (t[p] == '.' || t[p] == 'e' || t[p] == 'E'));
}

static int starts_non_finite(const char *t, Py_ssize_t n, Py_ssize_t p) {
    static const char *const words[] = {"NaN", "Infinity", "-Infinity"};
    if (p < 0 || p >= n) return 0;
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(words[i]);
        if ((size_t)(n - p) >= len && memcmp(t + p, words[i], len) == 0) return 1;
    }
    return 0;
}

/* The number of characters in the first n bytes of UTF-8 text. */
static Py_ssize_t utf8_chars(const char *t, Py_ssize_t n) {
    Py_ssize_t chars = 0;
    for (Py_ssize_t i = 0; i < n; i++) chars += ((unsigned char)t[i] & 0xC0) != 0x80;
    return chars;
}

/* The reference decoder's detail for a failure the scan found (FAIL_END, FAIL_VALUE, ...): "not valid
 * JSON: " and the parser's message, its text for the kind (json_messages), then where, as Python's
 * JSONDecodeError says it: the line, the column and the character index of byte `at` of UTF-8 text. */
static PyObject *parser_detail(Decoder *self, int kind, const char *t, Py_ssize_t at) {
    Py_ssize_t line = 1, newline = -1;
    for (Py_ssize_t i = 0; i < at; i++) {
        if (t[i] == '\n') {
            line++;
            newline = i;
        }
    }
    Py_ssize_t pos = utf8_chars(t, at);
    Py_ssize_t column = newline < 0 ? pos + 1 : pos - utf8_chars(t, newline);
    PyObject *head = PyTuple_GET_ITEM(self->json_details, kind - 1); /* "not valid JSON: <message>: line " */
    char where[96];
    int k = snprintf(where, sizeof where, "%zd column %zd (char %zd)", line, column, pos);
    PyObject *tail = PyUnicode_FromStringAndSize(where, k);
    if (tail == NULL) return NULL;
    PyObject *detail = PyUnicode_Concat(head, tail);
    Py_DECREF(tail);
    return detail;
}

/* The reference parser's own message and position (in characters) for text it refuses: it is called.
 * 1: *message and *pos set; 0: no such message (it parsed the text after all, or failed otherwise: the
 * reference decoder decides); -1: failed (exception set). */
static int parser_error(Decoder *self, PyObject *value, PyObject **message, Py_ssize_t *pos) {
    PyObject *parsed = PyObject_CallOneArg(self->json_loads, value);
    if (parsed != NULL) {
        Py_DECREF(parsed);
        return 0;
    }
    if (PyErr_ExceptionMatches(PyExc_MemoryError)) return -1;
    if (!PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear();
        return 0;
    }
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    if (exc == NULL) return 0;
    *message = PyObject_Str(exc);
    PyObject *at = PyObject_GetAttrString(exc, "pos");
    Py_DECREF(exc);
    *pos = at != NULL && PyLong_Check(at) ? PyLong_AsSsize_t(at) : -1;
    int ok = *message != NULL && at != NULL && PyLong_Check(at) && !PyErr_Occurred();
    Py_XDECREF(at);
    if (ok) return 1;
    Py_CLEAR(*message);
    if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_MemoryError)) return -1;
    PyErr_Clear();
    return 0;
}

/* The reference decoder's error for UTF-8 text its JSON parser refuses, as shared/events/reasons.py
 * json_error_reason makes it from that parser's message and position: the detail "not valid JSON:
 * <message>", the reason read from the message and from the text at the position it names. Where the
 * scan knows the message (a text that ends too soon, NaN, Infinity, a number overflowing a double) it is
 * made here; otherwise the parser is called for it. NULL without an exception: the message is one this
 * does not read (nesting, an encoding), so the reference decoder decides. */
static PyObject *json_error(Decoder *self, PyObject *value, const char *text, Py_ssize_t n, const Scan *scan) {
    PyObject *message = NULL, *detail = NULL, *out = NULL;
    Py_ssize_t pos; /* a byte offset */
    const char *first = text;
    while (first < text + n && (*first == ' ' || *first == '\n' || *first == '\r' || *first == '\t')) first++;
    if (scan->fail != FAIL_OTHER && !scan->unsure && self->json_messages != NULL && first < text + n &&
        (*first == '{' || *first == '[')) {
        pos = scan->fail == FAIL_END ? n : (const char *)scan->fail_at - text;
        detail = parser_detail(self, scan->fail, text, pos);
        if (detail == NULL) return NULL;
        message = Py_NewRef(PyTuple_GET_ITEM(self->json_messages, scan->fail - 1)); /* what the reason is read from */
    } else {
        int rc = parser_error(self, value, &message, &pos);
        if (rc <= 0) return NULL;
        const char *said = PyUnicode_AsUTF8(message);
        if (said == NULL) goto done;
        if (strstr(said, "depth limit") != NULL || contains_folded(said, "recursion") ||
            strstr(said, "UTF-8") != NULL || strstr(said, "surrogate") != NULL)
            goto done;
        int ascii = 1;
        for (Py_ssize_t i = 0; i < n && ascii; i++) ascii = (unsigned char)text[i] < 0x80;
        if (!ascii) { /* characters to bytes, on text known to be UTF-8 */
            if (pos < 0) goto done;
            Py_ssize_t at = 0;
            for (Py_ssize_t chars = 0; chars < pos && at < n; chars++) {
                unsigned char b = (unsigned char)text[at];
                at += b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
            }
            if (at > n) goto done;
            pos = at;
        }
    }
    const char *said = PyUnicode_AsUTF8(message);
    if (said == NULL) goto done;
    const char *reason;
    if (strstr(said, "infinity") != NULL) /* a literal no double holds */
        reason = integer_literal_at(text, n, pos > 0 ? pos : 0) ? "integer-out-of-range" : "non-finite-number";
    else if (starts_non_finite(text, n, pos) || starts_non_finite(text, n, pos - 1))
        reason = "non-finite-number";
    else
        reason = "malformed-json";
    if (detail == NULL) detail = PyUnicode_FromFormat("not valid JSON: %U", message);
    out = event_error(self, reason, detail);
    detail = NULL; /* stolen */
done:
    Py_XDECREF(detail);
    Py_XDECREF(message);
    return out;
}

/* A declined value's verdict when the refusal scan reaches one: a new reference to an error (or, from
 * `refuse`, whatever the reference decoder makes of it). NULL without an exception: the scan cannot
 * tell, the fallback decides. */
static PyObject *refuse_cheaply(Decoder *self, PyObject *value) {
    if (!PyBytes_CheckExact(value)) return NULL;
    Py_ssize_t n = PyBytes_GET_SIZE(value);
    const char *text = PyBytes_AS_STRING(value);
    if (self->max_size >= 0 && n > self->max_size) {
        char head[48];
        int k = snprintf(head, sizeof head, "record of %zd", n);
        PyObject *size = PyUnicode_FromStringAndSize(head, k);
        if (size == NULL) return NULL;
        PyObject *detail = PyUnicode_Concat(size, self->size_tail); /* "record of N bytes, over the limit of M" */
        Py_DECREF(size);
        return event_error(self, "oversized", detail);
    }
    if (self->max_depth < 0) return NULL;
    int deep = nesting_exceeds(text, text + n, self->max_depth);
    if (deep == 1)
        return event_error_cached(self, "too-deep", self->deep_detail, &self->deep_args);
    if (deep != 0) return NULL;
    if (self->utf8_detail != NULL && !valid_utf8((const unsigned char *)text, n))
        return event_error_cached(self, "invalid-utf8", self->utf8_detail, &self->utf8_args);
    Scan scan;
    scan_text(&scan, text, n);
    if (scan.bad) { /* not JSON: the reference decoder's parser says why */
        if (self->json_loads != NULL && self->utf8_detail != NULL) {
            PyObject *err = json_error(self, value, text, n, &scan);
            if (err != NULL || PyErr_Occurred()) return err;
        }
        return PyObject_CallOneArg(self->refuse, value);
    }
    if (scan.unsure) return NULL;
    if (scan.big != NULL) { /* the text parses: the reference decoder's next check refuses the literal */
        const char *lit = (const char *)scan.big;
        PyObject *shown = scan.big_len <= 40
                              ? PyUnicode_FromStringAndSize(lit, scan.big_len)
                              : PyUnicode_FromFormat("%.20s...(%zd digits)", lit, scan.big_len);
        if (shown == NULL) return NULL;
        PyObject *detail = PyUnicode_FromFormat("integer %U is outside the 64-bit range [-2**63, 2**64 - 1]", shown);
        Py_DECREF(shown);
        return event_error(self, "integer-out-of-range", detail);
    }
    if (scan.null) return PyObject_CallOneArg(self->refuse, value); /* no event holds a null */
    return NULL;
}

static int group_append(PyObject *groups, PyObject *key, PyObject *event) {
    PyObject *group = PyDict_GetItemWithError(groups, key);
    if (group != NULL) return PyList_Append(group, event);
    if (PyErr_Occurred()) return -1;
    group = PyList_New(1);
    if (group == NULL) return -1;
    Py_INCREF(event);
    PyList_SET_ITEM(group, 0, event);
    int rc = PyDict_SetItem(groups, key, group);
    Py_DECREF(group);
    return rc;
}

/* Every value decoded (declined ones by the fallback); with `grouped`, also the events by partition key
 * and the number of errors, as (decoded, groups, errors); without, just the decoded list. */
static PyObject *decode_batch(Decoder *self, PyObject *values, int grouped) {
    if (self->fallback == NULL || self->refuse == NULL || self->event_type == NULL || self->error_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "Decoder.__init__ was not called");
        return NULL;
    }
    PyObject *it = PyObject_GetIter(values);
    if (it == NULL) return NULL;
    PyObject *decoded = PyList_New(0), *groups = grouped ? PyDict_New() : NULL, *value;
    Py_ssize_t errors = 0;
    if (decoded == NULL || (grouped && groups == NULL)) goto fail;
    while ((value = PyIter_Next(it)) != NULL) {
        PyObject *key = NULL; /* owned */
        PyObject *item = decode_one(self, value, &key);
        if (item == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(value);
                goto fail;
            }
            int refused = self->refused;
            item = refuse_cheaply(self, value);
            if (item == NULL && !PyErr_Occurred())
                item = PyObject_CallOneArg(refused ? self->refuse : self->fallback, value);
            if (item == NULL) {
                Py_DECREF(value);
                goto fail;
            }
            if (PyObject_TypeCheck(item, (PyTypeObject *)self->error_type)) {
                errors++;
            } else if (!grouped) {
                /* no key needed */
            } else if (self->key_field != NULL) {
                key = PyObject_GetAttrString(item, "key");
                if (key == NULL) {
                    Py_DECREF(item);
                    Py_DECREF(value);
                    goto fail;
                }
            } else {
                key = Py_NewRef(self->empty_key);
            }
        } else if (key == NULL && PyObject_TypeCheck(item, (PyTypeObject *)self->error_type)) {
            errors++; /* refused by the parser itself */
        } else if (grouped && self->key_field == NULL) {
            key = Py_NewRef(self->empty_key);
        }
        Py_DECREF(value);
        int rc = PyList_Append(decoded, item);
        if (rc == 0 && grouped && key != NULL) rc = group_append(groups, key, item);
        Py_XDECREF(key);
        Py_DECREF(item);
        if (rc < 0) goto fail;
    }
    if (PyErr_Occurred()) goto fail;
    Py_DECREF(it);
    return grouped ? Py_BuildValue("(NNn)", decoded, groups, errors) : decoded;
fail:
    Py_DECREF(it);
    Py_XDECREF(decoded);
    Py_XDECREF(groups);
    return NULL;
}

/* Append one decoded row to its key's columns: groups[key][relation] is the list [records, deltas,
 * column 0, column 1, ...], records holding each row's index in the batch. Steals `delta` and `vals`. */
static int column_append(PyObject *groups, PyObject *key, const RelationSpec *rel, Py_ssize_t index,
                         PyObject *delta, PyObject **vals) {
    int rc = -1, ncol = rel->ncolumns;
    PyObject *rels = PyDict_GetItemWithError(groups, key);
    if (rels == NULL) {
        if (PyErr_Occurred() || (rels = PyDict_New()) == NULL) goto out;
        int bad = PyDict_SetItem(groups, key, rels);
        Py_DECREF(rels);
        if (bad < 0) goto out;
    }
    PyObject *lists = PyDict_GetItemWithError(rels, rel->name);
    if (lists == NULL) {
        if (PyErr_Occurred() || (lists = PyList_New(2 + ncol)) == NULL) goto out;
        for (int j = 0; j < 2 + ncol; j++) {
            PyObject *list = PyList_New(0);
            if (list == NULL) {
                Py_DECREF(lists);
                goto out;
            }
            PyList_SET_ITEM(lists, j, list);
        }
        int bad = PyDict_SetItem(rels, rel->name, lists);
        Py_DECREF(lists);
        if (bad < 0) goto out;
    }
    PyObject *at = PyLong_FromSsize_t(index);
    if (at == NULL) goto out;
    int bad = PyList_Append(PyList_GET_ITEM(lists, 0), at);
    Py_DECREF(at);
    if (bad < 0 || PyList_Append(PyList_GET_ITEM(lists, 1), delta) < 0) goto out;
    for (int j = 0; j < ncol; j++) {
        if (PyList_Append(PyList_GET_ITEM(lists, 2 + j), vals[j]) < 0) goto out;
    }
    rc = 0;
out:
    Py_DECREF(delta);
    for (int j = 0; j < ncol; j++) Py_DECREF(vals[j]);
    return rc;
}

/* An event the fallback decoded, appended to its key's columns as column_append does. */
static int event_append(Decoder *self, PyObject *groups, PyObject *event, Py_ssize_t index) {
    PyObject *vals[MAX_COLUMNS];
    PyObject *relation = PyObject_GetAttrString(event, "relation");
    if (relation == NULL) return -1;
    const RelationSpec *rel = NULL;
    for (int i = 0; i < self->nrelations && rel == NULL; i++) {
        int same = PyUnicode_Compare(self->relations[i].name, relation);
        if (same == -1 && PyErr_Occurred()) {
            Py_DECREF(relation);
            return -1;
        }
        if (same == 0) rel = &self->relations[i];
    }
    Py_DECREF(relation);
    if (rel == NULL) {
        PyErr_SetString(PyExc_ValueError, "decode_columns: the fallback decoded an undeclared relation");
        return -1;
    }
    PyObject *row = PyObject_GetAttrString(event, "row");
    if (row == NULL) return -1;
    int got = 0;
    for (; got < rel->ncolumns; got++) {
        PyObject *v = PyDict_Check(row) ? PyDict_GetItemWithError(row, rel->columns[got].name) : NULL;
        if (v == NULL) break;
        vals[got] = Py_NewRef(v);
    }
    Py_DECREF(row);
    PyObject *delta = got == rel->ncolumns ? PyObject_GetAttrString(event, "delta") : NULL;
    PyObject *key = NULL;
    if (delta != NULL) key = self->key_field != NULL ? PyObject_GetAttrString(event, "key") : Py_NewRef(self->empty_key);
    if (key == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "decode_columns: an event lacks a column");
        for (int j = 0; j < got; j++) Py_DECREF(vals[j]);
        Py_XDECREF(delta);
        return -1;
    }
    int rc = column_append(groups, key, rel, index, delta, vals);
    Py_DECREF(key);
    return rc;
}

/* Every value decoded as columns: (errors, groups), errors the (index, error) of each refused value,
 * groups[key][relation] = [records, deltas, column 0, ...] (column_append), keys and relations in order
 * of first appearance. No event or row dict is made for a value the parser reads itself. */
static PyObject *Decoder_decode_columns(Decoder *self, PyObject *values) {
    if (self->fallback == NULL || self->refuse == NULL || self->event_type == NULL || self->error_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "Decoder.__init__ was not called");
        return NULL;
    }
    PyObject *it = PyObject_GetIter(values);
    if (it == NULL) return NULL;
    PyObject *errors = PyList_New(0), *groups = PyDict_New(), *value;
    PyObject *sink[MAX_COLUMNS];
    Py_ssize_t index = 0;
    if (errors == NULL || groups == NULL) goto fail;
    while ((value = PyIter_Next(it)) != NULL) {
        PyObject *key = NULL; /* owned */
        self->sink = sink;
        PyObject *item = decode_one(self, value, &key);
        self->sink = NULL;
        int rc = 0;
        if (item == Py_True) {
            const RelationSpec *rel = self->sink_rel;
            PyObject *delta = PyLong_FromLongLong(self->sink_delta);
            if (delta == NULL) {
                for (int j = 0; j < rel->ncolumns; j++) Py_DECREF(sink[j]);
                rc = -1;
            } else {
                rc = column_append(groups, key != NULL ? key : self->empty_key, rel, index, delta, sink);
            }
            Py_DECREF(item);
        } else {
            if (item == NULL) {
                if (PyErr_Occurred()) {
                    Py_XDECREF(key);
                    Py_DECREF(value);
                    goto fail;
                }
                int refused = self->refused;
                item = refuse_cheaply(self, value);
                if (item == NULL && !PyErr_Occurred())
                    item = PyObject_CallOneArg(refused ? self->refuse : self->fallback, value);
            }
            if (item == NULL) {
                rc = -1;
            } else if (PyObject_TypeCheck(item, (PyTypeObject *)self->error_type)) {
                PyObject *pair = Py_BuildValue("(nO)", index, item);
                rc = pair == NULL ? -1 : PyList_Append(errors, pair);
                Py_XDECREF(pair);
            } else {
                rc = event_append(self, groups, item, index);
            }
            Py_XDECREF(item);
        }
        Py_XDECREF(key);
        Py_DECREF(value);
        if (rc < 0) goto fail;
        index++;
    }
    if (PyErr_Occurred()) goto fail;
    Py_DECREF(it);
    return Py_BuildValue("(NN)", errors, groups);
fail:
    self->sink = NULL;
    Py_DECREF(it);
    Py_XDECREF(errors);
    Py_XDECREF(groups);
    return NULL;
}

static PyObject *Decoder_decode_grouped(Decoder *self, PyObject *values) {
    return decode_batch(self, values, 1);
}

static PyObject *Decoder_decode_many(Decoder *self, PyObject *values) {
    return decode_batch(self, values, 0);
}

/* --- the type -------------------------------------------------------------------------------------- */

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
        }
        PyMem_Free(r->columns);
    }
    PyMem_Free(self->relations);
    self->relations = NULL;
    self->nrelations = 0;
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
    {"decode_columns", (PyCFunction)Decoder_decode_columns, METH_O,
     "decode_columns(values) -> (errors, groups): the refused values' (index, error), and every decoded "
     "row as columns, groups[key][relation] = [indexes, deltas, column 0, ...], without an event per row."},
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
