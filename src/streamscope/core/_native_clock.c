/* The native core's clocks (twin: _twin_clock.py): the host's monotonic clock, an emulated
   device clock (rate, offset, drift, steps, tick) and a manual one for tests.

   In: the clock's spec. Out: readings in the clock's own ticks. Included by _native.c. */

/* ==== Clock ================================================================================ */

enum { CLOCK_HOST = 0, CLOCK_EMULATED = 1, CLOCK_MANUAL = 2 };

typedef struct {
    PyObject_HEAD
    int kind;
    int64_t epoch;
    double c0, c1, c2, step_at, step, tick, rate_at, rate_step;
    int64_t manual;
} ClockObject;

/* Exactly timebase.emulated.EmulatedClock.now_ticks, operation for operation (built with
   -ffp-contract=off so that no multiply-add is fused and the results agree bit for bit). */
static inline int64_t emulated_at(const ClockObject *c, int64_t host)
{
    double tau = (double)(host - c->epoch);
    double d = c->c0 + tau * (c->c1 + tau * c->c2);
    if (tau >= c->step_at)
        d += c->step;
    if (tau >= c->rate_at)
        d += (tau - c->rate_at) * c->rate_step;
    return (int64_t)floor(d / c->tick);
}

static inline int64_t clock_now(const ClockObject *c)
{
    if (c->kind == CLOCK_HOST)
        return host_ns();
    if (c->kind == CLOCK_EMULATED)
        return emulated_at(c, host_ns());
    return c->manual;
}

static int Clock_init(ClockObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"kind", "epoch_ns", "c0", "c1", "c2", "step_at", "step",
                            "tick_ns", "start", "rate_at", "rate_step", NULL};
    const char *kind = "host";
    long long epoch = 0, start = 0;
    double c0 = 0.0, c1 = 1.0, c2 = 0.0, step_at = INFINITY, step = 0.0, tick = 1.0;
    double rate_at = INFINITY, rate_step = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|s$LddddddLdd", names, &kind, &epoch, &c0, &c1,
                                     &c2, &step_at, &step, &tick, &start, &rate_at, &rate_step))
        return -1;
    if (strcmp(kind, "host") == 0)
        self->kind = CLOCK_HOST;
    else if (strcmp(kind, "emulated") == 0)
        self->kind = CLOCK_EMULATED;
    else if (strcmp(kind, "manual") == 0)
        self->kind = CLOCK_MANUAL;
    else {
        PyErr_Format(PyExc_ValueError, "clock kind must be host, emulated or manual, not '%s'",
                     kind);
        return -1;
    }
    if (!(tick > 0.0)) {
        PyErr_SetString(PyExc_ValueError, "tick_ns must be > 0");
        return -1;
    }
    self->epoch = epoch;
    self->c0 = c0;
    self->c1 = c1;
    self->c2 = c2;
    self->step_at = step_at;
    self->step = step;
    self->tick = tick;
    self->manual = start;
    self->rate_at = rate_at;
    self->rate_step = rate_step;
    return 0;
}

static PyObject *Clock_now(ClockObject *self, PyObject *unused)
{
    return PyLong_FromLongLong(clock_now(self));
}

static PyObject *Clock_ticks_at(ClockObject *self, PyObject *arg)
{
    long long host = PyLong_AsLongLong(arg);
    if (host == -1 && PyErr_Occurred())
        return NULL;
    if (self->kind == CLOCK_HOST)
        return PyLong_FromLongLong(host);
    if (self->kind == CLOCK_EMULATED)
        return PyLong_FromLongLong(emulated_at(self, host));
    return PyLong_FromLongLong(self->manual);
}

static PyObject *Clock_set(ClockObject *self, PyObject *arg)
{
    long long t = PyLong_AsLongLong(arg);
    if (t == -1 && PyErr_Occurred())
        return NULL;
    if (self->kind != CLOCK_MANUAL) {
        PyErr_SetString(PyExc_ValueError, "only a manual clock can be set");
        return NULL;
    }
    if (t < self->manual) {
        PyErr_SetString(PyExc_ValueError, "a clock never goes backwards");
        return NULL;
    }
    self->manual = t;
    Py_RETURN_NONE;
}

static PyObject *Clock_advance(ClockObject *self, PyObject *arg)
{
    long long d = PyLong_AsLongLong(arg);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    if (self->kind != CLOCK_MANUAL) {
        PyErr_SetString(PyExc_ValueError, "only a manual clock can be advanced");
        return NULL;
    }
    if (d < 0) {
        PyErr_SetString(PyExc_ValueError, "a clock never goes backwards");
        return NULL;
    }
    self->manual += d;
    return PyLong_FromLongLong(self->manual);
}

static PyObject *Clock_get_kind(ClockObject *self, void *c)
{
    static const char *k[] = {"host", "emulated", "manual"};
    return PyUnicode_FromString(k[self->kind]);
}

static PyObject *Clock_get_tick(ClockObject *self, void *c) { return PyFloat_FromDouble(self->tick); }

static PyMethodDef Clock_methods[] = {
    {"now", (PyCFunction)Clock_now, METH_NOARGS, "The counter now (ticks)."},
    {"ticks_at", (PyCFunction)Clock_ticks_at, METH_O, "The counter at a host monotonic ns."},
    {"set", (PyCFunction)Clock_set, METH_O, "Set a manual clock (never backwards)."},
    {"advance", (PyCFunction)Clock_advance, METH_O, "Advance a manual clock; the new reading."},
    {NULL}};

static PyGetSetDef Clock_getset[] = {
    {"kind", (getter)Clock_get_kind, NULL, "host, emulated or manual", NULL},
    {"tick_ns", (getter)Clock_get_tick, NULL, "nominal ns per tick", NULL},
    {NULL}};

static PyTypeObject ClockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streamscope.core._native.Clock",
    .tp_basicsize = sizeof(ClockObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A tick counter: the host's monotonic ns, an emulated device clock computed from "
              "its parameters, or a manual one (tests).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Clock_init,
    .tp_methods = Clock_methods,
    .tp_getset = Clock_getset,
};
