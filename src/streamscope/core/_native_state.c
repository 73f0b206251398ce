/* The native core's stage state tracker (twin: _twin_state.py): a stage's state changes as
   STATE records, the heartbeat of a busy stage, and the service times of a few of its items.

   In: a stage's transitions (idle, busy, blocked on input or output) and the items it takes
   and passes on. Out: STATE records in its ring; for one item at most every
   SERVICE_SPACING_NS, a DURATION record (the ns it was busy on the item: from taking it to
   taking the next, its waits left out; a source's from one put to the next) and two SAMPLE
   records (the thread's CPU ns while it was busy on it, then its ns runnable but waiting for a
   core over the item, the OS's run queue; -1: not read). Included by _native.c. */

/* ==== StateTracker ========================================================================= */

enum { NO_STATE = -1, IDLE = 0, BUSY = 1, BLOCKED_IN = 2, BLOCKED_OUT = 3 };

typedef struct {
    PyObject_HEAD
    RingObject *ring; /* NULL: tracks without recording */
    long state;
    PyObject *name;
    int64_t beat_ns; /* host ns of its last record, for the heartbeat */
    /* service sampling: items taken; whether an item is being timed, its busy ns and the
       thread's CPU ns while busy so far, and since when (ns, CPU ns) busy; when the next may
       be timed; whether the thread's CPU time is the worker's (not an event loop's task's) */
    int64_t takes;
    int open, cpu;
    int64_t busy_ns, busy_since, cpu_ns, cpu_since, next_ns;
    /* the thread's schedstat, open (-1: not yet), for the thread it was opened in; its run
       queue's ns when the timed item began (-1: not read) */
    int qfd;
    long qtid;
    int64_t runq0;
} TrackerObject;

/* A stage that keeps going without ever waiting changes no state; it restates BUSY at most
   this often when it takes or passes on an item, so a stage busy without finishing anything
   (a stall) is told from one that finishes items all the time. */
#define HEARTBEAT_NS 100000000LL

/* An item's service is timed at most this often per worker (ns): each timed item costs two
   reads of the thread's CPU clock and two records, so at most a thousand a second whatever
   the items take; a few thousand over a run are what the what-if model draws from. */
#define SERVICE_SPACING_NS 1000000LL
/* ... by each of this process's first SERVICE_WORKERS workers; past them, each worker is timed
   proportionally less often (every SERVICE_SPACING_NS * workers / SERVICE_WORKERS), so that a
   process times at most some SERVICE_WORKERS thousand items a second however many threads it
   has: a program of 500 threads, each timing nearly every item, made 55,000 timing reads a
   second (three system calls each), a tenth of its work window. */
#define SERVICE_WORKERS 8
/* This process's trackers that record (their workers), counted under the interpreter's lock. */
static int64_t g_recording_trackers = 0;

static inline int64_t service_spacing(void)
{
    int64_t n = g_recording_trackers;
    return n > SERVICE_WORKERS ? SERVICE_SPACING_NS * n / SERVICE_WORKERS : SERVICE_SPACING_NS;
}

static inline int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

/* The calling thread's ns runnable but waiting for a core so far (the second field of
   /proc/thread-self/schedstat, kept open per thread: one pread), -1 where the OS does not say. */
static inline int64_t tracker_runq(TrackerObject *t)
{
    long tid = (long)syscall(SYS_gettid);
    if (t->qfd < 0 || t->qtid != tid) {
        if (t->qfd >= 0)
            close(t->qfd);
        t->qfd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        t->qtid = tid;
        if (t->qfd < 0)
            return -1;
    }
    char buf[96];
    ssize_t n = pread(t->qfd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *p = strchr(buf, ' ');
    return p ? strtoll(p + 1, NULL, 10) : -1;
}

static inline long tracker_set(TrackerObject *t, long s)
{
    long prev = t->state;
    if (s != prev) {
        t->state = s;
        if (t->ring != NULL)
            ring_record_now(t->ring, s);
        if ((s == IDLE || s == NO_STATE) && t->qfd > 0) { /* its work over for now: no descriptor held meanwhile
                                          (a program of a thousand threads holds none idle) */
            close(t->qfd);
            t->qfd = -1;
        }
        if (t->open && (prev == BUSY || s == BUSY)) {
            int64_t now = host_ns(), cpu = t->cpu ? thread_cpu_ns() : 0;
            if (prev == BUSY) {
                t->busy_ns += now - t->busy_since;
                t->cpu_ns += cpu - t->cpu_since;
            } else {
                t->busy_since = now;
                t->cpu_since = cpu;
            }
        }
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

/* An item's service time, two records kept both or neither; none refused (a sample not taken
   is no record lost, and the state records' refusals stay theirs). */
static inline void tracker_service(TrackerObject *t, int64_t busy, int64_t cpu, int64_t runq)
{
    RingObject *g = t->ring;
    if (g->gen != g_fork_gen || !ring_room(g, (uint64_t)ld(&g->hdr[H_W]), 3))
        return;
    int64_t ticks = clock_now(g->clock);
    ring_store(g, KIND_DURATION, g->probe, ticks, busy);
    ring_store(g, KIND_SAMPLE, g->probe, ticks, cpu);
    ring_store(g, KIND_SAMPLE, g->probe, ticks, runq);
}

/* An item boundary: a take (``took``), or a put of a worker that never took (a source's item
   made). Heartbeat; close the item being timed, or start timing this one if it is time. */
static inline void tracker_item(TrackerObject *t, int took)
{
    if (t == NULL || t->ring == NULL)
        return;
    if (took)
        t->takes++;
    else if (t->takes) {
        tracker_heartbeat(t);
        return;
    }
    int64_t now = host_ns();
    if (t->state == BUSY && now - t->beat_ns >= HEARTBEAT_NS) {
        t->beat_ns = now;
        ring_record_now(t->ring, BUSY);
    }
    if (t->open) {
        int64_t busy = t->busy_ns, cpu = t->cpu ? t->cpu_ns : -1;
        if (t->state == BUSY) {
            busy += now - t->busy_since;
            if (t->cpu)
                cpu += thread_cpu_ns() - t->cpu_since;
        }
        int64_t q = t->cpu && t->runq0 >= 0 ? tracker_runq(t) : -1;
        t->open = 0;
        t->next_ns = now + service_spacing();
        tracker_service(t, busy, cpu, q >= t->runq0 && t->runq0 >= 0 ? q - t->runq0 : -1);
    }
    if (!t->open && now >= t->next_ns) {
        t->open = 1;
        t->busy_ns = t->cpu_ns = 0;
        t->busy_since = now;
        t->cpu_since = t->cpu ? thread_cpu_ns() : 0;
        t->runq0 = t->cpu ? tracker_runq(t) : -1;
    }
}

static int Tracker_init(TrackerObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"name", "ring", "cpu", NULL};
    PyObject *name, *ring = Py_None;
    int cpu = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|Op", names, &name, &ring, &cpu))
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
    g_recording_trackers += (ring != Py_None) - (self->ring != NULL);
    Py_XSETREF(self->ring, ring == Py_None ? NULL : (RingObject *)Py_NewRef(ring));
    self->state = 0;
    self->cpu = cpu;
    self->takes = 0;
    self->open = 0;
    self->next_ns = 0;
    if (self->qfd > 0)
        close(self->qfd);
    self->qfd = -1;
    self->runq0 = -1;
    return 0;
}

static void Tracker_dealloc(TrackerObject *self)
{
    if (self->qfd > 0)
        close(self->qfd);
    if (self->ring != NULL)
        g_recording_trackers--;
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

static PyObject *Tracker_took(TrackerObject *self, PyObject *unused)
{
    tracker_item(self, 1);
    Py_RETURN_NONE;
}

static PyObject *Tracker_gave(TrackerObject *self, PyObject *unused)
{
    tracker_item(self, 0);
    Py_RETURN_NONE;
}

static PyMethodDef Tracker_methods[] = {
    {"set", (PyCFunction)Tracker_set, METH_O,
     "Enter a state; records only real changes; returns the previous state."},
    {"heartbeat", (PyCFunction)Tracker_heartbeat, METH_NOARGS,
     "An item was taken or passed on without waiting: restate BUSY if the last record is "
     "a tenth of a second old."},
    {"took", (PyCFunction)Tracker_took, METH_NOARGS,
     "An item was taken: heartbeat, and the item boundary of its service sampling."},
    {"gave", (PyCFunction)Tracker_gave, METH_NOARGS,
     "An item was passed on: heartbeat, and an item boundary for a worker that takes none "
     "(a source)."},
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
