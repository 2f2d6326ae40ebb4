/* The reference kernel's decimals: a plain decimal string or str() of a Decimal read into sign,
 * coefficient digits and exponent, written in its canonical text for a member key, and summed exactly
 * while every step of Python's reduce is exact (_bag_rows.c applies them row by row). */

#include "_kernels.h"

#define MAX_EXPONENT 500000  /* |exponent| of a decimal written here (the context's Emax is checked by the caller) */

/* 1 read, 0 not a plain finite decimal or more than MAX_DIGITS significant digits (left to Python). */
int parse_dec(const char *s, Py_ssize_t n, Dec *d) {
    Py_ssize_t i = 0, frac = 0, any = 0;
    int in_frac = 0;
    d->negative = 0;
    d->ndigits = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) d->negative = s[i++] == '-';
    for (; i < n; i++) {
        char ch = s[i];
        if (ch >= '0' && ch <= '9') {
            any = 1;
            if (in_frac) frac++;
            if (d->ndigits == 0 && ch == '0') continue; /* a leading zero */
            if (d->ndigits >= MAX_DIGITS) return 0;
            d->digits[d->ndigits++] = ch;
        } else if (ch == '.' && !in_frac) {
            in_frac = 1;
        } else {
            break;
        }
    }
    if (!any) return 0; /* Infinity, NaN, sNaN, "." */
    long long exponent = 0;
    if (i < n) {
        if (s[i] != 'E' && s[i] != 'e') return 0;
        i++;
        int exp_negative = 0;
        if (i < n && (s[i] == '+' || s[i] == '-')) exp_negative = s[i++] == '-';
        if (i >= n || n - i > 9) return 0;
        for (; i < n; i++) {
            if (s[i] < '0' || s[i] > '9') return 0;
            exponent = exponent * 10 + (s[i] - '0');
        }
        if (exp_negative) exponent = -exponent;
    }
    d->exponent = exponent - frac;
    return 1;
}

/* The canonical text of a decimal, str((v + 0).normalize()), as a JSON string: 1 written, 0 left to
 * Python (more significant digits than prec, a large exponent). */
int append_canonical(Buffer *b, const Dec *d, Py_ssize_t prec) {
    if (prec < 1) return 0; /* a context unlike the default one: every decimal left to Python */
    if (d->ndigits == 0) return append(b, "\"0\"", 3) < 0 ? -1 : 1; /* every zero normalizes to 0 */
    long long nd = d->ndigits, exponent = d->exponent;
    while (d->digits[nd - 1] == '0') { /* normalize: no trailing zeros */
        nd--;
        exponent++;
    }
    if (nd > prec || exponent > MAX_EXPONENT || exponent < -MAX_EXPONENT) return 0;
    /* Decimal.__str__: plain when the exponent is at most 0 and the adjusted exponent above -7 */
    long long left = exponent + nd, dot = (exponent <= 0 && left > -6) ? left : 1;
    if (reserve(b, nd + 32 + (dot < 0 ? -dot : 0)) < 0) return -1;
    char *out = b->data + b->len;
    *out++ = '"';
    if (d->negative) *out++ = '-';
    if (dot <= 0) {
        *out++ = '0';
        *out++ = '.';
        for (long long k = 0; k < -dot; k++) *out++ = '0';
        memcpy(out, d->digits, (size_t)nd);
        out += nd;
    } else if (dot >= nd) { /* dot == nd: the exponent is 0, or one digit in scientific form */
        memcpy(out, d->digits, (size_t)nd);
        out += nd;
    } else {
        memcpy(out, d->digits, (size_t)dot);
        out += dot;
        *out++ = '.';
        memcpy(out, d->digits + dot, (size_t)(nd - dot));
        out += nd - dot;
    }
    if (left != dot) out += sprintf(out, "E%+lld", left - dot);
    *out++ = '"';
    b->len = out - b->data;
    return 1;
}

/* --- exact decimal sums: a sum kept as sign, coefficient and exponent while every step of Python's
 * reduce(add, map(mul, column, deltas), sum) is exact (each product and sum within the context's
 * precision), which then gives the same Decimal, exponent and sign of zero included; at the first step
 * that would round, the sum becomes a Decimal and the rest goes through Python's arithmetic. */

u128 POW10[39];

void init_pow10(void) {
    if (POW10[0] == 1) return;
    POW10[0] = 1;
    for (int k = 1; k < 39; k++) POW10[k] = POW10[k - 1] * 10;
}

/* A coefficient's digits as a number: 1, or 0 when there are more than 36. */
int dec_coefficient(const Dec *d, u128 *out) {
    if (d->ndigits > 36) return 0;
    u128 c = 0;
    for (int k = 0; k < d->ndigits; k++) c = c * 10 + (u128)(d->digits[k] - '0');
    *out = c;
    return 1;
}

/* x * 10^k where it stays below 10^37: 1, else 0. */
static int scale10(u128 x, long long k, u128 *out) {
    if (k < 0 || k > 37) return 0;
    if (x != 0 && x >= POW10[37 - k]) return 0;
    *out = x * POW10[k];
    return 1;
}

/* The exact sum as a Decimal (decimal_type of "[-]<coefficient>E<exponent>", read exactly). */
PyObject *dec_sum_object(const DecSum *sum, PyObject *decimal_type) {
    char text[96], *p = text + 48, *end = p;
    u128 c = sum->coefficient;
    do *--p = (char)('0' + (int)(c % 10)); while ((c /= 10) != 0);
    if (sum->negative) *--p = '-';
    end += sprintf(end, "E%lld", sum->exponent);
    PyObject *str = PyUnicode_FromStringAndSize(p, end - p);
    if (str == NULL) return NULL;
    PyObject *out = PyObject_CallOneArg(decimal_type, str);
    Py_DECREF(str);
    return out;
}

/* sum + value * delta for one row, exactly (1), or 0 when that step would round (nothing changed). */
int dec_sum_add(DecSum *sum, int negative, u128 coefficient, long long exponent, long long delta, Py_ssize_t prec) {
    u128 magnitude = (u128)(delta < 0 ? -delta : delta);
    u128 term;
    if (__builtin_mul_overflow(coefficient, magnitude, &term)) return 0;
    if (term >= POW10[prec]) return 0; /* the product rounds */
    int term_negative = negative ^ (delta < 0);
    long long e = sum->exponent < exponent ? sum->exponent : exponent;
    u128 a, b;
    if (!scale10(sum->coefficient, sum->exponent - e, &a) || !scale10(term, exponent - e, &b)) return 0;
    u128 total;
    int total_negative;
    if (sum->negative == term_negative) {
        total = a + b;
        total_negative = sum->negative;
    } else if (a >= b) {
        total = a - b;
        total_negative = sum->negative;
    } else {
        total = b - a;
        total_negative = term_negative;
    }
    if (total >= POW10[prec]) return 0; /* the sum rounds */
    if (total == 0) total_negative = (a == 0 && b == 0) ? (sum->negative && term_negative) : 0;
    sum->negative = total_negative;
    sum->coefficient = total;
    sum->exponent = e;
    return 1;
}
