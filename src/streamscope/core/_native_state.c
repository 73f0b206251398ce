/* The native core's stage state tracker (twin: _twin_state.py): a stage's state changes as
   STATE records, and the heartbeat of a busy stage.

   In: a stage's transitions (idle, busy, blocked on input or output). Out: STATE records in its
   ring. Included by _native.c. */

/* ==== StateTracker ========================================================================= */

enum { IDLE = 0, BUSY = 1, BLOCKED_IN = 2, BLOCKED_OUT = 3 };

typedef struct {
    PyObject_HEAD
    RingObject *ring; /* NULL: tracks without recording */
    long state;
    PyObject *name;
    int64_t beat_ns; /* host ns of its last record, for the heartbeat */
} TrackerObject;

/* A stage that keeps going without ever waiting changes no state; it restates BUSY at most
   this often when it takes or passes on an item, so a stage busy without finishing anything
   (a stall) is told from one that finishes items all the time. */
#define HEARTBEAT_NS 100000000LL

static inline long tracker_set(TrackerObject *t, long s)
{
    long prev = t->state;
    if (s != prev) {
        t->state = s;
        if (t->ring != NULL)
            ring_record_now(t->ring, s);
    }
    return prev;
}

/* The thread took or passed on an item without waiting: restate BUSY if it has been a while. */
static inline void tracker_heartbeat(TrackerObject *t)
{
    if (t == NULL || t->ring == NULL || t->state != BUSY)
        return;
    int64_t now = host_ns();
    if (now - t->beat_ns >= HEARTBEAT_NS) {
        t->beat_ns = now;
        ring_record_now(t->ring, BUSY);
    }
}

static int Tracker_init(TrackerObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"name", "ring", NULL};
    PyObject *name, *ring = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|O", names, &name, &ring))
        return -1;
    if (ring != Py_None && !PyObject_TypeCheck(ring, &RingType)) {
        PyErr_SetString(PyExc_TypeError, "ring must be a Ring or None");
        return -1;
    }
    if (ring != Py_None && !((RingObject *)ring)->has_view) {
        PyErr_SetString(PyExc_ValueError, "ring not initialised");
        return -1;
    }
    Py_INCREF(name);
    Py_XSETREF(self->name, name);
    Py_XSETREF(self->ring, ring == Py_None ? NULL : (RingObject *)Py_NewRef(ring));
    self->state = 0;
    return 0;
}

static void Tracker_dealloc(TrackerObject *self)
{
    Py_XDECREF(self->ring);
    Py_XDECREF(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Tracker_set(TrackerObject *self, PyObject *arg)
{
    long s = PyLong_AsLong(arg);
    if (s == -1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(tracker_set(self, s));
}

static PyObject *Tracker_get_state(TrackerObject *self, void *c) { return PyLong_FromLong(self->state); }
static PyObject *Tracker_get_ring(TrackerObject *self, void *c)
{
    PyObject *r = self->ring ? (PyObject *)self->ring : Py_None;
    return Py_NewRef(r);
}
static PyObject *Tracker_get_name(TrackerObject *self, void *c)
{
    return Py_NewRef(self->name ? self->name : Py_None);
}

static PyObject *Tracker_heartbeat(TrackerObject *self, PyObject *unused)
{
    tracker_heartbeat(self);
    Py_RETURN_NONE;
}

static PyMethodDef Tracker_methods[] = {
    {"set", (PyCFunction)Tracker_set, METH_O,
     "Enter a state; records only real changes; returns the previous state."},
    {"heartbeat", (PyCFunction)Tracker_heartbeat, METH_NOARGS,
     "An item was taken or passed on without waiting: restate BUSY if the last record is "
     "a tenth of a second old."},
    {NULL}};

static PyGetSetDef Tracker_getset[] = {
    {"state", (getter)Tracker_get_state, NULL, "the current state", NULL},
    {"ring", (getter)Tracker_get_ring, NULL, "where changes are recorded", NULL},
    {"name", (getter)Tracker_get_name, NULL, "the stage", NULL},
    {NULL}};

static PyTypeObject TrackerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streamscope.core._native.StateTracker",
    .tp_basicsize = sizeof(TrackerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A stage's state (idle, busy, blocked_in, blocked_out); each change one record.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Tracker_init,
    .tp_dealloc = (destructor)Tracker_dealloc,
    .tp_methods = Tracker_methods,
    .tp_getset = Tracker_getset,
};

static inline TrackerObject *bound_tracker(void)
{
    return (TrackerObject *)PyThread_tss_get(&g_tracker_key);
}
