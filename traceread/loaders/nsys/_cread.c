/* The nsys loader's compiled reader of integer columns (see cread.py for the contract; read.py's
 * ``_fetch`` is the exact Python twin).
 *
 * It steps one prepared SELECT over a rowid slice and writes each row's int64 values into a buffer
 * the caller allocated, with the GIL released, so the loader's reader threads step in parallel and
 * no Python int is made per value. It needs no SQLite headers or library at build time: the few
 * functions it calls are resolved with dlsym from the libsqlite3 that Python's own sqlite3 module
 * loaded (the path comes from Python). It reads only the plain case: a value that is not an
 * INTEGER (NULL, REAL, TEXT, BLOB), a row past the buffer, or any SQLite error makes ``fetch``
 * return -1 and the caller reads that slice with Python's sqlite3, which gives the same values or
 * raises the same error as it always has. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

/* SQLite's stable C API (https://sqlite.org/c3ref), declared here instead of included. */
typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
typedef struct sqlite3_value sqlite3_value;
#define SQLITE_OK 0
#define SQLITE_INTEGER 1
#define SQLITE_ROW 100
#define SQLITE_DONE 101

typedef int (*open_v2_fn)(const char *, sqlite3 **, int, const char *);
typedef int (*close_v2_fn)(sqlite3 *);
typedef int (*prepare_v2_fn)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
typedef int (*bind_int64_fn)(sqlite3_stmt *, int, int64_t);
typedef int (*stmt_fn)(sqlite3_stmt *);
typedef sqlite3_value *(*column_value_fn)(sqlite3_stmt *, int);
typedef int (*value_type_fn)(sqlite3_value *);
typedef int64_t (*value_int64_fn)(sqlite3_value *);

static struct {
    open_v2_fn open_v2;
    close_v2_fn close_v2;
    prepare_v2_fn prepare_v2;
    bind_int64_fn bind_int64;
    stmt_fn step, reset, finalize, clear_bindings, column_count;
    column_value_fn column_value;
    value_type_fn value_type;
    value_int64_fn value_int64;
} api;
static int api_ready = 0;

static PyObject *bind_library(PyObject *self, PyObject *args) {
    const char *path;
    (void)self;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        PyErr_Format(PyExc_OSError, "cannot load %s: %s", path, why ? why : "unknown error");
        return NULL;
    }
#define RESOLVE(field, name)                                                             \
    do {                                                                                 \
        *(void **)(&api.field) = dlsym(lib, name);                                       \
        if (api.field == NULL) {                                                         \
            PyErr_Format(PyExc_OSError, "%s has no symbol %s", path, name);              \
            return NULL;                                                                 \
        }                                                                                \
    } while (0)
    /* The library stays loaded (Python's sqlite3 module holds it too): no dlclose. */
    RESOLVE(open_v2, "sqlite3_open_v2");
    RESOLVE(close_v2, "sqlite3_close_v2");
    RESOLVE(prepare_v2, "sqlite3_prepare_v2");
    RESOLVE(bind_int64, "sqlite3_bind_int64");
    RESOLVE(step, "sqlite3_step");
    RESOLVE(reset, "sqlite3_reset");
    RESOLVE(finalize, "sqlite3_finalize");
    RESOLVE(clear_bindings, "sqlite3_clear_bindings");
    RESOLVE(column_count, "sqlite3_column_count");
    RESOLVE(column_value, "sqlite3_column_value");
    RESOLVE(value_type, "sqlite3_value_type");
    RESOLVE(value_int64, "sqlite3_value_int64");
#undef RESOLVE
    api_ready = 1;
    Py_RETURN_NONE;
}

/* One connection (used by one thread at a time) and its last prepared statement. */
typedef struct {
    sqlite3 *db;
    sqlite3_stmt *stmt;
    char *sql;
} Conn;

static const char CAPSULE[] = "traceread.loaders.nsys._cread.Conn";

static void conn_release(Conn *c) {
    if (c->stmt) api.finalize(c->stmt);
    if (c->db) api.close_v2(c->db);
    free(c->sql);
    c->stmt = NULL, c->db = NULL, c->sql = NULL;
}

static void conn_destroy(PyObject *cap) {
    Conn *c = (Conn *)PyCapsule_GetPointer(cap, CAPSULE);
    if (c == NULL) return;
    conn_release(c);
    free(c);
}

static PyObject *open_conn(PyObject *self, PyObject *args) {
    const char *name;
    int flags;
    (void)self;
    if (!PyArg_ParseTuple(args, "yi", &name, &flags)) return NULL;
    if (!api_ready) {
        PyErr_SetString(PyExc_RuntimeError, "no SQLite library bound");
        return NULL;
    }
    Conn *c = calloc(1, sizeof(Conn));
    if (c == NULL) return PyErr_NoMemory();
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = api.open_v2(name, &c->db, flags, NULL);
    Py_END_ALLOW_THREADS
    if (rc != SQLITE_OK) {
        conn_release(c);
        free(c);
        PyErr_Format(PyExc_OSError, "sqlite3_open_v2 failed (%d)", rc);
        return NULL;
    }
    PyObject *cap = PyCapsule_New(c, CAPSULE, conn_destroy);
    if (cap == NULL) {
        conn_release(c);
        free(c);
    }
    return cap;
}

static PyObject *close_conn(PyObject *self, PyObject *args) {
    PyObject *cap;
    (void)self;
    if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
    Conn *c = (Conn *)PyCapsule_GetPointer(cap, CAPSULE);
    if (c == NULL) return NULL;
    conn_release(c);
    Py_RETURN_NONE;
}

/* fetch(conn, sql, lo, hi, out) -> rows written into ``out``, or -1: read this slice another way (see
 * the file's comment). ``out`` is int64, column-major: as many columns as the statement has, each
 * len(out) / columns long, so each column comes out contiguous. */
static PyObject *fetch(PyObject *self, PyObject *args) {
    PyObject *cap;
    const char *sql;
    Py_ssize_t sql_len;
    long long lo, hi;
    Py_buffer out;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oy#LLw*", &cap, &sql, &sql_len, &lo, &hi, &out)) return NULL;
    Conn *c = (Conn *)PyCapsule_GetPointer(cap, CAPSULE);
    if (c == NULL || c->db == NULL) {
        PyBuffer_Release(&out);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "fetch: connection is closed");
        return NULL;
    }
    Py_ssize_t rows = -1;
    Py_BEGIN_ALLOW_THREADS
    do {
        if (c->stmt == NULL || c->sql == NULL || strlen(c->sql) != (size_t)sql_len ||
            memcmp(c->sql, sql, (size_t)sql_len) != 0) {
            if (c->stmt) api.finalize(c->stmt);
            free(c->sql);
            c->stmt = NULL;
            c->sql = malloc((size_t)sql_len + 1);
            if (c->sql == NULL) break;
            memcpy(c->sql, sql, (size_t)sql_len);
            c->sql[sql_len] = '\0';
            if (api.prepare_v2(c->db, c->sql, (int)sql_len + 1, &c->stmt, NULL) != SQLITE_OK || c->stmt == NULL) {
                if (c->stmt) api.finalize(c->stmt);
                c->stmt = NULL;
                free(c->sql);
                c->sql = NULL;
                break;
            }
        }
        sqlite3_stmt *st = c->stmt;
        int ncol = api.column_count(st);
        if (ncol <= 0 || api.bind_int64(st, 1, (int64_t)lo) != SQLITE_OK ||
            api.bind_int64(st, 2, (int64_t)hi) != SQLITE_OK) {
            api.reset(st);
            break;
        }
        int64_t *buf = (int64_t *)out.buf;
        Py_ssize_t cap_rows = out.len / (Py_ssize_t)(8 * ncol), n = 0;
        int rc, plain = 1;
        while ((rc = api.step(st)) == SQLITE_ROW) {
            if (n >= cap_rows) { plain = 0; break; }
            for (int j = 0; j < ncol; j++) {
                /* One lookup of the value, then its type and integer (column_type + column_int64
                 * looked it up twice and checked for a malloc failure each time). */
                sqlite3_value *v = api.column_value(st, j);
                if (api.value_type(v) != SQLITE_INTEGER) { plain = 0; break; }
                buf[j * cap_rows + n] = api.value_int64(v);
            }
            if (!plain) break;
            n++;
        }
        api.reset(st);
        api.clear_bindings(st);
        if (plain && rc == SQLITE_DONE) rows = n;
    } while (0);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    return PyLong_FromSsize_t(rows);
}

static PyMethodDef methods[] = {
    {"bind_library", bind_library, METH_VARARGS, "bind_library(path): resolve SQLite's functions in the library at path"},
    {"open", open_conn, METH_VARARGS, "open(filename, flags) -> connection (sqlite3_open_v2)"},
    {"close", close_conn, METH_VARARGS, "close(connection)"},
    {"fetch", fetch, METH_VARARGS, "fetch(conn, sql, lo, hi, out) -> rows written, or -1 (read it another way)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cread", "nsys integer column reader", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cread(void) { return PyModule_Create(&module); }
