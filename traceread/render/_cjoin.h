/* What the _cjoin module's files share: a short cell is moved as a fixed SLACK bytes (inlined moves, not
 * a call to memcpy per cell) wherever SLACK bytes can be read from its source, into a result allocated
 * SLACK bytes longer and cut to its size at the end. */
#ifndef TRACEREAD_CJOIN_H
#define TRACEREAD_CJOIN_H

#include <Python.h>
#include <string.h>

#define SLACK 16

/* out has SLACK bytes beyond what is written (the result's spare tail). */
static inline char *put(char *out, const char *src, Py_ssize_t m, int roomy) {
    if (roomy && m <= SLACK)
        memcpy(out, src, SLACK); /* a constant size: moves, not a call (a larger one moves more bytes than most cells hold) */
    else
        memcpy(out, src, (size_t)m);
    return out + m;
}

#endif
