/* StepBuffer (agent/_stepbuf.c): a rank's step rows kept as C values, shared
 * with the hooks' fast path in agent/_native.c. */
#ifndef STEPSCOPE_STEPBUF_H
#define STEPSCOPE_STEPBUF_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The float fields of a row, in StepRow's order (agent/_recorder.py). */
enum { SB_START, SB_END, SB_DATA, SB_FORWARD, SB_BACKWARD, SB_OPTIMIZER, SB_COLLECTIVE,
       SB_OUTSIDE, SB_FLOATS };

enum { SB_TRAIN, SB_EVAL };

/* Adds the StepBuffer type to module ``m``; 0, or -1 with an exception set. */
int stepbuf_add_type(PyObject *m);

/* 1 if ``o`` is a StepBuffer (exactly: a subclass may override append). */
int stepbuf_check(PyObject *o);

/* Appends one row; ``marks`` is the step's device marks or None. 0, or -1 with
 * an exception set (and no row added). */
int stepbuf_add(PyObject *buf, int phase, long long step, const double values[SB_FLOATS],
                int profiled, PyObject *marks);

#endif
