/* The native core's probe ring (twin: _twin_ring.py): one fixed 24-byte record per event into
   a preallocated ring in shared memory (layout: _native_layout.h, from core/rings.py), a full
   ring refusing and counting; function tracing's ENTER/EXIT records.

   In: events from a probe's writer. Out: records in the ring, refusals and sampled costs in its
   header. Included by _native.c. */

/* ==== Ring ================================================================================= */

typedef struct {
    PyObject_HEAD
    Py_buffer view;
    int has_view;
    int64_t *hdr;
    char *slots;
    uint64_t cap, mask, r_cache;
    uint32_t probe, kind;
    uint64_t gen;
    ClockObject *clock;
    /* function tracing: calls open now (their EXITs have room kept), calls per function id */
    int64_t depth;
    int64_t *calls;
    Py_ssize_t ncalls;
} RingObject;

static inline int64_t ld(int64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void st(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

/* A word of the header plus n, wrapping as unsigned: the words are shared memory that another
   process may have overwritten with anything, and a signed overflow is no defined result. */
static inline void bump(int64_t *p, int64_t n)
{
    st(p, (int64_t)((uint64_t)ld(p) + (uint64_t)n));
}

/* Whether `need` slots are free at write position w, given read position r. Slots in use are
   never more than the capacity; positions that say otherwise were overwritten (the monitor
   finds it, counts it and moves the read position on): the ring counts as full till then. */
static inline int ring_fits(uint64_t cap, uint64_t w, uint64_t r, uint64_t need)
{
    uint64_t used = w - r;
    return used <= cap && cap - used >= need;
}

static inline int ring_room(RingObject *g, uint64_t w, uint64_t need)
{
    if (ring_fits(g->cap, w, g->r_cache, need))
        return 1;
    g->r_cache = (uint64_t)__atomic_load_n(&g->hdr[H_R], __ATOMIC_ACQUIRE);
    return ring_fits(g->cap, w, g->r_cache, need);
}

/* One record, or one counted refusal. Returns 1 when kept. */
static inline int ring_store(RingObject *g, uint32_t kind, uint32_t probe, int64_t ticks,
                             int64_t value)
{
    int64_t *h = g->hdr;
    uint64_t w = (uint64_t)ld(&h[H_W]);
    if (!ring_room(g, w, 1)) {
        bump(&h[H_DROPPED], 1);
        st(&h[H_REFUSED], value);
        return 0;
    }
    char *s = g->slots + (w & g->mask) * RECORD_BYTES;
    ((uint32_t *)s)[0] = kind;
    ((uint32_t *)s)[1] = probe;
    ((int64_t *)s)[1] = ticks;
    ((int64_t *)s)[2] = value;
    __atomic_store_n(&h[H_W], (int64_t)(w + 1), __ATOMIC_RELEASE);
    return 1;
}

static inline int ring_sampled(RingObject *g)
{
    return (((uint64_t)ld(&g->hdr[H_W]) + (uint64_t)ld(&g->hdr[H_DROPPED])) & SAMPLE_MASK) == 0;
}

static inline void ring_cost(RingObject *g, int64_t t0)
{
    int64_t c = host_ns() - t0 - g_clock_gap_ns;
    bump(&g->hdr[H_COST_NS], c > 0 ? c : 0);
    bump(&g->hdr[H_COST_N], 1);
}

/* A full ring refuses before the clock is read: when the monitor falls behind, the
   application pays less, not more. */
static inline int ring_refused(RingObject *g, int64_t value)
{
    if (ring_room(g, (uint64_t)ld(&g->hdr[H_W]), 1))
        return 0;
    bump(&g->hdr[H_DROPPED], 1);
    st(&g->hdr[H_REFUSED], value); /* a channel's last sequence number: its totals stay exact */
    return 1;
}

/* The probe path: clock read, record, and one event in 1024 timed while the run goes on. */
static inline int ring_record_now(RingObject *g, int64_t value)
{
    if (g->gen != g_fork_gen)
        return 0; /* a ring of the parent, seen in a forked child: not this process's */
    if (!ring_sampled(g)) {
        if (ring_refused(g, value))
            return 0;
        return ring_store(g, g->kind, g->probe, clock_now(g->clock), value);
    }
    int64_t t0 = host_ns();
    int ok = !ring_refused(g, value) && ring_store(g, g->kind, g->probe, clock_now(g->clock), value);
    ring_cost(g, t0);
    return ok;
}

/* An insertion that its item carries the time of (a network link whose consumer pairs each
   item's two ends): the clock is read whether the record is kept or refused, and returned. */
static inline int64_t ring_record_stamp(RingObject *g, int64_t value)
{
    int sampled = ring_sampled(g);
    int64_t t0 = sampled ? host_ns() : 0;
    int64_t ticks = clock_now(g->clock);
    if (g->gen == g_fork_gen) {
        ring_store(g, g->kind, g->probe, ticks, value);
        if (sampled)
            ring_cost(g, t0);
    }
    return ticks;
}

static inline int ring_record_at(RingObject *g, int64_t ticks, int64_t value)
{
    if (g->gen != g_fork_gen)
        return 0;
    if (!ring_sampled(g))
        return ring_store(g, g->kind, g->probe, ticks, value);
    int64_t t0 = host_ns();
    int ok = ring_store(g, g->kind, g->probe, ticks, value);
    ring_cost(g, t0);
    return ok;
}

static int Ring_init(RingObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"buffer", "clock", NULL};
    PyObject *buf, *clock;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!", names, &buf, &ClockType, &clock))
        return -1;
    if (self->has_view) {
        PyErr_SetString(PyExc_RuntimeError, "a ring is initialised once");
        return -1;
    }
    if (PyObject_GetBuffer(buf, &self->view, PyBUF_WRITABLE) < 0)
        return -1;
    self->has_view = 1;
    if (self->view.len < HEADER_BYTES || ((uintptr_t)self->view.buf & 7)) {
        PyErr_SetString(PyExc_ValueError, "a ring needs an 8-byte aligned buffer of at least "
                                          "its 256-byte header");
        return -1;
    }
    int64_t *h = (int64_t *)self->view.buf;
    if ((h[H_MAGIC] & 0xFFFFFFFFLL) != RING_MAGIC) {
        PyErr_SetString(PyExc_ValueError, "not a streamscope ring (bad magic): make it with "
                                          "streamscope.core.rings");
        return -1;
    }
    int64_t cap = h[H_CAPACITY];
    if (cap < 0 || (cap & (cap - 1)) || cap > (self->view.len - HEADER_BYTES) / RECORD_BYTES) {
        PyErr_SetString(PyExc_ValueError, "ring capacity is not a power of two, or the buffer "
                                          "is too small for it");
        return -1;
    }
    self->hdr = h;
    self->slots = (char *)self->view.buf + HEADER_BYTES;
    self->cap = (uint64_t)cap;
    self->mask = cap ? (uint64_t)cap - 1 : 0;
    self->r_cache = (uint64_t)__atomic_load_n(&h[H_R], __ATOMIC_ACQUIRE);
    self->probe = (uint32_t)h[H_PROBE];
    self->kind = (uint32_t)h[H_KIND];
    self->gen = g_fork_gen;
    Py_INCREF(clock);
    Py_XSETREF(self->clock, (ClockObject *)clock);
    return 0;
}

static void Ring_dealloc(RingObject *self)
{
    if (self->has_view)
        PyBuffer_Release(&self->view);
    Py_XDECREF(self->clock);
    PyMem_Free(self->calls);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define RING_READY(g)                                                                        \
    if (!(g)->has_view || (g)->clock == NULL) {                                              \
        PyErr_SetString(PyExc_RuntimeError, "ring not initialised");                         \
        return NULL;                                                                         \
    }

static PyObject *Ring_record(RingObject *self, PyObject *arg)
{
    int64_t v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    RING_READY(self);
    return PyBool_FromLong(ring_record_now(self, v));
}

static PyObject *Ring_record_stamp(RingObject *self, PyObject *arg)
{
    int64_t v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    RING_READY(self);
    return PyLong_FromLongLong((long long)ring_record_stamp(self, v));
}

static PyObject *Ring_record_at(RingObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "record_at(ticks, value)");
        return NULL;
    }
    int64_t t = PyLong_AsLongLong(args[0]);
    if (t == -1 && PyErr_Occurred())
        return NULL;
    int64_t v = PyLong_AsLongLong(args[1]);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    RING_READY(self);
    return PyBool_FromLong(ring_record_at(self, t, v));
}

static PyObject *Ring_write(RingObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "write(kind, probe, ticks, value)");
        return NULL;
    }
    long long a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = PyLong_AsLongLong(args[i]);
        if (a[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    if (a[0] < 0 || a[0] > 0xFFFFFFFFLL || a[1] < 0 || a[1] > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_OverflowError, "kind and probe are 32-bit unsigned");
        return NULL;
    }
    RING_READY(self);
    if (self->gen != g_fork_gen)
        Py_RETURN_FALSE;
    return PyBool_FromLong(ring_store(self, (uint32_t)a[0], (uint32_t)a[1], a[2], a[3]));
}

static PyObject *Ring_free(RingObject *self, PyObject *unused)
{
    RING_READY(self);
    uint64_t w = (uint64_t)ld(&self->hdr[H_W]);
    ring_room(self, w, self->cap ? self->cap : 1);
    uint64_t used = w - self->r_cache;
    return PyLong_FromUnsignedLongLong(used <= self->cap ? self->cap - used : 0);
}

static PyObject *Ring_refuse(RingObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long n = 1;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "refuse(n=1)");
        return NULL;
    }
    if (nargs == 1 && ((n = PyLong_AsLongLong(args[0])) == -1 && PyErr_Occurred()))
        return NULL;
    RING_READY(self);
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "refusals only count up");
        return NULL;
    }
    if (self->gen == g_fork_gen)
        bump(&self->hdr[H_DROPPED], n);
    Py_RETURN_NONE;
}

/* A counter register: total += n, and when it changed (the monitor reads both). */
static PyObject *Ring_add(RingObject *self, PyObject *arg)
{
    int64_t n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    RING_READY(self);
    if (self->gen == g_fork_gen) {
        st(&self->hdr[H_LAST], clock_now(self->clock));
        __atomic_store_n(&self->hdr[H_TOTAL],
                         (int64_t)((uint64_t)ld(&self->hdr[H_TOTAL]) + (uint64_t)n),
                         __ATOMIC_RELEASE);
    }
    Py_RETURN_NONE;
}

static int ensure_calls(RingObject *g, int64_t fid)
{
    if (fid < g->ncalls)
        return 0;
    Py_ssize_t n = g->ncalls ? g->ncalls : 64;
    while (n <= fid)
        n *= 2;
    int64_t *c = PyMem_Realloc(g->calls, (size_t)n * sizeof(int64_t));
    if (c == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(c + g->ncalls, 0, (size_t)(n - g->ncalls) * sizeof(int64_t));
    g->calls = c;
    g->ncalls = n;
    return 0;
}

/* Function tracing: an ENTER is kept only while the ring has room for it, its EXIT and the
   EXITs of every call open now, so the stream stays nested; a refused ENTER counts its EXIT as
   refused too. Calls are counted per function, kept or refused. */
static PyObject *Ring_enter(RingObject *self, PyObject *arg)
{
    int64_t fid = PyLong_AsLongLong(arg);
    if (fid == -1 && PyErr_Occurred())
        return NULL;
    RING_READY(self);
    if (fid <= 0) {
        PyErr_SetString(PyExc_ValueError, "function ids start at 1");
        return NULL;
    }
    if (ensure_calls(self, fid) < 0)
        return NULL;
    self->calls[fid]++;
    if (self->gen != g_fork_gen)
        Py_RETURN_FALSE;
    int64_t *h = self->hdr;
    int sampled = ring_sampled(self);
    int64_t t0 = sampled ? host_ns() : 0;
    uint64_t w = (uint64_t)ld(&h[H_W]);
    int ok = ring_room(self, w, (uint64_t)self->depth + 2);
    if (ok) {
        ring_store(self, KIND_ENTER, self->probe, clock_now(self->clock), fid);
        self->depth++;
    } else {
        bump(&h[H_DROPPED], 2);
    }
    if (sampled)
        ring_cost(self, t0);
    return PyBool_FromLong(ok);
}

static PyObject *Ring_exit(RingObject *self, PyObject *arg)
{
    int64_t fid = PyLong_AsLongLong(arg);
    if (fid == -1 && PyErr_Occurred())
        return NULL;
    RING_READY(self);
    if (self->gen != g_fork_gen)
        Py_RETURN_NONE;
    int sampled = ring_sampled(self);
    int64_t t0 = sampled ? host_ns() : 0;
    ring_store(self, KIND_EXIT, self->probe, clock_now(self->clock), fid);
    if (self->depth > 0)
        self->depth--;
    if (sampled)
        ring_cost(self, t0);
    Py_RETURN_NONE;
}

static PyObject *Ring_calls(RingObject *self, PyObject *unused)
{
    PyObject *out = PyList_New(self->ncalls);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < self->ncalls; i++) {
        PyObject *v = PyLong_FromLongLong(self->calls[i]);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

#define HDR_GETTER(name, word)                                                               \
    static PyObject *Ring_get_##name(RingObject *self, void *c)                              \
    {                                                                                        \
        RING_READY(self);                                                                    \
        return PyLong_FromLongLong(__atomic_load_n(&self->hdr[word], __ATOMIC_ACQUIRE));     \
    }
HDR_GETTER(written, H_W)
HDR_GETTER(dropped, H_DROPPED)
HDR_GETTER(read, H_R)
HDR_GETTER(total, H_TOTAL)
HDR_GETTER(last, H_LAST)
HDR_GETTER(cost_ns, H_COST_NS)
HDR_GETTER(cost_n, H_COST_N)
HDR_GETTER(refused, H_REFUSED)

static PyObject *Ring_get_probe(RingObject *self, void *c) { return PyLong_FromUnsignedLong(self->probe); }
static PyObject *Ring_get_kind(RingObject *self, void *c) { return PyLong_FromUnsignedLong(self->kind); }
static PyObject *Ring_get_capacity(RingObject *self, void *c) { return PyLong_FromUnsignedLongLong(self->cap); }
static PyObject *Ring_get_depth(RingObject *self, void *c) { return PyLong_FromLongLong(self->depth); }
static PyObject *Ring_get_clock(RingObject *self, void *c)
{
    PyObject *clk = self->clock ? (PyObject *)self->clock : Py_None;
    Py_INCREF(clk);
    return clk;
}

static PyMethodDef Ring_methods[] = {
    {"record", (PyCFunction)Ring_record, METH_O,
     "Record ``value`` at the clock's reading now; False (and counted) when full."},
    {"record_stamp", (PyCFunction)Ring_record_stamp, METH_O,
     "Record ``value`` now and return the clock's reading (read even when refused)."},
    {"record_at", (PyCFunction)(void (*)(void))Ring_record_at, METH_FASTCALL,
     "Record ``value`` at ``ticks`` read by the caller."},
    {"write", (PyCFunction)(void (*)(void))Ring_write, METH_FASTCALL,
     "Write a whole record (kind, probe, ticks, value), no clock read."},
    {"free", (PyCFunction)Ring_free, METH_NOARGS, "Slots free now (a single writer's view)."},
    {"refuse", (PyCFunction)(void (*)(void))Ring_refuse, METH_FASTCALL,
     "Count ``n`` refusals without writing."},
    {"add", (PyCFunction)Ring_add, METH_O, "Add to the counter register, stamping the change."},
    {"enter", (PyCFunction)Ring_enter, METH_O, "A traced call begins; False when refused."},
    {"exit", (PyCFunction)Ring_exit, METH_O, "A kept traced call ends."},
    {"calls", (PyCFunction)Ring_calls, METH_NOARGS, "Traced calls by function id, so far."},
    {NULL}};

static PyGetSetDef Ring_getset[] = {
    {"written", (getter)Ring_get_written, NULL, "records written", NULL},
    {"dropped", (getter)Ring_get_dropped, NULL, "records refused", NULL},
    {"read", (getter)Ring_get_read, NULL, "records drained by the reader", NULL},
    {"total", (getter)Ring_get_total, NULL, "the counter register", NULL},
    {"last", (getter)Ring_get_last, NULL, "ticks of the register's last change", NULL},
    {"cost_ns", (getter)Ring_get_cost_ns, NULL, "sampled ns spent recording", NULL},
    {"cost_n", (getter)Ring_get_cost_n, NULL, "events sampled", NULL},
    {"refused", (getter)Ring_get_refused, NULL, "value of the latest refused record", NULL},
    {"probe", (getter)Ring_get_probe, NULL, "the probe id", NULL},
    {"kind", (getter)Ring_get_kind, NULL, "the record kind of record()", NULL},
    {"capacity", (getter)Ring_get_capacity, NULL, "records the ring holds", NULL},
    {"depth", (getter)Ring_get_depth, NULL, "traced calls open now", NULL},
    {"clock", (getter)Ring_get_clock, NULL, "the clock record() reads", NULL},
    {NULL}};

static PyTypeObject RingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streamscope.core._native.Ring",
    .tp_basicsize = sizeof(RingObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The writing side of one probe ring in a shared mapping (single writer).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Ring_init,
    .tp_dealloc = (destructor)Ring_dealloc,
    .tp_methods = Ring_methods,
    .tp_getset = Ring_getset,
};
