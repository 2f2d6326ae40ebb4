/* What the compiled decoder's sources share; they build one extension module, ivmstream.events._fastjson:
 * - _fastjson.c: the module, the Decoder type and its settings (what the decoder does: its comment);
 * - _fastjson_record.c: one update event's record parsed into its event, or declined;
 * - _fastjson_refusal.c: the refusal scan, what a declined record certainly is, without building objects;
 * - _fastjson_errors.c: the reference decoder's errors made here (a column's, JSON's, the cheap refusals);
 * - _fastjson_changes.c: Debezium change records;
 * - _fastjson_batch.c: the batch loops (events, events by key, columns), declined records to the fallback.
 * What one file lends another is declared here with hidden visibility: only PyInit__fastjson leaves the
 * module, so the calls between the files are direct.
 */
#ifndef IVMSTREAM_FASTJSON_H
#define IVMSTREAM_FASTJSON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

enum { T_INT = 0, T_FLOAT = 1, T_NUMBER = 2, T_STR = 3, T_BOOL = 4, T_EXACT = 5, T_DECLINE = 6, T_DECIMAL = 7,
       T_CONNECT_DECIMAL = 8 /* change records only: Kafka Connect's base64 decimal, Column.scale */ };

#define MAX_COLUMNS 62 /* one bit per column plus the key field in a 64-bit "seen" mask */
#define MAX_FLOAT_TEXT 63
/* Short ASCII strings (keys, symbols, ids) repeat: a direct-mapped cache of recent ones saves the
 * allocation, and the cached str keeps its hash, so grouping by key does not rehash it. */
#define CACHE_SLOTS 4096
#define CACHE_MAX_LEN 32

/* A plain name (no quote, backslash or control character) of at most 14 bytes as the text "name", zero
 * padded to 16 bytes, with a mask of the text's bytes: matched where it stands with two word loads. */
typedef struct {
    unsigned char text[16];
    unsigned char mask[16];
    int n; /* the text's length, the name's + 2; 0: the name is not plain or longer */
} Quoted;

/* Each column keeps the ints it read last beyond CPython's shared small ints, in INT_CACHE slots by a
 * hash of the value: a value read again (a price level, a timestamp shared by a burst of records) is the
 * same immutable int object, and costs no allocation. */
#define INT_CACHE_BITS 6
#define INT_CACHE (1 << INT_CACHE_BITS)

typedef struct {
    PyObject *name;     /* str, the dict key */
    const char *utf8;   /* its UTF-8 bytes, owned by name */
    Py_ssize_t len;
    int plain; /* no quote, backslash or control character in the name: scan_name can match it */
    Quoted quoted;
    PyObject *ints[INT_CACHE]; /* an int read from this column, or NULL */
    int64_t int_values[INT_CACHE]; /* ints[k]'s value */
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
    int plain; /* no quote, backslash or control character in the name: scan_name can match it */
    Quoted quoted;
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
    /* set while decode_columns(values, decimal_text=True) runs: a decimal column's value written as a
     * plain decimal string is kept as that string (the Decimal it reads as exactly), not made a Decimal */
    int decimal_text;
} Decoder;

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
extern unsigned char STRING_SPECIAL[256];

/* Each base64 digit's value; -1: not a digit. */
extern signed char BASE64[256];

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

/* Whether the next string is exactly `name` (len bytes, none of them a quote, a backslash or a control
 * character), compared in place: then the cursor moves past it, as scan_string would on the same text. */
static inline int scan_name(Cursor *c, const char *name, Py_ssize_t len) {
    skip_ws(c);
    if (c->end - c->p < len + 2 || c->p[0] != '"' || c->p[len + 1] != '"' || memcmp(c->p + 1, name, (size_t)len) != 0)
        return 0;
    c->p += len + 2;
    return 1;
}

/* scan_name for a name of `plain` whose Quoted form is q: with 16 bytes left, two masked word compares. */
static inline int scan_quoted(Cursor *c, const Quoted *q, const char *name, Py_ssize_t len, int plain) {
    if (q->n == 0 || c->end - c->p < 16 || (unsigned char)*c->p <= ' ') return plain && scan_name(c, name, len);
    uint64_t a, b, ta, tb, ma, mb;
    memcpy(&a, c->p, 8);
    memcpy(&b, c->p + 8, 8);
    memcpy(&ta, q->text, 8);
    memcpy(&tb, q->text + 8, 8);
    memcpy(&ma, q->mask, 8);
    memcpy(&mb, q->mask + 8, 8);
    if (((a ^ ta) & ma) | ((b ^ tb) & mb)) return 0;
    c->p += q->n;
    return 1;
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

static inline int scan_literal(Cursor *c, const char *word, Py_ssize_t n) {
    skip_ws(c);
    if (c->end - c->p >= n && memcmp(c->p, word, (size_t)n) == 0) {
        c->p += n;
        return 1;
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

/* --- what the files lend each other ---------------------------------------------------------------- */

/* _fastjson_record.c */
PyObject *parse_str(Decoder *self, Cursor *c);
PyObject *float_from_text(const char *s, Py_ssize_t n);
int parse_row(Decoder *self, const RelationSpec *r, Cursor *c, PyObject **row_out, PyObject **key_out,
              int *fail_col, PyObject **fail_shown, int *container);
PyObject *decode_one(Decoder *self, PyObject *value, PyObject **key_out);

/* _fastjson_refusal.c */
int nesting_exceeds(const char *p, const char *end, int limit);
int valid_utf8(const unsigned char *p, Py_ssize_t n);
void scan_value(Scan *s, int depth);
void scan_text(Scan *s, const char *text, Py_ssize_t n);
int read_wrong_value(Decoder *self, Cursor *c, int type, PyObject **shown, int *container);

/* _fastjson_errors.c */
PyObject *column_error(Decoder *self, const RelationSpec *r, int j, PyObject *shown);
PyObject *refuse_cheaply(Decoder *self, PyObject *value);

/* _fastjson_changes.c */
PyObject *parse_connect_decimal(Decoder *self, Cursor *c, int scale);
PyObject *Decoder_decode_debezium(Decoder *self, PyObject *const *args, Py_ssize_t nargs);

/* _fastjson_batch.c */
PyObject *Decoder_decode_grouped(Decoder *self, PyObject *values);
PyObject *Decoder_decode_many(Decoder *self, PyObject *values);
PyObject *Decoder_decode_columns(Decoder *self, PyObject *args);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
