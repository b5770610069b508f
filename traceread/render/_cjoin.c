/* Rows of a table laid out from its columns (see rowjoin.py for the contract and the Python twin it must equal).
 *
 * join(pieces, columns, n, sep, lo=0, hi=n): row i is pieces[0] + cell(0, i) + pieces[1] + ... +
 * cell(k-1, i) + pieces[k]; the n rows are joined by sep, and rows [lo, hi) of that are returned (each
 * row but row 0 with the sep before it), so that consecutive ranges concatenate to the whole. A column
 * is a list of n bytes, a triple (buf, starts, ends): bytes and two arrays of n int64 positions, cell i
 * being buf[starts[i]:ends[i]] (the cells of a separated buffer, such as orjson's "[1,2,3]", or of a
 * table of distinct texts spread by code), or an array of n 64-bit integers written in decimal.
 * One copy per cell: no Python object per row. Cells are mostly a few bytes, and a call to memcpy
 * per cell cost more than the copying: a short cell is moved as a fixed SLACK bytes (inlined moves)
 * wherever SLACK bytes can be read from its source, into a result allocated SLACK bytes longer and
 * cut to its size at the end. The loops run without the GIL where they touch no Python object (no
 * column is a list): a writer may lay out a table on a thread. join_split(...) gives the same bytes as
 * pieces of whole rows, in one call.
 *
 * gather(...), rows of text kept as parts (see rowjoin.gather), and distinct(...) are in _cparts.c;
 * reprs(...), floats' texts, is in _frepr.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include "_cjoin.h"
/* The constant pieces between cells (a JSON row's '",\n      "key": ') are moved as a fixed PIECE_SLACK
 * bytes: most are longer than SLACK, and a call to memcpy per piece per row would be a large share of the join. */
#define PIECE_SLACK 48
#define DIGITS (SLACK + 8) /* room for a 64-bit integer's decimal digits */

typedef struct {
    PyObject *fast;         /* list form: PySequence_Fast of the column (owned) */
    Py_buffer ints;         /* integer form: the values (released at the end when held_ints) */
    int held_ints;          /* 1: the integer form, signed; 2: unsigned */
    Py_buffer starts, ends; /* triple form: the positions (released at the end when held) */
    int held;               /* how many of starts, ends are held */
    const char *buf;        /* triple form: the buffer's bytes */
    Py_ssize_t buflen;      /* triple form: its length */
    const int64_t *lo, *hi; /* triple form: n positions each */
} Column;

static int positions(PyObject *obj, Py_ssize_t n, Py_buffer *view, Column *c) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    c->held++;
    if (view->itemsize != 8 || view->len != n * 8 || view->format == NULL ||
        strchr("lq", view->format[0]) == NULL || view->format[1] != '\0') {
        PyErr_SetString(PyExc_ValueError, "join: starts and ends must be n int64 positions");
        return -1;
    }
    return 0;
}

/* An array of n 64-bit integers (numpy's int64/uint64), or 0 (no error set) when obj is not one. */
static int integers(PyObject *obj, Py_ssize_t n, Column *c) {
    if (PyList_Check(obj) || PyTuple_Check(obj) || !PyObject_CheckBuffer(obj)) return 0;
    if (PyObject_GetBuffer(obj, &c->ints, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    const char *f = c->ints.format;
    if (f != NULL && (f[0] == '<' || f[0] == '=' || f[0] == '@')) f++;
    int kind = f == NULL || f[0] == '\0' || f[1] != '\0' ? 0 : strchr("lq", f[0]) ? 1 : strchr("LQ", f[0]) ? 2 : 0;
    c->held_ints = kind ? kind : 3; /* 3: held, but not integers */
    if (!kind || c->ints.itemsize != 8 || c->ints.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "join: an integer column must be n int64 or uint64 values");
        return -1;
    }
    return 1;
}

static int open_column(PyObject *obj, Py_ssize_t n, Py_ssize_t from, Py_ssize_t to, Column *c) {
    int ints = integers(obj, n, c);
    if (ints != 0) return ints < 0 ? -1 : 0;
    if (PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 3) {
        PyObject *buf = PyTuple_GET_ITEM(obj, 0);
        if (!PyBytes_Check(buf)) {
            PyErr_SetString(PyExc_TypeError, "join: a (buf, starts, ends) column needs bytes");
            return -1;
        }
        if (positions(PyTuple_GET_ITEM(obj, 1), n, &c->starts, c) < 0) return -1;
        if (positions(PyTuple_GET_ITEM(obj, 2), n, &c->ends, c) < 0) return -1;
        c->buf = PyBytes_AS_STRING(buf);
        c->lo = (const int64_t *)c->starts.buf;
        c->hi = (const int64_t *)c->ends.buf;
        Py_ssize_t len = c->buflen = PyBytes_GET_SIZE(buf);
        for (Py_ssize_t i = from; i < to; i++) {
            if (c->lo[i] < 0 || c->lo[i] > c->hi[i] || c->hi[i] > len) {
                PyErr_SetString(PyExc_ValueError, "join: a cell outside its buffer");
                return -1;
            }
        }
        return 0;
    }
    c->fast = PySequence_Fast(obj, "join: a column is a list of bytes or a (buf, starts, ends) triple");
    if (c->fast == NULL) return -1;
    if (PySequence_Fast_GET_SIZE(c->fast) != n) {
        PyErr_SetString(PyExc_ValueError, "join: a column's length is not n");
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(c->fast);
    for (Py_ssize_t i = from; i < to; i++) {
        if (!PyBytes_Check(items[i])) {
            PyErr_SetString(PyExc_TypeError, "join: a column's cells must be bytes");
            return -1;
        }
    }
    return 0;
}

/* The decimal digits of an integer, right-aligned to end (exclusive); the start returned. */
static const char PAIRS[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";

static uint64_t magnitude(int64_t v, int is_unsigned) {
    return is_unsigned ? (uint64_t)v : v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

static char *decimal(char *end, int64_t v, int is_unsigned) {
    uint64_t m = magnitude(v, is_unsigned);
    while (m >= 100) { /* two digits per division */
        unsigned r = (unsigned)(m % 100);
        m /= 100;
        end -= 2;
        memcpy(end, PAIRS + 2 * r, 2);
    }
    if (m >= 10) {
        end -= 2;
        memcpy(end, PAIRS + 2 * m, 2);
    } else {
        *--end = (char)('0' + m);
    }
    if (!is_unsigned && v < 0) *--end = '-';
    return end;
}

/* The length of an integer's decimal text (the size pass: counted, not written). */
static const uint64_t POW10[20] = {1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
                                    100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL,
                                    1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
                                    1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
                                    1000000000000000000ULL, 10000000000000000000ULL};

static Py_ssize_t decimal_len(int64_t v, int is_unsigned) {
    uint64_t m = magnitude(v, is_unsigned);
    Py_ssize_t sign = !is_unsigned && v < 0;
#if defined(__GNUC__) || defined(__clang__)
    /* digits from the bit length (log10(2) ~ 1233 / 4096), then one comparison: no loop per digit. m | 1 has
     * m's digits (an even m + 1 reaches no power of ten) and 0's one. */
    uint64_t odd = m | 1;
    int bits = 64 - __builtin_clzll(odd);
    int t = (bits * 1233) >> 12; /* 10^t < 2^bits; the digits are t or t + 1 */
    return sign + t + (odd >= POW10[t]);
#else
    Py_ssize_t len = 1;
    while (len < 20 && m >= POW10[len]) len++;
    return sign + len;
#endif
}

/* Cell i of a column: its bytes, its length, and whether SLACK bytes may be read from its start;
 * an integer cell is written into digits (DIGITS + SLACK bytes: the 20 of any 64-bit value fit). */
static Py_ssize_t cell(const Column *c, Py_ssize_t i, const char **data, int *roomy, char *digits) {
    if (c->held_ints == 1 || c->held_ints == 2) {
        char *end = digits + DIGITS;
        *data = decimal(end, ((const int64_t *)c->ints.buf)[i], c->held_ints == 2);
        *roomy = 1; /* digits has SLACK spare bytes after DIGITS */
        return end - *data;
    }
    if (c->fast != NULL) {
        PyObject *b = PySequence_Fast_ITEMS(c->fast)[i];
        *data = PyBytes_AS_STRING(b);
        *roomy = 0;
        return PyBytes_GET_SIZE(b);
    }
    *data = c->buf + c->lo[i];
    *roomy = c->lo[i] + SLACK <= c->buflen;
    return (Py_ssize_t)(c->hi[i] - c->lo[i]);
}

/* A piece (padded with PIECE_SLACK spare bytes); out has PIECE_SLACK bytes beyond what is written. */
static inline char *put_piece(char *out, const char *src, Py_ssize_t m) {
    if (m <= PIECE_SLACK)
        memcpy(out, src, PIECE_SLACK);
    else
        memcpy(out, src, (size_t)m);
    return out + m;
}

/* Rows are laid out a tile of TILE rows at a time: the tile's cells are found column by column (each
 * column's values read in order), then its rows written from them. Read row by row, a row's ~80 column
 * arrays were as many streams of cache misses (most of a cell's time was waiting on those loads). */
#define TILE 64
#define DIGITS_STRIDE (DIGITS + SLACK)
typedef struct {
    const char *d;
    Py_ssize_t m;
    int roomy;
} Cell;

/* A table being laid out: its columns opened, its constant pieces padded (join and join_split). */
typedef struct {
    PyObject *pieces, *columns; /* PySequence_Fast of each (owned) */
    Py_buffer sep;
    int have_sep;
    Column *cols;
    char *padded;    /* the pieces and sep, each followed by PIECE_SLACK spare bytes */
    const char **at; /* where each piece (then sep) starts in padded */
    Py_ssize_t *len; /* the pieces' lengths */
    Py_ssize_t k, fixed;
    int lists; /* a column is a list: its bytes objects could be replaced by another thread, so the GIL is kept */
    Cell *cells;  /* a tile's cells, row by row (TILE x k) */
    char *digits; /* a tile's integer cells' texts (TILE x k x DIGITS_STRIDE) */
} Layout;

static void layout_close(Layout *t) {
    if (t->cols != NULL) {
        for (Py_ssize_t j = 0; j < t->k; j++) {
            Py_XDECREF(t->cols[j].fast);
            if (t->cols[j].held_ints) PyBuffer_Release(&t->cols[j].ints);
            if (t->cols[j].held > 0) PyBuffer_Release(&t->cols[j].starts);
            if (t->cols[j].held > 1) PyBuffer_Release(&t->cols[j].ends);
        }
        PyMem_Free(t->cols);
    }
    PyMem_Free(t->padded);
    PyMem_Free(t->at);
    PyMem_Free(t->len);
    PyMem_Free(t->cells);
    PyMem_Free(t->digits);
    Py_XDECREF(t->pieces);
    Py_XDECREF(t->columns);
    if (t->have_sep) PyBuffer_Release(&t->sep);
}

/* Opens rows [from, to) of the n-row table; 0, or -1 with an exception set (then layout_close). */
static int layout_open(Layout *t, PyObject *pieces_obj, PyObject *columns_obj, Py_ssize_t n, Py_ssize_t from,
                       Py_ssize_t to) {
    t->pieces = PySequence_Fast(pieces_obj, "join: pieces must be a sequence of bytes");
    t->columns = PySequence_Fast(columns_obj, "join: columns must be a sequence");
    if (t->pieces == NULL || t->columns == NULL) return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(t->columns);
    if (PySequence_Fast_GET_SIZE(t->pieces) != k + 1) {
        PyErr_SetString(PyExc_ValueError, "join: pieces must be one more than columns");
        return -1;
    }
    PyObject **piece = PySequence_Fast_ITEMS(t->pieces);
    for (Py_ssize_t j = 0; j <= k; j++) {
        if (!PyBytes_Check(piece[j])) {
            PyErr_SetString(PyExc_TypeError, "join: pieces must be bytes");
            return -1;
        }
        t->fixed += PyBytes_GET_SIZE(piece[j]);
    }
    t->padded = PyMem_Calloc((size_t)(t->fixed + t->sep.len + (k + 2) * PIECE_SLACK), 1);
    t->at = PyMem_Calloc((size_t)(k + 2), sizeof(char *));
    t->len = PyMem_Calloc((size_t)(k + 1), sizeof(Py_ssize_t));
    t->cols = PyMem_Calloc(k ? (size_t)k : 1, sizeof(Column));
    t->cells = PyMem_Malloc((size_t)TILE * (k ? (size_t)k : 1) * sizeof(Cell));
    t->digits = PyMem_Malloc((size_t)TILE * (k ? (size_t)k : 1) * DIGITS_STRIDE);
    if (t->cols == NULL || t->padded == NULL || t->at == NULL || t->len == NULL || t->cells == NULL ||
        t->digits == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        t->k = j + 1; /* opened so far: layout_close releases them */
        if (open_column(PySequence_Fast_GET_ITEM(t->columns, j), n, from, to, &t->cols[j]) < 0) return -1;
    }
    t->k = k;
    char *p = t->padded;
    for (Py_ssize_t j = 0; j <= k + 1; j++) {
        Py_ssize_t m = j <= k ? PyBytes_GET_SIZE(piece[j]) : t->sep.len;
        memcpy(p, j <= k ? PyBytes_AS_STRING(piece[j]) : (const char *)t->sep.buf, (size_t)m);
        t->at[j] = p;
        p += m + PIECE_SLACK;
        if (j <= k) t->len[j] = m;
    }
    for (Py_ssize_t j = 0; j < k; j++) t->lists |= t->cols[j].fast != NULL;
    return 0;
}

/* The sizes of rows [i0, i1) (at most TILE), each with its sep (every row but row 0 has one before it), into
 * size[]: column by column. */
static void row_sizes(const Layout *t, Py_ssize_t i0, Py_ssize_t i1, Py_ssize_t *size) {
    Py_ssize_t nr = i1 - i0;
    for (Py_ssize_t r = 0; r < nr; r++) size[r] = t->fixed + (i0 + r ? t->sep.len : 0);
    for (Py_ssize_t j = 0; j < t->k; j++) {
        const Column *c = &t->cols[j];
        if (c->held_ints == 1 || c->held_ints == 2) {
            const int64_t *v = (const int64_t *)c->ints.buf + i0;
            int u = c->held_ints == 2;
            for (Py_ssize_t r = 0; r < nr; r++) size[r] += decimal_len(v[r], u);
        } else if (c->fast != NULL) {
            PyObject **items = PySequence_Fast_ITEMS(c->fast) + i0;
            for (Py_ssize_t r = 0; r < nr; r++) size[r] += PyBytes_GET_SIZE(items[r]);
        } else {
            const int64_t *lo = c->lo + i0, *hi = c->hi + i0;
            for (Py_ssize_t r = 0; r < nr; r++) size[r] += (Py_ssize_t)(hi[r] - lo[r]);
        }
    }
}

/* Rows [from, to) written at out (PIECE_SLACK spare bytes beyond them), a tile at a time; the end returned. */
static char *put_rows(const Layout *t, char *out, Py_ssize_t from, Py_ssize_t to) {
    Py_ssize_t k = t->k;
    for (Py_ssize_t i0 = from; i0 < to; i0 += TILE) {
        Py_ssize_t nr = to - i0 < TILE ? to - i0 : TILE;
        for (Py_ssize_t j = 0; j < k; j++) {
            for (Py_ssize_t r = 0; r < nr; r++) {
                Cell *x = &t->cells[r * k + j];
                x->m = cell(&t->cols[j], i0 + r, &x->d, &x->roomy, t->digits + (r * k + j) * DIGITS_STRIDE);
            }
        }
        for (Py_ssize_t r = 0; r < nr; r++) {
            if (i0 + r) out = put_piece(out, t->at[k + 1], t->sep.len);
            const Cell *x = &t->cells[r * k];
            for (Py_ssize_t j = 0; j < k; j++) {
                out = put_piece(out, t->at[j], t->len[j]);
                out = put(out, x[j].d, x[j].m, x[j].roomy);
            }
            out = put_piece(out, t->at[k], t->len[k]);
        }
    }
    return out;
}

/* Rows [from, to) cut into pieces of whole rows, each of at least size bytes but the last: piece q is rows
 * [cut[q], cut[q + 1]), bytes[q] long (cut holds to - from + 2 entries, bytes to - from + 1). The count of
 * pieces, or -1 when a piece's size would overflow. Touches no Python object (run without the GIL). */
static Py_ssize_t cut_rows(const Layout *t, Py_ssize_t from, Py_ssize_t to, Py_ssize_t size, Py_ssize_t *cut,
                           Py_ssize_t *bytes) {
    Py_ssize_t n_out = 0, acc = 0, rows[TILE];
    cut[0] = from;
    for (Py_ssize_t i0 = from; i0 < to; i0 += TILE) {
        Py_ssize_t i1 = to - i0 < TILE ? to : i0 + TILE;
        row_sizes(t, i0, i1, rows);
        for (Py_ssize_t i = i0; i < i1; i++) {
            Py_ssize_t row = rows[i - i0];
            if (acc > PY_SSIZE_T_MAX - PIECE_SLACK - row) return -1;
            acc += row;
            if (acc >= size || i == to - 1) {
                bytes[n_out] = acc;
                cut[++n_out] = i + 1;
                acc = 0;
            }
        }
    }
    return n_out;
}

/* The sizes first (checked against overflow), then one copy into the result; both without the GIL when no
 * column is a list. */
static PyObject *join(PyObject *self, PyObject *args) {
    PyObject *pieces_obj, *columns_obj, *result = NULL;
    Py_ssize_t n, from = 0, to = -1;
    Layout t = {0};
    (void)self;
    if (!PyArg_ParseTuple(args, "OOny*|nn", &pieces_obj, &columns_obj, &n, &t.sep, &from, &to)) return NULL;
    t.have_sep = 1;
    if (to < 0) to = n;
    if (n < 0 || from < 0 || from > to || to > n) {
        PyErr_SetString(PyExc_ValueError, "join: n must not be negative, and 0 <= lo <= hi <= n");
        goto done;
    }
    if (layout_open(&t, pieces_obj, columns_obj, n, from, to) < 0) goto done;
    Py_ssize_t cut[3], bytes[2]; /* one piece (none when from == to): no size reaches PY_SSIZE_T_MAX */
    PyThreadState *unlocked = t.lists ? NULL : PyEval_SaveThread();
    Py_ssize_t n_out = cut_rows(&t, from, to, PY_SSIZE_T_MAX, cut, bytes);
    if (unlocked != NULL) PyEval_RestoreThread(unlocked);
    if (n_out < 0) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t total = n_out ? bytes[0] : 0;
    result = PyBytes_FromStringAndSize(NULL, total + PIECE_SLACK);
    if (result == NULL) goto done;
    unlocked = t.lists ? NULL : PyEval_SaveThread();
    put_rows(&t, PyBytes_AS_STRING(result), from, to);
    if (unlocked != NULL) PyEval_RestoreThread(unlocked);
    _PyBytes_Resize(&result, total); /* NULL, with the error set, if it failed */
done:
    layout_close(&t);
    return result;
}

/* join_split(pieces, columns, n, sep, size): the bytes of join(pieces, columns, n, sep) as a list of pieces
 * of whole rows, each of at least size bytes but the last (one row at least; [] when n is 0). One call for
 * a writer's block: the thread laying it out takes the GIL four times a block. A Python loop of join calls,
 * one per piece of about a megabyte, took it twice a piece, and on a writer's thread each time waited for
 * the thread encoding the next block. */
static PyObject *join_split(PyObject *self, PyObject *args) {
    PyObject *pieces_obj, *columns_obj, *result = NULL;
    Py_ssize_t n, size, n_out = 0;
    Py_ssize_t *cut = NULL, *bytes = NULL; /* piece q: rows [cut[q], cut[q + 1]), bytes[q] long */
    PyObject **made = NULL;
    Layout t = {0};
    (void)self;
    if (!PyArg_ParseTuple(args, "OOny*n", &pieces_obj, &columns_obj, &n, &t.sep, &size)) return NULL;
    t.have_sep = 1;
    if (n < 0 || size < 1) {
        PyErr_SetString(PyExc_ValueError, "join_split: n must not be negative, and size must be positive");
        goto done;
    }
    if (layout_open(&t, pieces_obj, columns_obj, n, 0, n) < 0) goto done;
    cut = PyMem_Malloc(((size_t)n + 2) * sizeof(Py_ssize_t));
    bytes = PyMem_Malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    if (cut == NULL || bytes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    PyThreadState *unlocked = t.lists ? NULL : PyEval_SaveThread();
    n_out = cut_rows(&t, 0, n, size, cut, bytes);
    if (unlocked != NULL) PyEval_RestoreThread(unlocked);
    if (n_out < 0) {
        n_out = 0; /* (nothing made to release) */
        PyErr_NoMemory();
        goto done;
    }
    made = PyMem_Calloc(n_out ? (size_t)n_out : 1, sizeof(PyObject *));
    if (made == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t q = 0; q < n_out; q++) {
        made[q] = PyBytes_FromStringAndSize(NULL, bytes[q] + PIECE_SLACK); /* the copies' spare tail */
        if (made[q] == NULL) goto done;
    }
    unlocked = t.lists ? NULL : PyEval_SaveThread();
    for (Py_ssize_t q = 0; q < n_out; q++) put_rows(&t, PyBytes_AS_STRING(made[q]), cut[q], cut[q + 1]);
    if (unlocked != NULL) PyEval_RestoreThread(unlocked);
    result = PyList_New(n_out);
    if (result == NULL) goto done;
    for (Py_ssize_t q = 0; q < n_out; q++) {
        if (_PyBytes_Resize(&made[q], bytes[q]) < 0) { /* made[q] is NULL, the error set */
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, q, made[q]); /* the list owns it now */
        made[q] = NULL;
    }
done:
    if (made != NULL) {
        for (Py_ssize_t q = 0; q < n_out; q++) Py_XDECREF(made[q]);
        PyMem_Free(made);
    }
    PyMem_Free(cut);
    PyMem_Free(bytes);
    layout_close(&t);
    return result;
}

/* comma_spaced(cells): the bytes with a space after each comma (bytes.replace(b",", b", ") in one pass, without
 * the GIL): json_tables' dense numeric cells, which hold no comma of their own. */
static PyObject *comma_spaced(PyObject *self, PyObject *arg) {
    Py_buffer b;
    (void)self;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    const char *src = (const char *)b.buf;
    Py_ssize_t n = b.len, commas = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) commas += src[i] == ',';
    Py_END_ALLOW_THREADS
    if (commas > PY_SSIZE_T_MAX - n) {
        PyBuffer_Release(&b);
        return PyErr_NoMemory();
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n + commas);
    if (out == NULL) {
        PyBuffer_Release(&b);
        return NULL;
    }
    char *dst = PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = src[i];
        *dst++ = c;
        if (c == ',') *dst++ = ' ';
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return out;
}

/* reprs(values) and repr_fallbacks(): in _frepr.c (floats' texts, mostly without the GIL). */
PyObject *frepr_reprs(PyObject *self, PyObject *arg);
PyObject *frepr_fallbacks(PyObject *self, PyObject *unused);
int frepr_module_init(PyObject *module);

/* gather(...) and distinct(values): in _cparts.c (text kept as parts). */
PyObject *cparts_gather(PyObject *self, PyObject *args);
PyObject *cparts_distinct(PyObject *self, PyObject *arg);

static PyMethodDef methods[] = {
    {"gather", cparts_gather, METH_VARARGS, "gather(buf, starts, ends, codes, k, pre, post): (bytes, n + 1 int64 offsets as bytes), rows laid out from coded parts"},
    {"reprs", frepr_reprs, METH_O, "reprs(float64 values): (buf, n + 1 int64 offsets as bytes), Python's repr of each, NaN empty"},
    {"repr_fallbacks", frepr_fallbacks, METH_NOARGS, "repr_fallbacks(): how many values reprs gave to Python's own formatter so far"},
    {"distinct", cparts_distinct, METH_O, "distinct(values): (int64 codes as bytes, the distinct objects by identity)"},
    {"join", join, METH_VARARGS, "join(pieces, columns, n, sep, lo=0, hi=n): rows [lo, hi) of a table laid out from its columns"},
    {"comma_spaced", comma_spaced, METH_O, "comma_spaced(cells): the bytes with a space after each comma"},
    {"join_split", join_split, METH_VARARGS, "join_split(pieces, columns, n, sep, size): join's bytes as pieces of whole rows of at least size bytes"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cjoin", "Table rows from columns", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cjoin(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && frepr_module_init(m) < 0) Py_CLEAR(m);
    return m;
}
