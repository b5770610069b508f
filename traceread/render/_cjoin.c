/* Rows of a table laid out from its columns (see rowjoin.py for the contract and the Python twin it must equal).
 *
 * join(pieces, columns, n, sep): row i is pieces[0] + cell(0, i) + pieces[1] + ... + cell(k-1, i) +
 * pieces[k]; the n rows are joined by sep. A column is a list of n bytes, or a pair (buf, bounds):
 * bytes and n + 1 int64 positions, cell i being buf[bounds[i] + 1 : bounds[i + 1]] (the cells of a
 * separated buffer, such as orjson's "[1,2,3]" split at its brackets and commas). One memcpy per
 * cell: no Python object per row. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    PyObject *fast;      /* list form: PySequence_Fast of the column (owned) */
    Py_buffer bounds;    /* pair form: the positions (released at the end when held) */
    int has_bounds;
    const char *buf;     /* pair form: the buffer's bytes */
    const int64_t *pos;  /* pair form: n + 1 positions */
} Column;

static int open_column(PyObject *obj, Py_ssize_t n, Column *c) {
    if (PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 2) {
        PyObject *buf = PyTuple_GET_ITEM(obj, 0);
        if (!PyBytes_Check(buf)) {
            PyErr_SetString(PyExc_TypeError, "join: a (buf, bounds) column needs bytes");
            return -1;
        }
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(obj, 1), &c->bounds, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
        c->has_bounds = 1;
        if (c->bounds.itemsize != 8 || c->bounds.len != (n + 1) * 8 || c->bounds.format == NULL ||
            strchr("lqLQ", c->bounds.format[0]) == NULL || c->bounds.format[1] != '\0') {
            PyErr_SetString(PyExc_ValueError, "join: bounds must be n + 1 int64 positions");
            return -1;
        }
        c->buf = PyBytes_AS_STRING(buf);
        c->pos = (const int64_t *)c->bounds.buf;
        Py_ssize_t len = PyBytes_GET_SIZE(buf);
        if (c->pos[0] < -1 || c->pos[n] > len) {
            PyErr_SetString(PyExc_ValueError, "join: bounds outside the buffer");
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (c->pos[i + 1] <= c->pos[i]) {
                PyErr_SetString(PyExc_ValueError, "join: bounds must increase");
                return -1;
            }
        }
        return 0;
    }
    c->fast = PySequence_Fast(obj, "join: a column is a list of bytes or a (buf, bounds) pair");
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

static Py_ssize_t cell(const Column *c, Py_ssize_t i, const char **data) {
    if (c->fast != NULL) {
        PyObject *b = PySequence_Fast_ITEMS(c->fast)[i];
        *data = PyBytes_AS_STRING(b);
        return PyBytes_GET_SIZE(b);
    }
    *data = c->buf + c->pos[i] + 1;
    return (Py_ssize_t)(c->pos[i + 1] - c->pos[i] - 1);
}

static inline char *put(char *out, const char *src, Py_ssize_t m) {
    memcpy(out, src, (size_t)m);
    return out + m;
}

static PyObject *join(PyObject *self, PyObject *args) {
    PyObject *pieces_obj, *columns_obj, *pieces = NULL, *columns = NULL, *result = NULL;
    Py_ssize_t n, k = 0;
    Py_buffer sep;
    Column *cols = NULL;
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
    cols = PyMem_Calloc(k ? (size_t)k : 1, sizeof(Column));
    if (cols == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        if (open_column(PySequence_Fast_GET_ITEM(columns, j), n, &cols[j]) < 0) goto done;
    }
    /* the size first (checked against overflow), then one copy into the result */
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t row = fixed + (i ? sep.len : 0);
        for (Py_ssize_t j = 0; j < k; j++) {
            const char *d;
            row += cell(&cols[j], i, &d);
        }
        if (total > PY_SSIZE_T_MAX - row) {
            PyErr_NoMemory();
            goto done;
        }
        total += row;
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL) goto done;
    char *out = PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i && sep.len) {
            memcpy(out, sep.buf, (size_t)sep.len);
            out += sep.len;
        }
        for (Py_ssize_t j = 0; j <= k; j++) {
            out = put(out, PyBytes_AS_STRING(piece[j]), PyBytes_GET_SIZE(piece[j]));
            if (j == k) break;
            const char *d;
            Py_ssize_t m = cell(&cols[j], i, &d);
            out = put(out, d, m);
        }
    }
done:
    if (cols != NULL) {
        for (Py_ssize_t j = 0; j < k; j++) {
            Py_XDECREF(cols[j].fast);
            if (cols[j].has_bounds) PyBuffer_Release(&cols[j].bounds);
        }
        PyMem_Free(cols);
    }
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
