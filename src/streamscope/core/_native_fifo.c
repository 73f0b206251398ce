/* The native core's bounded FIFO (twin: _twin_fifo.py): a channel between stages of one
   process, its tail and head tapped, waiting without the interpreter lock; and the link's DMA
   mover, which takes whole batches from a link's tail buffer (its methods are the FIFO's).

   In: items put and got. Out: the items in order, PUT/GET records in the taps' rings. Included by
   _native.c (the locking rules are there). */

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
    /* Path tags (keep_tags): each waiting item's tag (0: none), by slot; the tag of the item
       popped last; the rings of the tags leaving a path's origin here (its sampler: one item
       in about ``tag_every`` is given a new tag, jittered; over each window of TAG_WINDOW x
       ``tag_min_gap`` ticks at most TAG_WINDOW tags) and of those arriving. */
    int64_t *tags;
    int64_t last_tag;
    RingObject *depart, *arrive;
    int64_t tag_every, tag_base, tag_countdown, tag_seq, tag_min_gap;
    int64_t tag_window_start, tag_window_tags;
    uint64_t tag_rng;
} FifoObject;

#define TAG_WINDOW 64 /* the sampler's window: this many min_gap_ticks, as many tags at most */

/* The tag a stage thread carries from what it took to what it puts (see keep_tags): set by the
   first tagged item it takes after it last put, kept while it puts (a generator's outputs all
   carry their input's tag; an aggregator's output carries the oldest tag it took since). */
#define TAG_TLS __thread __attribute__((tls_model("initial-exec")))
static TAG_TLS int64_t t_tag;
static TAG_TLS int t_emitted;

static inline uint64_t tag_jitter(FifoObject *q)
{
    uint64_t x = q->tag_rng; /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    q->tag_rng = x;
    return x;
}

/* The tag an item put here carries (q->mu held; the putter's thread): the thread's, else,
   at a path's origin, a new one one item in about tag_every. */
static inline int64_t tag_choose(FifoObject *q)
{
    int64_t tag = t_tag;
    t_emitted = 1;
    if (tag != 0 || q->depart == NULL)
        return tag;
    if (--q->tag_countdown > 0)
        return 0;
    int64_t every = q->tag_every;
    q->tag_countdown = every / 2 + 1 + (int64_t)(tag_jitter(q) % (uint64_t)every);
    /* Not the thread's: each item a source (or a generator) puts here is sampled anew. */
    return ((int64_t)q->depart->probe << 40) | (++q->tag_seq & ((1LL << 40) - 1));
}

/* A tag leaving a path's origin: recorded (DEPART, value = the tag) at ``ticks`` (the tail
   tap's reading of the same put), or at the clock's now when < 0; the sampler keeps tags
   tag_min_gap apart on average. */
static inline void tag_depart(FifoObject *q, int64_t tag, int64_t ticks)
{
    if (ticks < 0)
        ticks = ring_record_stamp(q->depart, tag);
    else
        ring_record_at(q->depart, ticks, tag);
    if (q->tag_min_gap > 0) {
        /* Window by window (TAG_WINDOW gaps long), so that inside one every item is as likely
           to be tagged as any other: halve the rate while the window had more tags than it
           allows, double it back when it had under a quarter. */
        q->tag_window_tags++;
        if (ticks - q->tag_window_start >= TAG_WINDOW * q->tag_min_gap) {
            int64_t n = q->tag_window_tags;
            while (n > TAG_WINDOW && q->tag_every < (1LL << 40)) {
                q->tag_every *= 2;
                n /= 2;
            }
            if (q->tag_window_tags < TAG_WINDOW / 4 && q->tag_every > q->tag_base)
                q->tag_every /= 2;
            q->tag_window_start = ticks;
            q->tag_window_tags = 0;
        }
    }
}

/* An item taken with ``tag`` (the taker's thread): the thread's tag after its last put is
   dropped; a thread with none takes this one. */
static inline void tag_got(int64_t tag)
{
    if (t_emitted) {
        t_tag = 0;
        t_emitted = 0;
    }
    if (t_tag == 0)
        t_tag = tag;
}

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
        int64_t *g = q->tags ? PyMem_RawMalloc((size_t)n * sizeof(int64_t)) : NULL;
        if (a == NULL || (q->stamps && s == NULL) || (q->tags && g == NULL)) {
            PyMem_RawFree(a);
            PyMem_RawFree(s);
            PyMem_RawFree(g);
            return -1;
        }
        for (Py_ssize_t i = 0; i < q->count; i++) {
            a[i] = q->items[(q->first + i) % q->alloc];
            if (s)
                s[i] = q->stamps[(q->first + i) % q->alloc];
            if (g)
                g[i] = q->tags[(q->first + i) % q->alloc];
        }
        PyMem_RawFree(q->items);
        q->items = a;
        if (s) {
            PyMem_RawFree(q->stamps);
            q->stamps = s;
        }
        if (g) {
            PyMem_RawFree(q->tags);
            q->tags = g;
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
    if (q->tags)
        q->tags[slot] = 0;
    if (item != g_eos) {
        q->n_in++;
        int64_t tag = q->tags ? tag_choose(q) : 0;
        int departing = tag != 0 && q->depart != NULL;
        if (q->tags)
            q->tags[slot] = tag;
        if (q->tail != NULL) {
            if (q->stamps || departing) { /* one clock read for the tap, the stamp, the tag */
                int64_t ticks = ring_record_stamp(q->tail, q->n_in);
                if (q->stamps)
                    q->stamps[slot] = ticks;
                if (departing)
                    tag_depart(q, tag, ticks);
            } else
                ring_record_now(q->tail, q->n_in);
        } else if (departing)
            tag_depart(q, tag, -1);
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
    if (q->tags)
        q->last_tag = q->tags[q->first];
    q->first = (q->first + 1) % q->alloc;
    q->count--;
    if (item != g_eos) {
        q->n_out++;
        int64_t tag = q->tags ? q->last_tag : 0;
        if (q->tags)
            tag_got(tag);
        if (tag != 0 && q->arrive != NULL) { /* a tagged item arriving (ARRIVE, value = tag) */
            if (q->head != NULL)
                ring_record_at(q->arrive, ring_record_stamp(q->head, q->n_out), tag);
            else
                ring_record_now(q->arrive, tag);
        } else if (q->head != NULL)
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
        PyMem_RawFree(self->tags);
        pthread_mutex_destroy(&self->mu);
        pthread_cond_destroy(&self->not_empty);
        pthread_cond_destroy(&self->not_full);
        pthread_cond_destroy(&self->all_done);
    }
    Py_CLEAR(self->tail);
    Py_CLEAR(self->head);
    Py_CLEAR(self->depart);
    Py_CLEAR(self->arrive);
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

/* take(n), and what each item taken carried with it: the tail tap's ticks (``tags`` 0,
   keep_stamps) or its path tag (1, keep_tags): a link's mover sends either with the items. */
static PyObject *side_list(const int64_t *side, Py_ssize_t n)
{
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list != NULL && i < n; i++) {
        PyObject *t = PyLong_FromLongLong((long long)side[i]);
        if (t == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

/* take(n), and what each item carried: TAKE_STAMPS its tail tap's ticks, TAKE_TAGS its path
   tag, or both (a tuple of the items and each list asked for, stamps first). */
#define TAKE_STAMPS 1
#define TAKE_TAGS 2
static PyObject *fifo_take_with(FifoObject *self, PyObject *arg, int want)
{
    const char *what = want == TAKE_STAMPS ? "take_stamped"
                       : want == TAKE_TAGS ? "take_tagged"
                                           : "take_stamped_tagged";
    FIFO_READY(self);
    if (((want & TAKE_STAMPS) && self->stamps == NULL) || ((want & TAKE_TAGS) && self->tags == NULL)) {
        PyErr_Format(PyExc_RuntimeError, "%s: %s() was not called", what,
                     (want & TAKE_STAMPS) && self->stamps == NULL ? "keep_stamps" : "keep_tags");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    n = n > 0 ? n : 0;
    PyObject *out = PyList_New(n);
    int64_t *side = PyMem_RawMalloc((size_t)(n ? 2 * n : 2) * sizeof(int64_t));
    if (out == NULL || side == NULL) {
        Py_XDECREF(out);
        PyMem_RawFree(side);
        return PyErr_NoMemory();
    }
    int64_t *stamps = side, *tags = side + (n ? n : 1);
    LOCK(self);
    if (self->aborted || n > self->count) {
        int aborted = self->aborted;
        UNLOCK(self);
        Py_DECREF(out);
        PyMem_RawFree(side);
        if (aborted)
            return raise_aborted(self);
        PyErr_Format(PyExc_ValueError, "%s(%zd): only %zd items wait", what, n, self->count);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyList_SET_ITEM(out, i, fifo_pop(self));
        stamps[i] = self->last_stamp;
        tags[i] = self->last_tag;
    }
    UNLOCK(self);
    PyObject *first = want & TAKE_STAMPS ? side_list(stamps, n) : side_list(tags, n);
    PyObject *second = want == (TAKE_STAMPS | TAKE_TAGS) ? side_list(tags, n) : NULL;
    PyMem_RawFree(side);
    PyObject *result = NULL;
    if (first != NULL && (second != NULL || want != (TAKE_STAMPS | TAKE_TAGS)))
        result = second == NULL ? PyTuple_Pack(2, out, first) : PyTuple_Pack(3, out, first, second);
    Py_DECREF(out);
    Py_XDECREF(first);
    Py_XDECREF(second);
    return result;
}

static PyObject *Fifo_take_stamped(FifoObject *self, PyObject *arg)
{
    return fifo_take_with(self, arg, TAKE_STAMPS);
}

static PyObject *Fifo_take_stamped_tagged(FifoObject *self, PyObject *arg)
{
    return fifo_take_with(self, arg, TAKE_STAMPS | TAKE_TAGS);
}

static PyObject *Fifo_take_tagged(FifoObject *self, PyObject *arg)
{
    return fifo_take_with(self, arg, TAKE_TAGS);
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

static PyObject *Fifo_keep_tags(FifoObject *self, PyObject *unused)
{
    FIFO_READY(self);
    LOCK(self);
    if (self->tags == NULL)
        self->tags = PyMem_RawCalloc((size_t)self->alloc, sizeof(int64_t));
    int failed = self->tags == NULL;
    UNLOCK(self);
    if (failed)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static int tags_kept(FifoObject *self, const char *what)
{
    if (self->tags != NULL)
        return 1;
    PyErr_Format(PyExc_RuntimeError, "%s: keep_tags() was not called", what);
    return 0;
}

/* tag_departures(ring, every, min_gap_ticks=0, seed=1): a path starts at this channel. */
static PyObject *Fifo_tag_departures(FifoObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"ring", "every", "min_gap_ticks", "seed", NULL};
    PyObject *ring;
    long long every, min_gap = 0;
    unsigned long long seed = 1;
    FIFO_READY(self);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!L|LK", names, &RingType, &ring, &every,
                                     &min_gap, &seed))
        return NULL;
    if (!tags_kept(self, "tag_departures"))
        return NULL;
    if (every < 1 || min_gap < 0) {
        PyErr_SetString(PyExc_ValueError, "tag_departures: every >= 1 and min_gap_ticks >= 0");
        return NULL;
    }
    LOCK(self);
    Py_INCREF(ring);
    Py_XSETREF(self->depart, (RingObject *)ring);
    self->tag_every = self->tag_base = every;
    self->tag_min_gap = min_gap;
    self->tag_rng = seed ? seed : 1;
    self->tag_countdown = every / 2 + 1 + (int64_t)(tag_jitter(self) % (uint64_t)every);
    UNLOCK(self);
    Py_RETURN_NONE;
}

static PyObject *Fifo_tag_arrivals(FifoObject *self, PyObject *ring)
{
    FIFO_READY(self);
    if (!PyObject_TypeCheck(ring, &RingType)) {
        PyErr_SetString(PyExc_TypeError, "tag_arrivals: a Ring");
        return NULL;
    }
    if (!tags_kept(self, "tag_arrivals"))
        return NULL;
    LOCK(self);
    Py_INCREF(ring);
    Py_XSETREF(self->arrive, (RingObject *)ring);
    UNLOCK(self);
    Py_RETURN_NONE;
}

static PyObject *Fifo_get_last_tag(FifoObject *self, void *unused)
{
    return PyLong_FromLongLong((long long)self->last_tag);
}

static PyObject *Fifo_get_tag_every(FifoObject *self, void *unused)
{
    return PyLong_FromLongLong((long long)self->tag_every);
}

/* The calling thread's tag (for channels written in Python, and tests). */
static PyObject *native_current_tag(PyObject *mod, PyObject *unused)
{
    return PyLong_FromLongLong((long long)t_tag);
}

/* A channel written in Python puts an item: the tag it carries (the thread's), the thread marked
   as having put since it last took (as tag_choose does). */
static PyObject *native_emit_tag(PyObject *mod, PyObject *unused)
{
    t_emitted = 1;
    return PyLong_FromLongLong((long long)t_tag);
}

/* A channel written in Python hands over the tag of an item taken (as a FIFO's take does). */
static PyObject *native_take_tag(PyObject *mod, PyObject *arg)
{
    long long tag = PyLong_AsLongLong(arg);
    if (tag == -1 && PyErr_Occurred())
        return NULL;
    tag_got((int64_t)tag);
    Py_RETURN_NONE;
}

static PyObject *native_set_current_tag(PyObject *mod, PyObject *arg)
{
    long long tag = PyLong_AsLongLong(arg);
    if (tag == -1 && PyErr_Occurred())
        return NULL;
    t_tag = tag;
    t_emitted = 0;
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
    {"take_tagged", (PyCFunction)Fifo_take_tagged, METH_O,
     "Take n waiting items: (the items, each one's path tag) (keep_tags)."},
    {"take_stamped_tagged", (PyCFunction)Fifo_take_stamped_tagged, METH_O,
     "Take n waiting items: (the items, their tail tap's ticks, their path tags)."},
    {"keep_tags", (PyCFunction)Fifo_keep_tags, METH_NOARGS,
     "Carry each item's path tag with it (call before the first put)."},
    {"tag_departures", (PyCFunction)(void (*)(void))Fifo_tag_departures,
     METH_VARARGS | METH_KEYWORDS,
     "tag_departures(ring, every, min_gap_ticks=0, seed=1): a path's origin: tag one item "
     "in about every (jittered; every doubles while tags come closer than min_gap_ticks), "
     "record each tag leaving into ring."},
    {"tag_arrivals", (PyCFunction)Fifo_tag_arrivals, METH_O,
     "Record each tagged item taken into ring (a path's end)."},
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
    {"last_tag", (getter)Fifo_get_last_tag, NULL, "the tag of the item taken last", NULL},
    {"tag_every", (getter)Fifo_get_tag_every, NULL, "the sampler's period now", NULL},
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
