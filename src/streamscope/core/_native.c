/* streamscope's native probe core: clocks, probe rings, stage state trackers, a bounded FIFO.

   Per event it does only: read the clock, write one fixed 24-byte record into a preallocated
   ring in shared memory, advance the write index. A full ring refuses and counts the refusal.
   Everything else (draining, converting time, reducing) happens in the monitor's process.

   The same API exists in pure Python (streamscope/core/_twin.py); the tests run both side by
   side. Layout of a ring: streamscope/core/rings.py (the header words below must match it).

   Locking rules of the FIFO (it releases the interpreter lock while it waits):
   - nobody blocks on a FIFO's mutex while holding the interpreter lock (LOCK() tries first,
     and releases the interpreter lock before it blocks);
   - a holder of the mutex may wait for the interpreter lock;
   - nothing that can run Python code (a decref, a signal handler) runs with the mutex held. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* ---- ring layout: one definition, core/rings.py, generated into _native_layout.h ---------- */
#include "_native_layout.h"
/* What ring_store writes where, held to that definition as this file compiles. */
_Static_assert(RECORD_KIND_AT == 0 * sizeof(uint32_t), "a record's kind is its first u32");
_Static_assert(RECORD_PROBE_AT == 1 * sizeof(uint32_t), "a record's probe is its second u32");
_Static_assert(RECORD_TICKS_AT == 1 * sizeof(int64_t), "a record's ticks are its second i64");
_Static_assert(RECORD_VALUE_AT == 2 * sizeof(int64_t), "a record's value is its third i64");
_Static_assert(RECORD_BYTES == 3 * sizeof(int64_t), "a record is three i64");

/* ---- process-wide state ------------------------------------------------------------------ */
static PyObject *g_eos = NULL;     /* the end-of-stream marker: not an item, not recorded */
static PyObject *g_aborted = NULL; /* raised by every operation on an aborted FIFO */
static PyObject *g_full = NULL;    /* queue.Full */
static PyObject *g_empty = NULL;   /* queue.Empty */
static unsigned long g_main_ident = 0;
static int64_t g_clock_gap_ns = 0; /* the cost of one clock read, taken off sampled costs */
static volatile uint64_t g_fork_gen = 0;
static Py_tss_t g_tracker_key = Py_tss_NEEDS_INIT;

static void after_fork_child(void) { g_fork_gen++; }

static inline int64_t host_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

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

static inline int ring_room(RingObject *g, uint64_t w, uint64_t need)
{
    if (g->cap - (w - g->r_cache) >= need)
        return 1;
    g->r_cache = (uint64_t)__atomic_load_n(&g->hdr[H_R], __ATOMIC_ACQUIRE);
    return g->cap - (w - g->r_cache) >= need;
}

/* One record, or one counted refusal. Returns 1 when kept. */
static inline int ring_store(RingObject *g, uint32_t kind, uint32_t probe, int64_t ticks,
                             int64_t value)
{
    int64_t *h = g->hdr;
    uint64_t w = (uint64_t)ld(&h[H_W]);
    if (!ring_room(g, w, 1)) {
        st(&h[H_DROPPED], ld(&h[H_DROPPED]) + 1);
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
    return ((uint64_t)(ld(&g->hdr[H_W]) + ld(&g->hdr[H_DROPPED])) & SAMPLE_MASK) == 0;
}

static inline void ring_cost(RingObject *g, int64_t t0)
{
    int64_t c = host_ns() - t0 - g_clock_gap_ns;
    st(&g->hdr[H_COST_NS], ld(&g->hdr[H_COST_NS]) + (c > 0 ? c : 0));
    st(&g->hdr[H_COST_N], ld(&g->hdr[H_COST_N]) + 1);
}

/* A full ring refuses before the clock is read: when the monitor falls behind, the
   application pays less, not more. */
static inline int ring_refused(RingObject *g, int64_t value)
{
    if (ring_room(g, (uint64_t)ld(&g->hdr[H_W]), 1))
        return 0;
    st(&g->hdr[H_DROPPED], ld(&g->hdr[H_DROPPED]) + 1);
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
    if (cap < 0 || (cap & (cap - 1)) ||
        self->view.len < HEADER_BYTES + cap * (Py_ssize_t)RECORD_BYTES) {
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
    return PyLong_FromUnsignedLongLong(self->cap - (w - self->r_cache));
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
        st(&self->hdr[H_DROPPED], ld(&self->hdr[H_DROPPED]) + n);
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
        __atomic_store_n(&self->hdr[H_TOTAL], ld(&self->hdr[H_TOTAL]) + n, __ATOMIC_RELEASE);
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
        st(&h[H_DROPPED], ld(&h[H_DROPPED]) + 2);
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

/* ==== Fifo ================================================================================= */

#define MAIN_SLICE_NS 50000000LL /* the main thread wakes this often to run signal handlers */

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full, all_done;
    PyObject **items;
    Py_ssize_t alloc, first, count, maxsize, unfinished;
    int64_t n_in, n_out;
    int wait_get, wait_put, wait_join;
    int aborted, watch_idle, ready;
    int64_t last_put_ns;
    int64_t *truth;
    Py_ssize_t ntruth, truth_alloc;
    int truth_at; /* 0 none, 1 put, 2 get */
    RingObject *tail, *head;
    int64_t *stamps;    /* keep_stamps: the tail tap's ticks of each waiting item, by slot */
    int64_t last_stamp; /* ... of the item popped last */
} FifoObject;

static inline void LOCK(FifoObject *q)
{
    if (pthread_mutex_trylock(&q->mu) != 0) {
        Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&q->mu);
        Py_END_ALLOW_THREADS
    }
}
static inline void UNLOCK(FifoObject *q) { pthread_mutex_unlock(&q->mu); }

static inline int is_full(FifoObject *q) { return q->maxsize > 0 && q->count >= q->maxsize; }

static int cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, int64_t until)
{
    if (until < 0)
        return pthread_cond_wait(c, m);
    struct timespec ts = {(time_t)(until / 1000000000LL), (long)(until % 1000000000LL)};
    return pthread_cond_timedwait(c, m, &ts);
}

static inline void truth_note(FifoObject *q)
{
    if (q->ntruth == q->truth_alloc) {
        Py_ssize_t n = q->truth_alloc ? 2 * q->truth_alloc : 4096;
        int64_t *t = PyMem_RawRealloc(q->truth, (size_t)n * sizeof(int64_t));
        if (t == NULL)
            return; /* validation data only: the runner notices the shortfall */
        q->truth = t;
        q->truth_alloc = n;
    }
    q->truth[q->ntruth++] = host_ns();
}

/* Append an owned reference (q->mu held; may run without the interpreter lock). */
static int fifo_push(FifoObject *q, PyObject *item)
{
    if (q->count == q->alloc) {
        Py_ssize_t n = q->alloc ? 2 * q->alloc : 16;
        PyObject **a = PyMem_RawMalloc((size_t)n * sizeof(PyObject *));
        int64_t *s = q->stamps ? PyMem_RawMalloc((size_t)n * sizeof(int64_t)) : NULL;
        if (a == NULL || (q->stamps && s == NULL)) {
            PyMem_RawFree(a);
            PyMem_RawFree(s);
            return -1;
        }
        for (Py_ssize_t i = 0; i < q->count; i++) {
            a[i] = q->items[(q->first + i) % q->alloc];
            if (s)
                s[i] = q->stamps[(q->first + i) % q->alloc];
        }
        PyMem_RawFree(q->items);
        q->items = a;
        if (s) {
            PyMem_RawFree(q->stamps);
            q->stamps = s;
        }
        q->alloc = n;
        q->first = 0;
    }
    Py_ssize_t slot = (q->first + q->count) % q->alloc;
    q->items[slot] = item;
    q->count++;
    q->unfinished++;
    if (q->stamps)
        q->stamps[slot] = 0;
    if (item != g_eos) {
        q->n_in++;
        if (q->tail != NULL) {
            if (q->stamps)
                q->stamps[slot] = ring_record_stamp(q->tail, q->n_in);
            else
                ring_record_now(q->tail, q->n_in);
        }
        if (q->truth_at == 1)
            truth_note(q);
    }
    if (q->watch_idle)
        q->last_put_ns = host_ns();
    if (q->wait_get)
        pthread_cond_signal(&q->not_empty);
    return 0;
}

/* Take the first item: an owned reference for the caller (q->mu held). */
static PyObject *fifo_pop(FifoObject *q)
{
    PyObject *item = q->items[q->first];
    if (q->stamps)
        q->last_stamp = q->stamps[q->first];
    q->first = (q->first + 1) % q->alloc;
    q->count--;
    if (item != g_eos) {
        q->n_out++;
        if (q->head != NULL)
            ring_record_now(q->head, q->n_out);
        if (q->truth_at == 2)
            truth_note(q);
    }
    if (q->wait_put)
        pthread_cond_signal(&q->not_full);
    return item;
}

static int Fifo_init(FifoObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"maxsize", NULL};
    Py_ssize_t maxsize = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|n", names, &maxsize))
        return -1;
    if (self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "a FIFO is initialised once");
        return -1;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->not_empty, &ca);
    pthread_cond_init(&self->not_full, &ca);
    pthread_cond_init(&self->all_done, &ca);
    pthread_condattr_destroy(&ca);
    self->maxsize = maxsize; /* as queue.Queue keeps it: <= 0 is unbounded */
    self->alloc = maxsize > 0 ? maxsize + 1 : 16;
    self->items = PyMem_RawMalloc((size_t)self->alloc * sizeof(PyObject *));
    if (self->items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->ready = 1;
    return 0;
}

/* Not tracked by the collector: items move in and out without the interpreter lock, so the
   collector could not walk them safely (a queue that holds itself is never freed). */
static void Fifo_dealloc(FifoObject *self)
{
    if (self->ready) {
        while (self->count > 0) {
            PyObject *o = self->items[self->first];
            self->first = (self->first + 1) % self->alloc;
            self->count--;
            Py_DECREF(o);
        }
        PyMem_RawFree(self->items);
        PyMem_RawFree(self->truth);
        PyMem_RawFree(self->stamps);
        pthread_mutex_destroy(&self->mu);
        pthread_cond_destroy(&self->not_empty);
        pthread_cond_destroy(&self->not_full);
        pthread_cond_destroy(&self->all_done);
    }
    Py_CLEAR(self->tail);
    Py_CLEAR(self->head);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define FIFO_READY(q)                                                                        \
    if (!(q)->ready) {                                                                       \
        PyErr_SetString(PyExc_RuntimeError, "FIFO not initialised");                         \
        return NULL;                                                                         \
    }

/* Parse (block=True, timeout=None) into a deadline: -1 none, else host ns. */
static int parse_block(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                       Py_ssize_t first, int *block, int64_t *deadline)
{
    PyObject *b = NULL, *t = NULL;
    Py_ssize_t npos = nargs - first;
    if (npos > 2) {
        PyErr_SetString(PyExc_TypeError, "too many arguments (block, timeout)");
        return -1;
    }
    if (npos >= 1)
        b = args[first];
    if (npos >= 2)
        t = args[first + 1];
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *k = PyTuple_GET_ITEM(kwnames, i);
            PyObject *v = args[nargs + i];
            if (PyUnicode_CompareWithASCIIString(k, "block") == 0 && b == NULL)
                b = v;
            else if (PyUnicode_CompareWithASCIIString(k, "timeout") == 0 && t == NULL)
                t = v;
            else {
                PyErr_Format(PyExc_TypeError, "unexpected keyword argument %R", k);
                return -1;
            }
        }
    }
    *block = 1;
    if (b != NULL && (*block = PyObject_IsTrue(b)) < 0)
        return -1;
    *deadline = -1;
    if (*block && t != NULL && t != Py_None) {
        double s = PyFloat_AsDouble(t);
        if (s == -1.0 && PyErr_Occurred())
            return -1;
        if (s < 0 || isnan(s)) {
            PyErr_SetString(PyExc_ValueError, "'timeout' must be a non-negative number");
            return -1;
        }
        *deadline = host_ns() + (int64_t)(s * 1e9 > 9e18 ? 9e18 : s * 1e9);
    }
    return 0;
}

/* With the interpreter lock and q->mu held: wait on ``c`` once (woken, timed out at
   ``deadline``, or a slice of the main thread's), and come back with both held. Returns 1 when
   the deadline passed, 0 otherwise, -1 when a signal handler raised (both still held). */
static int fifo_block(FifoObject *q, pthread_cond_t *c, int64_t deadline)
{
    int main = PyThread_get_thread_ident() == g_main_ident;
    int64_t until = deadline;
    if (main) {
        int64_t s = host_ns() + MAIN_SLICE_NS;
        if (until < 0 || s < until)
            until = s;
    }
    PyThreadState *ts = PyEval_SaveThread();
    cond_wait_until(c, &q->mu, until);
    int late = deadline >= 0 && host_ns() >= deadline;
    UNLOCK(q);
    PyEval_RestoreThread(ts);
    int err = main ? PyErr_CheckSignals() : 0;
    LOCK(q);
    return err < 0 ? -1 : late;
}

static PyObject *raise_aborted(FifoObject *q)
{
    PyObject *name = PyObject_GetAttrString((PyObject *)q, "name");
    if (name == NULL) {
        PyErr_Clear();
        name = PyUnicode_FromString("channel");
    }
    PyErr_SetObject(g_aborted ? g_aborted : PyExc_RuntimeError, name);
    Py_XDECREF(name);
    return NULL;
}

/* put: the stage's tracker (bound to its thread) marks blocked_out only while it really waits,
   inside the FIFO's lock, where the wait starts and ends. */
static PyObject *fifo_put(FifoObject *q, PyObject *item, int block, int64_t deadline)
{
    FIFO_READY(q);
    Py_INCREF(item);
    LOCK(q);
    if (q->aborted) {
        UNLOCK(q);
        Py_DECREF(item);
        return raise_aborted(q);
    }
    if (!is_full(q)) {
        int rc = fifo_push(q, item);
        UNLOCK(q);
        if (rc < 0) {
            Py_DECREF(item);
            return PyErr_NoMemory();
        }
        tracker_heartbeat(bound_tracker());
        Py_RETURN_NONE;
    }
    if (!block) {
        UNLOCK(q);
        Py_DECREF(item);
        PyErr_SetNone(g_full ? g_full : PyExc_RuntimeError);
        return NULL;
    }
    TrackerObject *tr = bound_tracker();
    long prev = tr ? tracker_set(tr, BLOCKED_OUT) : 0;
    q->wait_put++;
    int main = PyThread_get_thread_ident() == g_main_ident;
    for (;;) {
        /* Wait without the interpreter lock; move the item in before taking it back. */
        int late = 0, ended = 0;
        PyThreadState *ts = PyEval_SaveThread();
        int64_t slice = main ? host_ns() + MAIN_SLICE_NS : -1;
        while (is_full(q) && !q->aborted) {
            int64_t until = deadline;
            if (slice >= 0 && (until < 0 || slice < until))
                until = slice;
            cond_wait_until(&q->not_full, &q->mu, until);
            if (deadline >= 0 && host_ns() >= deadline && is_full(q)) {
                late = 1;
                break;
            }
            if (slice >= 0 && host_ns() >= slice)
                break;
        }
        int rc = 0;
        if (!q->aborted && !late && !is_full(q)) {
            rc = fifo_push(q, item);
            ended = 1;
        }
        int aborted = q->aborted;
        if (ended || aborted || late)
            q->wait_put--;
        UNLOCK(q);
        PyEval_RestoreThread(ts);
        if (ended || aborted || late) {
            if (tr)
                tracker_set(tr, prev);
            if (ended && rc == 0)
                Py_RETURN_NONE;
            Py_DECREF(item);
            if (ended)
                return PyErr_NoMemory();
            if (aborted)
                return raise_aborted(q);
            PyErr_SetNone(g_full ? g_full : PyExc_RuntimeError);
            return NULL;
        }
        /* A slice of the main thread ended: run signal handlers, then wait on. */
        if (PyErr_CheckSignals() < 0) {
            LOCK(q);
            q->wait_put--;
            UNLOCK(q);
            if (tr)
                tracker_set(tr, prev);
            Py_DECREF(item);
            return NULL;
        }
        LOCK(q);
    }
}

static PyObject *fifo_get(FifoObject *q, int block, int64_t deadline)
{
    FIFO_READY(q);
    LOCK(q);
    if (q->aborted) {
        UNLOCK(q);
        return raise_aborted(q);
    }
    if (q->count > 0) {
        PyObject *item = fifo_pop(q);
        UNLOCK(q);
        tracker_heartbeat(bound_tracker());
        return item;
    }
    if (!block) {
        UNLOCK(q);
        PyErr_SetNone(g_empty ? g_empty : PyExc_RuntimeError);
        return NULL;
    }
    TrackerObject *tr = bound_tracker();
    long prev = tr ? tracker_set(tr, BLOCKED_IN) : 0;
    q->wait_get++;
    int main = PyThread_get_thread_ident() == g_main_ident;
    for (;;) {
        PyObject *item = NULL;
        int late = 0;
        PyThreadState *ts = PyEval_SaveThread();
        int64_t slice = main ? host_ns() + MAIN_SLICE_NS : -1;
        while (q->count == 0 && !q->aborted) {
            int64_t until = deadline;
            if (slice >= 0 && (until < 0 || slice < until))
                until = slice;
            cond_wait_until(&q->not_empty, &q->mu, until);
            if (deadline >= 0 && host_ns() >= deadline && q->count == 0) {
                late = 1;
                break;
            }
            if (slice >= 0 && host_ns() >= slice)
                break;
        }
        if (!q->aborted && q->count > 0)
            item = fifo_pop(q);
        int aborted = q->aborted;
        if (item || aborted || late)
            q->wait_get--;
        UNLOCK(q);
        PyEval_RestoreThread(ts);
        if (item || aborted || late) {
            if (tr)
                tracker_set(tr, prev);
            if (item)
                return item;
            if (aborted)
                return raise_aborted(q);
            PyErr_SetNone(g_empty ? g_empty : PyExc_RuntimeError);
            return NULL;
        }
        if (PyErr_CheckSignals() < 0) {
            LOCK(q);
            q->wait_get--;
            UNLOCK(q);
            if (tr)
                tracker_set(tr, prev);
            return NULL;
        }
        LOCK(q);
    }
}

static PyObject *Fifo_put(FifoObject *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    if (nargs == 1 && kwnames == NULL)
        return fifo_put(self, args[0], 1, -1);
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "put(item, block=True, timeout=None)");
        return NULL;
    }
    int block;
    int64_t deadline;
    if (parse_block(args, nargs, kwnames, 1, &block, &deadline) < 0)
        return NULL;
    return fifo_put(self, args[0], block, deadline);
}

static PyObject *Fifo_get(FifoObject *self, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames)
{
    if (nargs == 0 && kwnames == NULL)
        return fifo_get(self, 1, -1);
    int block;
    int64_t deadline;
    if (parse_block(args, nargs, kwnames, 0, &block, &deadline) < 0)
        return NULL;
    return fifo_get(self, block, deadline);
}

static PyObject *Fifo_put_nowait(FifoObject *self, PyObject *item) { return fifo_put(self, item, 0, -1); }
static PyObject *Fifo_get_nowait(FifoObject *self, PyObject *unused) { return fifo_get(self, 0, -1); }

static PyObject *Fifo_qsize(FifoObject *self, PyObject *unused)
{
    FIFO_READY(self);
    return PyLong_FromSsize_t(self->count);
}
static PyObject *Fifo_empty(FifoObject *self, PyObject *unused)
{
    FIFO_READY(self);
    return PyBool_FromLong(self->count == 0);
}
static PyObject *Fifo_full(FifoObject *self, PyObject *unused)
{
    FIFO_READY(self);
    return PyBool_FromLong(is_full(self));
}

static PyObject *Fifo_task_done(FifoObject *self, PyObject *unused)
{
    FIFO_READY(self);
    LOCK(self);
    if (self->unfinished <= 0) {
        UNLOCK(self);
        PyErr_SetString(PyExc_ValueError, "task_done() called too many times");
        return NULL;
    }
    if (--self->unfinished == 0)
        pthread_cond_broadcast(&self->all_done);
    UNLOCK(self);
    Py_RETURN_NONE;
}

static PyObject *Fifo_join(FifoObject *self, PyObject *unused)
{
    FIFO_READY(self);
    LOCK(self);
    self->wait_join++;
    while (self->unfinished > 0) {
        if (fifo_block(self, &self->all_done, -1) < 0) {
            self->wait_join--;
            UNLOCK(self);
            return NULL;
        }
    }
    self->wait_join--;
    UNLOCK(self);
    Py_RETURN_NONE;
}

/* The link's DMA engine: wait until a transfer may start. The number of slots to take: up to
   the end marker when it is among the first ``bulk``; ``bulk`` when that many wait; what waits
   once nothing was put for ``timeout_s`` (inf: never). */
static PyObject *Fifo_wait_batch(FifoObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    FIFO_READY(self);
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "wait_batch(bulk, timeout_s)");
        return NULL;
    }
    Py_ssize_t bulk = PyLong_AsSsize_t(args[0]);
    if (bulk == -1 && PyErr_Occurred())
        return NULL;
    double tmo = PyFloat_AsDouble(args[1]);
    if (tmo == -1.0 && PyErr_Occurred())
        return NULL;
    if (bulk < 1) {
        PyErr_SetString(PyExc_ValueError, "bulk must be at least 1");
        return NULL;
    }
    int64_t tmo_ns = isinf(tmo) || tmo > 9e9 ? -1 : (int64_t)(tmo * 1e9);
    LOCK(self);
    self->wait_get++;
    for (;;) {
        if (self->aborted) {
            self->wait_get--;
            UNLOCK(self);
            return raise_aborted(self);
        }
        Py_ssize_t n = self->count, m = n < bulk ? n : bulk;
        for (Py_ssize_t i = 0; i < m; i++)
            if (self->items[(self->first + i) % self->alloc] == g_eos) {
                self->wait_get--;
                UNLOCK(self);
                return PyLong_FromSsize_t(i + 1);
            }
        if (n >= bulk) {
            self->wait_get--;
            UNLOCK(self);
            return PyLong_FromSsize_t(bulk);
        }
        int64_t deadline = -1;
        if (n && tmo_ns >= 0) {
            deadline = self->last_put_ns + tmo_ns;
            if (host_ns() >= deadline) {
                self->wait_get--;
                UNLOCK(self);
                return PyLong_FromSsize_t(n);
            }
        }
        if (fifo_block(self, &self->not_empty, deadline) < 0) {
            self->wait_get--;
            UNLOCK(self);
            return NULL;
        }
    }
}

/* Take ``n`` waiting items at once (the link's mover; each removal recorded). */
static PyObject *Fifo_take(FifoObject *self, PyObject *arg)
{
    FIFO_READY(self);
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    PyObject *out = PyList_New(n > 0 ? n : 0);
    if (out == NULL)
        return NULL;
    LOCK(self);
    if (self->aborted || n > self->count) {
        int aborted = self->aborted;
        UNLOCK(self);
        Py_DECREF(out);
        if (aborted)
            return raise_aborted(self);
        PyErr_Format(PyExc_ValueError, "take(%zd): only %zd items wait", n, self->count);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        PyList_SET_ITEM(out, i, fifo_pop(self));
    UNLOCK(self);
    return out;
}

/* take(n), and the tail tap's ticks of each item taken (keep_stamps). */
static PyObject *Fifo_take_stamped(FifoObject *self, PyObject *arg)
{
    FIFO_READY(self);
    if (self->stamps == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "take_stamped: keep_stamps() was not called");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    n = n > 0 ? n : 0;
    PyObject *out = PyList_New(n);
    int64_t *ticks = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (out == NULL || ticks == NULL) {
        Py_XDECREF(out);
        PyMem_RawFree(ticks);
        return PyErr_NoMemory();
    }
    LOCK(self);
    if (self->aborted || n > self->count) {
        int aborted = self->aborted;
        UNLOCK(self);
        Py_DECREF(out);
        PyMem_RawFree(ticks);
        if (aborted)
            return raise_aborted(self);
        PyErr_Format(PyExc_ValueError, "take_stamped(%zd): only %zd items wait", n, self->count);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyList_SET_ITEM(out, i, fifo_pop(self));
        ticks[i] = self->last_stamp;
    }
    UNLOCK(self);
    PyObject *stamps = PyList_New(n);
    for (Py_ssize_t i = 0; stamps != NULL && i < n; i++) {
        PyObject *t = PyLong_FromLongLong((long long)ticks[i]);
        if (t == NULL) {
            Py_CLEAR(stamps);
            break;
        }
        PyList_SET_ITEM(stamps, i, t);
    }
    PyMem_RawFree(ticks);
    if (stamps == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(2, out, stamps);
    Py_DECREF(out);
    Py_DECREF(stamps);
    return pair;
}

static PyObject *Fifo_keep_stamps(FifoObject *self, PyObject *unused)
{
    FIFO_READY(self);
    LOCK(self);
    if (self->stamps == NULL)
        self->stamps = PyMem_RawCalloc((size_t)self->alloc, sizeof(int64_t));
    int failed = self->stamps == NULL;
    UNLOCK(self);
    if (failed)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* The run is stopping: wake every waiter for good; every later operation raises Aborted. */
static PyObject *Fifo_abort(FifoObject *self, PyObject *unused)
{
    FIFO_READY(self);
    LOCK(self);
    self->aborted = 1;
    Py_ssize_t n = self->count;
    PyObject **held = n ? PyMem_RawMalloc((size_t)n * sizeof(PyObject *)) : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = self->items[(self->first + i) % self->alloc];
        if (held)
            held[i] = o;
    }
    self->count = 0;
    self->first = 0;
    self->maxsize = 0;
    pthread_cond_broadcast(&self->not_empty);
    pthread_cond_broadcast(&self->not_full);
    pthread_cond_broadcast(&self->all_done);
    UNLOCK(self);
    for (Py_ssize_t i = 0; held && i < n; i++)
        Py_DECREF(held[i]);
    PyMem_RawFree(held);
    Py_RETURN_NONE;
}

static PyObject *Fifo_keep_truth(FifoObject *self, PyObject *arg)
{
    FIFO_READY(self);
    const char *at = PyUnicode_AsUTF8(arg);
    if (at == NULL)
        return NULL;
    int where = strcmp(at, "put") == 0 ? 1 : strcmp(at, "get") == 0 ? 2 : 0;
    if (!where) {
        PyErr_SetString(PyExc_ValueError, "keep_truth('put' or 'get')");
        return NULL;
    }
    LOCK(self);
    self->truth_at = where;
    UNLOCK(self);
    Py_RETURN_NONE;
}

static PyObject *Fifo_truth(FifoObject *self, PyObject *unused)
{
    FIFO_READY(self);
    LOCK(self);
    PyObject *out = PyBytes_FromStringAndSize((const char *)self->truth,
                                              self->ntruth * (Py_ssize_t)sizeof(int64_t));
    UNLOCK(self);
    return out;
}

static PyObject *Fifo_watch_idle(FifoObject *self, PyObject *unused)
{
    FIFO_READY(self);
    LOCK(self);
    self->watch_idle = 1;
    self->last_put_ns = host_ns();
    UNLOCK(self);
    Py_RETURN_NONE;
}

static PyObject *Fifo_get_ring(FifoObject *self, void *which)
{
    RingObject *r = which ? self->head : self->tail;
    return Py_NewRef(r ? (PyObject *)r : Py_None);
}

static int Fifo_set_ring(FifoObject *self, PyObject *value, void *which)
{
    if (value != NULL && value != Py_None && !PyObject_TypeCheck(value, &RingType)) {
        PyErr_SetString(PyExc_TypeError, "a channel end's tap is a Ring or None");
        return -1;
    }
    if (value != NULL && value != Py_None && !((RingObject *)value)->has_view) {
        PyErr_SetString(PyExc_ValueError, "ring not initialised");
        return -1;
    }
    RingObject *r = (value == NULL || value == Py_None) ? NULL : (RingObject *)Py_NewRef(value);
    RingObject *old;
    if (!self->ready) {
        Py_XDECREF(r);
        PyErr_SetString(PyExc_RuntimeError, "FIFO not initialised");
        return -1;
    }
    LOCK(self);
    if (which) {
        old = self->head;
        self->head = r;
    } else {
        old = self->tail;
        self->tail = r;
    }
    UNLOCK(self);
    Py_XDECREF(old);
    return 0;
}

#define FIFO_INT_GETTER(name, expr)                                                          \
    static PyObject *Fifo_get_##name(FifoObject *self, void *c)                              \
    {                                                                                        \
        FIFO_READY(self);                                                                    \
        return PyLong_FromLongLong((long long)(expr));                                       \
    }
FIFO_INT_GETTER(maxsize, self->maxsize)
FIFO_INT_GETTER(items_in, self->n_in)
FIFO_INT_GETTER(items_out, self->n_out)
FIFO_INT_GETTER(unfinished_tasks, self->unfinished)
FIFO_INT_GETTER(last_put_ns, self->last_put_ns)

static PyObject *Fifo_get_aborted(FifoObject *self, void *c) { return PyBool_FromLong(self->aborted); }

/* queue.Queue lets a program change its maxsize (test_queue's shrinking queue): only later
 * puts see it; a larger one lets waiting puts in. */
static int Fifo_set_maxsize(FifoObject *self, PyObject *value, void *c)
{
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "FIFO not initialised");
        return -1;
    }
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "maxsize cannot be deleted");
        return -1;
    }
    Py_ssize_t n = PyLong_AsSsize_t(value);
    if (n == -1 && PyErr_Occurred())
        return -1;
    LOCK(self);
    self->maxsize = n;
    pthread_cond_broadcast(&self->not_full);
    UNLOCK(self);
    return 0;
}

static PyMethodDef Fifo_methods[] = {
    {"put", (PyCFunction)(void (*)(void))Fifo_put, METH_FASTCALL | METH_KEYWORDS,
     "put(item, block=True, timeout=None), as queue.Queue.put."},
    {"get", (PyCFunction)(void (*)(void))Fifo_get, METH_FASTCALL | METH_KEYWORDS,
     "get(block=True, timeout=None), as queue.Queue.get."},
    {"put_nowait", (PyCFunction)Fifo_put_nowait, METH_O, "put(item, False)"},
    {"get_nowait", (PyCFunction)Fifo_get_nowait, METH_NOARGS, "get(False)"},
    {"qsize", (PyCFunction)Fifo_qsize, METH_NOARGS, "Items waiting now."},
    {"empty", (PyCFunction)Fifo_empty, METH_NOARGS, "No item waits."},
    {"full", (PyCFunction)Fifo_full, METH_NOARGS, "maxsize items wait."},
    {"task_done", (PyCFunction)Fifo_task_done, METH_NOARGS, "As queue.Queue.task_done."},
    {"join", (PyCFunction)Fifo_join, METH_NOARGS, "As queue.Queue.join."},
    {"wait_batch", (PyCFunction)(void (*)(void))Fifo_wait_batch, METH_FASTCALL,
     "Wait until a bulk transfer may start; how many items it takes."},
    {"take", (PyCFunction)Fifo_take, METH_O, "Take n waiting items, as a list."},
    {"take_stamped", (PyCFunction)Fifo_take_stamped, METH_O,
     "Take n waiting items: (the items, the tail tap's ticks of each) (keep_stamps)."},
    {"keep_stamps", (PyCFunction)Fifo_keep_stamps, METH_NOARGS,
     "Keep the tail tap's ticks of each item with it (call before the first put)."},
    {"abort", (PyCFunction)Fifo_abort, METH_NOARGS, "Wake every waiter; the FIFO is done."},
    {"keep_truth", (PyCFunction)Fifo_keep_truth, METH_O,
     "Validation: keep the host time of every insertion ('put') or removal ('get')."},
    {"truth", (PyCFunction)Fifo_truth, METH_NOARGS, "The kept times, int64 bytes."},
    {"watch_idle", (PyCFunction)Fifo_watch_idle, METH_NOARGS,
     "Keep the time of the last insertion (for wait_batch's timeout)."},
    {NULL}};

static PyGetSetDef Fifo_getset[] = {
    {"tail", (getter)Fifo_get_ring, (setter)Fifo_set_ring, "insertions' tap", NULL},
    {"head", (getter)Fifo_get_ring, (setter)Fifo_set_ring, "removals' tap", (void *)1},
    {"maxsize", (getter)Fifo_get_maxsize, (setter)Fifo_set_maxsize,
     "capacity (<= 0: unbounded); writable, as queue.Queue's", NULL},
    {"items_in", (getter)Fifo_get_items_in, NULL, "items inserted so far", NULL},
    {"items_out", (getter)Fifo_get_items_out, NULL, "items removed so far", NULL},
    {"unfinished_tasks", (getter)Fifo_get_unfinished_tasks, NULL, "puts not yet task_done", NULL},
    {"last_put_ns", (getter)Fifo_get_last_put_ns, NULL, "host ns of the last put (watch_idle)", NULL},
    {"aborted", (getter)Fifo_get_aborted, NULL, "the run is stopping", NULL},
    {NULL}};

static PyTypeObject FifoType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streamscope.core._native.Fifo",
    .tp_basicsize = sizeof(FifoObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A bounded FIFO of Python objects that waits without the interpreter lock; its "
              "insertions and removals are recorded into rings when tapped.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Fifo_init,
    .tp_dealloc = (destructor)Fifo_dealloc,
    .tp_methods = Fifo_methods,
    .tp_getset = Fifo_getset,
};

/* ==== module functions ===================================================================== */

static PyObject *m_host_ns(PyObject *m, PyObject *unused) { return PyLong_FromLongLong(host_ns()); }

static PyObject *m_bind_tracker(PyObject *m, PyObject *arg)
{
    if (arg != Py_None && !PyObject_TypeCheck(arg, &TrackerType)) {
        PyErr_SetString(PyExc_TypeError, "bind_tracker(StateTracker or None)");
        return NULL;
    }
    PyObject *old = (PyObject *)PyThread_tss_get(&g_tracker_key);
    if (arg != Py_None)
        Py_INCREF(arg);
    if (PyThread_tss_set(&g_tracker_key, arg == Py_None ? NULL : arg) != 0) {
        if (arg != Py_None)
            Py_DECREF(arg);
        PyErr_SetString(PyExc_RuntimeError, "cannot bind a tracker to this thread");
        return NULL;
    }
    if (old != NULL)
        return old; /* the reference the binding held */
    Py_RETURN_NONE;
}

static PyObject *m_bound_tracker(PyObject *m, PyObject *unused)
{
    PyObject *t = (PyObject *)PyThread_tss_get(&g_tracker_key);
    return Py_NewRef(t ? t : Py_None);
}

static PyObject *m_configure(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"eos", "aborted", "full", "empty", "main_ident", NULL};
    PyObject *eos, *aborted, *full, *empty;
    unsigned long main_ident;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "$OOOOk", names, &eos, &aborted, &full, &empty,
                                     &main_ident))
        return NULL;
    Py_XSETREF(g_eos, Py_NewRef(eos));
    Py_XSETREF(g_aborted, Py_NewRef(aborted));
    Py_XSETREF(g_full, Py_NewRef(full));
    Py_XSETREF(g_empty, Py_NewRef(empty));
    g_main_ident = main_ident;
    Py_RETURN_NONE;
}

static int64_t word_arg(PyObject *buf, PyObject *w, Py_buffer *view)
{
    Py_ssize_t word = PyLong_AsSsize_t(w);
    if (word == -1 && PyErr_Occurred())
        return -1;
    if (PyObject_GetBuffer(buf, view, PyBUF_WRITABLE) < 0)
        return -1;
    if (word < 0 || (word + 1) * 8 > view->len || ((uintptr_t)view->buf & 7)) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_IndexError, "word out of the buffer");
        return -1;
    }
    return word;
}

static PyObject *m_load_acquire(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "load_acquire(buffer, word)");
        return NULL;
    }
    Py_buffer view;
    int64_t word = word_arg(args[0], args[1], &view);
    if (word < 0)
        return NULL;
    int64_t v = __atomic_load_n((int64_t *)view.buf + word, __ATOMIC_ACQUIRE);
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(v);
}

static PyObject *m_store_release(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "store_release(buffer, word, value)");
        return NULL;
    }
    long long v = PyLong_AsLongLong(args[2]);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    int64_t word = word_arg(args[0], args[1], &view);
    if (word < 0)
        return NULL;
    __atomic_store_n((int64_t *)view.buf + word, (int64_t)v, __ATOMIC_RELEASE);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* Which of many rings the monitor must look at: out[i] = 1 where the ring whose header is at
 * address addrs[i] holds records not drained, was closed by its writer, refused records or is
 * a register (capacity 0); 0 where nothing changed. Address 0: a ring mapped without one
 * (always looked at). The caller keeps every address mapped for the call. */
static PyObject *m_astir(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "astir(addresses, out)");
        return NULL;
    }
    Py_buffer a, o;
    if (PyObject_GetBuffer(args[0], &a, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &o, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&a);
        return NULL;
    }
    Py_ssize_t n = a.len / 8;
    if (o.len < n) {
        PyBuffer_Release(&a);
        PyBuffer_Release(&o);
        PyErr_SetString(PyExc_ValueError, "astir: out is shorter than the addresses");
        return NULL;
    }
    const uint64_t *addrs = (const uint64_t *)a.buf;
    uint8_t *out = (uint8_t *)o.buf;
    Py_ssize_t busy = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t *h = (const int64_t *)(uintptr_t)addrs[i];
        int b = h == NULL || __atomic_load_n(&h[H_W], __ATOMIC_ACQUIRE) != h[H_R] ||
                h[H_CLOSED] != 0 || h[H_DROPPED] != 0 || h[H_CAPACITY] == 0;
        out[i] = (uint8_t)b;
        busy += b;
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&o);
    return PyLong_FromSsize_t(busy);
}

static PyObject *m_clock_gap_ns(PyObject *m, PyObject *unused)
{
    return PyLong_FromLongLong(g_clock_gap_ns);
}

static PyMethodDef module_methods[] = {
    {"host_ns", m_host_ns, METH_NOARGS, "CLOCK_MONOTONIC in ns (time.monotonic_ns)."},
    {"bind_tracker", m_bind_tracker, METH_O,
     "Bind a state tracker to the calling thread (None: unbind); returns the previous one."},
    {"bound_tracker", m_bound_tracker, METH_NOARGS, "The calling thread's tracker, or None."},
    {"configure", (PyCFunction)(void (*)(void))m_configure, METH_VARARGS | METH_KEYWORDS,
     "The objects the FIFO needs: end-of-stream marker, exception classes, main thread."},
    {"load_acquire", (PyCFunction)(void (*)(void))m_load_acquire, METH_FASTCALL,
     "Read 64-bit word ``word`` of a buffer with acquire order."},
    {"store_release", (PyCFunction)(void (*)(void))m_store_release, METH_FASTCALL,
     "Write 64-bit word ``word`` of a buffer with release order."},
    {"astir", (PyCFunction)(void (*)(void))m_astir, METH_FASTCALL,
     "Mark which rings (header addresses) hold anything for the monitor; returns how many."},
    {"clock_gap_ns", m_clock_gap_ns, METH_NOARGS,
     "What one host clock read costs here (ns), as measured when the module loaded."},
    {NULL}};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "_native",
    "streamscope's native probe core (see streamscope/core/native.py).", -1, module_methods};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

PyMODINIT_FUNC PyInit__native(void)
{
    if (PyType_Ready(&ClockType) < 0 || PyType_Ready(&RingType) < 0 ||
        PyType_Ready(&TrackerType) < 0 || PyType_Ready(&FifoType) < 0)
        return NULL;
    if (PyThread_tss_create(&g_tracker_key) != 0)
        return NULL;
    pthread_atfork(NULL, NULL, after_fork_child);
    /* The median gap between two clock reads: what a sampled cost carries beyond its event. */
    int64_t gaps[257];
    for (int i = 0; i < 257; i++) {
        int64_t a = host_ns();
        gaps[i] = host_ns() - a;
    }
    qsort(gaps, 257, sizeof(int64_t), cmp_i64);
    g_clock_gap_ns = gaps[128];
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Clock", (PyObject *)&ClockType) < 0 ||
        PyModule_AddObjectRef(m, "Ring", (PyObject *)&RingType) < 0 ||
        PyModule_AddObjectRef(m, "StateTracker", (PyObject *)&TrackerType) < 0 ||
        PyModule_AddObjectRef(m, "Fifo", (PyObject *)&FifoType) < 0 ||
        PyModule_AddIntConstant(m, "HEADER_BYTES", HEADER_BYTES) < 0 ||
        PyModule_AddIntConstant(m, "RECORD_BYTES", RECORD_BYTES) < 0 ||
        PyModule_AddIntConstant(m, "SAMPLE_EVERY", SAMPLE_MASK + 1) < 0 ||
        PyModule_AddIntConstant(m, "W_W", H_W) < 0 ||
        PyModule_AddIntConstant(m, "W_R", H_R) < 0 ||
        PyModule_AddIntConstant(m, "W_DROPPED", H_DROPPED) < 0 ||
        PyModule_AddIntConstant(m, "W_TOTAL", H_TOTAL) < 0 ||
        PyModule_AddIntConstant(m, "W_LAST", H_LAST) < 0 ||
        PyModule_AddIntConstant(m, "W_COST_NS", H_COST_NS) < 0 ||
        PyModule_AddIntConstant(m, "W_COST_N", H_COST_N) < 0 ||
        PyModule_AddIntConstant(m, "W_REFUSED", H_REFUSED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
