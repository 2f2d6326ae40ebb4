/* The refusal scan: what a declined value certainly is (nested too deep, not UTF-8, not JSON, holding an
 * integer beyond 64 bits or a null), read without building objects, and a wrong column value read as the
 * reference decoder's rejection shows it.
 */
#include "_fastjson.h"

/* Whether the text nests arrays and objects deeper than `limit`, read as the reference decoder reads it
 * (shared/events/reasons.py too_deep): brackets outside strings, a backslash in a string escaping the
 * next byte. 1: deeper; 0: not; -1: undecided (a string runs to the end, which that reading treats
 * differently, so the reference decoder decides; unless there are too few brackets to nest that deep). */
int nesting_exceeds(const char *p, const char *end, int limit) {
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
int valid_utf8(const unsigned char *p, Py_ssize_t n) {
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

void scan_value(Scan *s, int depth);

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

void scan_value(Scan *s, int depth) {
    scan_ws(s);
    if (s->p >= s->end || depth > 64) { /* deeper texts: nesting_exceeds refuses them or leaves them undecided first */
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

void scan_text(Scan *s, const char *text, Py_ssize_t n) {
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
int read_wrong_value(Decoder *self, Cursor *c, int type, PyObject **shown, int *container) {
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
