/* streamscope's native probe core: clocks, probe rings, stage state trackers, a bounded FIFO.

   Per event it does only: read the clock, write one fixed 24-byte record into a preallocated
   ring in shared memory, advance the write index. A full ring refuses and counts the refusal.
   Everything else (draining, converting time, reducing) happens in the monitor's process.

   The same API exists in pure Python (streamscope/core/_twin.py); the tests run both side by
   side. Layout of a ring: streamscope/core/rings.py, generated into _native_layout.h. This file
   holds what the parts share and the module; the parts are each in a file of its own beside its
   twin (_native_clock.c, _native_ring.c, _native_state.c, _native_fifo.c, _native_stacks.c,
   _native_guard.c), included below as one translation unit so that the hot paths inline across
   them as before.

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
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* ==== the core, by concern: each file beside its pure-Python twin (one translation unit) ===== */
#include "_native_clock.c"
#include "_native_ring.c"
#include "_native_state.c"
#include "_native_fifo.c"
#include "_native_stacks.c"
#include "_native_guard.c"

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

static PyObject *m_service_spacing_ns(PyObject *m, PyObject *unused)
{
    return PyLong_FromLongLong(service_spacing());
}

static PyMethodDef module_methods[] = {
    {"host_ns", m_host_ns, METH_NOARGS, "CLOCK_MONOTONIC in ns (time.monotonic_ns)."},
    {"bind_tracker", m_bind_tracker, METH_O,
     "Bind a state tracker to the calling thread (None: unbind); returns the previous one."},
    {"bound_tracker", m_bound_tracker, METH_NOARGS, "The calling thread's tracker, or None."},
    {"service_spacing_ns", m_service_spacing_ns, METH_NOARGS,
     "How often each worker of this process may have an item's service timed now (ns)."},
    {"configure", (PyCFunction)(void (*)(void))m_configure, METH_VARARGS | METH_KEYWORDS,
     "The objects the FIFO needs: end-of-stream marker, exception classes, main thread."},
    {"load_acquire", (PyCFunction)(void (*)(void))m_load_acquire, METH_FASTCALL,
     "Read 64-bit word ``word`` of a buffer with acquire order."},
    {"store_release", (PyCFunction)(void (*)(void))m_store_release, METH_FASTCALL,
     "Write 64-bit word ``word`` of a buffer with release order."},
    {"astir", (PyCFunction)(void (*)(void))m_astir, METH_FASTCALL,
     "Mark which rings (header addresses) hold anything for the monitor; returns how many."},
    {"guard_mapping", (PyCFunction)(void (*)(void))m_guard_mapping, METH_FASTCALL,
     "A SIGBUS reading this mapping (a truncated file) maps zeros over it, not a crash."},
    {"unguard_mapping", (PyCFunction)m_unguard_mapping, METH_O,
     "Let a guarded mapping go (before unmapping it); whether it was cut short."},
    {"mapping_faulted", (PyCFunction)m_mapping_faulted, METH_O,
     "Whether a guarded mapping was cut short (its file truncated under it)."},
    {"current_tag", native_current_tag, METH_NOARGS,
     "The calling thread's path tag: what its next put carries (0: none)."},
    {"emit_tag", native_emit_tag, METH_NOARGS,
     "The tag an item put now carries (the thread's); the thread has put since it last took."},
    {"take_tag", native_take_tag, METH_O,
     "An item with this tag was taken (as a FIFO's take hands it to the taking thread)."},
    {"set_current_tag", native_set_current_tag, METH_O,
     "Set the calling thread's path tag (a channel written in Python hands one over)."},
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
#ifdef STACKS_NATIVE
    if (PyType_Ready(&SamplerType) < 0)
        return NULL;
#endif
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
#ifdef STACKS_NATIVE
        PyModule_AddObjectRef(m, "StackSampler", (PyObject *)&SamplerType) < 0 ||
#endif
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
