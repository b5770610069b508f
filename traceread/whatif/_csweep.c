/* The what-if replay's sweep (see sweep.py for the contract and the Python twin it must equal).
 *
 * Nodes come in causal order; node i's value is the latest end[src] + delay over its three edge
 * slots (src -1: no edge), or its recorded time when it has none; end = value + dur. Arithmetic
 * is int64 with the same saturation-free formulas as the Python twin (inputs are ns of one trace). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *sweep(PyObject *self, PyObject *args) {
    Py_buffer b_time, b_src, b_delay, b_dur, b_out;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*", &b_time, &b_src, &b_delay, &b_dur, &b_out)) return NULL;
    Py_ssize_t n = b_time.len / 8;
    PyObject *result = NULL;
    if (b_src.len != n * 24 || b_delay.len != n * 24 || b_dur.len != n * 8 || b_out.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "sweep: array sizes disagree");
        goto done;
    }
    const int64_t *time = (const int64_t *)b_time.buf, *src = (const int64_t *)b_src.buf;
    const int64_t *delay = (const int64_t *)b_delay.buf, *dur = (const int64_t *)b_dur.buf;
    int64_t *out = (int64_t *)b_out.buf; /* each node's value (start); its end is out + dur */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t best = 0;
        int any = 0;
        for (int k = 0; k < 3; k++) {
            int64_t s = src[3 * i + k];
            if (s < 0) continue;
            if (s >= i) { /* an edge must point backward: the caller guarantees it */
                PyErr_SetString(PyExc_ValueError, "sweep: an edge points forward");
                goto done;
            }
            int64_t v = out[s] + dur[s] + delay[3 * i + k];
            if (!any || v > best) best = v;
            any = 1;
        }
        out[i] = any ? best : time[i];
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&b_time); PyBuffer_Release(&b_src); PyBuffer_Release(&b_delay);
    PyBuffer_Release(&b_dur); PyBuffer_Release(&b_out);
    return result;
}

static PyMethodDef methods[] = {
    {"sweep", sweep, METH_VARARGS, "sweep(time, src, delay, dur, out): replay nodes in causal order"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_csweep", "What-if replay sweep", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__csweep(void) { return PyModule_Create(&module); }
