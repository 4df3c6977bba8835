/* stepscope.agent._native: the per-step hooks' common case, in C.
 *
 * The hooks (agent/frameworks/_torch_hooks.py, agent/frameworks/_torch_timers.py) run several times per training
 * step on the training thread. In Python each costs an interpreter frame and a
 * few dozen bytecodes: ~17,000 instructions a step in all (benchmarks/
 * step_instructions.py). Here the same common case (no device timer, no
 * data-loader window, no deferred call, first boundary passed) costs a C call
 * and two clock reads; every other case calls the Python code it replaces, so
 * this file holds no logic of its own beyond that fast path (docs/design.md).
 *
 * RecorderState holds StepRecorder's per-step fields as C values, readable and
 * writable from Python as ordinary attributes. Hook wraps one callable (or is
 * one torch hook) and is a method descriptor, so it can replace a class's
 * __call__ or __next__. Nothing here releases the GIL or keeps a pointer that
 * is not owned: a hook holds references to everything it uses.
 */
#include "_stepbuf.h"

#include <structmember.h>

/* The clock of time.perf_counter(), so C and Python times mix. */
static double
now(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyTime_t t;
    (void)PyTime_PerfCounterRaw(&t);
    return PyTime_AsSecondsDouble(t);
#else
    return _PyTime_AsSecondsDouble(_PyTime_GetPerfCounter());
#endif
}

static PyObject *str_train, *str_eval, *str_take, *str_append, *str_doc, *str_module,
    *str_training, *str_on_backward_root;

/* ---------------------------------------------------------------- state */

typedef struct {
    PyObject_HEAD
    double data, forward, backward, optimizer, collective, collective_outside;
    double boundary, opt_start, fwd_start;
    long long train_steps, eval_steps, due_train, due_eval;
    int opt_depth, root_depth;
    char has_boundary, in_forward, profiled, poke, hooks_pending;
    PyObject *rows, *on_batch, *deferred, *device, *worker_fetch, *listeners;
} State;

#define IS_NONE(o) ((o) == NULL || (o) == Py_None)

static int
State_traverse(State *s, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(s));
    Py_VISIT(s->rows);
    Py_VISIT(s->on_batch);
    Py_VISIT(s->deferred);
    Py_VISIT(s->device);
    Py_VISIT(s->worker_fetch);
    Py_VISIT(s->listeners);
    return 0;
}

static int
State_clear(State *s)
{
    Py_CLEAR(s->rows);
    Py_CLEAR(s->on_batch);
    Py_CLEAR(s->deferred);
    Py_CLEAR(s->device);
    Py_CLEAR(s->worker_fetch);
    Py_CLEAR(s->listeners);
    return 0;
}

static void
State_dealloc(State *s)
{
    PyTypeObject *tp = Py_TYPE(s);
    PyObject_GC_UnTrack(s);
    State_clear(s);
    tp->tp_free((PyObject *)s);
    Py_DECREF(tp);
}

/* The step's row as a StepRow tuple appended to ``rows`` (a deque, in tests). */
static int
append_tuple(State *s, PyObject *phase, long long step, const double values[SB_FLOATS],
             PyObject *marks)
{
    PyObject *row = PyTuple_New(12);
    if (row == NULL) {
        return -1;
    }
    PyTuple_SET_ITEM(row, 0, Py_NewRef(phase));
    PyTuple_SET_ITEM(row, 11, Py_NewRef(marks));
    PyTuple_SET_ITEM(row, 10, Py_NewRef(s->profiled ? Py_True : Py_False));
    PyObject *n = PyLong_FromLongLong(step);
    if (n == NULL) {
        Py_DECREF(row);
        return -1;
    }
    PyTuple_SET_ITEM(row, 1, n);
    for (int i = 0; i < SB_FLOATS; i++) {
        PyObject *f = PyFloat_FromDouble(values[i]);
        if (f == NULL) {
            Py_DECREF(row);
            return -1;
        }
        PyTuple_SET_ITEM(row, 2 + i, f);
    }
    PyObject *r = s->rows == NULL ? NULL : PyObject_CallMethodOneArg(s->rows, str_append, row);
    Py_DECREF(row);
    if (r == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "step recorder has no rows");
        }
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* The step's row: straight into a StepBuffer (the agent's), else as a tuple. */
static int
store_row(State *s, PyObject *phase, long long step, double t)
{
    PyObject *marks;
    if (IS_NONE(s->device)) {
        marks = Py_NewRef(Py_None);
    }
    else if ((marks = PyObject_CallMethodNoArgs(s->device, str_take)) == NULL) {
        return -1;
    }
    double values[SB_FLOATS] = {s->has_boundary ? s->boundary : t, t, s->data, s->forward,
                                s->backward, s->optimizer, s->collective, s->collective_outside};
    int err;
    if (stepbuf_check(s->rows) && (phase == str_train || phase == str_eval)) {
        int code = phase == str_train ? SB_TRAIN : SB_EVAL;
        err = stepbuf_add(s->rows, code, step, values, s->profiled, marks);
    }
    else {
        err = append_tuple(s, phase, step, values, marks);
    }
    Py_DECREF(marks);
    return err;
}

/* One row per step (agent/_recorder.py: StepRow), then the listeners if due. */
static int
emit(State *s, PyObject *phase, long long step, double t)
{
    if (store_row(s, phase, step, t) < 0) {
        return -1;
    }
    s->boundary = t;
    s->has_boundary = 1;
    s->data = s->forward = s->backward = s->optimizer = 0.0;
    s->collective = s->collective_outside = 0.0;
    long long due = phase == str_train ? s->due_train : s->due_eval;
    if (s->poke || step + 1 >= due) {
        PyObject *r = PyObject_CallMethod((PyObject *)s, "_call_listeners", "OLd", phase, step, t);
        if (r == NULL) {
            return -1;
        }
        Py_DECREF(r);
    }
    return 0;
}

static PyObject *
State_emit(State *s, PyObject *args)
{
    PyObject *phase;
    long long step;
    double t;
    if (!PyArg_ParseTuple(args, "ULd:_emit", &phase, &step, &t)) {
        return NULL;
    }
    /* The fast path compares the phase by identity: use the interned strings. */
    if (PyUnicode_Compare(phase, str_train) == 0) {
        phase = str_train;
    }
    else if (PyUnicode_Compare(phase, str_eval) == 0) {
        phase = str_eval;
    }
    if (emit(s, phase, step, t) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
State_get_boundary(State *s, void *closure)
{
    if (!s->has_boundary) {
        Py_RETURN_NONE;
    }
    return PyFloat_FromDouble(s->boundary);
}

static int
State_set_boundary(State *s, PyObject *value, void *closure)
{
    if (value == NULL || value == Py_None) {
        s->has_boundary = 0;
        return 0;
    }
    double v = PyFloat_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    s->boundary = v;
    s->has_boundary = 1;
    return 0;
}

#define DOUBLE(name, field) {name, T_DOUBLE, offsetof(State, field), 0, NULL}
#define OBJECT(name, field) {name, T_OBJECT, offsetof(State, field), 0, NULL}
static PyMemberDef State_members[] = {
    DOUBLE("data", data),
    DOUBLE("forward", forward),
    DOUBLE("backward", backward),
    DOUBLE("optimizer", optimizer),
    DOUBLE("collective", collective),
    DOUBLE("collective_outside", collective_outside),
    DOUBLE("_opt_start", opt_start),
    DOUBLE("_fwd_start", fwd_start),
    {"train_steps", T_LONGLONG, offsetof(State, train_steps), 0, NULL},
    {"eval_steps", T_LONGLONG, offsetof(State, eval_steps), 0, NULL},
    {"_due_train", T_LONGLONG, offsetof(State, due_train), 0, NULL},
    {"_due_eval", T_LONGLONG, offsetof(State, due_eval), 0, NULL},
    {"_opt_depth", T_INT, offsetof(State, opt_depth), 0, NULL},
    {"_root_depth", T_INT, offsetof(State, root_depth), 0, NULL},
    {"_in_forward", T_BOOL, offsetof(State, in_forward), 0, NULL},
    {"profiled", T_BOOL, offsetof(State, profiled), 0, NULL},
    {"poke", T_BOOL, offsetof(State, poke), 0, NULL},
    {"_hooks_pending", T_BOOL, offsetof(State, hooks_pending), 0, NULL},
    OBJECT("rows", rows),
    OBJECT("on_batch", on_batch),
    OBJECT("deferred", deferred),
    OBJECT("device", device),
    OBJECT("worker_fetch", worker_fetch),
    OBJECT("listeners", listeners),
    {NULL},
};

static PyGetSetDef State_getset[] = {
    {"boundary", (getter)State_get_boundary, (setter)State_set_boundary,
     "Start of the current step (perf_counter seconds), None before the first.", NULL},
    {NULL},
};

static PyMethodDef State_methods[] = {
    {"_emit", (PyCFunction)State_emit, METH_VARARGS, "Record one step row."},
    {NULL},
};

static PyType_Slot State_slots[] = {
    {Py_tp_doc, "StepRecorder's per-step fields, held as C values."},
    {Py_tp_traverse, State_traverse},
    {Py_tp_clear, State_clear},
    {Py_tp_dealloc, State_dealloc},
    {Py_tp_members, State_members},
    {Py_tp_getset, State_getset},
    {Py_tp_methods, State_methods},
    {Py_tp_new, PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec State_spec = {
    "stepscope.agent._native.RecorderState",
    sizeof(State),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    State_slots,
};

static PyTypeObject *State_type;

/* ----------------------------------------------------------------- hooks */

enum { NEXT, BACKWARD, CALL, OPT_PRE, OPT_POST, KINDS };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int kind;
    State *rec;
    PyObject *original; /* NEXT, BACKWARD, CALL: the wrapped callable */
    PyObject *slow;     /* NEXT, BACKWARD: the Python wrapper, for the whole call;
                           CALL, OPT_PRE, OPT_POST: the recorder's callback, f(t) */
    PyObject *slow2;    /* CALL: f(t, training); OPT_POST: f(), while hooks_pending */
    PyObject *extra;    /* CALL: tuple of root modules; BACKWARD: the StepTimers */
    PyObject *grad_enabled; /* CALL: torch.is_grad_enabled */
    PyObject *record;   /* f(exception): the fault boundary */
} Hook;

/* A failure of ours (not of the wrapped call) goes to the fault boundary. */
static void
record_fault(Hook *h)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        return; /* KeyboardInterrupt, SystemExit: leave them raised */
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL) { /* as `except ... as exc` sees it: with its frames */
        PyException_SetTraceback(value, tb);
    }
    PyObject *r = IS_NONE(h->record) ? NULL : PyObject_CallOneArg(h->record, value);
    Py_XDECREF(r);
    if (r == NULL && PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear(); /* the boundary itself failed: nothing left to tell */
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* f(t) or f(t, training): a Python callback that guards itself. */
static int
call_slow(PyObject *f, double t, int with_training, int training)
{
    PyObject *args[2] = {PyFloat_FromDouble(t), training ? Py_True : Py_False};
    if (args[0] == NULL) {
        return -1;
    }
    PyObject *r = PyObject_Vectorcall(f, args, with_training ? 2 : 1, NULL);
    Py_DECREF(args[0]);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

static PyObject *
next_call(Hook *h, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    State *s = h->rec;
    if (!(IS_NONE(s->on_batch) && IS_NONE(s->deferred) && s->has_boundary)) {
        return PyObject_Vectorcall(h->slow, args, nargsf, kwnames);
    }
    double t0 = now();
    PyObject *r = PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    s->data += now() - t0; /* also when it raises (StopIteration ends an epoch) */
    return r;
}

static PyObject *
backward_call(Hook *h, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    State *s = h->rec;
    int fast = IS_NONE(s->device) && s->has_boundary;
    if (fast) {
        PyObject *root = PyObject_GetAttr(h->extra, str_on_backward_root);
        if (root == NULL) {
            return NULL;
        }
        fast = root == Py_None;
        Py_DECREF(root);
    }
    if (!fast) {
        return PyObject_Vectorcall(h->slow, args, nargsf, kwnames);
    }
    double t0 = now();
    PyObject *r = PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    s->backward += now() - t0;
    return r;
}

static int
is_root(Hook *h, PyObject *module)
{
    Py_ssize_t n = PyTuple_GET_SIZE(h->extra);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyTuple_GET_ITEM(h->extra, i) == module) {
            return 1;
        }
    }
    return 0;
}

/* module.training and torch.is_grad_enabled(); -1 with an exception set. */
static int
is_training(Hook *h, PyObject *module)
{
    PyObject *flag = PyObject_GetAttr(module, str_training);
    if (flag == NULL) {
        return -1;
    }
    int training = PyObject_IsTrue(flag);
    Py_DECREF(flag);
    if (training == 1) {
        PyObject *enabled = PyObject_CallNoArgs(h->grad_enabled);
        if (enabled == NULL) {
            return -1;
        }
        training = PyObject_IsTrue(enabled);
        Py_DECREF(enabled);
    }
    return training;
}

static int
forward_end(Hook *h, PyObject *module)
{
    State *s = h->rec;
    double t = now();
    int training = is_training(h, module);
    if (training < 0) { /* ours, not the forward's: a fault, and no row */
        record_fault(h);
        if (PyErr_Occurred()) {
            return -1;
        }
        s->in_forward = 0;
        return 0;
    }
    if (training && IS_NONE(s->device)) {
        s->forward += t - s->fwd_start;
        s->in_forward = 0;
        return 0;
    }
    return call_slow(h->slow2, t, 1, training);
}

static PyObject *
call_call(Hook *h, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    State *s = h->rec;
    PyObject *module = PyVectorcall_NARGS(nargsf) ? args[0] : NULL;
    if (module == NULL || !is_root(h, module)) {
        return PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    }
    Py_INCREF(module); /* args may not outlive the call */
    if (++s->root_depth == 1) {
        double t = now();
        if (IS_NONE(s->deferred) && IS_NONE(s->device) && s->has_boundary) {
            s->fwd_start = t;
            s->in_forward = 1;
        }
        else if (call_slow(h->slow, t, 0, 0) < 0) {
            s->root_depth--;
            Py_DECREF(module);
            return NULL;
        }
    }
    PyObject *r = PyObject_Vectorcall(h->original, args, nargsf, kwnames);
    /* As a `finally:`: the forward's own exception, if any, waits meanwhile. */
    if (--s->root_depth == 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (forward_end(h, module) < 0) {
            Py_CLEAR(r);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
        }
        else {
            PyErr_Restore(type, value, tb);
        }
    }
    Py_DECREF(module);
    return r;
}

static PyObject *
opt_pre_call(Hook *h, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    State *s = h->rec;
    double t = now();
    if (!s->opt_depth && IS_NONE(s->device) && s->has_boundary) {
        s->opt_depth = 1;
        s->opt_start = t;
    }
    else if (call_slow(h->slow, t, 0, 0) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
opt_post_call(Hook *h, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    State *s = h->rec;
    double t = now();
    if (s->opt_depth == 1 && IS_NONE(s->device)) {
        s->opt_depth = 0;
        s->optimizer += t - s->opt_start;
        int failed = emit(s, str_train, s->train_steps, t);
        s->train_steps++;
        if (failed) {
            record_fault(h);
            if (PyErr_Occurred()) {
                return NULL;
            }
        }
    }
    else if (call_slow(h->slow, t, 0, 0) < 0) {
        return NULL;
    }
    /* Root discovery, and a late CUDA start looked for every 256 steps. */
    if (s->hooks_pending || (IS_NONE(s->device) && (s->train_steps & 255) == 1)) {
        PyObject *r = PyObject_CallNoArgs(h->slow2);
        if (r == NULL) {
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
}

static vectorcallfunc calls[KINDS] = {
    (vectorcallfunc)next_call, (vectorcallfunc)backward_call, (vectorcallfunc)call_call,
    (vectorcallfunc)opt_pre_call, (vectorcallfunc)opt_post_call,
};

static int
Hook_init(Hook *h, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"kind", "rec", "original", "slow", "slow2", "extra",
                            "grad_enabled", "record", NULL};
    if (h->vectorcall != NULL) { /* a call in flight may hold the old fields */
        PyErr_SetString(PyExc_TypeError, "Hook is initialised once");
        return -1;
    }
    int kind;
    PyObject *rec, *original = Py_None, *slow = Py_None, *slow2 = Py_None,
                   *extra = Py_None, *grad = Py_None, *record = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iO!|OOOOOO:Hook", names, &kind, State_type,
                                     &rec, &original, &slow, &slow2, &extra, &grad, &record)) {
        return -1;
    }
    int needs_original = kind == NEXT || kind == BACKWARD || kind == CALL;
    if (kind < 0 || kind >= KINDS || (needs_original && !PyCallable_Check(original)) ||
        !PyCallable_Check(slow) || ((kind == CALL || kind == OPT_POST) && !PyCallable_Check(slow2)) ||
        (kind == CALL && (!PyTuple_Check(extra) || !PyCallable_Check(grad))) ||
        (kind == BACKWARD && extra == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "Hook: arguments do not fit its kind");
        return -1;
    }
    h->kind = kind;
    h->vectorcall = calls[kind];
    Py_XSETREF(h->rec, (State *)Py_NewRef(rec));
    Py_XSETREF(h->original, Py_NewRef(original));
    Py_XSETREF(h->slow, Py_NewRef(slow));
    Py_XSETREF(h->slow2, Py_NewRef(slow2));
    Py_XSETREF(h->extra, Py_NewRef(extra));
    Py_XSETREF(h->grad_enabled, Py_NewRef(grad));
    Py_XSETREF(h->record, Py_NewRef(record));
    return 0;
}

static PyObject *
Hook_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Hook *h = (Hook *)PyType_GenericNew(type, args, kwds);
    if (h != NULL) {
        h->vectorcall = NULL; /* not callable until __init__ has run */
    }
    return (PyObject *)h;
}

static PyObject *
Hook_call(Hook *h, PyObject *args, PyObject *kwargs)
{
    if (h->vectorcall == NULL) {
        PyErr_SetString(PyExc_TypeError, "Hook was not initialised");
        return NULL;
    }
    return PyVectorcall_Call((PyObject *)h, args, kwargs);
}

/* Bound like a function when it replaces a method (instance.__next__). */
static PyObject *
Hook_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

/* Everything else (__name__, __doc__, __module__, ...) is the wrapped callable's. */
static PyObject *
Hook_getattro(Hook *h, PyObject *name)
{
    /* The type's own __doc__ and __module__ would hide the wrapped callable's. */
    if (!IS_NONE(h->original) && (PyUnicode_Compare(name, str_doc) == 0 ||
                                  PyUnicode_Compare(name, str_module) == 0)) {
        return PyObject_GetAttr(h->original, name);
    }
    PyObject *r = PyObject_GenericGetAttr((PyObject *)h, name);
    if (r == NULL && !IS_NONE(h->original) && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        r = PyObject_GetAttr(h->original, name);
    }
    return r;
}

static int
Hook_traverse(Hook *h, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(h));
    Py_VISIT(h->rec);
    Py_VISIT(h->original);
    Py_VISIT(h->slow);
    Py_VISIT(h->slow2);
    Py_VISIT(h->extra);
    Py_VISIT(h->grad_enabled);
    Py_VISIT(h->record);
    return 0;
}

static int
Hook_clear(Hook *h)
{
    h->vectorcall = NULL;
    Py_CLEAR(h->rec);
    Py_CLEAR(h->original);
    Py_CLEAR(h->slow);
    Py_CLEAR(h->slow2);
    Py_CLEAR(h->extra);
    Py_CLEAR(h->grad_enabled);
    Py_CLEAR(h->record);
    return 0;
}

static void
Hook_dealloc(Hook *h)
{
    PyTypeObject *tp = Py_TYPE(h);
    PyObject_GC_UnTrack(h);
    Hook_clear(h);
    tp->tp_free((PyObject *)h);
    Py_DECREF(tp);
}

static PyMemberDef Hook_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(Hook, original), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Hook, vectorcall), READONLY, NULL},
    {"kind", T_INT, offsetof(Hook, kind), READONLY, NULL},
    {NULL},
};

static PyType_Slot Hook_slots[] = {
    {Py_tp_doc, "A timed callable or torch hook: Hook(kind, rec, original, slow, slow2, "
                "extra, grad_enabled, record)."},
    {Py_tp_new, Hook_new},
    {Py_tp_init, Hook_init},
    {Py_tp_call, Hook_call},
    {Py_tp_descr_get, Hook_get},
    {Py_tp_getattro, Hook_getattro},
    {Py_tp_traverse, Hook_traverse},
    {Py_tp_clear, Hook_clear},
    {Py_tp_dealloc, Hook_dealloc},
    {Py_tp_members, Hook_members},
    {0, NULL},
};

static PyType_Spec Hook_spec = {
    "stepscope.agent._native.Hook",
    sizeof(Hook),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
        Py_TPFLAGS_METHOD_DESCRIPTOR,
    Hook_slots,
};

/* --------------------------------------------------------------- module */

static int
add_type(PyObject *m, PyType_Spec *spec, PyObject *base, PyTypeObject **out)
{
    PyObject *tp = PyType_FromSpecWithBases(spec, base);
    if (tp == NULL) {
        return -1;
    }
    *out = (PyTypeObject *)tp;
    return PyModule_AddObjectRef(m, strrchr(spec->name, '.') + 1, tp);
}

static int
intern(PyObject **out, const char *s)
{
    *out = PyUnicode_InternFromString(s);
    return *out == NULL ? -1 : 0;
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "stepscope.agent._native",
    "The per-step hooks' common case in C (agent/_native.c).", -1, NULL,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    PyTypeObject *hook_type;
    if (intern(&str_train, "train") || intern(&str_eval, "eval") || intern(&str_take, "take") ||
        intern(&str_append, "append") || intern(&str_doc, "__doc__") || intern(&str_module, "__module__") ||
        intern(&str_training, "training") || intern(&str_on_backward_root, "on_backward_root")) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    if (add_type(m, &State_spec, NULL, &State_type) < 0 ||
        add_type(m, &Hook_spec, NULL, &hook_type) < 0 || stepbuf_add_type(m) < 0 ||
        PyModule_AddIntConstant(m, "NEXT", NEXT) || PyModule_AddIntConstant(m, "BACKWARD", BACKWARD) ||
        PyModule_AddIntConstant(m, "CALL", CALL) || PyModule_AddIntConstant(m, "OPT_PRE", OPT_PRE) ||
        PyModule_AddIntConstant(m, "OPT_POST", OPT_POST)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
