/* The native core's stack sampler (twin: _twin_stacks.py): every worker's Python stack, read
   by a thread of its own that never takes the interpreter lock.

   In: the workers of this process (a thread's state, or an asyncio task's coroutine and the
   thread of its loop), each with its state tracker. Out: one SAMPLE record per worker per
   period into the sampler's ring, its value the worker's state probe, the state the worker
   was in at that instant (busy on a core, busy but waiting: asleep, on I/O or a lock, the
   interpreter's included; blocked on input or output; idle), the period then and the stack's
   id (a worker at rest, among more than SAMPLER_RESTING of them, one period in 2^k, k raised
   as they are more: what a pass costs is then the busy workers', and a program of thousands
   of threads keeps its busy ones sampled at the period asked, not at the slowest one); each stack, the first time it is seen, one line in the process's stack table file
   (id, then each frame from the root: qualified name, file, first line), written whole.

   The stack is read as a profiler outside the process reads it: the thread state's current
   frame and each frame before it, every read through process_vm_readv on this process, so a
   frame that ends meanwhile reads as a bad address, never a fault; the lock is never taken,
   so sampling costs the workers nothing but a core's share. Included by _native.c. */

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define STACKS_NATIVE 1
#define Py_BUILD_CORE 1
#include "internal/pycore_frame.h"
#undef Py_BUILD_CORE
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/uio.h>

/* ==== StackSampler ========================================================================= */

#define STACK_DEPTH 64       /* frames read per stack at most (deeper: the root's are cut) */
#define STACK_TABLE 4096     /* distinct stacks per process at most (a power of two) */
#define SAMPLER_SLOTS 65536 /* workers per process at most (their slots grow as they come) */
/* Workers whose running state is read from a descriptor of their own (/proc/self/task/TID/
   stat); the others' from their CPU clock alone: a program of thousands of threads holds no
   thousands of descriptors for being watched (nor runs out of them under a low limit). */
#define SAMPLER_STATFDS 64
#define PERIOD_MAX_SHIFT 7   /* the period doubles at most this many times */
#define COST_EVERY_NS 1000000000LL
/* Workers at rest (not busy) sampled a pass at most, about: among more, each one pass in 2^k
   (its record's period 2^k times as long), k at most REST_MAX_SHIFT. */
#define SAMPLER_RESTING 64
#define REST_MAX_SHIFT 7
#define SAMPLER_NICE -10
/* The sampler's share of one core it keeps to, at 100 samples a second asked (more asked,
   more allowed, in proportion; a quarter of a core at most): over it, the period doubles;
   under a quarter of it, it halves back towards the asked period. */
#define COST_BUDGET 0.005

/* A sample's state, as recorded (bits 24-27 of the value). */
enum { S_IDLE = 0, S_RUNNING = 1, S_BLOCKED_IN = 2, S_BLOCKED_OUT = 3, S_WAITING = 4 };

typedef struct {
    int used;
    uint32_t probe;
    TrackerObject *tracker; /* strong */
    PyObject *coro;         /* strong: an asyncio task's coroutine (NULL: a thread) */
    uintptr_t tstate;       /* the thread that runs it */
    uintptr_t iframe;       /* the coroutine's frame (0: a thread) */
    int statfd;             /* /proc/self/task/TID/stat of that thread */
    clockid_t cpuclock;     /* that thread's CPU clock, and its reading at the last sample */
    int has_clock;
    int64_t last_cpu;
} SamplerSlot;

typedef struct {
    PyObject_HEAD
    RingObject *ring;
    int tablefd;
    pid_t pid;
    pthread_t thread;
    int started;
    volatile int stopping;
    pthread_mutex_t lock;
    /* what the sampler's thread waits on between samples: ``stop`` wakes it at once */
    pthread_mutex_t wlock;
    pthread_cond_t wake;
    SamplerSlot *slots; /* ``cap`` of them, ``nslots`` used so far (grown under ``lock``) */
    int nslots, cap, nstatfds;
    int64_t base_ns;
    volatile int shift;
    uint64_t passes;
    volatile int64_t cpu_ns, samples, wall_ns, read_ns;
    int64_t nstacks, refused_stacks;
    uint64_t keys[STACK_TABLE];
    uint32_t ids[STACK_TABLE];
    PyCodeObject codes[STACK_DEPTH]; /* the sampler thread's: the stack being read */
} SamplerObject;

static int pvr(pid_t pid, void *dst, uintptr_t src, size_t n)
{
    struct iovec l = {dst, n}, r = {(void *)src, n};
    return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* One of the code's names into out (UTF-8, tabs and newlines as spaces); "?" if unreadable. */
static size_t read_name(pid_t pid, uintptr_t obj, char *out, size_t room)
{
    PyASCIIObject a;
    size_t n = 0;
    if (obj && pvr(pid, &a, obj, sizeof a) == 0 && a.state.compact && a.length >= 0) {
        unsigned kind = a.state.kind;
        uintptr_t data = obj + (a.state.ascii ? sizeof(PyASCIIObject)
                                              : sizeof(PyCompactUnicodeObject));
        Py_ssize_t len = a.length < 200 ? a.length : 200;
        unsigned char raw[800];
        if (kind >= 1 && kind <= 4 && kind != 3 && pvr(pid, raw, data, (size_t)len * kind) == 0) {
            for (Py_ssize_t i = 0; i < len && n + 4 < room; i++) {
                uint32_t c = kind == 1 ? raw[i] : kind == 2 ? ((uint16_t *)raw)[i]
                                                            : ((uint32_t *)raw)[i];
                if (c == '\t' || c == '\n' || c == '\r')
                    c = ' ';
                if (c < 0x80) {
                    out[n++] = (char)c;
                } else if (c < 0x800) {
                    out[n++] = (char)(0xC0 | (c >> 6));
                    out[n++] = (char)(0x80 | (c & 0x3F));
                } else if (c < 0x10000) {
                    out[n++] = (char)(0xE0 | (c >> 12));
                    out[n++] = (char)(0x80 | ((c >> 6) & 0x3F));
                    out[n++] = (char)(0x80 | (c & 0x3F));
                } else {
                    out[n++] = (char)(0xF0 | (c >> 18));
                    out[n++] = (char)(0x80 | ((c >> 12) & 0x3F));
                    out[n++] = (char)(0x80 | ((c >> 6) & 0x3F));
                    out[n++] = (char)(0x80 | (c & 0x3F));
                }
            }
            return n;
        }
    }
    if (room > 1)
        out[n++] = '?';
    return n;
}

/* A stack's line in the table file: "id\tdepth" then, root first, "\tname\tfile\tline". */
static void write_stack(SamplerObject *s, uint32_t id, PyCodeObject *codes, int depth)
{
    enum { ROOM = STACK_DEPTH * 600 + 64 };
    char *line = malloc(ROOM);
    if (line == NULL)
        return;
    size_t n = (size_t)snprintf(line, ROOM, "%u\t%d", id, depth);
    for (int i = depth - 1; i >= 0 && n + 600 < ROOM; i--) {
        line[n++] = '\t';
        n += read_name(s->pid, (uintptr_t)codes[i].co_qualname, line + n, 250);
        line[n++] = '\t';
        n += read_name(s->pid, (uintptr_t)codes[i].co_filename, line + n, 300);
        n += (size_t)snprintf(line + n, 24, "\t%d", codes[i].co_firstlineno);
    }
    line[n++] = '\n';
    if (write(s->tablefd, line, n) < 0) {
        /* a table that cannot be written: the stack's samples still count, unnamed */
    }
    free(line);
}

/* The id of the stack of frames[0..depth) (leaf first; their code objects read into codes),
   made and written the first time it is seen; 0 when the table is full. */
static uint32_t stack_id(SamplerObject *s, PyCodeObject *codes, int depth)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)depth;
    for (int i = 0; i < depth; i++) {
        h = (h ^ (uint64_t)(uintptr_t)codes[i].co_qualname) * 1099511628211ULL;
        h = (h ^ (uint64_t)(uintptr_t)codes[i].co_filename) * 1099511628211ULL;
        h = (h ^ (uint64_t)codes[i].co_firstlineno) * 1099511628211ULL;
    }
    if (h == 0)
        h = 1;
    for (uint64_t j = 0, k = h & (STACK_TABLE - 1); j < STACK_TABLE;
         j++, k = (k + 1) & (STACK_TABLE - 1)) {
        if (s->keys[k] == h)
            return s->ids[k];
        if (s->keys[k] == 0) {
            if (s->nstacks >= STACK_TABLE * 3 / 4)
                break;
            s->keys[k] = h;
            s->ids[k] = (uint32_t)++s->nstacks;
            write_stack(s, s->ids[k], codes, depth);
            return s->ids[k];
        }
    }
    s->refused_stacks++;
    return 0;
}

/* The code objects of the frames of thread state ts, leaf first, into codes: how many; with
   ``until`` set, only those down to that frame (and -1 when it is not among them). The frames
   are read one by one (each names the next), their code objects all in one read. */
static int read_stack(SamplerObject *s, uintptr_t ts, uintptr_t until, PyCodeObject *codes)
{
    uintptr_t cf = 0, fr = 0;
    if (pvr(s->pid, &cf, ts + offsetof(PyThreadState, cframe), sizeof cf) < 0 || !cf ||
        pvr(s->pid, &fr, cf + offsetof(_PyCFrame, current_frame), sizeof fr) < 0)
        return until ? -1 : 0;
    struct iovec local[STACK_DEPTH], remote[STACK_DEPTH];
    int depth = 0, found = 0;
    while (fr && depth < STACK_DEPTH) {
        _PyInterpreterFrame f;
        if (pvr(s->pid, &f, fr, offsetof(_PyInterpreterFrame, localsplus)) < 0 || !f.f_code)
            break;
        local[depth] = (struct iovec){&codes[depth], sizeof(PyCodeObject)};
        remote[depth] = (struct iovec){(void *)f.f_code, sizeof(PyCodeObject)};
        depth++;
        if (until && fr == until) {
            found = 1;
            break;
        }
        fr = (uintptr_t)f.previous;
    }
    if (until && !found)
        return -1;
    ssize_t got = depth ? process_vm_readv(s->pid, local, depth, remote, depth, 0) : 0;
    int whole = got > 0 ? (int)((size_t)got / sizeof(PyCodeObject)) : 0;
    return whole < depth ? whole : depth;
}

/* Whether the worker's thread ran at all since the last sample (its CPU clock moved): one
   that just woke from a sleep, or waited a whole period for a core, is runnable but has not
   been running (a sample catching it runnable then would make its sleep look like work). */
static int ran_since(SamplerSlot *w)
{
    struct timespec ts;
    if (!w->has_clock || clock_gettime(w->cpuclock, &ts) != 0)
        return 1;
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec, before = w->last_cpu;
    w->last_cpu = now;
    return before < 0 || now > before;
}

/* Whether thread stat file fd says its thread is on a core or runnable ('R'). */
static int thread_running(int fd)
{
    char buf[512];
    if (fd < 0)
        return 1;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 1;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return !(p && p[1] == ' ' && p[2] != 'R');
}

static void sample_all(SamplerObject *s)
{
    PyCodeObject *codes = s->codes;
    pthread_mutex_lock(&s->lock);
    int64_t ticks = clock_now(s->ring->clock);
    int rest = 0; /* workers at rest are sampled one pass in 2^rest (see the top) */
    while (rest < REST_MAX_SHIFT && (s->nslots >> rest) > SAMPLER_RESTING)
        rest++;
    uint64_t turn = ((uint64_t)1 << rest) - 1, pass = s->passes++;
    for (int i = 0; i < s->nslots; i++) {
        SamplerSlot *w = &s->slots[i];
        if (!w->used)
            continue;
        long st = w->tracker->state;
        int klass = st == BUSY ? S_RUNNING : st == BLOCKED_IN ? S_BLOCKED_IN
                  : st == BLOCKED_OUT ? S_BLOCKED_OUT : S_IDLE;
        uint32_t id = 0;
        int shift = s->shift;
        if (klass != S_RUNNING) {
            if (((pass + (uint64_t)i) & turn) != 0)
                continue; /* not its pass: its clock is read again at its next */
            shift += rest;
            ran_since(w); /* its clock's reading kept, for the next busy sample */
        }
        if (klass == S_RUNNING) {
            int depth = read_stack(s, w->tstate, w->iframe, codes);
            if (depth < 0)
                klass = S_WAITING; /* a task busy on an item but not running: it awaits */
            else if (!ran_since(w) | !thread_running(w->statfd)) /* both read, always */
                klass = S_WAITING;
            if (depth > 0)
                id = stack_id(s, codes, depth);
        }
        int64_t value = ((int64_t)w->probe << 32) | ((int64_t)shift << 28) |
                        ((int64_t)klass << 24) | (int64_t)(id & 0xFFFFFF);
        ring_store(s->ring, s->ring->kind, s->ring->probe, ticks, value);
        s->samples++;
    }
    pthread_mutex_unlock(&s->lock);
}

/* What the sampler cost so far, as a line of its table (read by the monitor: the last one). */
static void write_cost(SamplerObject *s)
{
    char line[128];
    int n = snprintf(line, sizeof line, "#cost\t%lld\t%lld\t%lld\n", (long long)s->cpu_ns,
                     (long long)s->samples, (long long)s->wall_ns);
    if (write(s->tablefd, line, (size_t)n) < 0) {
        /* as for a stack's line */
    }
}

static void *sampler_main(void *arg)
{
    SamplerObject *s = (SamplerObject *)arg;
    /* Ahead of the workers for a core where allowed (it runs for microseconds a period): a
       sampler that waits for a core on a machine with none free samples when one frees (a
       worker going to sleep), not at its times, and its samples lean that way (beside a busy
       core, 87 % of samples found a worker asleep half its time asleep, at nice 0 and at -10
       alike). The lowest real-time priority, else the highest nice allowed. */
    struct sched_param rt = {.sched_priority = 1};
    const char *priority = "realtime";
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt) != 0)
        priority = setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), SAMPLER_NICE) == 0
                       ? "nice -10" : "normal";
    char line[64];
    int n = snprintf(line, sizeof line, "#priority\t%s\n", priority);
    if (write(s->tablefd, line, (size_t)n) < 0) {
        /* as for a stack's line */
    }
    /* Its timers fire at their times, not merged with others' within the default slack of
       50 us: a worker's own sleep ending would otherwise wake it too, and its samples would
       find that worker just awake far more often than it is. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    /* a sampler started again (a program's process whose workers all went, then came) goes
       on counting its cost from where it was */
    int64_t cpu0 = s->cpu_ns, wall0 = s->wall_ns;
    int64_t t0 = host_ns(), c0 = thread_cpu_ns(), last_cost = t0, c_last = cpu0, w_last = wall0;
    uint64_t rng = (uint64_t)t0 | 1;
    while (!s->stopping) {
        int64_t period = s->base_ns << s->shift;
        /* Each gap drawn from an exponential of mean one period: the samples are a Poisson
           stream, which sees the time averages (PASTA) even where the program reacts to it
           (the sampler's own wake lets a worker waiting for a core have it, so a phase often
           ends just after a sample); with gaps of half to one and a half periods, the phase
           after such an end went short of samples for half a period, and a stage asleep
           after its work showed 7 % less asleep than its own clock beside a busy core. Nor is
           a program whose items take a multiple of the period sampled at one point of each. */
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        double u = ((double)(rng >> 11) + 1.0) * 0x1.0p-53; /* in (0, 1] */
        int64_t gap = (int64_t)(-log(u) * (double)period);
        next.tv_nsec += gap % 1000000000LL;
        next.tv_sec += gap / 1000000000LL + next.tv_nsec / 1000000000LL;
        next.tv_nsec %= 1000000000LL;
        pthread_mutex_lock(&s->wlock);
        while (!s->stopping &&
               pthread_cond_timedwait(&s->wake, &s->wlock, &next) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&s->wlock);
        if (s->stopping)
            break;
        int64_t now = host_ns();
        if (now - (next.tv_sec * 1000000000LL + next.tv_nsec) > period) {
            /* woken late (a busy machine): the next tick counts from now, none made up */
            clock_gettime(CLOCK_MONOTONIC, &next);
        }
        int64_t r0 = thread_cpu_ns();
        sample_all(s);
        int64_t c = thread_cpu_ns();
        s->read_ns += c - r0;
        s->cpu_ns = c - c0;
        s->wall_ns = host_ns() - t0;
        if (now - last_cost >= COST_EVERY_NS) {
            double share = (double)(s->cpu_ns - c_last) / (double)(s->wall_ns - w_last + 1);
            c_last = s->cpu_ns;
            w_last = s->wall_ns;
            double budget = COST_BUDGET * 1e7 / (double)s->base_ns;
            budget = budget < 0.25 ? budget : 0.25;
            if (share > budget && s->shift < PERIOD_MAX_SHIFT)
                s->shift++;
            else if (share < budget / 4 && s->shift > 0)
                s->shift--;
            write_cost(s);
            last_cost = now;
        }
    }
    return NULL;
}

static int Sampler_init(SamplerObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"ring", "table", "period_ns", NULL};
    PyObject *ring;
    const char *table;
    long long period = 10000000;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s|L", names, &RingType, &ring, &table, &period))
        return -1;
    if (period <= 0) {
        PyErr_SetString(PyExc_ValueError, "period_ns must be positive");
        return -1;
    }
    if (self->ring != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a stack sampler is made once");
        return -1;
    }
    self->tablefd = open(table, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (self->tablefd < 0) {
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, table);
        return -1;
    }
    Py_INCREF(ring);
    self->ring = (RingObject *)ring;
    self->pid = getpid();
    self->base_ns = period;
    pthread_mutex_init(&self->lock, NULL);
    pthread_mutex_init(&self->wlock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&self->wake, &attr);
    pthread_condattr_destroy(&attr);
    return 0;
}

static void slot_clear(SamplerSlot *w)
{
    w->used = 0;
    if (w->statfd >= 0)
        close(w->statfd);
    w->statfd = -1;
    Py_CLEAR(w->tracker);
    Py_CLEAR(w->coro);
}

static PyObject *Sampler_stop(SamplerObject *self, PyObject *unused)
{
    /* ``started`` is cleared before the lock is let go: a second caller meanwhile (another
       thread ending) finds nothing to stop, and a thread is joined once. */
    if (self->started && self->pid == getpid()) {
        self->started = 0;
        pthread_t thread = self->thread;
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&self->wlock);
        self->stopping = 1;
        pthread_cond_signal(&self->wake);
        pthread_mutex_unlock(&self->wlock);
        pthread_join(thread, NULL);
        Py_END_ALLOW_THREADS
        write_cost(self);
    }
    self->started = 0;
    Py_RETURN_NONE;
}

static void Sampler_dealloc(SamplerObject *self)
{
    if (self->ring != NULL) {
        Py_XDECREF(Sampler_stop(self, NULL));
        for (int i = 0; i < self->nslots; i++)
            slot_clear(&self->slots[i]);
        PyMem_RawFree(self->slots);
        self->slots = NULL;
        if (self->tablefd >= 0)
            close(self->tablefd);
        pthread_mutex_destroy(&self->lock);
        pthread_mutex_destroy(&self->wlock);
        pthread_cond_destroy(&self->wake);
        Py_CLEAR(self->ring);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Sampler_start(SamplerObject *self, PyObject *unused)
{
    if (self->ring == NULL || self->pid != getpid()) {
        PyErr_SetString(PyExc_RuntimeError, "this stack sampler is not this process's");
        return NULL;
    }
    if (!self->started) {
        self->stopping = 0;
        if (pthread_create(&self->thread, NULL, sampler_main, self) != 0) {
            PyErr_SetString(PyExc_OSError, "the stack sampler's thread could not start");
            return NULL;
        }
        self->started = 1;
    }
    Py_RETURN_NONE;
}

/* add(tracker, probe, coro=None): the calling thread works as this worker (or runs the event
   loop of the task whose coroutine is ``coro``). */
static PyObject *Sampler_add(SamplerObject *self, PyObject *args)
{
    PyObject *tracker, *coro = Py_None;
    unsigned long probe;
    if (!PyArg_ParseTuple(args, "O!k|O", &TrackerType, &tracker, &probe, &coro))
        return NULL;
    if (coro != Py_None && !PyCoro_CheckExact(coro) && !PyGen_Check(coro)) {
        PyErr_SetString(PyExc_TypeError, "coro must be a coroutine or None");
        return NULL;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", (long)syscall(SYS_gettid));
    pthread_mutex_lock(&self->lock);
    int at = -1;
    for (int i = 0; i < self->nslots; i++)
        if (!self->slots[i].used || self->slots[i].tracker == (TrackerObject *)tracker) {
            at = i;
            break;
        }
    if (at < 0 && self->nslots == self->cap && self->cap < SAMPLER_SLOTS) {
        int cap = self->cap ? 2 * self->cap : 64;
        SamplerSlot *grown = PyMem_RawRealloc(self->slots, (size_t)cap * sizeof(SamplerSlot));
        if (grown != NULL) {
            self->slots = grown;
            self->cap = cap;
        }
    }
    if (at < 0 && self->nslots < self->cap) {
        at = self->nslots++;
        self->slots[at] = (SamplerSlot){.statfd = -1}; /* a slot never used yet */
    }
    if (at >= 0) {
        SamplerSlot *w = &self->slots[at];
        PyObject *old_t = (PyObject *)w->tracker, *old_c = w->coro;
        int old_fd = w->used ? w->statfd : -1;
        self->nstatfds -= old_fd >= 0;
        int fd = -1;
        if (self->nstatfds < SAMPLER_STATFDS) {
            fd = open(path, O_RDONLY | O_CLOEXEC);
            self->nstatfds += fd >= 0;
        }
        w->tracker = (TrackerObject *)Py_NewRef(tracker);
        w->coro = coro == Py_None ? NULL : Py_NewRef(coro);
        w->probe = (uint32_t)probe;
        w->tstate = (uintptr_t)PyThreadState_Get();
        w->iframe = coro == Py_None ? 0 : (uintptr_t)((PyGenObject *)coro)->gi_iframe;
        w->statfd = fd;
        w->has_clock = pthread_getcpuclockid(pthread_self(), &w->cpuclock) == 0;
        w->last_cpu = -1;
        w->used = 1;
        pthread_mutex_unlock(&self->lock);
        if (old_fd >= 0 && old_fd != fd)
            close(old_fd);
        Py_XDECREF(old_t);
        Py_XDECREF(old_c);
        Py_RETURN_TRUE;
    }
    pthread_mutex_unlock(&self->lock);
    Py_RETURN_FALSE; /* more workers than slots: this one is not sampled */
}

static PyObject *Sampler_remove(SamplerObject *self, PyObject *tracker)
{
    SamplerSlot gone = {0};
    gone.statfd = -1;
    pthread_mutex_lock(&self->lock);
    for (int i = 0; i < self->nslots; i++)
        if (self->slots[i].used && self->slots[i].tracker == (TrackerObject *)tracker) {
            gone = self->slots[i];
            self->nstatfds -= gone.statfd >= 0;
            self->slots[i].used = 0;
            self->slots[i].tracker = NULL;
            self->slots[i].coro = NULL;
            self->slots[i].statfd = -1;
            break;
        }
    pthread_mutex_unlock(&self->lock);
    int was = gone.tracker != NULL;
    slot_clear(&gone);
    return PyBool_FromLong(was);
}

static PyObject *Sampler_get_samples(SamplerObject *s, void *c) { return PyLong_FromLongLong(s->samples); }
static PyObject *Sampler_get_cpu_ns(SamplerObject *s, void *c) { return PyLong_FromLongLong(s->cpu_ns); }
static PyObject *Sampler_get_read_ns(SamplerObject *s, void *c) { return PyLong_FromLongLong(s->read_ns); }
static PyObject *Sampler_get_stacks(SamplerObject *s, void *c) { return PyLong_FromLongLong(s->nstacks); }
static PyObject *Sampler_get_period_ns(SamplerObject *s, void *c)
{
    return PyLong_FromLongLong(s->base_ns << s->shift);
}

static PyMethodDef Sampler_methods[] = {
    {"add", (PyCFunction)Sampler_add, METH_VARARGS,
     "add(tracker, probe, coro=None): the calling thread is this worker (or runs its task's "
     "loop); False when the sampler is full."},
    {"remove", (PyCFunction)Sampler_remove, METH_O, "remove(tracker): that worker is let go."},
    {"start", (PyCFunction)Sampler_start, METH_NOARGS, "Start sampling (its own thread)."},
    {"stop", (PyCFunction)Sampler_stop, METH_NOARGS, "Stop sampling and wait for its thread."},
    {NULL}};

static PyGetSetDef Sampler_getset[] = {
    {"samples", (getter)Sampler_get_samples, NULL, "samples recorded so far", NULL},
    {"cpu_ns", (getter)Sampler_get_cpu_ns, NULL, "its thread's CPU ns so far", NULL},
    {"read_ns", (getter)Sampler_get_read_ns, NULL,
     "of its CPU ns, those spent reading stacks (the rest: waking up)", NULL},
    {"stacks", (getter)Sampler_get_stacks, NULL, "distinct stacks seen so far", NULL},
    {"period_ns", (getter)Sampler_get_period_ns, NULL, "its period now (adapted)", NULL},
    {NULL}};

static PyTypeObject SamplerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streamscope.core._native.StackSampler",
    .tp_basicsize = sizeof(SamplerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StackSampler(ring, table, period_ns=10_000_000): samples its workers' stacks.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Sampler_init,
    .tp_dealloc = (destructor)Sampler_dealloc,
    .tp_methods = Sampler_methods,
    .tp_getset = Sampler_getset,
};
#endif
