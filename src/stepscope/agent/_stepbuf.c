/* stepscope.agent._native.StepBuffer: a rank's step rows, kept as C values.
 *
 * The hooks' fast path (agent/_native.c) ends a step by writing its values
 * here: no tuple and no float objects a step. The writer thread then takes all
 * rows at once as the steps columns' final Arrow buffers (agent/_writer.py), in
 * one call that holds the GIL for microseconds and never releases it. Building
 * the same columns with numpy took ~20 calls, each of which may hand the GIL to
 * the training thread and back: ~20 sleeps of the training thread a flush
 * (BENCHMARKS.md, "GIL handoffs"). agent/_stepbuf.py is the same in Python, for
 * builds without a compiler; tests/test_stepbuf.py checks both give the same
 * bytes.
 */
#include "_stepbuf.h"

#include <stdint.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    Py_ssize_t n, cap;
    double (*v)[SB_FLOATS];
    long long *step;
    unsigned char *phase, *profiled;
    PyObject *marks; /* a list of n device marks once a step had some, else NULL */
} StepBuffer;

static PyTypeObject *StepBuffer_type;
static const char *PHASES[] = {"train", "eval"};

int
stepbuf_check(PyObject *o)
{
    return o != NULL && Py_IS_TYPE(o, StepBuffer_type);
}

static int
grow(StepBuffer *b)
{
    Py_ssize_t cap = b->cap ? b->cap * 2 : 1024;
    void *v = PyMem_Realloc(b->v, cap * sizeof *b->v);
    if (v != NULL) {
        b->v = v;
        v = PyMem_Realloc(b->step, cap * sizeof *b->step);
    }
    if (v != NULL) {
        b->step = v;
        v = PyMem_Realloc(b->phase, cap);
    }
    if (v != NULL) {
        b->phase = v;
        v = PyMem_Realloc(b->profiled, cap);
    }
    if (v == NULL) { /* what was grown keeps its rows; cap stays the smallest */
        PyErr_NoMemory();
        return -1;
    }
    b->profiled = v;
    b->cap = cap;
    return 0;
}

/* A step's device marks, or None for a step without any (None, or an empty list). */
static int
has_marks(PyObject *marks)
{
    return marks != Py_None && !(PyList_Check(marks) && PyList_GET_SIZE(marks) == 0);
}

static int
add_mark(StepBuffer *b, PyObject *marks)
{
    if (!has_marks(marks)) {
        marks = Py_None;
    }
    while (b->marks == NULL) {
        if (marks == Py_None) {
            return 0; /* no device timing so far: nothing kept */
        }
        /* The list's allocation may run the garbage collector, whose finalizers may
         * let the writer thread take the rows meanwhile (Python 3.11): keep the list
         * only if nothing changed, else build it again. */
        Py_ssize_t n = b->n;
        PyObject *list = PyList_New(n);
        if (list == NULL) {
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyList_SET_ITEM(list, i, Py_NewRef(Py_None));
        }
        if (b->marks == NULL && b->n == n) {
            b->marks = list;
        }
        else {
            Py_DECREF(list);
        }
    }
    return PyList_Append(b->marks, marks);
}

int
stepbuf_add(PyObject *buf, int phase, long long step, const double values[SB_FLOATS],
            int profiled, PyObject *marks)
{
    StepBuffer *b = (StepBuffer *)buf;
    if ((b->n == b->cap && grow(b) < 0) || add_mark(b, marks) < 0) {
        return -1;
    }
    memcpy(b->v[b->n], values, sizeof b->v[0]);
    b->step[b->n] = step;
    b->phase[b->n] = (unsigned char)phase;
    b->profiled[b->n] = profiled ? 1 : 0;
    b->n++;
    return 0;
}

static int
phase_code(PyObject *phase)
{
    for (int i = 0; i < 2; i++) {
        if (PyUnicode_Check(phase) && PyUnicode_CompareWithASCIIString(phase, PHASES[i]) == 0) {
            return i;
        }
    }
    PyErr_Format(PyExc_ValueError, "a step's phase is 'train' or 'eval', not %R", phase);
    return -1;
}

/* append(row): one StepRow tuple (the pure-Python recorder's _emit). */
static PyObject *
StepBuffer_append(StepBuffer *b, PyObject *row)
{
    PyObject *phase, *marks;
    long long step;
    double v[SB_FLOATS];
    int profiled;
    if (!PyTuple_Check(row)) {
        PyErr_Format(PyExc_TypeError, "a step row is a StepRow tuple, not %.100s",
                     Py_TYPE(row)->tp_name);
        return NULL;
    }
    if (!PyArg_ParseTuple(row, "OLddddddddpO:StepBuffer.append", &phase, &step, &v[0], &v[1],
                          &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &profiled, &marks)) {
        return NULL;
    }
    int code = phase_code(phase);
    if (code < 0 || stepbuf_add((PyObject *)b, code, step, v, profiled, marks) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------- take() */

static char *
new_column(PyObject *cols, const char *name, Py_ssize_t size)
{
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, size);
    if (bytes == NULL) {
        return NULL;
    }
    int err = PyDict_SetItemString(cols, name, bytes);
    Py_DECREF(bytes);
    return err < 0 ? NULL : PyBytes_AS_STRING(bytes);
}

static int
wall_columns(StepBuffer *b, PyObject *cols, double wall0, double perf0)
{
    double *start = (double *)new_column(cols, "start", b->n * 8);
    double *end = start == NULL ? NULL : (double *)new_column(cols, "end", b->n * 8);
    char *step = end == NULL ? NULL : new_column(cols, "step", b->n * 8);
    if (step == NULL) {
        return -1;
    }
    memcpy(step, b->step, b->n * 8);
    for (Py_ssize_t i = 0; i < b->n; i++) { /* Clock.wall, in the same order */
        start[i] = wall0 + (b->v[i][SB_START] - perf0);
        end[i] = wall0 + (b->v[i][SB_END] - perf0);
    }
    return 0;
}

static const char *PART_NAMES[] = {"data_wait", "forward", "backward", "optimizer", "collective"};
static const int PART_FIELDS[] = {SB_DATA, SB_FORWARD, SB_BACKWARD, SB_OPTIMIZER, SB_COLLECTIVE};

static int
part_columns(StepBuffer *b, PyObject *cols)
{
    float *dur = (float *)new_column(cols, "duration", b->n * 4);
    float *other = dur == NULL ? NULL : (float *)new_column(cols, "other", b->n * 4);
    if (other == NULL) {
        return -1;
    }
    for (int k = 0; k < 5; k++) {
        float *out = (float *)new_column(cols, PART_NAMES[k], b->n * 4);
        if (out == NULL) {
            return -1;
        }
        for (Py_ssize_t i = 0; i < b->n; i++) {
            out[i] = (float)b->v[i][PART_FIELDS[k]];
        }
    }
    for (Py_ssize_t i = 0; i < b->n; i++) {
        const double *v = b->v[i];
        double d = v[SB_END] - v[SB_START];
        /* "other": what the four parts and collectives outside them leave (never < 0) */
        double busy = v[SB_DATA] + v[SB_FORWARD] + v[SB_BACKWARD] + v[SB_OPTIMIZER];
        double rest = d - (busy + v[SB_OUTSIDE]);
        dur[i] = (float)d;
        other[i] = (float)(rest > 0.0 ? rest : (rest == rest ? 0.0 : rest)); /* np.maximum */
    }
    return 0;
}

static int
flag_columns(StepBuffer *b, PyObject *cols)
{
    Py_ssize_t chars = 0;
    for (Py_ssize_t i = 0; i < b->n; i++) {
        chars += (Py_ssize_t)strlen(PHASES[b->phase[i]]);
    }
    int32_t *offsets = (int32_t *)new_column(cols, "phase_offsets", (b->n + 1) * 4);
    char *data = offsets == NULL ? NULL : new_column(cols, "phase_data", chars);
    unsigned char *bits = data == NULL ? NULL : (unsigned char *)new_column(cols, "profiled", (b->n + 7) / 8);
    if (bits == NULL) {
        return -1;
    }
    memset(bits, 0, (b->n + 7) / 8);
    offsets[0] = 0;
    for (Py_ssize_t i = 0; i < b->n; i++) {
        const char *p = PHASES[b->phase[i]];
        size_t len = strlen(p);
        memcpy(data + offsets[i], p, len);
        offsets[i + 1] = offsets[i] + (int32_t)len;
        bits[i / 8] |= (unsigned char)(b->profiled[i] << (i % 8)); /* Arrow: LSB first */
    }
    return 0;
}

/* take(wall0, perf0): every row so far as the steps columns' buffers, or None. */
static PyObject *
StepBuffer_take(StepBuffer *b, PyObject *args)
{
    double wall0, perf0;
    if (!PyArg_ParseTuple(args, "dd:StepBuffer.take", &wall0, &perf0)) {
        return NULL;
    }
    if (b->n == 0) {
        Py_RETURN_NONE;
    }
    PyObject *cols = PyDict_New(), *n = PyLong_FromSsize_t(b->n);
    if (cols == NULL || n == NULL || PyDict_SetItemString(cols, "n", n) < 0 ||
        wall_columns(b, cols, wall0, perf0) < 0 || part_columns(b, cols) < 0 ||
        flag_columns(b, cols) < 0 ||
        PyDict_SetItemString(cols, "marks", b->marks ? b->marks : Py_None) < 0) {
        Py_XDECREF(n);
        Py_XDECREF(cols);
        return NULL; /* the rows stay, for the next take */
    }
    Py_DECREF(n);
    b->n = 0;
    Py_CLEAR(b->marks);
    return cols;
}

static Py_ssize_t
StepBuffer_len(StepBuffer *b)
{
    return b->n;
}

static int
StepBuffer_traverse(StepBuffer *b, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(b));
    Py_VISIT(b->marks);
    return 0;
}

static int
StepBuffer_clear(StepBuffer *b)
{
    Py_CLEAR(b->marks);
    return 0;
}

static void
StepBuffer_dealloc(StepBuffer *b)
{
    PyTypeObject *tp = Py_TYPE(b);
    PyObject_GC_UnTrack(b);
    StepBuffer_clear(b);
    PyMem_Free(b->v);
    PyMem_Free(b->step);
    PyMem_Free(b->phase);
    PyMem_Free(b->profiled);
    tp->tp_free((PyObject *)b);
    Py_DECREF(tp);
}

static PyMethodDef StepBuffer_methods[] = {
    {"append", (PyCFunction)StepBuffer_append, METH_O, "Add one StepRow tuple."},
    {"take", (PyCFunction)StepBuffer_take, METH_VARARGS,
     "take(wall0, perf0) -> the steps columns' buffers of every row so far (emptied), or None."},
    {NULL},
};

static PyType_Slot StepBuffer_slots[] = {
    {Py_tp_doc, "A rank's step rows as C values (agent/_stepbuf.c)."},
    {Py_tp_methods, StepBuffer_methods},
    {Py_sq_length, StepBuffer_len},
    {Py_tp_traverse, StepBuffer_traverse},
    {Py_tp_clear, StepBuffer_clear},
    {Py_tp_dealloc, StepBuffer_dealloc},
    {Py_tp_new, PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec StepBuffer_spec = {
    "stepscope.agent._native.StepBuffer",
    sizeof(StepBuffer),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    StepBuffer_slots,
};

int
stepbuf_add_type(PyObject *m)
{
    PyObject *tp = PyType_FromSpec(&StepBuffer_spec);
    if (tp == NULL) {
        return -1;
    }
    StepBuffer_type = (PyTypeObject *)tp;
    return PyModule_AddObjectRef(m, "StepBuffer", tp);
}
