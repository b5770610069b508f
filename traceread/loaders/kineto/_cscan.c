/* Compiled scanner for one chunk of a Kineto event array (see scan.py for the contract).
 *
 * The chunk is the text between two event boundaries: JSON objects separated by commas. The
 * scanner validates the whole chunk as strict JSON (a stricter check than msgspec's is always
 * safe: whatever it refuses goes to the msgspec decoder, the exact fallback) and, per row event
 * (ph X, i, I), writes the frame's integer columns straight into caller-owned int64 arrays:
 * exact nanoseconds from integer or up-to-3-decimal microseconds, ids, category and name codes
 * (hash tables keyed by the value's bytes, confirmed by byte comparison), kernel launch config,
 * copy bytes and input-shape codes. Metadata events and rows carrying collective args or a stream
 * wait's event record are not decoded here: their text is copied into one JSON array for msgspec.
 *
 * The common shapes (short plain keys and strings, numbers of up to 16 digits and 7 decimals,
 * ": " and ", " separators, empty arrays) take inline word-at-a-time fast paths; anything else
 * goes to the general functions from the same index, so the fast paths change no result and no
 * refusal reason (tests/unit/test_kineto_cscan_paths.py compares against a build without them).
 *
 * Anything the scanner cannot take exactly returns a short reason string instead of a result
 * and the caller decodes the chunk the msgspec way. Every read is bounds-checked against the
 * buffer's length; no input makes it read outside the buffer or write past the arrays.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
/* Word-at-a-time paths: SSE2 (every x86-64 CPU) and 64-bit SWAR (little-endian GCC/Clang). Each
 * has a plain C path beside it giving the same results; CSCAN_NO_SSE2 / CSCAN_PLAIN force those
 * (the tests' way to check them on an x86-64 machine). */
#if defined(__SSE2__) && !defined(CSCAN_NO_SSE2) && !defined(CSCAN_PLAIN)
#define SSE2 1
#include <emmintrin.h> /* part of every x86-64 CPU: 16 string bytes per step */
#else
#define SSE2 0
#endif
#if defined(__GNUC__)
#define HOT static inline __attribute__((always_inline))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define HOT static inline
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#endif

/* dense per-row columns (int64, column-major: column c of row r at cols[c * cap + r]) */
enum { C_START, C_END, C_PID, C_TID, C_EXT, C_CORR, C_DEVICE, C_STREAM, C_CAT, C_NAME, C_INSTANT,
       C_BYTES, C_SHAPE, NCOLS };
/* kernel records (rows with a grid): row, grid xyz, block xyz, registers, shared memory */
enum { K_ROW, K_GX, K_GY, K_GZ, K_BX, K_BY, K_BZ, K_REGS, K_SMEM, NKCOLS };

#define MAX_DEPTH 64
#define NS_LIMIT_US 9223372036854775LL /* INT64_MAX / 1000: larger microseconds do not fit ns */
/* A value only the fallback can give exactly (a string id in args, an odd launch config). Written
 * instead of it; the caller falls back when a row that uses the value holds it. No parsed id
 * can be INT64_MIN (magnitudes past INT64_MAX are refused). */
#define UNSURE INT64_MIN

typedef struct { const uint8_t *s; Py_ssize_t n; const char *err; } Scan;

/* ---- growable arrays and the interning table ---------------------------------------------- */

typedef struct { int64_t *v; Py_ssize_t len, cap; } Vec;

static int vec_push(Vec *a, const int64_t *items, int k) {
    if (a->len + k > a->cap) {
        Py_ssize_t cap = a->cap ? a->cap * 2 : 256;
        while (cap < a->len + k) cap *= 2;
        int64_t *v = PyMem_RawRealloc(a->v, (size_t)cap * sizeof(int64_t));
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    memcpy(a->v + a->len, items, (size_t)k * sizeof(int64_t));
    a->len += k;
    return 0;
}

/* Key = one or two byte spans of the chunk (two for input shapes: dims and types). */
typedef struct { uint64_t h; Py_ssize_t o1, l1, o2, l2; int32_t code; uint8_t esc; } Entry;
typedef struct {
    Entry *slots;
    Py_ssize_t mask, used;
    Vec order; /* slot index per code */
    Py_ssize_t recent_o[2], recent_l[2]; /* the last two values looked up (categories and names repeat) */
    int32_t recent_code[2];
} Table;

static uint64_t hash_bytes(const uint8_t *p, Py_ssize_t n, uint64_t h) {
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    if (n) memcpy(&w, p, (size_t)n);
    h = (h ^ w ^ ((uint64_t)n << 56)) * 0xC2B2AE3D27D4EB4FULL;
    return h ^ (h >> 31);
}

static int table_init(Table *t) {
    t->mask = 255;
    t->used = 0;
    t->order = (Vec){0};
    t->recent_l[0] = t->recent_l[1] = -1;
    t->slots = PyMem_RawCalloc(256, sizeof(Entry));
    return t->slots ? 0 : -1;
}

static void table_free(Table *t) {
    PyMem_RawFree(t->slots);
    PyMem_RawFree(t->order.v);
}

static int table_grow(Table *t) {
    Py_ssize_t ncap = (t->mask + 1) * 2;
    Entry *ns = PyMem_RawCalloc((size_t)ncap, sizeof(Entry));
    if (!ns) return -1;
    for (Py_ssize_t c = 0; c < t->order.len; c++) {
        Entry *e = &t->slots[t->order.v[c]];
        Py_ssize_t j = (Py_ssize_t)(e->h & (uint64_t)(ncap - 1));
        while (ns[j].code != 0) j = (j + 1) & (ncap - 1);
        ns[j] = *e;
        t->order.v[c] = j;
    }
    PyMem_RawFree(t->slots);
    t->slots = ns;
    t->mask = ncap - 1;
    return 0;
}

/* Code of the key (o1,l1)+(o2,l2) in first-seen order; -1 when out of memory.
 * Slots are "empty" when zeroed; a stored entry has code+1 in `code` to tell it apart. */
static int32_t table_code(Table *t, const uint8_t *s, Py_ssize_t o1, Py_ssize_t l1, Py_ssize_t o2,
                          Py_ssize_t l2, uint8_t esc) {
    uint64_t h = hash_bytes(s + o1, l1, 0x1234567ULL);
    if (l2 >= 0) h = hash_bytes(s + o2, l2, h ^ 0xA5A5A5A5ULL);
    Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)t->mask);
    for (;;) {
        Entry *e = &t->slots[j];
        if (e->code == 0) break; /* empty */
        if (e->h == h && e->l1 == l1 && e->l2 == l2 && memcmp(s + e->o1, s + o1, (size_t)l1) == 0
            && (l2 <= 0 || memcmp(s + e->o2, s + o2, (size_t)l2) == 0))
            return e->code - 1;
        j = (j + 1) & t->mask;
    }
    int32_t code = (int32_t)t->order.len;
    Entry *e = &t->slots[j];
    *e = (Entry){h, o1, l1, o2, l2, code + 1, esc};
    int64_t slot = j;
    if (vec_push(&t->order, &slot, 1) < 0) return -1;
    if (++t->used * 2 > t->mask + 1 && table_grow(t) < 0) return -1;
    return code;
}

/* table_code of one span, first asking the two values looked up last (most rows repeat one).
 * Not inlined: inlined, GCC stops inlining event_at into the chunk loop (more instructions per event). */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static int32_t text_code(Table *t, const uint8_t *s, Py_ssize_t o, Py_ssize_t l, uint8_t esc) {
    if (t->recent_l[0] == l && memcmp(s + t->recent_o[0], s + o, (size_t)l) == 0) return t->recent_code[0];
    int32_t code;
    if (t->recent_l[1] == l && memcmp(s + t->recent_o[1], s + o, (size_t)l) == 0) {
        code = t->recent_code[1];
    } else {
        code = table_code(t, s, o, l, 0, -1, esc);
        if (code < 0) return code;
    }
    t->recent_o[1] = t->recent_o[0];
    t->recent_l[1] = t->recent_l[0];
    t->recent_code[1] = t->recent_code[0];
    t->recent_o[0] = o;
    t->recent_l[0] = l;
    t->recent_code[0] = code;
    return code;
}

/* ---- strict JSON lexing --------------------------------------------------------------------- */

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ \
    && !defined(CSCAN_PLAIN)
#define SWAR 1
#else
#define SWAR 0
#endif

/* Index of the first non-whitespace byte from i. Most calls stop at once (one compare: every JSON
 * whitespace byte is <= ' '); pretty-printed files indent with runs of newlines and spaces,
 * skipped 16 bytes per step (SSE2) or 8 spaces per step (SWAR). */
static inline Py_ssize_t ws(const Scan *sc, Py_ssize_t i) {
    const uint8_t *s = sc->s;
    Py_ssize_t n = sc->n;
    if (i < n && s[i] > ' ') return i;
    if (i + 1 < n && s[i] == ' ' && s[i + 1] > ' ') return i + 1; /* the space after ':' or ',' */
#if SSE2
    {
        const __m128i sp = _mm_set1_epi8(' '), nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'),
                      tb = _mm_set1_epi8('\t');
        while (i + 16 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
            __m128i w = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, sp), _mm_cmpeq_epi8(v, nl)),
                                     _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, tb)));
            unsigned m = ~(unsigned)_mm_movemask_epi8(w) & 0xFFFFu; /* bytes that are not whitespace */
            if (m) return i + __builtin_ctz(m);
            i += 16;
        }
    }
#endif
    while (i < n) {
        uint8_t c = s[i];
        if (c > ' ') break;
#if SWAR
        if (c == ' ' && i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            uint64_t x = w ^ 0x2020202020202020ULL; /* zero bytes: spaces */
            if (x == 0) { i += 8; continue; }
            i += __builtin_ctzll(x) >> 3;
            continue;
        }
#endif
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
        i++;
    }
    return i;
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Length of the valid UTF-8 sequence at s[i] (a non-ASCII lead byte), 0 when invalid: overlong
 * forms, surrogates and code points past U+10FFFF are refused, as Python's decoder does. */
static int utf8_len(const Scan *sc, Py_ssize_t i) {
    const uint8_t *p = sc->s + i;
    Py_ssize_t left = sc->n - i;
    uint8_t c = p[0];
    if (c >= 0xC2 && c <= 0xDF) return (left >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && p[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && p[1] < 0x90) return 0;
        if (c == 0xF4 && p[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

static const uint64_t POW10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

#if SWAR
/* High bit set in the bytes of w that end a plain run inside a string: '"', '\\', control
 * characters (< 0x20) and non-ASCII (>= 0x80). Bits above the lowest one may be false positives
 * (borrows); the lowest is exact, and only it is used. */
static inline uint64_t special8(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    return (((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w) | w) & high;
}

/* Eight ASCII digits in w (little-endian load)? And their value (Lemire's SWAR digit parse). */
static inline int eight_digits(uint64_t w) {
    return ((w & 0xF0F0F0F0F0F0F0F0ULL) | (((w + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4))
           == 0x3333333333333333ULL;
}

static inline uint64_t eight_digits_value(uint64_t w) {
    w -= 0x3030303030303030ULL;
    w = (w * 10) + (w >> 8);
    return (((w & 0x000000FF000000FFULL) * 0x000F424000000064ULL)
            + (((w >> 16) & 0x000000FF000000FFULL) * 0x0000271000000001ULL)) >> 32;
}

/* How many of the 8 bytes at p are leading ASCII digits (0-8), and in *value the number they
 * spell: the digits moved to the end of a word of '0's and parsed as eight. Replaces the last
 * digit-by-digit loop of a number (a timestamp's tail, its decimals, a duration). */
static inline int leading_digits8(const uint8_t *p, uint64_t *value) {
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t x = w ^ 0x3030303030303030ULL; /* digits become 0-9 */
    uint64_t nd = (((x & 0x7F7F7F7F7F7F7F7FULL) + 0x7676767676767676ULL) | x) & 0x8080808080808080ULL;
    int k = nd ? __builtin_ctzll(nd) >> 3 : 8;
    if (k == 0) {
        *value = 0;
        return 0;
    }
    *value = eight_digits_value(k == 8 ? w : (w << (8 * (8 - k))) | (0x3030303030303030ULL >> (8 * k)));
    return k;
}
#endif

/* String at s[i] == '"' (string_at), or from the byte after it (`from`) with the bytes up to i
 * already known to be plain (string_from): returns the index after the closing quote (-1:
 * invalid or unterminated).
 * start and len give the bytes between the quotes; *esc is set when they hold an escape.
 * Escapes of surrogates (\uD800-\uDFFF) are refused: lone ones differ between decoders. */
static Py_ssize_t string_from(Scan *sc, Py_ssize_t from, Py_ssize_t i, Py_ssize_t *start, Py_ssize_t *len,
                              int *esc) {
    const uint8_t *s = sc->s;
    Py_ssize_t n = sc->n;
    *esc = 0;
    *start = from;
    while (i < n) {
#if SSE2
        while (i + 16 <= n) { /* sixteen plain bytes at a time: most of a file is keys and names */
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
            /* signed compare: below 0x20 are control characters, negative are non-ASCII bytes */
            __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                    _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                       _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
            int m = _mm_movemask_epi8(hit);
            if (m) {
                i += __builtin_ctz((unsigned)m);
                goto special;
            }
            i += 16;
        }
#endif
#if SWAR
        while (i + 8 <= n) { /* eight plain bytes at a time */
            uint64_t w, m;
            memcpy(&w, s + i, 8);
            if ((m = special8(w)) != 0) {
                i += __builtin_ctzll(m) >> 3;
                break;
            }
            i += 8;
        }
        if (i >= n) break;
#endif
#if SSE2
    special:
#endif
        ;
        uint8_t c = s[i];
        if (c == '"') {
            *len = i - *start;
            return i + 1;
        }
        if (c == '\\') {
            *esc = 1;
            if (i + 1 >= n) break;
            uint8_t e = s[i + 1];
            if (e == 'u') {
                if (i + 5 >= n) break;
                int v = 0;
                for (int k = 2; k < 6; k++) {
                    int h = hexval(s[i + k]);
                    if (h < 0) { sc->err = "bad escape"; return -1; }
                    v = v * 16 + h;
                }
                if (v >= 0xD800 && v <= 0xDFFF) { sc->err = "surrogate escape"; return -1; }
                i += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r'
                       || e == 't') {
                i += 2;
            } else {
                sc->err = "bad escape";
                return -1;
            }
        } else if (c < 0x20) {
            sc->err = "control character in a string";
            return -1;
        } else if (c >= 0x80) {
            int k = utf8_len(sc, i);
            if (!k) { sc->err = "invalid UTF-8"; return -1; }
            i += k;
        } else {
            i++;
        }
    }
    sc->err = "unterminated string";
    return -1;
}

static Py_ssize_t string_at(Scan *sc, Py_ssize_t i, Py_ssize_t *start, Py_ssize_t *len, int *esc) {
    return string_from(sc, i + 1, i + 1, start, len, esc);
}

/* A JSON number at s[i]. Returns the index after it (-1: not a number by JSON's grammar).
 * *is_int: no fraction, no exponent; *ival (when is_int and it fits int64, else *big = 1);
 * *frac_digits, *frac: the fraction when there is no exponent (-1 digits when exponent). */
typedef struct { int neg, is_int, big, frac_digits; int64_t ival; uint64_t mag, frac; } Num;

static Py_ssize_t number_at(Scan *sc, Py_ssize_t i, Num *num) {
    const uint8_t *s = sc->s;
    Py_ssize_t n = sc->n;
    uint64_t mag = 0, frac = 0; /* locals, not num's fields: kept in registers in the digit loops */
    int neg = 0, is_int = 1, big = 0, frac_digits = 0;
    if (i < n && s[i] == '-') { neg = 1; i++; }
    if (i >= n || s[i] < '0' || s[i] > '9') goto bad;
    if (s[i] == '0') {
        i++;
    } else {
        Py_ssize_t first = i, stop = n - i > 19 ? i + 19 : n; /* 19 digits always fit in uint64 */
#if SWAR
        while (i + 8 <= stop) { /* timestamps have 16 digits: two steps of eight */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!eight_digits(w)) break;
            mag = mag * 100000000ULL + eight_digits_value(w);
            i += 8;
        }
        if (i + 8 <= n) { /* the last 1-7 digits in one step (within the 19-digit cap) */
            uint64_t v;
            int k = leading_digits8(s + i, &v);
            if (k < 8 && k <= stop - i) {
                mag = mag * POW10[k] + v;
                i += k;
            }
        }
#endif
        while (i < stop && (uint8_t)(s[i] - '0') <= 9) mag = mag * 10 + (uint64_t)(s[i++] - '0');
        while (i < n && (uint8_t)(s[i] - '0') <= 9) i++;
        big = i - first > 19;
    }
    if (i < n && s[i] == '.') {
        is_int = 0;
        i++;
        if (i >= n || s[i] < '0' || s[i] > '9') goto bad;
#if SWAR
        if (i + 8 <= n) { /* up to 7 decimals in one step; more go on digit by digit */
            uint64_t v;
            int k = leading_digits8(s + i, &v);
            if (k < 8) {
                frac = v;
                frac_digits = k;
                i += k;
            }
        }
#endif
        while (i < n && (uint8_t)(s[i] - '0') <= 9) {
            if (frac_digits < 18) frac = frac * 10 + (uint64_t)(s[i] - '0');
            frac_digits++;
            i++;
        }
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        is_int = 0;
        frac_digits = -1;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || s[i] < '0' || s[i] > '9') goto bad;
        while (i < n && (uint8_t)(s[i] - '0') <= 9) i++;
    }
    if (mag > (uint64_t)INT64_MAX) big = 1;
    *num = (Num){neg, is_int, big, frac_digits, big ? 0 : (neg ? -(int64_t)mag : (int64_t)mag), mag, frac};
    return i;
bad:
    sc->err = "bad number";
    return -1;
}

/* ---- fast paths ------------------------------------------------------------------------------
 * The common shapes (short plain keys and strings, numbers of up to 16 digits and 7 decimals,
 * empty arrays) in one or two word steps, inlined with their results in registers. Anything else
 * goes to the general functions above from the same index, so every result and every refusal
 * reason is theirs; a fast path only ever agrees with them sooner. */

/* A string at s[i] == '"' whose closing quote comes within 16 bytes (8 without SSE2) with no
 * escape, control or non-ASCII byte before it: most keys, phases and categories. */
HOT Py_ssize_t str_fast(Scan *sc, Py_ssize_t i, Py_ssize_t *start, Py_ssize_t *len, int *esc) {
#if SSE2
    if (LIKELY(i + 17 <= sc->n)) {
        const uint8_t *p = sc->s + i + 1;
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                   _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
        unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (LIKELY(m)) {
            unsigned k = (unsigned)__builtin_ctz(m);
            if (LIKELY(p[k] == '"')) {
                *start = i + 1;
                *len = k;
                *esc = 0;
                return i + 2 + k;
            }
            return string_from(sc, i + 1, i + 1 + k, start, len, esc); /* at the escape or odd byte */
        }
        return string_from(sc, i + 1, i + 17, start, len, esc); /* past 16 plain bytes */
    }
#elif SWAR
    if (LIKELY(i + 9 <= sc->n)) {
        const uint8_t *p = sc->s + i + 1;
        uint64_t w, m;
        memcpy(&w, p, 8);
        if ((m = special8(w)) != 0) {
            unsigned k = (unsigned)__builtin_ctzll(m) >> 3;
            if (p[k] == '"') {
                *start = i + 1;
                *len = k;
                *esc = 0;
                return i + 2 + k;
            }
            return string_from(sc, i + 1, i + 1 + k, start, len, esc);
        }
        return string_from(sc, i + 1, i + 9, start, len, esc);
    }
#endif
    return string_at(sc, i, start, len, esc);
}

#if SWAR
/* How many of the 8 bytes of w (little-endian load) are leading ASCII digits (0-8). */
HOT int digits8(uint64_t w) {
    uint64_t x = w ^ 0x3030303030303030ULL; /* digits become 0-9 */
    uint64_t nd = (((x & 0x7F7F7F7F7F7F7F7FULL) + 0x7676767676767676ULL) | x) & 0x8080808080808080ULL;
    return nd ? __builtin_ctzll(nd) >> 3 : 8;
}

/* How many of the 16 bytes at p are leading ASCII digits (0-16). */
HOT int digits16(const uint8_t *p) {
#if SSE2
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i d = _mm_sub_epi8(v, _mm_set1_epi8('0'));
    __m128i is_digit = _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d); /* d <= 9 unsigned */
    return __builtin_ctz(~(unsigned)_mm_movemask_epi8(is_digit)); /* bit 16 and up: set */
#else
    uint64_t w;
    memcpy(&w, p, 8);
    int k = digits8(w);
    if (k < 8) return k;
    memcpy(&w, p + 8, 8);
    return 8 + digits8(w);
#endif
}

/* The k leading digits (1-8) of w as one eight-digit word: shifted up, '0's in front. */
HOT uint64_t digits_word(uint64_t w, int k) {
    return k == 8 ? w : (w << (8 * (8 - k))) | (0x3030303030303030ULL >> (8 * k));
}

/* Value of the k ASCII digits (1-16) at p; 16 bytes readable. */
HOT uint64_t digits_value(const uint8_t *p, int k) {
    uint64_t w0, w1;
    memcpy(&w0, p, 8);
    if (k <= 8) return eight_digits_value(digits_word(w0, k));
    memcpy(&w1, p + 8, 8);
    return eight_digits_value(w0) * POW10[k - 8] + eight_digits_value(digits_word(w1, k - 8));
}
#endif

/* The common numbers at s[i] (i < n): '-'?, 1-16 integer digits without a leading zero (or one
 * 0), then '.' and 1-7 decimals or nothing, no exponent, with 17 bytes readable from the first
 * digit (9 from a '.'; 16 suffice for up to 15 digits). Sets the sign, magnitude and decimals (fd = 0: an integer) and returns
 * the index after the number, or -2: number_at decides (a slow shape, or not a number at all). */
HOT Py_ssize_t num_fast(const Scan *sc, Py_ssize_t i, int *neg, uint64_t *mag, int *fd, uint64_t *frac) {
#if SWAR
    const uint8_t *s = sc->s;
    Py_ssize_t n = sc->n;
    int ng = s[i] == '-';
    i += ng;
    if (UNLIKELY(i + 16 > n)) return -2;
    int k = digits16(s + i);
    if (UNLIKELY(k == 0 || (s[i] == '0' && k > 1))) return -2;
    if (k == 16 && (i + 16 >= n || (uint8_t)(s[i + 16] - '0') <= 9)) return -2; /* 17 digits or more */
    uint64_t m = digits_value(s + i, k);
    i += k; /* < n */
    int f = 0;
    uint64_t fr = 0;
    if (s[i] == '.') {
        if (UNLIKELY(i + 9 > n)) return -2;
        uint64_t w;
        memcpy(&w, s + i + 1, 8);
        f = digits8(w);
        if (UNLIKELY(f == 0 || f == 8)) return -2;
        fr = eight_digits_value(digits_word(w, f));
        i += 1 + f; /* < n: at most 8 past the '.' */
    }
    if (UNLIKELY((s[i] | 0x20) == 'e')) return -2;
    *neg = ng;
    *mag = m;
    *fd = f;
    *frac = fr;
    return i;
#else
    (void)sc; (void)i; (void)neg; (void)mag; (void)fd; (void)frac;
    return -2;
#endif
}

/* After a key's closing quote at s[i]: past the ':' and whitespace to the value (-1: no ':').
 * One compare pair for the usual ": " and ":" before ws's general loop. */
HOT Py_ssize_t colon_at(Scan *sc, Py_ssize_t i) {
    const uint8_t *s = sc->s;
    if (LIKELY(i + 2 < sc->n && s[i] == ':')) {
        if (s[i + 1] > ' ') return i + 1;
        if (s[i + 1] == ' ' && s[i + 2] > ' ') return i + 2;
    }
    i = ws(sc, i);
    if (i >= sc->n || sc->s[i] != ':') { sc->err = "expected ':'"; return -1; }
    return ws(sc, i + 1);
}

static Py_ssize_t literal_at(Scan *sc, Py_ssize_t i, const char *word, Py_ssize_t len) {
    if (sc->n - i < len || memcmp(sc->s + i, word, (size_t)len) != 0) {
        sc->err = "bad literal";
        return -1;
    }
    return i + len;
}

static Py_ssize_t skip_value(Scan *sc, Py_ssize_t i, int depth);

/* skip_value with its common leaves inline: short strings, numbers, empty arrays. */
HOT Py_ssize_t skip_fast(Scan *sc, Py_ssize_t i, int depth) {
    if (LIKELY(i < sc->n)) {
        uint8_t c = sc->s[i];
        if (c == '"') {
            Py_ssize_t a, b;
            int esc;
            return str_fast(sc, i, &a, &b, &esc);
        }
        if (c == '-' || (uint8_t)(c - '0') <= 9) {
            int neg, fd;
            uint64_t mag, frac;
            Py_ssize_t j = num_fast(sc, i, &neg, &mag, &fd, &frac);
            if (LIKELY(j >= 0)) return j;
        } else if (c == '[' && i + 1 < sc->n && sc->s[i + 1] == ']' && depth < MAX_DEPTH) {
            return i + 2;
        }
    }
    return skip_value(sc, i, depth);
}

/* Any JSON value at s[i], validated and skipped; returns the index after it or -1. */
static Py_ssize_t skip_value(Scan *sc, Py_ssize_t i, int depth) {
    Py_ssize_t a, b;
    int esc;
    Num num;
    if (i >= sc->n) { sc->err = "unexpected end"; return -1; }
    switch (sc->s[i]) {
    case '"':
        return string_at(sc, i, &a, &b, &esc);
    case '{':
    case '[': {
        int obj = sc->s[i] == '{';
        uint8_t close = obj ? '}' : ']';
        if (depth >= MAX_DEPTH) { sc->err = "nested too deep"; return -1; }
        i = ws(sc, i + 1);
        if (i < sc->n && sc->s[i] == close) return i + 1;
        for (;;) {
            if (obj) {
                if (i >= sc->n || sc->s[i] != '"') { sc->err = "expected a key"; return -1; }
                if ((i = str_fast(sc, i, &a, &b, &esc)) < 0) return -1;
                if ((i = colon_at(sc, i)) < 0) return -1;
            }
            if ((i = skip_fast(sc, i, depth + 1)) < 0) return -1;
            if (LIKELY(i + 2 < sc->n && sc->s[i] == ',')) { /* the usual ", " or "," */
                if (sc->s[i + 1] > ' ') { i++; continue; }
                if (sc->s[i + 1] == ' ' && sc->s[i + 2] > ' ') { i += 2; continue; }
            }
            i = ws(sc, i);
            if (i >= sc->n) { sc->err = "unexpected end"; return -1; }
            if (sc->s[i] == close) return i + 1;
            if (sc->s[i] != ',') { sc->err = "expected ',' or a close"; return -1; }
            i = ws(sc, i + 1);
        }
    }
    case 't': return literal_at(sc, i, "true", 4);
    case 'f': return literal_at(sc, i, "false", 5);
    case 'n': return literal_at(sc, i, "null", 4);
    default:
        return number_at(sc, i, &num);
    }
}

/* ---- one event ------------------------------------------------------------------------------ */

/* Field state of an event, decided once the whole object is read (ph may come last). */
enum { V_ABSENT = 0, V_OK, V_BAD };
typedef struct { int state; int64_t v; Py_ssize_t o, l; int str_id; } IdVal; /* str_id: a name */
typedef struct { int state, dot; int64_t ns; } TimeVal;
typedef struct { int state; Py_ssize_t o, l; int esc; } StrVal;
typedef struct { int present, ok; int64_t v[3]; } Triple;

typedef struct {
    char ph;  /* 'X', 'i', 'M', 'C' (counter), 's' (skipped: another known phase), 0 (none), '?' (unknown) */
    int bad;  /* a row would be wrong here: duplicate key, wrong type, odd value */
    StrVal cat, name;
    IdVal pid, tid;
    TimeVal ts, dur;
    int64_t ext, ext_old, corr, device, stream, regs, smem, nbytes;
    Triple grid, block;
    Py_ssize_t dims_o, dims_l, dims_old_o, dims_old_l, types_o, types_l; /* -1 length: absent */
    int collective; /* a collective-args key: the row goes to msgspec */
} Ev;

static int key_is(const uint8_t *k, Py_ssize_t l, const char *word) {
    Py_ssize_t wl = (Py_ssize_t)strlen(word);
    return l == wl && memcmp(k, word, (size_t)wl) == 0;
}

/* An id (pid, tid, args ids): a JSON integer in int64; for pid/tid also an ASCII string: digits
 * (2021 files write tids so), "stream 7", or a name without any digit ("Spans"). */
static Py_ssize_t id_at(Scan *sc, Py_ssize_t i, IdVal *out, int allow_string) {
    if (out->state != V_ABSENT) out->state = V_BAD; /* duplicate key */
    if (i < sc->n && sc->s[i] == '"') {
        Py_ssize_t o, l;
        int esc;
        if ((i = str_fast(sc, i, &o, &l, &esc)) < 0) return -1;
        if (out->state == V_BAD || !allow_string || esc) { out->state = V_BAD; return i; }
#if SWAR
        if (LIKELY(l >= 1 && l <= 16 && o + 16 <= sc->n) && digits16(sc->s + o) >= l) { /* "1441273664" */
            *out = (IdVal){V_OK, (int64_t)digits_value(sc->s + o, (int)l), 0, 0, 0};
            return i;
        }
#endif
        /* what the fallback's ids_with_strings/_one_int make of an ASCII string: no digit: a
         * name; digits (after stripping spaces): the number; else the first -?[0-9]+ in it */
        const uint8_t *p = sc->s + o, *q = sc->s + o + l;
        Py_ssize_t first = -1, run = 0;
        for (const uint8_t *c = p; c < q; c++) {
            if (*c >= 0x80) { out->state = V_BAD; return i; } /* Unicode digits, spaces: Python's */
            if (first < 0 && *c >= '0' && *c <= '9') first = c - p;
        }
        if (first < 0) { *out = (IdVal){V_OK, -1, o, l, 1}; return i; }
        while (p < q && *p == ' ') p++;
        if (q - p >= 2 && p[0] == '0' && (p[1] | 0x20) == 'x') { out->state = V_BAD; return i; } /* hex */
        int64_t v = 0;
        for (const uint8_t *c = sc->s + o + first; c < q && *c >= '0' && *c <= '9'; c++, run++)
            if (run < 18) v = v * 10 + (*c - '0');
        if (run > 18) { out->state = V_BAD; return i; } /* may pass int64: Python decides */
        if (first > 0 && sc->s[o + first - 1] == '-') v = -v;
        *out = (IdVal){V_OK, v, 0, 0, 0};
        return i;
    }
    Num num;
    int dup = out->state == V_BAD;
    out->state = V_BAD;
    if (i < sc->n && (sc->s[i] == '-' || (sc->s[i] >= '0' && sc->s[i] <= '9'))) {
        int neg, fd;
        uint64_t mag, frac;
        Py_ssize_t j = num_fast(sc, i, &neg, &mag, &fd, &frac);
        if (LIKELY(j >= 0)) {
            if (!dup && fd == 0) *out = (IdVal){V_OK, neg ? -(int64_t)mag : (int64_t)mag, 0, 0, 0};
            return j;
        }
        if ((i = number_at(sc, i, &num)) < 0) return -1;
        if (!dup && num.is_int && !num.big) *out = (IdVal){V_OK, num.ival, 0, 0, 0};
        return i;
    }
    return skip_fast(sc, i, 1);
}

/* id_at with its common case inline: a first integer of up to 16 digits. */
HOT Py_ssize_t id_fast(Scan *sc, Py_ssize_t i, IdVal *out, int allow_string) {
    if (LIKELY(i < sc->n && out->state == V_ABSENT)) {
        uint8_t c = sc->s[i];
        if (c == '-' || (uint8_t)(c - '0') <= 9) {
            int neg, fd;
            uint64_t mag, frac;
            Py_ssize_t j = num_fast(sc, i, &neg, &mag, &fd, &frac);
            if (LIKELY(j >= 0)) {
                if (LIKELY(fd == 0)) *out = (IdVal){V_OK, neg ? -(int64_t)mag : (int64_t)mag, 0, 0, 0};
                else out->state = V_BAD;
                return j;
            }
        }
    }
    return id_at(sc, i, out, allow_string);
}

/* ts/dur: integer microseconds or up to three decimals, exactly as int64 ns. */
HOT Py_ssize_t time_at(Scan *sc, Py_ssize_t i, TimeVal *out) {
    int dup = out->state != V_ABSENT;
    out->state = V_BAD;
    if (i >= sc->n || !(sc->s[i] == '-' || (sc->s[i] >= '0' && sc->s[i] <= '9'))) return skip_fast(sc, i, 1);
    int neg, fd;
    uint64_t mag, frac;
    Py_ssize_t j = num_fast(sc, i, &neg, &mag, &fd, &frac);
    if (LIKELY(j >= 0)) {
        if (dup || mag >= (uint64_t)NS_LIMIT_US || fd > 3) return j;
        int64_t ns = (int64_t)(mag * 1000 + frac * POW10[3 - fd]);
        *out = (TimeVal){V_OK, fd != 0, neg ? -ns : ns};
        return j;
    }
    Num num;
    j = number_at(sc, i, &num);
    if (j < 0 || dup) return j;
    if (num.big || num.mag >= (uint64_t)NS_LIMIT_US || num.frac_digits < 0 || num.frac_digits > 3) return j;
    frac = num.frac;
    for (int k = num.frac_digits; k < 3; k++) frac *= 10;
    int64_t ns = (int64_t)(num.mag * 1000 + frac);
    *out = (TimeVal){V_OK, !num.is_int, num.neg ? -ns : ns};
    return j;
}

/* [x, y, z] of three JSON integers (kernel grid and block); anything else is not ok. */
static void triple_of(Scan *sc, Py_ssize_t i, Py_ssize_t end, Triple *t) {
    t->ok = 0;
    if (sc->s[i] != '[') return;
    i++;
    for (int k = 0; k < 3; k++) {
        i = ws(sc, i);
        Num num;
        if (i >= end || !(sc->s[i] == '-' || (sc->s[i] >= '0' && sc->s[i] <= '9'))) return;
        int neg, fd;
        uint64_t mag, frac;
        Py_ssize_t j = num_fast(sc, i, &neg, &mag, &fd, &frac);
        if (LIKELY(j >= 0)) {
            if (fd) return;
            t->v[k] = neg ? -(int64_t)mag : (int64_t)mag;
            i = j;
        } else {
            i = number_at(sc, i, &num);
            if (i < 0 || !num.is_int || num.big) return;
            t->v[k] = num.ival;
        }
        i = ws(sc, i);
        if (i >= end || sc->s[i] != (k < 2 ? ',' : ']')) return;
        i++;
    }
    t->ok = i == end;
}

/* After an object member's value at s[i]: past the ',' to the next key (*closed = 0) or past the
 * closing '}' (*closed = 1); -1 when neither follows. */
HOT Py_ssize_t next_member(Scan *sc, Py_ssize_t i, int *closed) {
    const uint8_t *s = sc->s;
    if (LIKELY(i + 2 < sc->n && s[i] == ',')) { /* the usual ", " or "," before the next key */
        *closed = 0;
        if (s[i + 1] > ' ') return i + 1;
        if (s[i + 1] == ' ' && s[i + 2] > ' ') return i + 2;
        return ws(sc, i + 1);
    }
    i = ws(sc, i);
    if (i >= sc->n) { sc->err = "unexpected end"; return -1; }
    *closed = sc->s[i] == '}';
    if (*closed) return i + 1;
    if (sc->s[i] != ',') { sc->err = "expected ',' or '}'"; return -1; }
    return ws(sc, i + 1);
}

static Py_ssize_t args_at(Scan *sc, Py_ssize_t i, Ev *ev) {
    Py_ssize_t ko, kl, vo;
    int esc;
    if (i >= sc->n || sc->s[i] != '{') {
        ev->bad = 1; /* args that are not an object */
        return skip_fast(sc, i, 1);
    }
    i = ws(sc, i + 1);
    if (i < sc->n && sc->s[i] == '}') return i + 1;
    uint32_t seen = 0;
    for (;;) {
        if (i >= sc->n || sc->s[i] != '"') { sc->err = "expected a key"; return -1; }
        if ((i = str_fast(sc, i, &ko, &kl, &esc)) < 0) return -1;
        if (esc) { sc->err = "escaped key"; return -1; }
        if ((vo = i = colon_at(sc, i)) < 0) return -1;
        const uint8_t *k = sc->s + ko;
        int bit = -1;
        IdVal idv = {0};
        int64_t *id_dst = NULL;
        Triple *tri = NULL;
        Py_ssize_t *raw_o = NULL, *raw_l = NULL;
        switch (k[0]) { /* the Args keys of events.py; all others are skipped */
        case 'E': if (key_is(k, kl, "External id")) { bit = 0; id_dst = &ev->ext; } break;
        case 'c': if (key_is(k, kl, "correlation")) { bit = 1; id_dst = &ev->corr; } break;
        case 'e': if (key_is(k, kl, "external id")) { bit = 2; id_dst = &ev->ext_old; } break;
        case 'd':
            if (key_is(k, kl, "device")) { bit = 3; id_dst = &ev->device; }
            else if (key_is(k, kl, "dtype")) bit = 20;
            break;
        case 's':
            if (key_is(k, kl, "stream")) { bit = 4; id_dst = &ev->stream; }
            else if (key_is(k, kl, "shared memory")) { bit = 5; id_dst = &ev->smem; }
            break;
        case 'r': if (key_is(k, kl, "registers per thread")) { bit = 6; id_dst = &ev->regs; } break;
        case 'b':
            if (key_is(k, kl, "bytes")) { bit = 7; id_dst = &ev->nbytes; }
            else if (key_is(k, kl, "block")) { bit = 8; tri = &ev->block; }
            break;
        case 'g': if (key_is(k, kl, "grid")) { bit = 9; tri = &ev->grid; } break;
        case 'I':
            if (key_is(k, kl, "Input Dims")) { bit = 10; raw_o = &ev->dims_o; raw_l = &ev->dims_l; }
            else if (key_is(k, kl, "Input dims")) { bit = 11; raw_o = &ev->dims_old_o; raw_l = &ev->dims_old_l; }
            else if (key_is(k, kl, "Input type")) { bit = 12; raw_o = &ev->types_o; raw_l = &ev->types_l; }
            else if (key_is(k, kl, "In msg nelems") || key_is(k, kl, "In msg size")) bit = 20;
            break;
        case 'O': if (key_is(k, kl, "Out msg nelems") || key_is(k, kl, "Out msg size")) bit = 20; break;
        case 'C': if (key_is(k, kl, "Collective name")) bit = 20; break;
        case 'G': if (key_is(k, kl, "Group size")) bit = 20; break;
        case 'w': /* a stream wait's event record: msgspec decodes this row's args too (rare) */
            if (key_is(k, kl, "wait_on_cuda_event_record_corr_id") || key_is(k, kl, "wait_on_stream")) bit = 20;
            break;
        case 'P':
            if (key_is(k, kl, "Process Group Name") || key_is(k, kl, "Process Group ID")
                || key_is(k, kl, "Process Group Description")) bit = 20;
            break;
        case 'n': if (key_is(k, kl, "name")) bit = 13; break;
        case 'l': if (key_is(k, kl, "labels")) bit = 14; break;
        default: break;
        }
        if (id_dst) {
            if (i < sc->n && sc->s[i] == '"') { /* a string id: valid, but its value is Python's */
                if ((i = skip_fast(sc, i, 1)) < 0) return -1;
                *id_dst = UNSURE;
            } else {
                if ((i = id_fast(sc, i, &idv, 0)) < 0) return -1;
                if (idv.state == V_OK) *id_dst = idv.v; else ev->bad = 1;
            }
        } else {
            if ((i = skip_fast(sc, i, 1)) < 0) return -1;
            if (bit == 20) ev->collective = 1; /* msgspec decodes this row's args */
            else if (bit == 13 || bit == 14) { if (sc->s[vo] != '"') ev->bad = 1; } /* str fields */
            else if (tri) { tri->present = 1; triple_of(sc, vo, i, tri); }
            else if (raw_o) { *raw_o = vo; *raw_l = i - vo; }
        }
        if (bit >= 0 && bit < 20) {
            if (seen & (1u << bit)) ev->bad = 1; /* duplicate: decoders may take either */
            seen |= 1u << bit;
        }
        int closed;
        if ((i = next_member(sc, i, &closed)) < 0 || closed) return i;
    }
}

static char phase_of(const uint8_t *p, Py_ssize_t l) {
    if (l == 0) return 's'; /* ph "" is the Skipped struct's own tag */
    if (l != 1) return '?';
    switch (p[0]) {
    case 'X': return 'X';
    case 'i': case 'I': return 'i';
    case 'M': return 'M';
    case 'C': return 'C'; /* a counter: skipped like 's', and counted */
    default: return strchr("BEbnesStTpFfPONDRcVv()", p[0]) && p[0] ? 's' : '?';
    }
}

static Py_ssize_t event_at(Scan *sc, Py_ssize_t i, Ev *ev) {
    Py_ssize_t ko, kl, o, l;
    int esc;
    uint32_t seen = 0;
    /* only what is read before it is written (a memset of the whole struct cost more) */
    ev->ph = 0;
    ev->bad = ev->collective = 0;
    ev->cat = ev->name = (StrVal){0};
    ev->pid.state = ev->tid.state = ev->ts.state = ev->dur.state = V_ABSENT;
    ev->ext = ev->ext_old = ev->corr = ev->device = ev->stream = ev->regs = ev->smem = ev->nbytes = -1;
    ev->grid = ev->block = (Triple){0};
    ev->dims_l = ev->dims_old_l = ev->types_l = -1;
    ev->types_o = 0;
    i = ws(sc, i + 1); /* past '{' */
    if (i < sc->n && sc->s[i] == '}') return i + 1;
    for (;;) {
        if (i >= sc->n || sc->s[i] != '"') { sc->err = "expected a key"; return -1; }
        if ((i = str_fast(sc, i, &ko, &kl, &esc)) < 0) return -1;
        if (esc) { sc->err = "escaped key"; return -1; }
        if ((i = colon_at(sc, i)) < 0) return -1;
        const uint8_t *k = sc->s + ko;
        int bit = -1;
        StrVal *sv = NULL;
        /* dispatch on the key's length first: most keys are none of these and cost one switch */
        int which = -1; /* 0 ph, 1 cat, 2 name, 3 pid, 4 tid, 5 ts, 6 dur, 7 args */
        switch (kl) {
        case 2:
            if (k[0] == 'p' && k[1] == 'h') which = 0;
            else if (k[0] == 't' && k[1] == 's') which = 5;
            break;
        case 3:
            if (!memcmp(k, "cat", 3)) which = 1;
            else if (!memcmp(k, "pid", 3)) which = 3;
            else if (!memcmp(k, "tid", 3)) which = 4;
            else if (!memcmp(k, "dur", 3)) which = 6;
            break;
        case 4:
            if (!memcmp(k, "name", 4)) which = 2;
            else if (!memcmp(k, "args", 4)) which = 7;
            break;
        default: break;
        }
        if (which == 0) {
            bit = 0;
            if (i < sc->n && sc->s[i] == '"') {
                if ((i = str_fast(sc, i, &o, &l, &esc)) < 0) return -1;
                ev->ph = esc ? '?' : phase_of(sc->s + o, l);
            } else {
                if ((i = skip_fast(sc, i, 1)) < 0) return -1;
                ev->ph = '?';
            }
        } else if (which == 1) { bit = 1; sv = &ev->cat; }
        else if (which == 2) { bit = 2; sv = &ev->name; }
        else if (which == 3) { bit = 3; if ((i = id_fast(sc, i, &ev->pid, 1)) < 0) return -1; }
        else if (which == 4) { bit = 4; if ((i = id_fast(sc, i, &ev->tid, 1)) < 0) return -1; }
        else if (which == 5) { bit = 5; if ((i = time_at(sc, i, &ev->ts)) < 0) return -1; }
        else if (which == 6) { bit = 6; if ((i = time_at(sc, i, &ev->dur)) < 0) return -1; }
        else if (which == 7) { bit = 7; if ((i = args_at(sc, i, ev)) < 0) return -1; }
        else if ((i = skip_fast(sc, i, 1)) < 0) return -1;
        if (sv) {
            if (i < sc->n && sc->s[i] == '"') {
                if ((i = str_fast(sc, i, &o, &l, &esc)) < 0) return -1;
                *sv = (StrVal){V_OK, o, l, esc};
            } else {
                if ((i = skip_fast(sc, i, 1)) < 0) return -1;
                sv->state = V_BAD;
            }
        }
        if (bit >= 0) {
            if (seen & (1u << bit)) ev->bad = 1;
            seen |= 1u << bit;
        }
        int closed;
        if ((i = next_member(sc, i, &closed)) < 0 || closed) return i;
    }
}

/* Why a row event cannot be taken exactly here (NULL: it can). */
static const char *row_problem(const Ev *ev) {
    if (ev->bad) return "odd row field (duplicate key or unexpected type)";
    if (ev->cat.state == V_BAD || ev->name.state == V_BAD) return "cat or name not a string";
    if (ev->pid.state == V_BAD || ev->tid.state == V_BAD) return "pid or tid not an exact id";
    if (ev->ts.state != V_OK) return "ts absent or not exact";
    if (ev->ph == 'X' && (ev->dur.state != V_OK || ev->dur.ns < 0)) return "dur absent, negative or not exact";
    return NULL;
}

/* ---- the chunk ------------------------------------------------------------------------------ */

typedef struct {
    Scan sc;
    int64_t *cols, *kern;
    Py_ssize_t cap, rows, nkern;
    Table cats, names, shapes;
    Vec extra;   /* msgspec events: start, end, row (-1: metadata) */
    Vec strings; /* string ids: column (0 pid, 1 tid), row, offset, length */
    int64_t other, unsure; /* unsure: values written as UNSURE */
    int64_t counters; /* of the other events, counter samples (ph C) */
    int float_ts;
} Chunk;

static const char *take_row(Chunk *ch, const Ev *ev, Py_ssize_t start, Py_ssize_t end) {
    const char *why = row_problem(ev);
    if (why) return why;
    Py_ssize_t r = ch->rows, cap = ch->cap;
    if (r >= cap) return "more rows than the caller's capacity";
    int64_t *c = ch->cols;
    const uint8_t *s = ch->sc.s;
    int32_t cat = text_code(&ch->cats, s, ev->cat.o, ev->cat.state ? ev->cat.l : 0, (uint8_t)ev->cat.esc);
    int32_t name = text_code(&ch->names, s, ev->name.o, ev->name.state ? ev->name.l : 0, (uint8_t)ev->name.esc);
    if (cat < 0 || name < 0) return "out of memory";
    int64_t dur = ev->ph == 'X' ? ev->dur.ns : 0; /* instants: no duration whatever is written */
    c[C_START * cap + r] = ev->ts.ns;
    c[C_END * cap + r] = (int64_t)((uint64_t)ev->ts.ns + (uint64_t)dur); /* wraps as numpy's add */
    c[C_PID * cap + r] = ev->pid.state ? ev->pid.v : -1;
    c[C_TID * cap + r] = ev->tid.state ? ev->tid.v : -1;
    c[C_EXT * cap + r] = ev->ext != -1 ? ev->ext : ev->ext_old;
    ch->unsure += ev->ext == UNSURE || ev->ext_old == UNSURE || ev->corr == UNSURE || ev->device == UNSURE
                  || ev->stream == UNSURE || ev->nbytes == UNSURE || ev->regs == UNSURE || ev->smem == UNSURE; /* Kineto <= 2022-04 spelling */
    c[C_CORR * cap + r] = ev->corr;
    c[C_DEVICE * cap + r] = ev->device;
    c[C_STREAM * cap + r] = ev->stream;
    c[C_CAT * cap + r] = cat;
    c[C_NAME * cap + r] = name;
    c[C_INSTANT * cap + r] = ev->ph != 'X';
    c[C_BYTES * cap + r] = ev->nbytes;
    int64_t shape = -1;
    Py_ssize_t dl = ev->dims_l >= 0 ? ev->dims_l : ev->dims_old_l;
    if (dl >= 0) {
        Py_ssize_t d_o = ev->dims_l >= 0 ? ev->dims_o : ev->dims_old_o;
        shape = table_code(&ch->shapes, s, d_o, dl, ev->types_o, ev->types_l >= 0 ? ev->types_l : 0, 0);
        if (shape < 0) return "out of memory";
    }
    c[C_SHAPE * cap + r] = shape;
    for (int k = 0; k < 2; k++) {
        const IdVal *id = k ? &ev->tid : &ev->pid;
        if (id->state && id->str_id) {
            int64_t rec[4] = {k, r, id->o, id->l};
            if (vec_push(&ch->strings, rec, 4) < 0) return "out of memory";
        }
    }
    if (ev->grid.present) {
        Py_ssize_t q = ch->nkern++;
        int64_t *kc = ch->kern;
        int ok = ev->grid.ok && ev->block.present && ev->block.ok; /* else: only msgspec's _triples knows */
        int64_t vals[NKCOLS] = {r, ok ? ev->grid.v[0] : UNSURE, ev->grid.v[1], ev->grid.v[2], ev->block.v[0],
                                ev->block.v[1], ev->block.v[2], ev->regs, ev->smem};
        if (!ok) ch->unsure++;
        for (int j = 0; j < NKCOLS; j++) kc[j * cap + q] = vals[j];
    }
    if (ev->collective) {
        int64_t rec[3] = {start, end, r};
        if (vec_push(&ch->extra, rec, 3) < 0) return "out of memory";
    }
    if (ev->ts.dot) ch->float_ts = 1;
    ch->rows++;
    return NULL;
}

static const char *scan_all(Chunk *ch) {
    Scan *sc = &ch->sc;
    Py_ssize_t i = ws(sc, 0);
    Ev ev;
    if (i >= sc->n) return NULL;
    for (;;) {
        if (sc->s[i] != '{') return "an array element that is not an object";
        Py_ssize_t start = i;
        if ((i = event_at(sc, i, &ev)) < 0) return sc->err;
        if (ev.ph == 'X' || ev.ph == 'i') {
            const char *why = take_row(ch, &ev, start, i);
            if (why) return why;
        } else if (ev.ph == 'M') {
            int64_t rec[3] = {start, i, -1};
            if (vec_push(&ch->extra, rec, 3) < 0) return "out of memory";
        } else if (ev.ph == 's' || ev.ph == 'C') {
            ch->other++;
            ch->counters += ev.ph == 'C';
        } else {
            return ev.ph ? "unknown phase" : "event without ph";
        }
        i = ws(sc, i);
        if (i >= sc->n) return NULL;
        if (sc->s[i] != ',') return "expected ',' between events";
        i = ws(sc, i + 1);
        if (i >= sc->n) return "trailing comma";
    }
}

/* ---- Python interface ----------------------------------------------------------------------- */

static PyObject *values_list(const Chunk *ch, const Table *t, int shapes) {
    PyObject *out = PyList_New(t->order.len);
    if (!out) return NULL;
    const char *s = (const char *)ch->sc.s;
    for (Py_ssize_t c = 0; c < t->order.len; c++) {
        const Entry *e = &t->slots[t->order.v[c]];
        PyObject *v;
        if (shapes) { /* dims text, NUL, types text: the fallback's key */
            v = PyBytes_FromStringAndSize(NULL, e->l1 + 1 + e->l2);
            if (v) {
                char *p = PyBytes_AS_STRING(v);
                memcpy(p, s + e->o1, (size_t)e->l1);
                p[e->l1] = 0;
                memcpy(p + e->l1 + 1, s + e->o2, (size_t)e->l2);
            }
        } else if (e->esc) { /* escaped: decoded by the caller */
            v = PyBytes_FromStringAndSize(s + e->o1, e->l1);
        } else {
            v = PyUnicode_DecodeUTF8(s + e->o1, e->l1, "strict");
        }
        if (!v) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, c, v);
    }
    return out;
}

static PyObject *result(Chunk *ch) {
    const char *s = (const char *)ch->sc.s;
    PyObject *cats = values_list(ch, &ch->cats, 0), *names = values_list(ch, &ch->names, 0);
    PyObject *shapes = values_list(ch, &ch->shapes, 1);
    PyObject *strings = PyList_New(ch->strings.len / 4);
    PyObject *extra_rows = PyList_New(ch->extra.len / 3);
    PyObject *extra = Py_None;
    Py_INCREF(Py_None);
    if (!cats || !names || !shapes || !strings || !extra_rows) goto fail;
    for (Py_ssize_t j = 0; j < ch->strings.len / 4; j++) {
        int64_t *r = ch->strings.v + 4 * j;
        PyObject *t = Py_BuildValue("(nnN)", (Py_ssize_t)r[0], (Py_ssize_t)r[1],
                                    PyUnicode_DecodeUTF8(s + r[2], (Py_ssize_t)r[3], "strict"));
        if (!t) goto fail;
        PyList_SET_ITEM(strings, j, t);
    }
    if (ch->extra.len) { /* "[" + the events' texts joined by "," + "]" */
        Py_ssize_t total = 1;
        for (Py_ssize_t j = 0; j < ch->extra.len; j += 3) total += ch->extra.v[j + 1] - ch->extra.v[j] + 1;
        Py_DECREF(extra);
        extra = PyBytes_FromStringAndSize(NULL, total);
        if (!extra) goto fail;
        char *p = PyBytes_AS_STRING(extra);
        *p++ = '[';
        for (Py_ssize_t j = 0; j < ch->extra.len; j += 3) {
            if (j) *p++ = ',';
            memcpy(p, s + ch->extra.v[j], (size_t)(ch->extra.v[j + 1] - ch->extra.v[j]));
            p += ch->extra.v[j + 1] - ch->extra.v[j];
        }
        *p = ']';
        for (Py_ssize_t j = 0; j < ch->extra.len / 3; j++) {
            PyObject *row = PyLong_FromLongLong(ch->extra.v[3 * j + 2]);
            if (!row) goto fail;
            PyList_SET_ITEM(extra_rows, j, row);
        }
    }
    return Py_BuildValue("(nnLiNNNNNNLL)", ch->rows, ch->nkern, (long long)ch->other, ch->float_ts, cats, names,
                         shapes, strings, extra, extra_rows, (long long)ch->unsure, (long long)ch->counters);
fail:
    Py_XDECREF(cats);
    Py_XDECREF(names);
    Py_XDECREF(shapes);
    Py_XDECREF(strings);
    Py_XDECREF(extra_rows);
    Py_XDECREF(extra);
    return NULL;
}

static int writable_int64(PyObject *obj, Py_buffer *view, Py_ssize_t need) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len < need * (Py_ssize_t)sizeof(int64_t)) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "output array too small");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(scan_doc,
"scan(body, cols, kern, cap) -> tuple | str\n\n"
"Scan one chunk of a Kineto event array (events separated by commas, no brackets).\n"
"cols: writable int64 buffer of 13 * cap values, kern: 9 * cap (column-major, see the C source).\n"
"Returns (rows, kernels, other_events, float_ts, cat_values, name_values, shape_texts, string_ids,\n"
"extra_json, extra_rows, unsure, counter_events), or a reason string when the chunk must be decoded the\n"
"exact msgspec way. counter_events: how many of the other events are counters (ph C).");

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *body_obj, *cols_obj, *kern_obj;
    Py_ssize_t cap;
    Py_buffer body, cols, kern;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOn", &body_obj, &cols_obj, &kern_obj, &cap)) return NULL;
    if (cap < 0) { PyErr_SetString(PyExc_ValueError, "negative capacity"); return NULL; }
    if (PyObject_GetBuffer(body_obj, &body, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (writable_int64(cols_obj, &cols, NCOLS * cap) < 0) { PyBuffer_Release(&body); return NULL; }
    if (writable_int64(kern_obj, &kern, NKCOLS * cap) < 0) {
        PyBuffer_Release(&body);
        PyBuffer_Release(&cols);
        return NULL;
    }
    Chunk ch;
    memset(&ch, 0, sizeof ch);
    ch.sc = (Scan){(const uint8_t *)body.buf, body.len, "invalid JSON"};
    ch.cols = cols.buf;
    ch.kern = kern.buf;
    ch.cap = cap;
    PyObject *out = NULL;
    if (table_init(&ch.cats) < 0 || table_init(&ch.names) < 0 || table_init(&ch.shapes) < 0) {
        out = PyUnicode_FromString("out of memory");
    } else {
        const char *why;
        Py_BEGIN_ALLOW_THREADS /* the buffers are ours for the call: the inflating thread may run */
        why = scan_all(&ch);
        Py_END_ALLOW_THREADS
        out = why ? PyUnicode_FromString(why) : result(&ch);
        if (!out && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) { /* not expected: validated */
            PyErr_Clear();
            out = PyUnicode_FromString("invalid UTF-8");
        }
    }
    table_free(&ch.cats);
    table_free(&ch.names);
    table_free(&ch.shapes);
    PyMem_RawFree(ch.extra.v);
    PyMem_RawFree(ch.strings.v);
    PyBuffer_Release(&body);
    PyBuffer_Release(&cols);
    PyBuffer_Release(&kern);
    return out;
}

/* ---- Guard for mapped trace files ---------------------------------------------------------------
 * window.py decodes a plain file straight from a copy-on-write map. If another process truncates
 * the file meanwhile, touching a page past the new end raises SIGBUS, which kills the process
 * with no message. The guard's handler replaces such a page of a registered map with a zero page
 * and counts it; the read then goes on (over zeros, which no JSON value holds) and the loader,
 * which checks the count after every chunk, stops with a one-line error. A SIGBUS anywhere else
 * gets the action that was installed before (the default: the process ends as it would have). */
#if defined(__unix__)
#include <sys/mman.h>
#include <unistd.h>
#endif
#if defined(__unix__) && defined(SA_SIGINFO) && defined(MAP_ANONYMOUS)
#define GUARD 1
#define GUARD_SLOTS 64
static volatile uintptr_t guard_lo[GUARD_SLOTS], guard_hi[GUARD_SLOTS];
static volatile sig_atomic_t guard_faults;
static struct sigaction guard_previous;
static uintptr_t guard_page = 4096;

static void guard_handler(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)context;
    uintptr_t at = (uintptr_t)info->si_addr;
    for (int i = 0; i < GUARD_SLOTS; i++) {
        if (guard_lo[i] <= at && at < guard_hi[i]) {
            void *page = (void *)(at & ~(guard_page - 1));
            if (mmap(page, guard_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
                != MAP_FAILED) {
                guard_faults++;
                return; /* the faulting read is retried, on the zero page */
            }
        }
    }
    sigaction(SIGBUS, &guard_previous, NULL); /* not ours: retried under the previous action */
}

static PyObject *guard_map(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    uintptr_t lo = (uintptr_t)view.buf, hi = lo + (uintptr_t)view.len;
    PyBuffer_Release(&view); /* the map stays where it is until it is closed (unguard first) */
    struct sigaction now;
    if (sigaction(SIGBUS, NULL, &now) != 0) return PyLong_FromLong(-1);
    if (!(now.sa_flags & SA_SIGINFO) || now.sa_sigaction != guard_handler) { /* first, or replaced since */
        struct sigaction act;
        memset(&act, 0, sizeof act);
        act.sa_sigaction = guard_handler;
        act.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&act.sa_mask);
        long page = sysconf(_SC_PAGESIZE);
        if (page > 0) guard_page = (uintptr_t)page;
        if (sigaction(SIGBUS, &act, &guard_previous) != 0) return PyLong_FromLong(-1);
    }
    for (int i = 0; i < GUARD_SLOTS; i++) {
        if (guard_hi[i] == 0) {
            guard_lo[i] = lo;
            guard_hi[i] = hi;
            return PyLong_FromLong(i);
        }
    }
    return PyLong_FromLong(-1);
}

static PyObject *guard_unmap(PyObject *self, PyObject *args) {
    (void)self;
    int slot;
    if (!PyArg_ParseTuple(args, "i", &slot)) return NULL;
    if (slot >= 0 && slot < GUARD_SLOTS) {
        guard_hi[slot] = 0;
        guard_lo[slot] = 0;
    }
    Py_RETURN_NONE;
}

static PyObject *guard_count(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return PyLong_FromLong((long)guard_faults);
}
#else
#define GUARD 0
#endif

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, scan_doc},
#if GUARD
    {"guard_map", guard_map, METH_VARARGS, "guard_map(buffer) -> slot (-1: not guarded): SIGBUS in it reads zeros"},
    {"guard_unmap", guard_unmap, METH_VARARGS, "guard_unmap(slot): the map is about to be closed"},
    {"guard_faults", guard_count, METH_NOARGS, "guard_faults() -> pages replaced since the process began"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cscan",
                                    "Compiled scanner for Kineto event chunks (optional; see scan.py).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cscan(void) { return PyModule_Create(&module); }
