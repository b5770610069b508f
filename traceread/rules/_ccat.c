/* Row-wise concatenation of text columns (see textcat.py for the contract and the Python twin it must equal).
 *
 * cat(parts, n): parts is a sequence whose items are each a str (the same in every row) or a list of
 * n str; row i is the concatenation of the parts' texts of row i, in order. Returns the list of the n
 * joined str. Rows whose parts are equal get the same joined str: one allocation per distinct tuple
 * of parts (a template filled once: gaps share durations and percentages to the digits shown), found
 * by a hash table of the parts' own hashes (cached in each str; the formatters hand out one str per
 * distinct value, so most parts are hashed once). The strings equal Python's "".join over zip() (some
 * shared). Mostly distinct rows stop the sharing (it would cost more than it saves). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define CHECK_ROWS 4096 /* every so many rows: stop sharing when over a quarter of the rows were distinct */

typedef struct {
    Py_ssize_t row; /* the first row of this tuple of parts, -1: empty slot */
    PyObject *text; /* its joined str (borrowed from the result list) */
    int64_t hash;   /* row_hash of that row */
} Slot;

static uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* The joined str of row i (a new reference). */
static PyObject *joined(PyObject ***cols, PyObject **part, Py_ssize_t k, Py_ssize_t i) {
    Py_ssize_t len = 0;
    Py_UCS4 maxchar = 0;
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *s = cols[j] ? cols[j][i] : part[j];
        if (!PyUnicode_Check(s)) {
            PyErr_Format(PyExc_TypeError, "sequence item %zd: expected str instance, %.80s found", j,
                         Py_TYPE(s)->tp_name);
            return NULL;
        }
        Py_ssize_t m = PyUnicode_GET_LENGTH(s);
        if (len > PY_SSIZE_T_MAX - m) return PyErr_NoMemory();
        len += m;
        Py_UCS4 mc = PyUnicode_MAX_CHAR_VALUE(s);
        if (mc > maxchar) maxchar = mc;
    }
    PyObject *row = PyUnicode_New(len, maxchar);
    if (row == NULL) return NULL;
    if (maxchar < 128) { /* all ASCII: plain copies of one byte per character */
        char *out = (char *)PyUnicode_DATA(row);
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *s = cols[j] ? cols[j][i] : part[j];
            Py_ssize_t m = PyUnicode_GET_LENGTH(s);
            memcpy(out, PyUnicode_DATA(s), (size_t)m);
            out += m;
        }
        return row;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *s = cols[j] ? cols[j][i] : part[j];
        Py_ssize_t m = PyUnicode_GET_LENGTH(s);
        if (m && PyUnicode_CopyCharacters(row, at, s, 0, m) < 0) {
            Py_DECREF(row);
            return NULL;
        }
        at += m;
    }
    return row;
}

/* Whether two str are equal (PEP 393: equal text has the same kind, so the bytes compare). */
static int equal(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    Py_ssize_t m = PyUnicode_GET_LENGTH(a);
    if (m != PyUnicode_GET_LENGTH(b) || PyUnicode_KIND(a) != PyUnicode_KIND(b)) return 0;
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)m * PyUnicode_KIND(a)) == 0;
}

/* Whether rows a and b have equal parts. */
static int same(PyObject ***cols, const Py_ssize_t *varying, Py_ssize_t v, Py_ssize_t a, Py_ssize_t b) {
    for (Py_ssize_t j = 0; j < v; j++)
        if (!equal(cols[varying[j]][a], cols[varying[j]][b])) return 0;
    return 1;
}

/* The hash of row i's parts (each str's own hash, cached in the str), or -1 with TypeError set. */
static int64_t row_hash(PyObject ***cols, const Py_ssize_t *varying, Py_ssize_t v, Py_ssize_t i) {
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (Py_ssize_t j = 0; j < v; j++) {
        PyObject *s = cols[varying[j]][i];
        if (!PyUnicode_Check(s)) {
            PyErr_Format(PyExc_TypeError, "sequence item %zd: expected str instance, %.80s found", varying[j],
                         Py_TYPE(s)->tp_name);
            return -1;
        }
        Py_hash_t sh = PyObject_Hash(s);
        if (sh == -1) return -1;
        h = mix(h ^ (uint64_t)sh);
    }
    return (int64_t)(h >> 1);
}

static PyObject *cat(PyObject *self, PyObject *args) {
    PyObject *parts_obj, *parts = NULL, *result = NULL;
    Py_ssize_t n, k = 0, v = 0, cap = 0, used = 0;
    PyObject ***cols = NULL; /* per part: the items of its list, or NULL for a str */
    Py_ssize_t *varying = NULL; /* the parts that are lists */
    Slot *slots = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "On", &parts_obj, &n)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "cat: n must not be negative");
        return NULL;
    }
    parts = PySequence_Fast(parts_obj, "cat: parts must be a sequence");
    if (parts == NULL) return NULL;
    k = PySequence_Fast_GET_SIZE(parts);
    PyObject **part = PySequence_Fast_ITEMS(parts);
    cols = PyMem_Calloc(k ? (size_t)k : 1, sizeof(PyObject **));
    varying = PyMem_Calloc(k ? (size_t)k : 1, sizeof(Py_ssize_t));
    cap = 1024;
    slots = PyMem_Malloc((size_t)cap * sizeof(Slot));
    if (cols == NULL || varying == NULL || slots == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < cap; j++) slots[j].row = -1;
    for (Py_ssize_t j = 0; j < k; j++) {
        if (PyUnicode_Check(part[j])) continue;
        if (!PyList_Check(part[j]) || PyList_GET_SIZE(part[j]) != n) {
            PyErr_SetString(PyExc_ValueError, "cat: a part is a str or a list of n str");
            goto done;
        }
        cols[j] = ((PyListObject *)part[j])->ob_item;
        varying[v++] = j;
    }
    result = PyList_New(n);
    if (result == NULL) goto done;
    int dedup = v > 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (dedup && (i & (CHECK_ROWS - 1)) == CHECK_ROWS - 1 && used * 4 > i) {
            dedup = 0; /* mostly distinct: the table costs more than it saves */
            PyMem_Free(slots);
            slots = NULL;
        }
        if (!dedup) {
            PyObject *text = joined(cols, part, k, i);
            if (text == NULL) goto fail;
            PyList_SET_ITEM(result, i, text);
            continue;
        }
        int64_t h = row_hash(cols, varying, v, i);
        if (h < 0) goto fail;
        Py_ssize_t at = (Py_ssize_t)((uint64_t)h & (uint64_t)(cap - 1));
        while (slots[at].row >= 0 && (slots[at].hash != h || !same(cols, varying, v, slots[at].row, i)))
            at = (at + 1) & (cap - 1);
        PyObject *text;
        if (slots[at].row >= 0) {
            text = slots[at].text;
            Py_INCREF(text);
        } else {
            text = joined(cols, part, k, i);
            if (text == NULL) goto fail;
            slots[at].row = i;
            slots[at].text = text;
            slots[at].hash = h;
            if (++used * 2 > cap) { /* grow: the slots moved by their hashes */
                Py_ssize_t bigger = cap * 2;
                Slot *grown = PyMem_Malloc((size_t)bigger * sizeof(Slot));
                if (grown == NULL) {
                    PyList_SET_ITEM(result, i, text);
                    PyErr_NoMemory();
                    goto fail;
                }
                for (Py_ssize_t j = 0; j < bigger; j++) grown[j].row = -1;
                for (Py_ssize_t s = 0; s < cap; s++) {
                    if (slots[s].row < 0) continue;
                    Py_ssize_t to = (Py_ssize_t)((uint64_t)slots[s].hash & (uint64_t)(bigger - 1));
                    while (grown[to].row >= 0) to = (to + 1) & (bigger - 1);
                    grown[to] = slots[s];
                }
                PyMem_Free(slots);
                slots = grown;
                cap = bigger;
            }
        }
        PyList_SET_ITEM(result, i, text);
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    PyMem_Free(slots);
    PyMem_Free(cols);
    PyMem_Free(varying);
    Py_XDECREF(parts);
    return result;
}

/* codes(values): (codes, firsts) with firsts the distinct objects of the list values (by identity, in order
 * of first appearance) and codes the native int32 bytes of each value's index in firsts: text parts
 * (textcat.texts) coded without hashing a str (rows read from one categorical share its strings).
 * TypeError for an item that is not a str, as cat refuses it. */
static PyObject *codes(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyList_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "codes: values must be a list");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(arg), cap = 16, used = 0;
    if (n > INT32_MAX) return PyErr_NoMemory();
    while (cap < 2 * n) cap *= 2;
    PyObject **keys = PyMem_Calloc((size_t)cap, sizeof(PyObject *));
    int32_t *index = PyMem_Malloc((size_t)cap * sizeof(int32_t));
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 4), *firsts = PyList_New(0), *result = NULL;
    if (keys == NULL || index == NULL) PyErr_NoMemory();
    if (keys == NULL || index == NULL || out == NULL || firsts == NULL) goto done;
    int32_t *code = (int32_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(arg, i);
        Py_ssize_t at = (Py_ssize_t)(mix((uint64_t)(uintptr_t)v) & (uint64_t)(cap - 1));
        while (keys[at] != NULL && keys[at] != v) at = (at + 1) & (cap - 1);
        if (keys[at] == NULL) {
            if (!PyUnicode_Check(v)) {
                PyErr_Format(PyExc_TypeError, "expected str instance, %.80s found", Py_TYPE(v)->tp_name);
                goto done;
            }
            keys[at] = v;
            index[at] = (int32_t)used++;
            if (PyList_Append(firsts, v) < 0) goto done;
        }
        code[i] = index[at];
    }
    result = PyTuple_Pack(2, out, firsts);
done:
    PyMem_Free(keys);
    PyMem_Free(index);
    Py_XDECREF(out);
    Py_XDECREF(firsts);
    return result;
}

static PyMethodDef methods[] = {
    {"codes", codes, METH_O, "codes(values): (int32 codes as bytes, the distinct str by identity)"},
    {"cat", cat, METH_VARARGS, "cat(parts, n): the n rows' concatenations of str parts and lists of n str"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ccat", "Row-wise text concatenation", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__ccat(void) { return PyModule_Create(&module); }
