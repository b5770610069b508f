/* Rows of a table laid out from its columns (see rowjoin.py for the contract and the Python twin it must equal).
 *
 * join(pieces, columns, n, sep): row i is pieces[0] + cell(0, i) + pieces[1] + ... + cell(k-1, i) +
 * pieces[k]; the n rows are joined by sep. A column is a list of n bytes, or a triple (buf, starts,
 * ends): bytes and two arrays of n int64 positions, cell i being buf[starts[i]:ends[i]] (the cells of
 * a separated buffer, such as orjson's "[1,2,3]", or of a table of distinct texts spread by code).
 * One copy per cell: no Python object per row. Cells are mostly a few bytes, and a call to memcpy
 * per cell cost more than the copying: a short cell is moved as a fixed SLACK bytes (inlined moves)
 * wherever SLACK bytes can be read from its source, into a result allocated SLACK bytes longer and
 * cut to its size at the end. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SLACK 16

typedef struct {
    PyObject *fast;         /* list form: PySequence_Fast of the column (owned) */
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

static int open_column(PyObject *obj, Py_ssize_t n, Column *c) {
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
        for (Py_ssize_t i = 0; i < n; i++) {
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
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(items[i])) {
            PyErr_SetString(PyExc_TypeError, "join: a column's cells must be bytes");
            return -1;
        }
    }
    return 0;
}

/* Cell i of a column: its bytes, its length, and whether SLACK bytes may be read from its start. */
static Py_ssize_t cell(const Column *c, Py_ssize_t i, const char **data, int *roomy) {
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
    Py_ssize_t n, k = 0;
    Py_buffer sep;
    Column *cols = NULL;
    char *padded = NULL; /* the pieces and sep, each followed by SLACK spare bytes */
    const char **at = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOny*", &pieces_obj, &columns_obj, &n, &sep)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "join: n must not be negative");
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
    padded = PyMem_Calloc((size_t)(fixed + sep.len + (k + 2) * SLACK), 1);
    at = PyMem_Calloc((size_t)(k + 2), sizeof(char *));
    cols = PyMem_Calloc(k ? (size_t)k : 1, sizeof(Column));
    if (cols == NULL || padded == NULL || at == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        if (open_column(PySequence_Fast_GET_ITEM(columns, j), n, &cols[j]) < 0) goto done;
    }
    char *p = padded;
    for (Py_ssize_t j = 0; j <= k + 1; j++) {
        Py_ssize_t m = j <= k ? PyBytes_GET_SIZE(piece[j]) : sep.len;
        memcpy(p, j <= k ? PyBytes_AS_STRING(piece[j]) : (const char *)sep.buf, (size_t)m);
        at[j] = p;
        p += m + SLACK;
    }
    /* the size first (checked against overflow), then one copy into the result */
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t row = fixed + (i ? sep.len : 0);
        for (Py_ssize_t j = 0; j < k; j++) {
            const char *d;
            int roomy;
            row += cell(&cols[j], i, &d, &roomy);
        }
        if (total > PY_SSIZE_T_MAX - SLACK - row) {
            PyErr_NoMemory();
            goto done;
        }
        total += row;
    }
    result = PyBytes_FromStringAndSize(NULL, total + SLACK);
    if (result == NULL) goto done;
    char *out = PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i) out = put(out, at[k + 1], sep.len, 1);
        for (Py_ssize_t j = 0; j <= k; j++) {
            out = put(out, at[j], PyBytes_GET_SIZE(piece[j]), 1);
            if (j == k) break;
            const char *d;
            int roomy;
            Py_ssize_t m = cell(&cols[j], i, &d, &roomy);
            out = put(out, d, m, roomy);
        }
    }
    _PyBytes_Resize(&result, total); /* NULL, with the error set, if it failed */
done:
    if (cols != NULL) {
        for (Py_ssize_t j = 0; j < k; j++) {
            Py_XDECREF(cols[j].fast);
            if (cols[j].held > 0) PyBuffer_Release(&cols[j].starts);
            if (cols[j].held > 1) PyBuffer_Release(&cols[j].ends);
        }
        PyMem_Free(cols);
    }
    PyMem_Free(padded);
    PyMem_Free(at);
    Py_XDECREF(pieces);
    Py_XDECREF(columns);
    PyBuffer_Release(&sep);
    return result;
}

static PyMethodDef methods[] = {
    {"join", join, METH_VARARGS, "join(pieces, columns, n, sep): a table's rows laid out from its columns"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cjoin", "Table rows from columns", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cjoin(void) { return PyModule_Create(&module); }
