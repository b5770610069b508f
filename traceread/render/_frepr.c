/* The _cjoin module's reprs (its table in _cjoin.c): Python's repr of doubles, without the GIL for the
 * values this file can decide exactly; Python's own PyOS_double_to_string, which needs the GIL and makes a
 * Python string per value, formats the rest. Written here from the definition of repr, not taken from any
 * published algorithm.
 *
 * repr gives the shortest decimal that reads back as x, the one nearest x among several of that length.
 * For a finite x > 0 with x = m / 2^k (m the 53-bit significand, hidden bit included), the reals that
 * read back as x are those strictly between (2m - 1) / 2^(k+1) and (2m + 1) / 2^(k+1) (the endpoints too
 * when m is even: reading rounds half to even), m not a power of two (else the interval below x is half
 * as wide). Scaled by 10^q, with q the smallest such that 10^q >= 2^k, the interval is wider than 1 (k > 0;
 * exactly 1 around the integer m when k = 0), so it holds an integer, and its endpoints
 * (2m +- 1) * 10^q / 2^(k+1) = (2m +- 1) * 5^q / 2^(k+1-q) are not integers (an odd number over a power
 * of two, as q <= k), so whether an endpoint is included never matters. The integers in it, lo..hi, are
 * then all the candidates of at most q digits after the point; a shortest one is a multiple of the
 * largest power 10^j that has a multiple in lo..hi. When j > 0 there is one such multiple (lo..hi spans
 * fewer than 10 integers); when j = 0 every integer of lo..hi has as many digits (no multiple of 10 among
 * them, and all are above 2^52), and repr takes the one nearest x * 10^q (a tie, x * 10^q exactly
 * halfway, is left to Python). The products (2m +- 1) * 5^q fit 128 bits, and 5^q 64, when q <= 27,
 * that is k <= KMAX = 89: 2^-37 (~7.3e-12) <= x < 2^53, where repr writes positional text but
 * for x < 1e-4. Anything else is "doubtful": zero's sign, subnormals, inf, powers of two (but those
 * formatted by Python once, at the module's init), larger or smaller magnitudes, and builds without
 * unsigned __int128; the caller gives those to Python. tests/unit/test_float_reprs.py compares the
 * result with repr byte for byte on millions of values of every kind. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#define REPR_MAX 32 /* a cell's room: repr of any double is at most 24 characters ("-2.2250738585072014e-308") */
#define KMAX 89 /* x >= 2^52 / 2^89 = 2^-37; 10^27 >= 2^89 and 5^27 < 2^64 */

/* The powers of two 2^-POW2_MAX .. 2^POW2_MAX (m a power of two: the interval below x is half as wide as
 * the one above) as Python formats them, set once by the module's init; 0: not set. */
#define POW2_MAX 64
static char POW2_TEXT[2 * POW2_MAX + 1][24];
static unsigned char POW2_LEN[2 * POW2_MAX + 1];

#if defined(__SIZEOF_INT128__)
typedef unsigned __int128 u128;
static uint64_t POW5[28];         /* 5^0 .. 5^27 */
static unsigned char Q[KMAX + 1]; /* the smallest q with 10^q >= 2^k */

#define FAST 1
static void tables(void) {
    POW5[0] = 1;
    for (int q = 1; q < 28; q++) POW5[q] = POW5[q - 1] * 5;
    u128 ten = 1;
    for (int k = 0, q = 0; k <= KMAX; k++) {
        for (; ten < ((u128)1 << k); ten *= 10) q++;
        Q[k] = (unsigned char)q;
    }
}

static const char PAIRS[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                               "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                               "8081828384858687888990919293949596979899";

/* v < 10^8 as 8 digits (leading zeros) at s. */
static inline void eight(char *s, uint32_t v) {
    uint32_t hi = v / 10000, lo = v % 10000;
    memcpy(s, PAIRS + 2 * (hi / 100), 2);
    memcpy(s + 2, PAIRS + 2 * (hi % 100), 2);
    memcpy(s + 4, PAIRS + 2 * (lo / 100), 2);
    memcpy(s + 6, PAIRS + 2 * (lo % 100), 2);
}

/* repr of a finite x > 0 into out (at most 23 bytes), its length; -1 when doubtful (nothing decided). */
static int shortest(double x, char *out) {
    uint64_t bits;
    memcpy(&bits, &x, 8);
    uint64_t frac = bits & ((UINT64_C(1) << 52) - 1);
    int be = (int)((bits >> 52) & 0x7ff), k = 1075 - be;
    if (frac == 0 && be > 0 && be - 1023 >= -POW2_MAX && be - 1023 <= POW2_MAX &&
        POW2_LEN[be - 1023 + POW2_MAX] > 0) { /* 2^e (1.0, 0.5: common fractions): Python's own text */
        memcpy(out, POW2_TEXT[be - 1023 + POW2_MAX], POW2_LEN[be - 1023 + POW2_MAX]);
        return POW2_LEN[be - 1023 + POW2_MAX];
    }
    if (frac == 0 || k < 0 || k > KMAX) return -1; /* 0, 2^e, x >= 2^53, x < 2^-37, subnormal, inf */
    uint64_t m = frac | (UINT64_C(1) << 52);
    int q = Q[k], sh = k - q;                      /* sh >= 0 */
    u128 t = POW5[q], p = (u128)m * t;             /* x * 10^q = p / 2^sh */
    u128 a = 2 * p - t, b = 2 * p + t, below = ((u128)1 << (sh + 1)) - 1;
    if ((a & below) == 0 || (b & below) == 0) return -1; /* an endpoint an integer: cannot happen (above) */
    uint64_t lo = (uint64_t)(a >> (sh + 1)) + 1, hi = (uint64_t)(b >> (sh + 1)); /* < 10 * 2^53 */
    if (lo > hi) return -1; /* cannot happen: the interval is at least 1 wide */
    uint64_t d, pw = 1;
    int j = 0;
    if (hi / 10 * 10 >= lo) { /* a multiple of 10 in lo..hi (rare: a constant division first) */
        pw = 10;
        j = 1;
        while (hi / (pw * 10) * (pw * 10) >= lo) { /* a multiple of 10 * pw; ends before pw > 2^58 */
            pw *= 10;
            j++;
        }
    }
    if (j > 0) {
        d = hi / pw;
    } else {
        d = (uint64_t)(p >> sh);
        if (sh > 0) {
            u128 r = p & (((u128)1 << sh) - 1), half = (u128)1 << (sh - 1);
            if (r == half) return -1; /* a tie between two nearest candidates */
            d += r > half;
        }
        if (d < lo || d > hi) return -1; /* cannot happen: the nearest integer is within 1/2, lo..hi wider */
    }
    /* the digits of d (at most 17, no trailing zero: j is the largest): the last 8 apart from the
     * rest when there are more (two shorter chains of divisions, side by side) */
    char s[24], *e = s + sizeof s, *f = e;
    if (d >= 100000000) {
        eight(e - 8, (uint32_t)(d % 100000000));
        d /= 100000000;
        f -= 8;
    }
    uint32_t h = (uint32_t)d; /* < 10^9 */
    while (h >= 100) {
        f -= 2;
        memcpy(f, PAIRS + 2 * (h % 100), 2);
        h /= 100;
    }
    if (h >= 10) {
        f -= 2;
        memcpy(f, PAIRS + 2 * h, 2);
    } else {
        *--f = (char)('0' + h);
    }
    int nd = (int)(e - f);
    int decpt = nd + j - q; /* x ~ 0.DIGITS * 10^decpt */
    char *o = out;
    if (decpt > -4 && decpt <= 16) { /* repr's positional range, 1e-4 <= x < 1e16 */
        if (decpt <= 0) {
            memcpy(o, "0.000", (size_t)(2 - decpt));
            o += 2 - decpt;
            memcpy(o, f, (size_t)nd);
            o += nd;
        } else if (decpt < nd) {
            memcpy(o, f, (size_t)decpt);
            o += decpt;
            *o++ = '.';
            memcpy(o, f + decpt, (size_t)(nd - decpt));
            o += nd - decpt;
        } else { /* integral: zeros, then '.0' */
            memcpy(o, f, (size_t)nd);
            o += nd;
            memset(o, '0', (size_t)(decpt - nd));
            o += decpt - nd;
            memcpy(o, ".0", 2);
            o += 2;
        }
    } else { /* 'd.ddde-XX': the exponent of at least two digits (only small x reach here, x < 1e-4) */
        *o++ = f[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, f + 1, (size_t)(nd - 1));
            o += nd - 1;
        }
        int ex = decpt - 1;
        *o++ = 'e';
        *o++ = ex < 0 ? '-' : '+';
        if (ex < 0) ex = -ex;
        if (ex >= 100) {
            *o++ = (char)('0' + ex / 100);
            ex %= 100;
        }
        *o++ = (char)('0' + ex / 10);
        *o++ = (char)('0' + ex % 10);
    }
    return (int)(o - out);
}
#else
#define FAST 0
static void tables(void) {}
static int shortest(double x, char *out) { /* no 128-bit integers: Python formats everything */
    (void)x;
    (void)out;
    return -1;
}
#endif

/* The n values' reprs laid out in buf (room for REPR_MAX bytes a value), cell i at off[i]..off[i + 1]; NaN an
 * empty cell. A doubtful value is left empty and its index stored in doubtful (room for n); their count
 * is returned. Touches no Python object: the caller runs it without the GIL. */
static Py_ssize_t pass(const double *v, Py_ssize_t n, char *buf, int64_t *off, int64_t *doubtful) {
    char *out = buf;
    Py_ssize_t nd = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        off[i] = out - buf;
        double x = v[i];
        if (x != x) continue; /* NaN: an empty cell */
        if (x == 0.0 && !signbit(x)) { /* most overlap fractions */
            memcpy(out, "0.0", 3);
            out += 3;
            continue;
        }
        int neg = x < 0;
        *out = '-';
        int len = shortest(neg ? -x : x, out + neg);
        if (len < 0)
            doubtful[nd++] = i;
        else
            out += neg + len;
    }
    off[n] = out - buf;
    return nd;
}

/* The doubtful cells' texts (nd of them, text t at texts + t * REPR_MAX, lens[t] bytes) put in their empty
 * places, the cells after them moved up (from the end, so each byte moves once) and off adjusted. */
static void insert(char *buf, int64_t *off, Py_ssize_t n, const int64_t *doubtful, Py_ssize_t nd,
                   const char *texts, const int *lens) {
    int64_t shift = 0, end = off[n];
    for (Py_ssize_t t = 0; t < nd; t++) shift += lens[t];
    for (Py_ssize_t t = nd - 1; t >= 0; t--) { /* shift: the texts 0..t's length */
        int64_t at = off[doubtful[t]];
        memmove(buf + at + shift, buf + at, (size_t)(end - at));
        Py_ssize_t last = t + 1 < nd ? doubtful[t + 1] : n;
        for (Py_ssize_t i = doubtful[t] + 1; i <= last; i++) off[i] += shift;
        shift -= lens[t];
        memcpy(buf + at + shift, texts + t * REPR_MAX, (size_t)lens[t]); /* off[doubtful[t]]: at t - 1 */
        end = at;
    }
}

/* reprs(values): (buf, offsets) with cell i = buf[offsets[i]:offsets[i + 1]] being Python's repr of the
 * float64 values[i] (what pandas' CSV writes for a float64), or nothing for NaN; offsets are n + 1
 * native int64 as bytes. A pass without the GIL formats what shortest() decides exactly (almost all values
 * of a gaps table: a call to PyOS_double_to_string, float.__repr__'s, needs the GIL and allocates);
 * the few doubtful values then go through PyOS_double_to_string and are put in their places. */
static Py_ssize_t repr_fallbacks; /* values given to PyOS_double_to_string so far (under the GIL; tests) */

PyObject *frepr_reprs(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    PyObject *buf = NULL, *offsets = NULL, *result = NULL;
    int64_t *doubtful = NULL;
    char *texts = NULL;
    int *lens = NULL;
    if (PyObject_GetBuffer(arg, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    const char *f = view.format;
    if (f != NULL && (f[0] == '<' || f[0] == '=' || f[0] == '@')) f++;
    if (view.itemsize != 8 || f == NULL || f[0] != 'd' || f[1] != '\0') {
        PyErr_SetString(PyExc_ValueError, "reprs: values must be float64");
        goto done;
    }
    Py_ssize_t n = view.len / 8;
    if (n > (PY_SSIZE_T_MAX - 1) / REPR_MAX) {
        PyErr_NoMemory();
        goto done;
    }
    buf = PyBytes_FromStringAndSize(NULL, n * REPR_MAX);
    offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 8);
    doubtful = PyMem_RawMalloc(n ? (size_t)n * 8 : 1); /* pages untouched but for the doubtful few */
    if (buf == NULL || offsets == NULL) goto done;
    if (doubtful == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    char *out = PyBytes_AS_STRING(buf);
    int64_t *off = (int64_t *)PyBytes_AS_STRING(offsets);
    const double *v = (const double *)view.buf;
    Py_ssize_t nd;
    Py_BEGIN_ALLOW_THREADS
    nd = pass(v, n, out, off, doubtful);
    Py_END_ALLOW_THREADS
    if (nd > 0) {
        texts = PyMem_Malloc((size_t)nd * REPR_MAX);
        lens = PyMem_Malloc((size_t)nd * sizeof(int));
        if (texts == NULL || lens == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t t = 0; t < nd; t++) {
            char *text = PyOS_double_to_string(v[doubtful[t]], 'r', 0, Py_DTSF_ADD_DOT_0, NULL); /* float.__repr__'s call */
            if (text == NULL) goto done;
            size_t m = strlen(text);
            if (m > REPR_MAX) m = REPR_MAX; /* cannot happen (at most 24) */
            memcpy(texts + t * REPR_MAX, text, m);
            lens[t] = (int)m;
            PyMem_Free(text);
        }
        repr_fallbacks += nd;
        Py_BEGIN_ALLOW_THREADS
        insert(out, off, n, doubtful, nd, texts, lens);
        Py_END_ALLOW_THREADS
    }
    if (_PyBytes_Resize(&buf, off[n]) < 0) goto done;
    result = PyTuple_Pack(2, buf, offsets);
done:
    Py_XDECREF(buf);
    Py_XDECREF(offsets);
    PyMem_RawFree(doubtful);
    PyMem_Free(texts);
    PyMem_Free(lens);
    PyBuffer_Release(&view);
    return result;
}

/* repr_fallbacks(): how many values reprs has given to PyOS_double_to_string so far (a test's check
 * that the GIL-free path is the one taken). */
PyObject *frepr_fallbacks(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromSsize_t(repr_fallbacks);
}

/* The module's init: the tables, the powers of two as Python formats them (once per process), FAST_REPRS. */
int frepr_module_init(PyObject *module) {
    tables();
    for (int e = -POW2_MAX; e <= POW2_MAX; e++) {
        char *text = PyOS_double_to_string(ldexp(1.0, e), 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (text == NULL) return -1;
        size_t len = strlen(text);
        if (len <= sizeof POW2_TEXT[0]) {
            memcpy(POW2_TEXT[e + POW2_MAX], text, len);
            POW2_LEN[e + POW2_MAX] = (unsigned char)len;
        }
        PyMem_Free(text);
    }
    return PyModule_AddIntConstant(module, "FAST_REPRS", FAST);
}
