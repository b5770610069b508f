/* One pass over intervals sorted by start against sorted, disjoint queries (the gap engine's
 * measurements). See traceread/intervals.py (rows_covered, rows_longest_overlap, rows_count_in) for
 * the contracts and the numpy twins every function here must equal exactly.
 *
 * Intervals are given as two int64 columns (start, end) and the row numbers selecting them (int32
 * or int64, by the buffer's item size), so no gathered copy of a selection is made. Every function
 * returns None, having written nothing the caller reads, when its input is not in the shape it needs
 * (rows not sorted by start, queries not sorted and disjoint): the caller then sorts or uses the twin. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    Py_buffer start, end, rows, qs, qe;
    int have_end;
    Py_ssize_t n_ev, n, m;
    int wide; /* rows are int64 (else int32) */
} Args;

static void release(Args *a) {
    PyBuffer_Release(&a->start);
    if (a->have_end) PyBuffer_Release(&a->end);
    PyBuffer_Release(&a->rows);
    PyBuffer_Release(&a->qs);
    PyBuffer_Release(&a->qe);
}

/* Validates sizes and row numbers; 0 on success (else an exception is set and buffers released). */
static int check(Args *a) {
    a->n_ev = a->start.len / 8;
    if (a->have_end && a->end.len != a->start.len) {
        PyErr_SetString(PyExc_ValueError, "_cintervals: start and end differ in length");
        goto bad;
    }
    if (a->rows.itemsize != 4 && a->rows.itemsize != 8) {
        PyErr_SetString(PyExc_ValueError, "_cintervals: rows must be int32 or int64");
        goto bad;
    }
    a->wide = a->rows.itemsize == 8;
    a->n = a->rows.len / a->rows.itemsize;
    a->m = a->qs.len / 8;
    if (a->qe.len != a->qs.len) {
        PyErr_SetString(PyExc_ValueError, "_cintervals: query starts and ends differ in length");
        goto bad;
    }
    return 0;
bad:
    release(a);
    return -1;
}

static inline Py_ssize_t row_at(const Args *a, Py_ssize_t i) {
    return a->wide ? (Py_ssize_t)((const int64_t *)a->rows.buf)[i] : (Py_ssize_t)((const int32_t *)a->rows.buf)[i];
}

/* Rows in range and sorted by start; queries sorted by start and pairwise disjoint. */
static int shaped(const Args *a) {
    const int64_t *s = (const int64_t *)a->start.buf;
    const int64_t *qs = (const int64_t *)a->qs.buf, *qe = (const int64_t *)a->qe.buf;
    int64_t prev = INT64_MIN;
    for (Py_ssize_t i = 0; i < a->n; i++) {
        Py_ssize_t r = row_at(a, i);
        if (r < 0 || r >= a->n_ev || s[r] < prev) return 0;
        prev = s[r];
    }
    for (Py_ssize_t k = 0; k < a->m; k++) {
        if (qe[k] < qs[k] || (k && qs[k] < qe[k - 1])) return 0;
    }
    return 1;
}

/* covered(start, end, rows, qs, qe, out): out[k] = length of query k covered by the union of the
 * rows' intervals (zero-length intervals cover nothing; touching ones merge, as intervals.union). */
static PyObject *covered(PyObject *self, PyObject *args) {
    Args a = {0};
    Py_buffer b_out;
    (void)self;
    a.have_end = 1;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*", &a.start, &a.end, &a.rows, &a.qs, &a.qe, &b_out)) return NULL;
    if (check(&a)) { PyBuffer_Release(&b_out); return NULL; }
    PyObject *result = Py_None;
    if (b_out.len != a.m * 8) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.covered: out has the wrong length");
        result = NULL;
        goto done;
    }
    if (!shaped(&a)) goto done;
    const int64_t *s = (const int64_t *)a.start.buf, *e = (const int64_t *)a.end.buf;
    const int64_t *qs = (const int64_t *)a.qs.buf, *qe = (const int64_t *)a.qe.buf;
    int64_t *out = (int64_t *)b_out.buf;
    Py_ssize_t m = a.m, j = 0;
    for (Py_ssize_t k = 0; k < m; k++) out[k] = 0;
    Py_ssize_t i = 0;
    while (i < a.n && j < m) {
        /* the next member of the union: [cs, ce) */
        Py_ssize_t r = row_at(&a, i++);
        if (e[r] <= s[r]) continue;
        int64_t cs = s[r], ce = e[r];
        while (i < a.n) {
            Py_ssize_t r2 = row_at(&a, i);
            if (s[r2] > ce) break;
            if (e[r2] > ce) ce = e[r2];
            i++;
        }
        while (j < m && qe[j] <= cs) j++; /* queries wholly before the member: done */
        for (Py_ssize_t k = j; k < m && qs[k] < ce; k++) {
            int64_t lo = qs[k] > cs ? qs[k] : cs, hi = qe[k] < ce ? qe[k] : ce;
            if (hi > lo) out[k] += hi - lo;
        }
    }
    result = Py_True;
done:
    release(&a);
    PyBuffer_Release(&b_out);
    if (result) Py_INCREF(result);
    return result;
}

/* longest(start, end, rows, qs, qe, length, index): per query, the interval overlapping it the
 * longest and its position in rows (-1: none), with intervals.longest_overlap's tie rules: an
 * interval starting before the query is the one reaching furthest (the latest of those reaching
 * equally far); one starting inside the query is the first reaching the query's maximum, and it
 * replaces the former only when it overlaps strictly longer. */
/* Whether thread id t is among the sorted ids (a few: the launching threads of a device). */
static inline int among(const int64_t *ids, Py_ssize_t n_ids, int64_t t) {
    Py_ssize_t lo = 0, hi = n_ids;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (ids[mid] < t) lo = mid + 1; else hi = mid;
    }
    return lo < n_ids && ids[lo] == t;
}

static PyObject *longest(PyObject *self, PyObject *args) {
    Args a = {0};
    Py_buffer b_len, b_idx, b_tid = {0}, b_tids = {0};
    PyObject *o_tid = Py_None, *o_tids = Py_None;
    (void)self;
    a.have_end = 1;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*w*|OO", &a.start, &a.end, &a.rows, &a.qs, &a.qe, &b_len, &b_idx,
                          &o_tid, &o_tids))
        return NULL;
    if (check(&a)) { PyBuffer_Release(&b_len); PyBuffer_Release(&b_idx); return NULL; }
    PyObject *result = Py_None;
    /* optional: only rows whose tid is among tids (sorted int64) take part */
    int filter = o_tid != Py_None;
    if (filter) {
        if (PyObject_GetBuffer(o_tid, &b_tid, PyBUF_SIMPLE) < 0) { result = NULL; filter = 0; goto done; }
        if (PyObject_GetBuffer(o_tids, &b_tids, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&b_tid); result = NULL; filter = 0; goto done;
        }
        if (b_tid.len != a.start.len || b_tid.itemsize != 8 || b_tids.itemsize != 8) {
            PyErr_SetString(PyExc_ValueError, "_cintervals.longest: tid must be int64 per event, tids int64");
            result = NULL;
            goto done;
        }
    }
    const int64_t *tid = filter ? (const int64_t *)b_tid.buf : NULL, *tids = filter ? (const int64_t *)b_tids.buf : NULL;
    Py_ssize_t n_tids = filter ? b_tids.len / 8 : 0;
    if (b_len.len != a.m * 8 || b_idx.len != a.m * 8) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.longest: outputs have the wrong length");
        result = NULL;
        goto done;
    }
    if (!shaped(&a)) goto done;
    const int64_t *s = (const int64_t *)a.start.buf, *e = (const int64_t *)a.end.buf;
    const int64_t *qs = (const int64_t *)a.qs.buf, *qe = (const int64_t *)a.qe.buf;
    int64_t *len = (int64_t *)b_len.buf, *idx = (int64_t *)b_idx.buf;
    Py_ssize_t i = 0, far = -1; /* far: the interval started so far that reaches furthest (latest on ties) */
    int64_t far_end = 0;
    for (Py_ssize_t k = 0; k < a.m; k++) {
        while (i < a.n) {
            Py_ssize_t r = row_at(&a, i);
            if (s[r] >= qs[k]) break;
            if ((!filter || among(tids, n_tids, tid[r])) && (far < 0 || e[r] >= far_end)) { far = i; far_end = e[r]; }
            i++;
        }
        int64_t best = 0, best_idx = -1;
        if (far >= 0) {
            int64_t ov = (far_end < qe[k] ? far_end : qe[k]) - qs[k];
            if (ov > 0) { best = ov; best_idx = far; }
        }
        int64_t in_best = 0, in_idx = -1;
        for (Py_ssize_t j = i; j < a.n; j++) {
            Py_ssize_t r = row_at(&a, j);
            if (s[r] >= qe[k]) break;
            if (filter && !among(tids, n_tids, tid[r])) continue;
            int64_t ov = (e[r] < qe[k] ? e[r] : qe[k]) - s[r];
            if (in_idx < 0 || ov > in_best) { in_best = ov; in_idx = j; }
        }
        if (in_idx >= 0 && in_best > best) { best = in_best; best_idx = in_idx; }
        len[k] = best;
        idx[k] = best_idx;
    }
    result = Py_True;
done:
    if (filter) { PyBuffer_Release(&b_tid); PyBuffer_Release(&b_tids); }
    release(&a);
    PyBuffer_Release(&b_len);
    PyBuffer_Release(&b_idx);
    if (result) Py_INCREF(result);
    return result;
}

/* count(start, rows, qs, qe, out): out[k] = number of rows with qs[k] <= start < qe[k]. */
static PyObject *count(PyObject *self, PyObject *args) {
    Args a = {0};
    Py_buffer b_out;
    (void)self;
    a.have_end = 0;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*", &a.start, &a.rows, &a.qs, &a.qe, &b_out)) return NULL;
    if (check(&a)) { PyBuffer_Release(&b_out); return NULL; }
    PyObject *result = Py_None;
    if (b_out.len != a.m * 8) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.count: out has the wrong length");
        result = NULL;
        goto done;
    }
    if (!shaped(&a)) goto done;
    const int64_t *s = (const int64_t *)a.start.buf;
    const int64_t *qs = (const int64_t *)a.qs.buf, *qe = (const int64_t *)a.qe.buf;
    int64_t *out = (int64_t *)b_out.buf;
    Py_ssize_t i = 0;
    for (Py_ssize_t k = 0; k < a.m; k++) {
        while (i < a.n && s[row_at(&a, i)] < qs[k]) i++;
        Py_ssize_t j = i;
        while (j < a.n && s[row_at(&a, j)] < qe[k]) j++;
        out[k] = (int64_t)(j - i);
        i = j;
    }
    result = Py_True;
done:
    release(&a);
    PyBuffer_Release(&b_out);
    if (result) Py_INCREF(result);
    return result;
}

/* A code column read as int64 whatever its signed width (1, 2, 4 or 8 bytes). */
static inline int64_t code_at(const Py_buffer *b, Py_ssize_t i) {
    switch (b->itemsize) {
    case 1: return ((const int8_t *)b->buf)[i];
    case 2: return ((const int16_t *)b->buf)[i];
    case 4: return ((const int32_t *)b->buf)[i];
    default: return ((const int64_t *)b->buf)[i];
    }
}

/* table[code] with numpy's reading of a negative index (from the end); -1: out of range. */
static inline int table_at(const Py_buffer *t, int64_t code) {
    Py_ssize_t n = t->len;
    if (code < 0) code += n;
    if (code < 0 || code >= n) return -1;
    return ((const unsigned char *)t->buf)[code] != 0;
}

/* bucket_max(start, end, rows, bounds, max_len, out, cat, cat_ok, name, name_ok): for each row
 * shorter than max_len (end - start) whose cat_ok[cat[row]] and name_ok[name[row]] hold (tables
 * of bools indexed by code as numpy indexes), out[b] = max(out[b], end) with b the number of bounds
 * (sorted ascending) at or before its start. cat/cat_ok and name/name_ok may be None (no test).
 * capture_edges._tail's numpy lines are the twin. */
static PyObject *bucket_max(PyObject *self, PyObject *args) {
    Py_buffer b_start, b_end, b_rows, b_bounds, b_out;
    Py_buffer tab[4]; /* cat, cat_ok, name, name_ok */
    PyObject *objs[4];
    int got[4] = {0, 0, 0, 0};
    long long max_len;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*Lw*OOOO", &b_start, &b_end, &b_rows, &b_bounds, &max_len, &b_out,
                          &objs[0], &objs[1], &objs[2], &objs[3]))
        return NULL;
    PyObject *result = NULL;
    for (int t = 0; t < 4; t++) {
        if (objs[t] == Py_None) continue;
        if (PyObject_GetBuffer(objs[t], &tab[t], PyBUF_SIMPLE | PyBUF_FORMAT) < 0) goto done;
        got[t] = 1;
    }
    if ((got[0] != got[1]) || (got[2] != got[3])) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.bucket_max: a code column needs its table");
        goto done;
    }
    Py_ssize_t n_ev = b_start.len / 8, nb = b_bounds.len / 8;
    int wide = b_rows.itemsize == 8;
    Py_ssize_t n = b_rows.len / b_rows.itemsize;
    if (b_end.len != b_start.len || (b_rows.itemsize != 4 && b_rows.itemsize != 8) || b_out.len != (nb + 1) * 8 ||
        (got[0] && tab[0].len / tab[0].itemsize != n_ev) || (got[2] && tab[2].len / tab[2].itemsize != n_ev)) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.bucket_max: array sizes disagree");
        goto done;
    }
    const int64_t *s = (const int64_t *)b_start.buf, *e = (const int64_t *)b_end.buf;
    const int64_t *bounds = (const int64_t *)b_bounds.buf;
    int64_t *out = (int64_t *)b_out.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t r = wide ? (Py_ssize_t)((const int64_t *)b_rows.buf)[i] : (Py_ssize_t)((const int32_t *)b_rows.buf)[i];
        if (r < 0) r += n_ev;
        if (r < 0 || r >= n_ev) {
            PyErr_SetString(PyExc_IndexError, "_cintervals.bucket_max: a row is out of range");
            goto done;
        }
        if (!(e[r] - s[r] < max_len)) continue;
        for (int t = 0; t < 4; t += 2) {
            if (!got[t]) continue;
            int ok = table_at(&tab[t + 1], code_at(&tab[t], r));
            if (ok < 0) {
                PyErr_SetString(PyExc_IndexError, "_cintervals.bucket_max: a code is out of its table");
                goto done;
            }
            if (!ok) goto next;
        }
        {
            Py_ssize_t lo = 0, hi = nb; /* first bound > start */
            while (lo < hi) {
                Py_ssize_t mid = (lo + hi) / 2;
                if (bounds[mid] <= s[r]) lo = mid + 1; else hi = mid;
            }
            if (e[r] > out[lo]) out[lo] = e[r];
        }
    next:;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int t = 0; t < 4; t++) if (got[t]) PyBuffer_Release(&tab[t]);
    PyBuffer_Release(&b_start); PyBuffer_Release(&b_end); PyBuffer_Release(&b_rows);
    PyBuffer_Release(&b_bounds); PyBuffer_Release(&b_out);
    return result;
}

/* starting_at(start, end, rows, t, out): per time t (sorted ascending), the position in rows (sorted
 * by start) of the interval starting exactly at t that ends last (the first of those ending equally
 * late), -1 when none starts there; intervals.longest_starting_at is the twin. None when unsorted. */
static PyObject *starting_at(PyObject *self, PyObject *args) {
    Args a = {0};
    Py_buffer b_out;
    (void)self;
    a.have_end = 1;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*", &a.start, &a.end, &a.rows, &a.qs, &b_out)) return NULL;
    /* the times stand in as both query bounds: check() wants qe, so borrow qs's view */
    if (PyObject_GetBuffer(a.qs.obj, &a.qe, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&a.start); PyBuffer_Release(&a.end); PyBuffer_Release(&a.rows); PyBuffer_Release(&a.qs);
        PyBuffer_Release(&b_out);
        return NULL;
    }
    if (check(&a)) { PyBuffer_Release(&b_out); return NULL; }
    PyObject *result = Py_None;
    if (b_out.len != a.m * 8) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.starting_at: out has the wrong length");
        result = NULL;
        goto done;
    }
    const int64_t *s = (const int64_t *)a.start.buf, *e = (const int64_t *)a.end.buf;
    const int64_t *t = (const int64_t *)a.qs.buf;
    int64_t *out = (int64_t *)b_out.buf;
    int64_t prev = INT64_MIN;
    for (Py_ssize_t i = 0; i < a.n; i++) {
        Py_ssize_t r = row_at(&a, i);
        if (r < 0 || r >= a.n_ev || s[r] < prev) goto done;
        prev = s[r];
    }
    for (Py_ssize_t k = 1; k < a.m; k++) if (t[k] < t[k - 1]) goto done;
    Py_ssize_t i = 0;
    for (Py_ssize_t k = 0; k < a.m; k++) {
        while (i < a.n && s[row_at(&a, i)] < t[k]) i++;
        int64_t best_idx = -1, best_end = 0;
        for (Py_ssize_t j = i; j < a.n; j++) {
            Py_ssize_t r = row_at(&a, j);
            if (s[r] != t[k]) break;
            if (best_idx < 0 || e[r] > best_end) { best_idx = j; best_end = e[r]; }
        }
        out[k] = best_idx;
    }
    result = Py_True;
done:
    release(&a);
    PyBuffer_Release(&b_out);
    if (result) Py_INCREF(result);
    return result;
}

/* at_or_before(points, t, out): out[k] = number of points <= t[k], both sorted ascending (None
 * when not); intervals.count_at_or_before is the twin. */
static PyObject *at_or_before(PyObject *self, PyObject *args) {
    Py_buffer b_p, b_t, b_out;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*w*", &b_p, &b_t, &b_out)) return NULL;
    PyObject *result = Py_None;
    Py_ssize_t n = b_p.len / 8, m = b_t.len / 8;
    const int64_t *p = (const int64_t *)b_p.buf, *t = (const int64_t *)b_t.buf;
    int64_t *out = (int64_t *)b_out.buf;
    if (b_out.len != m * 8) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.at_or_before: out has the wrong length");
        result = NULL;
        goto done;
    }
    for (Py_ssize_t i = 1; i < n; i++) if (p[i] < p[i - 1]) goto done;
    for (Py_ssize_t k = 1; k < m; k++) if (t[k] < t[k - 1]) goto done;
    Py_ssize_t i = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        while (i < n && p[i] <= t[k]) i++;
        out[k] = (int64_t)i;
    }
    result = Py_True;
done:
    PyBuffer_Release(&b_p); PyBuffer_Release(&b_t); PyBuffer_Release(&b_out);
    if (result) Py_INCREF(result);
    return result;
}

/* An index column (int32 or int64 by item size) read as int64. */
static inline int64_t index_at(const Py_buffer *b, Py_ssize_t i) {
    return b->itemsize == 8 ? ((const int64_t *)b->buf)[i] : (int64_t)((const int32_t *)b->buf)[i];
}

/* positions(keys, queries, out): out[k] = position of the first key equal to queries[k], -1 when
 * none; keys and queries int32 or int64, both sorted ascending (None when not). */
static PyObject *positions(PyObject *self, PyObject *args) {
    Py_buffer b_k, b_q, b_out;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*w*", &b_k, &b_q, &b_out)) return NULL;
    PyObject *result = Py_None;
    if ((b_k.itemsize != 4 && b_k.itemsize != 8) || (b_q.itemsize != 4 && b_q.itemsize != 8)) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.positions: keys and queries must be int32 or int64");
        result = NULL;
        goto done;
    }
    Py_ssize_t n = b_k.len / b_k.itemsize, m = b_q.len / b_q.itemsize;
    int64_t *out = (int64_t *)b_out.buf;
    if (b_out.len != m * 8) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.positions: out has the wrong length");
        result = NULL;
        goto done;
    }
    for (Py_ssize_t i = 1; i < n; i++) if (index_at(&b_k, i) < index_at(&b_k, i - 1)) goto done;
    for (Py_ssize_t k = 1; k < m; k++) if (index_at(&b_q, k) < index_at(&b_q, k - 1)) goto done;
    Py_ssize_t i = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        int64_t q = index_at(&b_q, k);
        while (i < n && index_at(&b_k, i) < q) i++;
        out[k] = (i < n && index_at(&b_k, i) == q) ? (int64_t)i : -1;
    }
    result = Py_True;
done:
    PyBuffer_Release(&b_k); PyBuffer_Release(&b_q); PyBuffer_Release(&b_out);
    if (result) Py_INCREF(result);
    return result;
}

/* holes(us, ue, ws, we, w_idx, gs, ge): the parts of each window (sorted, disjoint) no member of
 * the union (sorted, disjoint) covers, in order; the outputs hold len(us) + 1 + len(ws) entries at
 * least. Returns how many were written (intervals.complement_in_windows is the twin), or None when
 * an input is out of shape. */
static PyObject *holes(PyObject *self, PyObject *args) {
    Py_buffer b_us, b_ue, b_ws, b_we, b_w, b_gs, b_ge;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*w*w*", &b_us, &b_ue, &b_ws, &b_we, &b_w, &b_gs, &b_ge)) return NULL;
    PyObject *result = Py_None;
    Py_ssize_t n = b_us.len / 8, m = b_ws.len / 8, cap = b_w.len / 8;
    const int64_t *us = (const int64_t *)b_us.buf, *ue = (const int64_t *)b_ue.buf;
    const int64_t *ws = (const int64_t *)b_ws.buf, *we = (const int64_t *)b_we.buf;
    int64_t *w_idx = (int64_t *)b_w.buf, *gs = (int64_t *)b_gs.buf, *ge = (int64_t *)b_ge.buf;
    if (b_ue.len != b_us.len || b_we.len != b_ws.len || cap < n + 1 + m || b_gs.len != b_w.len || b_ge.len != b_w.len) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.holes: array sizes disagree");
        result = NULL;
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) if (ue[i] <= us[i] || (i && us[i] <= ue[i - 1])) goto done;
    for (Py_ssize_t k = 0; k < m; k++) if (we[k] < ws[k] || (k && ws[k] < we[k - 1])) goto done;
    Py_ssize_t out = 0, i = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        /* members ending at or before the window's start cannot cut it */
        while (i < n && ue[i] <= ws[k]) i++;
        int64_t at = ws[k];
        Py_ssize_t j = i;
        for (; j < n && us[j] < we[k]; j++) {
            if (us[j] > at) { w_idx[out] = k; gs[out] = at; ge[out] = us[j]; out++; }
            if (ue[j] > at) at = ue[j];
        }
        if (at < we[k]) { w_idx[out] = k; gs[out] = at; ge[out] = we[k]; out++; }
    }
    result = PyLong_FromSsize_t(out);
done:
    PyBuffer_Release(&b_us); PyBuffer_Release(&b_ue); PyBuffer_Release(&b_ws); PyBuffer_Release(&b_we);
    PyBuffer_Release(&b_w); PyBuffer_Release(&b_gs); PyBuffer_Release(&b_ge);
    if (result == Py_None) Py_INCREF(result);
    return result;
}

/* union_rows(start, end, rows, us, ue): the union of the rows' intervals (rows sorted by start)
 * written to us/ue (room for one member per row); returns the member count, or None when the rows
 * are not sorted by start. intervals.union is the twin: zero-length intervals dropped, touching
 * ones merged. */
static PyObject *union_rows(PyObject *self, PyObject *args) {
    Py_buffer b_s, b_e, b_rows, b_us, b_ue;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*", &b_s, &b_e, &b_rows, &b_us, &b_ue)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n_ev = b_s.len / 8;
    if (b_e.len != b_s.len || (b_rows.itemsize != 4 && b_rows.itemsize != 8)) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.union_rows: array sizes disagree");
        goto done;
    }
    Py_ssize_t n = b_rows.len / b_rows.itemsize;
    if (b_us.len < n * 8 || b_ue.len < n * 8) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.union_rows: no room for the members");
        goto done;
    }
    const int64_t *s = (const int64_t *)b_s.buf, *e = (const int64_t *)b_e.buf;
    int64_t *us = (int64_t *)b_us.buf, *ue = (int64_t *)b_ue.buf;
    Py_ssize_t out = 0;
    int64_t prev = INT64_MIN;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t r = (Py_ssize_t)index_at(&b_rows, i);
        if (r < 0 || r >= n_ev || s[r] < prev) { result = Py_None; Py_INCREF(result); goto done; }
        prev = s[r];
        if (e[r] <= s[r]) continue;
        if (out && s[r] <= ue[out - 1]) {
            if (e[r] > ue[out - 1]) ue[out - 1] = e[r];
        } else {
            us[out] = s[r];
            ue[out] = e[r];
            out++;
        }
    }
    result = PyLong_FromSsize_t(out);
done:
    PyBuffer_Release(&b_s); PyBuffer_Release(&b_e); PyBuffer_Release(&b_rows);
    PyBuffer_Release(&b_us); PyBuffer_Release(&b_ue);
    return result;
}

/* free_near(start, end, name, rows, marker, points, us, ue, f_rows, f_s, f_e, near): one host thread's
 * frames (rows, sorted by start) without those whose marker[name[row]] holds (a bool per name code,
 * read as numpy indexes) written to f_rows/f_s/f_e (row, start, end), and near[] the positions among
 * them of the frames overlapping the union us/ue (sorted, disjoint; at least one member) inside
 * which none of points (sorted) starts; returns (frames, near), or None when rows are not sorted by
 * start or points not sorted. rules/host_work.py's _free_near_numpy is the twin. */
static PyObject *free_near(PyObject *self, PyObject *args) {
    Py_buffer b_s, b_e, b_name, b_rows, b_mark, b_pts, b_us, b_ue, b_fr, b_fs, b_fe, b_near;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*w*w*w*w*", &b_s, &b_e, &b_name, &b_rows, &b_mark, &b_pts, &b_us,
                          &b_ue, &b_fr, &b_fs, &b_fe, &b_near))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n_ev = b_s.len / 8, n = b_rows.itemsize ? b_rows.len / b_rows.itemsize : 0;
    Py_ssize_t n_pts = b_pts.len / 8, n_u = b_us.len / 8;
    if (b_e.len != b_s.len || b_name.itemsize < 1 || b_name.len / b_name.itemsize != n_ev ||
        (b_rows.itemsize != 4 && b_rows.itemsize != 8) || b_ue.len != b_us.len || n_u < 1 ||
        b_fr.len < n * 8 || b_fs.len < n * 8 || b_fe.len < n * 8 || b_near.len < n * 8) {
        PyErr_SetString(PyExc_ValueError, "_cintervals.free_near: array sizes disagree");
        goto done;
    }
    const int64_t *s = (const int64_t *)b_s.buf, *e = (const int64_t *)b_e.buf;
    const int64_t *pts = (const int64_t *)b_pts.buf, *us = (const int64_t *)b_us.buf, *ue = (const int64_t *)b_ue.buf;
    int64_t *fr = (int64_t *)b_fr.buf, *fs = (int64_t *)b_fs.buf, *fe = (int64_t *)b_fe.buf, *near = (int64_t *)b_near.buf;
    for (Py_ssize_t k = 1; k < n_pts; k++)
        if (pts[k] < pts[k - 1]) { result = Py_None; Py_INCREF(result); goto done; }
    Py_ssize_t m = 0, q = 0, j = 0, k = 0;
    int64_t prev = INT64_MIN;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t r = index_at(&b_rows, i);
        if (r < 0 || r >= n_ev) {
            PyErr_SetString(PyExc_IndexError, "_cintervals.free_near: a row out of range");
            goto done;
        }
        if (s[r] < prev) { result = Py_None; Py_INCREF(result); goto done; }
        prev = s[r];
        int hit = table_at(&b_mark, code_at(&b_name, r));
        if (hit < 0) {
            PyErr_SetString(PyExc_IndexError, "_cintervals.free_near: a name code out of range");
            goto done;
        }
        if (hit) continue;
        fr[m] = r;
        fs[m] = s[r];
        fe[m] = e[r];
        while (j < n_u && ue[j] <= s[r]) j++; /* the first member ending after the start (else the last) */
        Py_ssize_t u = j < n_u ? j : n_u - 1;
        if (ue[u] > s[r] && us[u] < e[r]) {
            while (k < n_pts && pts[k] < s[r]) k++; /* the first point at or after the start */
            if (k == n_pts || pts[k] >= e[r]) near[q++] = m;
        }
        m++;
    }
    result = Py_BuildValue("nn", m, q);
done:
    PyBuffer_Release(&b_s); PyBuffer_Release(&b_e); PyBuffer_Release(&b_name); PyBuffer_Release(&b_rows);
    PyBuffer_Release(&b_mark); PyBuffer_Release(&b_pts); PyBuffer_Release(&b_us); PyBuffer_Release(&b_ue);
    PyBuffer_Release(&b_fr); PyBuffer_Release(&b_fs); PyBuffer_Release(&b_fe); PyBuffer_Release(&b_near);
    return result;
}

static PyMethodDef methods[] = {
    {"covered", covered, METH_VARARGS, "covered(start, end, rows, qs, qe, out): union coverage per query"},
    {"longest", longest, METH_VARARGS, "longest(start, end, rows, qs, qe, length, index): longest overlap per query"},
    {"count", count, METH_VARARGS, "count(start, rows, qs, qe, out): starts inside each query"},
    {"starting_at", starting_at, METH_VARARGS, "starting_at(start, end, rows, t, out): longest interval starting at each time"},
    {"at_or_before", at_or_before, METH_VARARGS, "at_or_before(points, t, out): points at or before each time"},
    {"positions", positions, METH_VARARGS, "positions(keys, queries, out): where sorted queries are among sorted keys"},
    {"holes", holes, METH_VARARGS, "holes(us, ue, ws, we, w_idx, gs, ge): the union's holes inside each window"},
    {"union_rows", union_rows, METH_VARARGS, "union_rows(start, end, rows, us, ue): union of rows sorted by start"},
    {"free_near", free_near, METH_VARARGS, "free_near(start, end, name, rows, marker, points, us, ue, f_rows, f_s, f_e, near)"},
    {"bucket_max", bucket_max, METH_VARARGS, "bucket_max(start, end, rows, bounds, max_len, out, cat, cat_ok, name, name_ok)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cintervals", "The gap engine's interval sweeps", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cintervals(void) { return PyModule_Create(&module); }
