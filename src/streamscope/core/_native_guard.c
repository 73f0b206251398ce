/* The native core's guard over the rings a reader maps (twin: _twin_ring.py's guard_mapping,
   which cannot guard): a ring file that another process truncates makes a read of its mapping
   past the file's new end a SIGBUS, which would kill the monitor. A SIGBUS whose address lies in
   a guarded mapping is answered by mapping private zero pages over the rest of it, and the read
   goes on: the reader finds a header of zeros, counts the ring as damaged and asks here whether
   it was cut short (mapping_faulted). A SIGBUS anywhere else is handed to the action there was
   before, as if no guard were installed.

   In: mappings (address, size) guarded and let go by the reader, under the interpreter lock.
   Out: the handler, installed with the first guard; which mappings it answered for. Included by
   _native.c. */

#include <signal.h>
#include <sys/mman.h>

/* ==== Guard ================================================================================ */

typedef struct {
    uintptr_t lo, hi; /* the mapping, page-rounded */
    int faulted;      /* the handler mapped zeros over part of it */
} GuardSpan;

/* The guarded mappings: changed only under the interpreter lock, read by the handler. A fault
   in a ring is a read by a thread that holds the lock (numpy's copy, astir), so the handler
   does not run while another thread changes the table; still, a table outgrown is published
   whole and never freed (a few bytes a ring). */
static GuardSpan *g_spans;
static Py_ssize_t g_nspans, g_spans_cap;
static struct sigaction g_prev_bus;
static int g_guarding;
static uintptr_t g_page;

static void guard_on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    GuardSpan *spans = __atomic_load_n(&g_spans, __ATOMIC_ACQUIRE);
    Py_ssize_t n = __atomic_load_n(&g_nspans, __ATOMIC_ACQUIRE);
    for (Py_ssize_t i = 0; i < n; i++) {
        GuardSpan *s = &spans[i];
        if (a < s->lo || a >= s->hi)
            continue;
        uintptr_t from = a & ~(g_page - 1);
        void *p = mmap((void *)from, s->hi - from, PROT_READ | PROT_WRITE,
                       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            break;
        s->faulted = 1;
        return; /* the read is made again, of zeros */
    }
    /* Not a guarded mapping's: the fault is what it would have been without the guard. */
    sigaction(SIGBUS, &g_prev_bus, NULL);
    g_guarding = 0;
}

static int guard_install(void)
{
    if (g_guarding)
        return 0;
    if (!g_page)
        g_page = (uintptr_t)sysconf(_SC_PAGESIZE);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = guard_on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &g_prev_bus) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    g_guarding = 1;
    return 0;
}

static PyObject *m_guard_mapping(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "guard_mapping(address, size)");
        return NULL;
    }
    uintptr_t addr = (uintptr_t)PyLong_AsUnsignedLongLong(args[0]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t size = PyLong_AsSsize_t(args[1]);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (guard_install() < 0)
        return NULL;
    if (addr == 0 || size <= 0 || (addr & (g_page - 1))) {
        PyErr_SetString(PyExc_ValueError, "guard_mapping: a mapping's page-aligned address "
                                          "and its size");
        return NULL;
    }
    if (g_nspans == g_spans_cap) {
        Py_ssize_t n = g_spans_cap ? 2 * g_spans_cap : 64;
        GuardSpan *s = malloc((size_t)n * sizeof(GuardSpan));
        if (s == NULL)
            return PyErr_NoMemory();
        if (g_nspans)
            memcpy(s, g_spans, (size_t)g_nspans * sizeof(GuardSpan));
        __atomic_store_n(&g_spans, s, __ATOMIC_RELEASE);
        g_spans_cap = n;
    }
    uintptr_t hi = (addr + (uintptr_t)size + g_page - 1) & ~(g_page - 1);
    g_spans[g_nspans] = (GuardSpan){addr, hi, 0};
    __atomic_store_n(&g_nspans, g_nspans + 1, __ATOMIC_RELEASE);
    Py_RETURN_NONE;
}

static Py_ssize_t guard_find(PyObject *arg)
{
    uintptr_t addr = (uintptr_t)PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return -2;
    for (Py_ssize_t i = 0; i < g_nspans; i++)
        if (g_spans[i].lo == addr)
            return i;
    return -1;
}

/* Let a mapping go (before it is unmapped); whether the guard answered for it. */
static PyObject *m_unguard_mapping(PyObject *m, PyObject *arg)
{
    Py_ssize_t i = guard_find(arg);
    if (i == -2)
        return NULL;
    if (i < 0)
        Py_RETURN_FALSE;
    int faulted = g_spans[i].faulted;
    g_spans[i] = g_spans[g_nspans - 1];
    __atomic_store_n(&g_nspans, g_nspans - 1, __ATOMIC_RELEASE);
    return PyBool_FromLong(faulted);
}

static PyObject *m_mapping_faulted(PyObject *m, PyObject *arg)
{
    Py_ssize_t i = guard_find(arg);
    if (i == -2)
        return NULL;
    return PyBool_FromLong(i >= 0 && g_spans[i].faulted);
}
