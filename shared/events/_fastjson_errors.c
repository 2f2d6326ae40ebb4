/* The reference decoder's errors, made here as it makes them: a column's (null, wrong type), JSON's (the
 * parser's message and position), and the cheap refusals of declined values (refuse_cheaply), so a flood
 * of hostile records costs no Python frame per record.
 */
#include "_fastjson.h"

/* The reason codes the decoder refuses records with, each with its str and the "<code>: " that starts
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

/* An error_type instance as EventError.__init__ makes it (shared/events/model.py): its one argument
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

/* The reference decoder's error for column j of relation r holding a value it shows as `shown` (NULL: a
 * null), detail and all: "R.C is null", or "R.C must be <what> (<type>), got <shown>". */
PyObject *column_error(Decoder *self, const RelationSpec *r, int j, PyObject *shown) {
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
PyObject *refuse_cheaply(Decoder *self, PyObject *value) {
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
