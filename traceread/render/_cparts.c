/* The _cjoin module's gather and distinct (its table in _cjoin.c): text kept as parts laid out as rows, and
 * the distinct objects of a list by identity (see rowjoin.gather and rowjoin.distinct for the contracts and
 * the Python twins they must equal). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_cjoin.h"

/* distinct(values): (codes, firsts) with firsts the distinct objects of the list values (by identity, in
 * order of first appearance) and codes the native int64 bytes of each value's index in firsts: a writer
 * encodes each distinct object once (rows sharing a sentence share its str). */
PyObject *cparts_distinct(PyObject *self, PyObject *arg) {
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

/* gather(buf, starts, ends, codes, k, pre, post): (out, offsets) with row i of out (out[offsets[i]:offsets[i + 1]])
 * being pre + the k cells buf[starts[c]:ends[c]] of c = codes[i * k + j] + post: rows of text kept as parts
 * (a table of their distinct encoded parts, int32 codes per row and part) laid out as one buffer; offsets are
 * n + 1 native int64 as bytes. The two passes (sizes, copies) touch no Python object and run without the GIL. */
PyObject *cparts_gather(PyObject *self, PyObject *args) {
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
