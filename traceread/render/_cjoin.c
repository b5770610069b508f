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
 * column is a list): a writer may lay out a table on a thread.
 *
 * gather(...) lays out rows of text kept as parts (see rowjoin.gather); reprs(...), floats' texts, is in
 * _frepr.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#define SLACK 16
/* The constant pieces between cells (a JSON row's '",\n      "key": ') are moved as a fixed PIECE_SLACK
 * bytes: most are longer than SLACK, and a call to memcpy each cost a fifth of the join. */
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
static Py_ssize_t decimal_len(int64_t v, int is_unsigned) {
    uint64_t m = magnitude(v, is_unsigned);
    Py_ssize_t len = 1 + (!is_unsigned && v < 0);
    for (uint64_t p = 10; m >= p; p *= 10) {
        len++;
        if (p > UINT64_MAX / 10) break; /* 10^19: the last power below 2^64 */
    }
    return len;
}

/* The length of cell i of a column. */
static Py_ssize_t cell_len(const Column *c, Py_ssize_t i) {
    if (c->held_ints == 1 || c->held_ints == 2) return decimal_len(((const int64_t *)c->ints.buf)[i], c->held_ints == 2);
    if (c->fast != NULL) return PyBytes_GET_SIZE(PySequence_Fast_ITEMS(c->fast)[i]);
    return (Py_ssize_t)(c->hi[i] - c->lo[i]);
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

/* out has SLACK bytes beyond what is written (the result's spare tail). */
static inline char *put(char *out, const char *src, Py_ssize_t m, int roomy) {
    if (roomy && m <= SLACK)
        memcpy(out, src, SLACK); /* a constant size: moves, not a call (a larger size measured slower) */
    else
        memcpy(out, src, (size_t)m);
    return out + m;
}

static PyObject *join(PyObject *self, PyObject *args) {
    PyObject *pieces_obj, *columns_obj, *pieces = NULL, *columns = NULL, *result = NULL;
    Py_ssize_t n, k = 0, from = 0, to = -1;
    char digits[DIGITS + SLACK] = {0};
    Py_buffer sep;
    Column *cols = NULL;
    char *padded = NULL; /* the pieces and sep, each followed by SLACK spare bytes */
    const char **at = NULL;
    Py_ssize_t *len = NULL; /* the pieces' lengths */
    (void)self;
    if (!PyArg_ParseTuple(args, "OOny*|nn", &pieces_obj, &columns_obj, &n, &sep, &from, &to)) return NULL;
    if (to < 0) to = n;
    if (n < 0 || from < 0 || from > to || to > n) {
        PyErr_SetString(PyExc_ValueError, "join: n must not be negative, and 0 <= lo <= hi <= n");
        goto done;
    }
    pieces = PySequence_Fast(pieces_obj, "join: pieces must be a sequence of bytes");
    columns = PySequence_Fast(columns_obj, "join: columns must be a sequence");
    if (pieces == NULL || columns == NULL) goto done;
    k = PySequence_Fast_GET_SIZE(columns);
    if (PySequence_Fast_GET_SIZE(pieces) != k + 1) {
        PyErr_SetString(PyExc_ValueError, "join: pieces must be one more than columns");
        goto done;
    }
    PyObject **piece = PySequence_Fast_ITEMS(pieces);
    Py_ssize_t fixed = 0;
    for (Py_ssize_t j = 0; j <= k; j++) {
        if (!PyBytes_Check(piece[j])) {
            PyErr_SetString(PyExc_TypeError, "join: pieces must be bytes");
            goto done;
        }
        fixed += PyBytes_GET_SIZE(piece[j]);
    }
    padded = PyMem_Calloc((size_t)(fixed + sep.len + (k + 2) * PIECE_SLACK), 1);
    at = PyMem_Calloc((size_t)(k + 2), sizeof(char *));
    len = PyMem_Calloc((size_t)(k + 1), sizeof(Py_ssize_t));
    cols = PyMem_Calloc(k ? (size_t)k : 1, sizeof(Column));
    if (cols == NULL || padded == NULL || at == NULL || len == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        if (open_column(PySequence_Fast_GET_ITEM(columns, j), n, from, to, &cols[j]) < 0) goto done;
    }
    char *p = padded;
    for (Py_ssize_t j = 0; j <= k + 1; j++) {
        Py_ssize_t m = j <= k ? PyBytes_GET_SIZE(piece[j]) : sep.len;
        memcpy(p, j <= k ? PyBytes_AS_STRING(piece[j]) : (const char *)sep.buf, (size_t)m);
        at[j] = p;
        p += m + PIECE_SLACK;
    }
    /* the size first (checked against overflow), then one copy into the result; both without the GIL
     * when no column is a list (whose bytes objects another thread could replace meanwhile) */
    int lists = 0;
    for (Py_ssize_t j = 0; j < k; j++) lists |= cols[j].fast != NULL;
    for (Py_ssize_t j = 0; j <= k; j++) len[j] = PyBytes_GET_SIZE(piece[j]);
    Py_ssize_t total = 0;
    int too_big = 0;
    PyThreadState *unlocked = lists ? NULL : PyEval_SaveThread();
    for (Py_ssize_t i = from; i < to; i++) {
        Py_ssize_t row = fixed + (i ? sep.len : 0);
        for (Py_ssize_t j = 0; j < k; j++) row += cell_len(&cols[j], i);
        if (total > PY_SSIZE_T_MAX - PIECE_SLACK - row) {
            too_big = 1;
            break;
        }
        total += row;
    }
    if (unlocked != NULL) PyEval_RestoreThread(unlocked);
    if (too_big) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, total + PIECE_SLACK);
    if (result == NULL) goto done;
    char *out = PyBytes_AS_STRING(result);
    unlocked = lists ? NULL : PyEval_SaveThread();
    for (Py_ssize_t i = from; i < to; i++) {
        if (i) out = put_piece(out, at[k + 1], sep.len);
        for (Py_ssize_t j = 0; j <= k; j++) {
            out = put_piece(out, at[j], len[j]);
            if (j == k) break;
            const char *d;
            int roomy;
            Py_ssize_t m = cell(&cols[j], i, &d, &roomy, digits);
            out = put(out, d, m, roomy);
        }
    }
    if (unlocked != NULL) PyEval_RestoreThread(unlocked);
    _PyBytes_Resize(&result, total); /* NULL, with the error set, if it failed */
done:
    if (cols != NULL) {
        for (Py_ssize_t j = 0; j < k; j++) {
            Py_XDECREF(cols[j].fast);
            if (cols[j].held_ints) PyBuffer_Release(&cols[j].ints);
            if (cols[j].held > 0) PyBuffer_Release(&cols[j].starts);
            if (cols[j].held > 1) PyBuffer_Release(&cols[j].ends);
        }
        PyMem_Free(cols);
    }
    PyMem_Free(padded);
    PyMem_Free(at);
    PyMem_Free(len);
    Py_XDECREF(pieces);
    Py_XDECREF(columns);
    PyBuffer_Release(&sep);
    return result;
}

/* join_split(pieces, columns, n, sep, size): the bytes of join(pieces, columns, n, sep) as a list of pieces
 * of whole rows, each of at least size bytes but the last (one row at least; [] when n is 0). One call for
 * a writer's block: the thread laying it out takes the GIL four times a block. A Python loop of join calls,
 * one per piece of about a megabyte, took it twice a piece, and on a writer's thread each time waited for
 * the thread encoding the next block (the 1.1 GB trace's gap table: 0.6 s of waits for 0.2 s of work). */
static PyObject *join_split(PyObject *self, PyObject *args) {
    PyObject *pieces_obj, *columns_obj, *pieces = NULL, *columns = NULL, *result = NULL;
    Py_ssize_t n, size, k = 0, n_out = 0;
    char digits[DIGITS + SLACK] = {0};
    Py_buffer sep;
    Column *cols = NULL;
    char *padded = NULL;
    const char **at = NULL;
    Py_ssize_t *len = NULL, *cut = NULL, *bytes = NULL; /* piece p: rows [cut[p], cut[p + 1]), bytes[p] long */
    PyObject **made = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOny*n", &pieces_obj, &columns_obj, &n, &sep, &size)) return NULL;
    if (n < 0 || size < 1) {
        PyErr_SetString(PyExc_ValueError, "join_split: n must not be negative, and size must be positive");
        goto done;
    }
    pieces = PySequence_Fast(pieces_obj, "join: pieces must be a sequence of bytes");
    columns = PySequence_Fast(columns_obj, "join: columns must be a sequence");
    if (pieces == NULL || columns == NULL) goto done;
    k = PySequence_Fast_GET_SIZE(columns);
    if (PySequence_Fast_GET_SIZE(pieces) != k + 1) {
        PyErr_SetString(PyExc_ValueError, "join: pieces must be one more than columns");
        goto done;
    }
    PyObject **piece = PySequence_Fast_ITEMS(pieces);
    Py_ssize_t fixed = 0;
    for (Py_ssize_t j = 0; j <= k; j++) {
        if (!PyBytes_Check(piece[j])) {
            PyErr_SetString(PyExc_TypeError, "join: pieces must be bytes");
            goto done;
        }
        fixed += PyBytes_GET_SIZE(piece[j]);
    }
    padded = PyMem_Calloc((size_t)(fixed + sep.len + (k + 2) * PIECE_SLACK), 1);
    at = PyMem_Calloc((size_t)(k + 2), sizeof(char *));
    len = PyMem_Calloc((size_t)(k + 1), sizeof(Py_ssize_t));
    cols = PyMem_Calloc(k ? (size_t)k : 1, sizeof(Column));
    cut = PyMem_Calloc((size_t)n + 2, sizeof(Py_ssize_t));
    bytes = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    if (cols == NULL || padded == NULL || at == NULL || len == NULL || cut == NULL || bytes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        if (open_column(PySequence_Fast_GET_ITEM(columns, j), n, 0, n, &cols[j]) < 0) goto done;
    }
    char *p = padded;
    for (Py_ssize_t j = 0; j <= k + 1; j++) {
        Py_ssize_t m = j <= k ? PyBytes_GET_SIZE(piece[j]) : sep.len;
        memcpy(p, j <= k ? PyBytes_AS_STRING(piece[j]) : (const char *)sep.buf, (size_t)m);
        at[j] = p;
        p += m + PIECE_SLACK;
    }
    int lists = 0; /* a list column's bytes objects could be replaced by another thread: the GIL is kept */
    for (Py_ssize_t j = 0; j < k; j++) lists |= cols[j].fast != NULL;
    for (Py_ssize_t j = 0; j <= k; j++) len[j] = PyBytes_GET_SIZE(piece[j]);
    /* the rows' sizes, cut into pieces (checked against overflow) */
    int too_big = 0;
    PyThreadState *unlocked = lists ? NULL : PyEval_SaveThread();
    Py_ssize_t acc = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t row = fixed + (i ? sep.len : 0);
        for (Py_ssize_t j = 0; j < k; j++) row += cell_len(&cols[j], i);
        if (acc > PY_SSIZE_T_MAX - PIECE_SLACK - row) {
            too_big = 1;
            break;
        }
        acc += row;
        if (acc >= size || i == n - 1) {
            bytes[n_out] = acc;
            cut[++n_out] = i + 1;
            acc = 0;
        }
    }
    if (unlocked != NULL) PyEval_RestoreThread(unlocked);
    if (too_big) {
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
    unlocked = lists ? NULL : PyEval_SaveThread();
    for (Py_ssize_t q = 0; q < n_out; q++) {
        char *out = PyBytes_AS_STRING(made[q]);
        for (Py_ssize_t i = cut[q]; i < cut[q + 1]; i++) {
            if (i) out = put_piece(out, at[k + 1], sep.len);
            for (Py_ssize_t j = 0; j <= k; j++) {
                out = put_piece(out, at[j], len[j]);
                if (j == k) break;
                const char *d;
                int roomy;
                Py_ssize_t m = cell(&cols[j], i, &d, &roomy, digits);
                out = put(out, d, m, roomy);
            }
        }
    }
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
    if (cols != NULL) {
        for (Py_ssize_t j = 0; j < k; j++) {
            Py_XDECREF(cols[j].fast);
            if (cols[j].held_ints) PyBuffer_Release(&cols[j].ints);
            if (cols[j].held > 0) PyBuffer_Release(&cols[j].starts);
            if (cols[j].held > 1) PyBuffer_Release(&cols[j].ends);
        }
        PyMem_Free(cols);
    }
    PyMem_Free(padded);
    PyMem_Free(at);
    PyMem_Free(len);
    PyMem_Free(cut);
    PyMem_Free(bytes);
    Py_XDECREF(pieces);
    Py_XDECREF(columns);
    PyBuffer_Release(&sep);
    return result;
}

/* distinct(values): (codes, firsts) with firsts the distinct objects of the list values (by identity, in
 * order of first appearance) and codes the native int64 bytes of each value's index in firsts: a writer
 * encodes each distinct object once (rows sharing a sentence share its str). */
static PyObject *distinct(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyList_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "distinct: values must be a list");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(arg), cap = 16, used = 0;
    while (cap < 2 * n) cap *= 2;
    PyObject **keys = PyMem_Calloc((size_t)cap, sizeof(PyObject *));
    int64_t *index = PyMem_Malloc((size_t)cap * sizeof(int64_t));
    PyObject *codes = PyBytes_FromStringAndSize(NULL, n * 8), *firsts = PyList_New(0), *result = NULL;
    if (keys == NULL || index == NULL) PyErr_NoMemory();
    if (keys == NULL || index == NULL || codes == NULL || firsts == NULL) goto done;
    int64_t *code = (int64_t *)PyBytes_AS_STRING(codes);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(arg, i);
        uint64_t h = (uint64_t)(uintptr_t)v;
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        Py_ssize_t at = (Py_ssize_t)(h & (uint64_t)(cap - 1));
        while (keys[at] != NULL && keys[at] != v) at = (at + 1) & (cap - 1);
        if (keys[at] == NULL) {
            keys[at] = v;
            index[at] = used++;
            if (PyList_Append(firsts, v) < 0) goto done;
        }
        code[i] = index[at];
    }
    result = PyTuple_Pack(2, codes, firsts);
done:
    PyMem_Free(keys);
    PyMem_Free(index);
    Py_XDECREF(codes);
    Py_XDECREF(firsts);
    return result;
}

/* reprs(values) and repr_fallbacks(): in _frepr.c (floats' texts, mostly without the GIL). */
PyObject *frepr_reprs(PyObject *self, PyObject *arg);
PyObject *frepr_fallbacks(PyObject *self, PyObject *unused);
int frepr_module_init(PyObject *module);

/* gather(buf, starts, ends, codes, k, pre, post): (out, offsets) with row i of out (out[offsets[i]:offsets[i + 1]])
 * being pre + the k cells buf[starts[c]:ends[c]] of c = codes[i * k + j] + post: rows of text kept as parts
 * (a table of their distinct encoded parts, int32 codes per row and part) laid out as one buffer; offsets are
 * n + 1 native int64 as bytes. The two passes (sizes, copies) touch no Python object and run without the GIL. */
static PyObject *gather(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf, st, en, codes, pre, post;
    Py_ssize_t k;
    PyObject *st_obj, *en_obj, *codes_obj, *out = NULL, *offsets = NULL, *result = NULL;
    int have = 0;
    if (!PyArg_ParseTuple(args, "y*OOOny*y*", &buf, &st_obj, &en_obj, &codes_obj, &k, &pre, &post)) return NULL;
    if (PyObject_GetBuffer(st_obj, &st, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto release;
    have = 1;
    if (PyObject_GetBuffer(en_obj, &en, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto release;
    have = 2;
    if (PyObject_GetBuffer(codes_obj, &codes, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto release;
    have = 3;
    if (st.itemsize != 8 || en.itemsize != 8 || st.len != en.len || codes.itemsize != 4 || k < 0 ||
        (k == 0 ? codes.len != 0 : codes.len % (4 * k) != 0)) {
        PyErr_SetString(PyExc_ValueError, "gather: int64 starts and ends of the table, int32 codes of n rows of k");
        goto release;
    }
    Py_ssize_t m = st.len / 8, n = k ? codes.len / (4 * k) : 0;
    const int64_t *lo = (const int64_t *)st.buf, *hi = (const int64_t *)en.buf;
    const int32_t *code = (const int32_t *)codes.buf;
    const char *src = (const char *)buf.buf, *p0 = (const char *)pre.buf, *p1 = (const char *)post.buf;
    Py_ssize_t np0 = pre.len, np1 = post.len, buflen = buf.len;
    if (k == 0) {
        PyErr_SetString(PyExc_ValueError, "gather: k must be positive");
        goto release;
    }
    int bad = 0;
    Py_ssize_t total = 0;
    offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 8);
    if (offsets == NULL) goto release;
    int64_t *off = (int64_t *)PyBytes_AS_STRING(offsets);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t c = 0; c < m && !bad; c++)
        if (lo[c] < 0 || lo[c] > hi[c] || hi[c] > buflen) bad = 1;
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
        off[i] = total;
        Py_ssize_t row = np0 + np1;
        for (Py_ssize_t j = 0; j < k; j++) {
            int32_t c = code[i * k + j];
            if (c < 0 || c >= m) {
                bad = 1;
                break;
            }
            row += (Py_ssize_t)(hi[c] - lo[c]);
        }
        if (total > PY_SSIZE_T_MAX - SLACK - row) bad = 2;
        total += row;
    }
    off[n] = total;
    Py_END_ALLOW_THREADS
    if (bad) {
        if (bad == 2)
            PyErr_NoMemory();
        else
            PyErr_SetString(PyExc_ValueError, "gather: a code or cell outside its table");
        goto release;
    }
    out = PyBytes_FromStringAndSize(NULL, total + SLACK);
    if (out == NULL) goto release;
    char *o = PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(o, p0, (size_t)np0);
        o += np0;
        for (Py_ssize_t j = 0; j < k; j++) {
            int32_t c = code[i * k + j];
            o = put(o, src + lo[c], (Py_ssize_t)(hi[c] - lo[c]), lo[c] + SLACK <= buflen);
        }
        memcpy(o, p1, (size_t)np1);
        o += np1;
    }
    Py_END_ALLOW_THREADS
    if (_PyBytes_Resize(&out, total) < 0) goto release;
    result = PyTuple_Pack(2, out, offsets);
release:
    Py_XDECREF(out);
    Py_XDECREF(offsets);
    if (have > 0) PyBuffer_Release(&st);
    if (have > 1) PyBuffer_Release(&en);
    if (have > 2) PyBuffer_Release(&codes);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&pre);
    PyBuffer_Release(&post);
    return result;
}

static PyMethodDef methods[] = {
    {"gather", gather, METH_VARARGS, "gather(buf, starts, ends, codes, k, pre, post): (bytes, n + 1 int64 offsets as bytes), rows laid out from coded parts"},
    {"reprs", frepr_reprs, METH_O, "reprs(float64 values): (buf, n + 1 int64 offsets as bytes), Python's repr of each, NaN empty"},
    {"repr_fallbacks", frepr_fallbacks, METH_NOARGS, "repr_fallbacks(): how many values reprs gave to Python's own formatter so far"},
    {"distinct", distinct, METH_O, "distinct(values): (int64 codes as bytes, the distinct objects by identity)"},
    {"join", join, METH_VARARGS, "join(pieces, columns, n, sep, lo=0, hi=n): rows [lo, hi) of a table laid out from its columns"},
    {"join_split", join_split, METH_VARARGS, "join_split(pieces, columns, n, sep, size): join's bytes as pieces of whole rows of at least size bytes"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cjoin", "Table rows from columns", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cjoin(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && frepr_module_init(m) < 0) Py_CLEAR(m);
    return m;
}
