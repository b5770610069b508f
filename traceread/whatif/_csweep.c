/* The what-if replay's compiled loops (see sweep.py for the contracts and the Python twins they must equal).
 *
 * sweep: nodes come in causal order (edge sources int32, delays and durations int32 or int64, the rest int64);
 * node i's value is the latest end[src] + delay over its three edge
 * slots (src -1: no edge), or its recorded time when it has none; end = value + dur. Arithmetic is int64
 * with the same saturation-free formulas as the Python twin (inputs are ns of one trace). It returns the
 * replay's (first start, last end) read in the same pass.
 *
 * host_cut: the host time a union of intervals covers on each host-clock edge, scaled by a fraction (the
 * host-time fixes' cut, fixes._shrink_host). Both loops run without the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The sweep's loop for one pair of delay and duration widths (int32 or int64 each: a model stores each array
 * at int32 when every value fits, model._put); every sum is int64, as in the Python twin. Returns 1 when
 * an edge points forward. */
#define SWEEP_LOOP(NAME, DELAY_T, DUR_T)                                                                   \
    static int NAME(Py_ssize_t n, const int64_t *time, const int32_t *src, const DELAY_T *delay,          \
                    const DUR_T *dur, int64_t *out, int64_t *first, int64_t *last) {                      \
        for (Py_ssize_t i = 0; i < n; i++) {                                                               \
            int64_t best = 0;                                                                              \
            int any = 0;                                                                                   \
            for (int k = 0; k < 3; k++) {                                                                  \
                Py_ssize_t s = src[3 * i + k];                                                             \
                if (s < 0) continue;                                                                       \
                if (s >= i) return 1; /* an edge must point backward: the caller guarantees it */         \
                int64_t v = out[s] + (int64_t)dur[s] + (int64_t)delay[3 * i + k];                          \
                if (!any || v > best) best = v;                                                            \
                any = 1;                                                                                   \
            }                                                                                              \
            int64_t start = any ? best : time[i], end = start + (int64_t)dur[i];                           \
            out[i] = start;                                                                                \
            if (i == 0 || start < *first) *first = start;                                                  \
            if (i == 0 || end > *last) *last = end;                                                        \
        }                                                                                                  \
        return 0;                                                                                          \
    }

SWEEP_LOOP(sweep_64_64, int64_t, int64_t)
SWEEP_LOOP(sweep_32_64, int32_t, int64_t)
SWEEP_LOOP(sweep_64_32, int64_t, int32_t)
SWEEP_LOOP(sweep_32_32, int32_t, int32_t)

static PyObject *sweep(PyObject *self, PyObject *args) {
    Py_buffer b_time, b_src, b_delay, b_dur, b_out;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*", &b_time, &b_src, &b_delay, &b_dur, &b_out)) return NULL;
    Py_ssize_t n = b_time.len / 8;
    PyObject *result = NULL;
    /* delay (n, 3) and dur (n,) are int32 or int64, told apart by their byte lengths */
    int delay32 = b_delay.len == n * 12 && n > 0, dur32 = b_dur.len == n * 4 && n > 0;
    if (b_src.len != n * 12 || (b_delay.len != n * 24 && !delay32) || (b_dur.len != n * 8 && !dur32) ||
        b_out.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "sweep: array sizes disagree");
        goto done;
    }
    const int64_t *time = (const int64_t *)b_time.buf;
    const int32_t *src = (const int32_t *)b_src.buf; /* (n, 3) int32: sweep.SRC */
    int64_t *out = (int64_t *)b_out.buf; /* each node's value (start); its end is out + dur */
    int forward = 0;
    int64_t first = 0, last = 0;
    Py_BEGIN_ALLOW_THREADS
    if (delay32 && dur32)
        forward = sweep_32_32(n, time, src, (const int32_t *)b_delay.buf, (const int32_t *)b_dur.buf, out, &first, &last);
    else if (delay32)
        forward = sweep_32_64(n, time, src, (const int32_t *)b_delay.buf, (const int64_t *)b_dur.buf, out, &first, &last);
    else if (dur32)
        forward = sweep_64_32(n, time, src, (const int64_t *)b_delay.buf, (const int32_t *)b_dur.buf, out, &first, &last);
    else
        forward = sweep_64_64(n, time, src, (const int64_t *)b_delay.buf, (const int64_t *)b_dur.buf, out, &first, &last);
    Py_END_ALLOW_THREADS
    if (forward) {
        PyErr_SetString(PyExc_ValueError, "sweep: an edge points forward");
        goto done;
    }
    result = Py_BuildValue("(LL)", (long long)first, (long long)last);
done:
    PyBuffer_Release(&b_time); PyBuffer_Release(&b_src); PyBuffer_Release(&b_delay);
    PyBuffer_Release(&b_dur); PyBuffer_Release(&b_out);
    return result;
}

/* A cursor over a union's members (sorted, disjoint) for host_cut: ``j`` members start at or before the last
 * time asked, ``before`` is the total length of members 0 .. j-2. */
typedef struct {
    Py_ssize_t j;
    int64_t before;
} HostCursor;

/* The union's coverage before time ``t``: the cursor moves from the last time asked, back over the members
 * starting after ``t`` when it is earlier (a sync's own start: the members since then are few), then forward
 * (the sums are the same integers either way). */
static int64_t covered(HostCursor *c, int64_t t, const int64_t *us, const int64_t *ue, Py_ssize_t u) {
    while (c->j > 0 && us[c->j - 1] > t) {
        if (c->j >= 2) c->before -= ue[c->j - 2] - us[c->j - 2];
        c->j--;
    }
    while (c->j < u && us[c->j] <= t) {
        if (c->j > 0) c->before += ue[c->j - 1] - us[c->j - 1];
        c->j++;
    }
    if (c->j == 0) return 0;
    int64_t len = ue[c->j - 1] - us[c->j - 1], part = t - us[c->j - 1];
    if (part < 0) part = 0; /* np.clip(t - us, 0, len): the upper bound applied last */
    if (part > len) part = len;
    return c->before + part;
}

static PyObject *host_cut(PyObject *self, PyObject *args) {
    Py_buffer b_time, b_src, b_delay, b_nodes, b_us, b_ue, b_on, b_oc;
    double frac;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*dw*w*", &b_time, &b_src, &b_delay, &b_nodes, &b_us, &b_ue, &frac,
                          &b_on, &b_oc))
        return NULL;
    Py_ssize_t n = b_time.len / 8, k = b_nodes.len / 4, u = b_us.len / 8; /* nodes int32, as edge sources */
    PyObject *result = NULL;
    int delay32 = b_delay.len == n * 12 && n > 0; /* (n, 3) int32 or int64 */
    if (b_src.len != n * 12 || (b_delay.len != n * 24 && !delay32) || b_ue.len != u * 8 || b_on.len != k * 4 ||
        b_oc.len != k * 8 || b_nodes.len != k * 4) {
        PyErr_SetString(PyExc_ValueError, "host_cut: array sizes disagree");
        goto done;
    }
    const int64_t *time = (const int64_t *)b_time.buf;
    const int32_t *src = (const int32_t *)b_src.buf;
    const int64_t *delay = (const int64_t *)b_delay.buf;
    const int32_t *nodes = (const int32_t *)b_nodes.buf;
    const int32_t *delay_32 = (const int32_t *)b_delay.buf;
    const int64_t *us = (const int64_t *)b_us.buf, *ue = (const int64_t *)b_ue.buf;
    int32_t *out_nodes = (int32_t *)b_on.buf;
    int64_t *out_cut = (int64_t *)b_oc.buf;
    int bad = 0;
    Py_ssize_t kept = 0;
    Py_BEGIN_ALLOW_THREADS
    /* The union's coverage before a node's time (times ascending, members sorted and disjoint): the members
     * starting at or before the time in full but the last, which counts up to the time. Read at each node and
     * its source only, by a cursor per side (no int64 array over every node of a rank): the nodes
     * ascend, and so do the sources but a sync end's own start. */
    HostCursor at_node = {0, 0}, at_src = {0, 0};
    for (Py_ssize_t q = 0; q < k; q++) {
        Py_ssize_t node = nodes[q];
        if (node < 0 || node >= n || src[3 * node] < 0 || src[3 * node] >= n) {
            bad = 1;
            break;
        }
        int64_t over = covered(&at_node, time[node], us, ue, u) - covered(&at_src, time[src[3 * node]], us, ue, u);
        if (over < 0) over = 0;
        int64_t cut = (int64_t)((double)over * frac);
        if (cut != 0 || (delay32 ? delay_32[3 * node] : delay[3 * node]) < 0) {
            out_nodes[kept] = node;
            out_cut[kept] = cut;
            kept++;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "host_cut: a node or its source is out of range");
        goto done;
    }
    result = PyLong_FromSsize_t(kept);
done:
    PyBuffer_Release(&b_time); PyBuffer_Release(&b_src); PyBuffer_Release(&b_delay);
    PyBuffer_Release(&b_nodes); PyBuffer_Release(&b_us); PyBuffer_Release(&b_ue);
    PyBuffer_Release(&b_on); PyBuffer_Release(&b_oc);
    return result;
}

static PyMethodDef methods[] = {
    {"sweep", sweep, METH_VARARGS,
     "sweep(time, src, delay, dur, out) -> (first start, last end): replay nodes in causal order"},
    {"host_cut", host_cut, METH_VARARGS,
     "host_cut(time, src, delay, nodes, us, ue, frac, out_nodes, out_cut) -> kept: host-clock edges' cut"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_csweep", "What-if replay sweep", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__csweep(void) { return PyModule_Create(&module); }
