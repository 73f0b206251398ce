/* The pipeline simulator's event loop (model/network.py's _Simulation), compiled. Its rules,
   its order of events and its arithmetic are the Python loop's, step for step (IEEE doubles as
   written; Python's min and max, which keep the first of equals); the random numbers come from
   the same generator through two calls back (a stage's next pool of service times, the next gap
   between background jobs), made in the same order. The tests hold it to the Python loop bit for
   bit on random pipelines. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { IDLE, BUSY, BLOCKED_IN, BLOCKED_OUT };
enum { CPU_TICK, WAKE, START, BACKGROUND, SWITCH };
enum { R_CPU, R_GET, R_PUT, R_EMIT, R_AFTER };
#define MONITOR (-2)
#define BG (-10)

static inline double pymax(double a, double b) { return b > a ? b : a; }
static inline double pymin(double a, double b) { return b < a ? b : a; }

/* -- growable containers ------------------------------------------------------------------- */

typedef struct { double t; int64_t seq; int kind; int who; int64_t token; } Event;
typedef struct { Event *a; Py_ssize_t n, cap; } Heap;
/* rings whose capacity is a power of 2 (grow doubles it from 16): an index wraps by a mask */
typedef struct { double *a; Py_ssize_t head, n, cap; } DQueue; /* a ring of doubles */
typedef struct { int *a; Py_ssize_t head, n, cap; } IQueue;    /* a ring of ints */
typedef struct { double *a; Py_ssize_t n, cap; } Vec;

static int grow(void **a, Py_ssize_t *cap, size_t item)
{
    Py_ssize_t c = *cap ? 2 * *cap : 16;
    void *p = realloc(*a, (size_t)c * item);
    if (p == NULL)
        return -1;
    *a = p;
    *cap = c;
    return 0;
}

static inline int ev_less(const Event *x, const Event *y)
{
    return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

static int heap_push(Heap *h, Event e)
{
    if (h->n == h->cap && grow((void **)&h->a, &h->cap, sizeof(Event)) < 0)
        return -1;
    Py_ssize_t i = h->n++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!ev_less(&e, &h->a[p]))
            break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = e;
    return 0;
}

static Event heap_pop(Heap *h)
{
    Event top = h->a[0], last = h->a[--h->n];
    Py_ssize_t i = 0, n = h->n;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ev_less(&h->a[c + 1], &h->a[c]))
            c++;
        if (!ev_less(&h->a[c], &last))
            break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (n > 0)
        h->a[i] = last;
    return top;
}

/* A full ring grown (doubled), the part from head to the old end moved to the new end. */
static int ring_grow(void **a, Py_ssize_t *head, Py_ssize_t n, Py_ssize_t *cap, size_t item)
{
    Py_ssize_t old = *cap;
    if (grow(a, cap, item) < 0)
        return -1;
    if (*head + n > old) {
        Py_ssize_t tail = old - *head;
        char *base = *a;
        memmove(base + (size_t)(*cap - tail) * item, base + (size_t)*head * item, (size_t)tail * item);
        *head = *cap - tail;
    }
    return 0;
}

static int dq_push(DQueue *q, double x)
{
    if (q->n == q->cap && ring_grow((void **)&q->a, &q->head, q->n, &q->cap, sizeof(double)) < 0)
        return -1;
    q->a[(q->head + q->n) & (q->cap - 1)] = x;
    q->n++;
    return 0;
}
static inline double dq_first(const DQueue *q) { return q->a[q->head]; }
static inline double dq_last(const DQueue *q) { return q->a[(q->head + q->n - 1) & (q->cap - 1)]; }
static inline void dq_popleft(DQueue *q)
{
    q->head = (q->head + 1) & (q->cap - 1);
    q->n--;
}

static int iq_push(IQueue *q, int x)
{
    if (q->n == q->cap && ring_grow((void **)&q->a, &q->head, q->n, &q->cap, sizeof(int)) < 0)
        return -1;
    q->a[(q->head + q->n) & (q->cap - 1)] = x;
    q->n++;
    return 0;
}
static inline int iq_popleft(IQueue *q)
{
    int x = q->a[q->head];
    q->head = (q->head + 1) & (q->cap - 1);
    q->n--;
    return x;
}

static int vec_push(Vec *v, double x)
{
    if (v->n == v->cap && grow((void **)&v->a, &v->cap, sizeof(double)) < 0)
        return -1;
    v->a[v->n++] = x;
    return 0;
}

/* -- the simulation ------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t cap;
    double delay;
    DQueue items; /* ready times */
    int getter;
    IQueue putters;
    int ended;
    double level_t;
    double *levels;
    Vec puts, takes;
} Chan;

typedef struct {
    double sw;
    int holder;
    IQueue wait;
    double since, busy;
    int64_t gen, switch_gen;
} Lock;

typedef struct {
    int idx;
    Py_buffer pool; /* the service times it draws from now, in order */
    int has_pool;
    double cpu_share, overhead, locked, ratio;
    int lock;
    int *ins, nins, *outs, nouts, *active;
    int broadcast, zip_in, in_order;
    int64_t left;
    int state;
    double since, spent[4];
    Py_ssize_t draw;
    double cpu, unlocked, free_, credit;
    int64_t pending, rr_out, rr_in, zip_left;
    int done, holds, in_cpu, resume, put_ci;
    double job_t, job_w, runq, worked;
} Worker;

typedef struct {
    Heap heap;
    int64_t seq;
    double now, horizon;
    Chan *chans;
    int nchans;
    Lock *locks;
    int nlocks;
    Worker *ws;
    int n;
    /* CPU jobs on the cores, in the order they came (a Python dict's): id, work left */
    int *job_id;
    double *job_left;
    Py_ssize_t njobs, jobs_cap;
    int *done_buf;
    double cpu_t;
    int64_t cpu_token;
    int stage_jobs;
    int64_t bg_id;
    double bg_part;
    double cores_busy;
    int cores;
    double bg_cores, bg_job_ns, monitor_ns, monitor_job_ns;
    double backlog;
    int monitor_on;
    int64_t live;
    int finished;
    PyObject *pool_cb, *gap_cb;
    int err;
} Sim;

static void fail(Sim *s) { s->err = 1; }

static void at(Sim *s, double t, int kind, int who, int64_t token)
{
    s->seq++;
    if (kind != BACKGROUND && kind != CPU_TICK)
        s->live++;
    Event e = {t, s->seq, kind, who, token};
    if (heap_push(&s->heap, e) < 0)
        fail(s);
}

static void set_state(Sim *s, Worker *w, int state)
{
    w->spent[w->state] += s->now - w->since;
    w->state = state;
    w->since = s->now;
}

static void level(Sim *s, Chan *ch)
{
    if (ch->items.n > ch->cap) { /* a channel over its capacity: a step out of the rules */
        PyErr_SetString(PyExc_RuntimeError, "the simulation put into a full channel");
        fail(s);
        return;
    }
    ch->levels[ch->items.n] += s->now - ch->level_t;
    ch->level_t = s->now;
}

static double bg_gap(Sim *s)
{
    PyObject *r = PyObject_CallNoArgs(s->gap_cb);
    if (r == NULL) {
        fail(s);
        return 0.0;
    }
    double g = PyFloat_AsDouble(r);
    Py_DECREF(r);
    if (g == -1.0 && PyErr_Occurred()) {
        fail(s);
        return 0.0;
    }
    return g;
}

/* The worker's next pool of service times (the generator's next draws, or its trace again). */
static int refill(Sim *s, Worker *w)
{
    PyObject *arr = PyObject_CallFunction(s->pool_cb, "i", w->idx);
    if (arr == NULL)
        return -1;
    Py_buffer view;
    int bad = PyObject_GetBuffer(arr, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT);
    Py_DECREF(arr);
    if (bad < 0)
        return -1;
    if (view.itemsize != 8 || view.format == NULL || strcmp(view.format, "d") != 0 || view.len == 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "a stage's pool of service times: a float64 array, not empty");
        return -1;
    }
    if (w->has_pool)
        PyBuffer_Release(&w->pool);
    w->pool = view;
    w->has_pool = 1;
    w->draw = 0;
    return 0;
}

/* -- the cores -------------------------------------------------------------------------------- */

static double cpu_rate(Sim *s)
{
    Py_ssize_t n = s->njobs;
    return n ? pymin(1.0, (double)s->cores / (double)n) : 1.0;
}

static void cpu_advance(Sim *s)
{
    double dt = s->now - s->cpu_t;
    if (dt > 0 && s->njobs) {
        double done = dt * cpu_rate(s);
        for (Py_ssize_t i = 0; i < s->njobs; i++)
            s->job_left[i] -= done;
        Py_ssize_t busy = s->njobs < s->cores ? s->njobs : s->cores;
        s->cores_busy += dt * (double)busy;
    }
    s->cpu_t = s->now;
}

static void cpu_schedule(Sim *s)
{
    s->cpu_token++;
    if (s->njobs) {
        double m = s->job_left[0];
        for (Py_ssize_t i = 1; i < s->njobs; i++)
            m = pymin(m, s->job_left[i]);
        double left = pymax(m, 0.0);
        if (isfinite(left))
            at(s, s->now + left / cpu_rate(s), CPU_TICK, -1, s->cpu_token);
    }
}

static void cpu_start(Sim *s, int job, double work)
{
    cpu_advance(s);
    Py_ssize_t i;
    for (i = 0; i < s->njobs; i++)
        if (s->job_id[i] == job)
            break;
    if (i == s->njobs) {
        if (s->njobs == s->jobs_cap) {
            Py_ssize_t c = s->jobs_cap ? 2 * s->jobs_cap : 16;
            int *ids = realloc(s->job_id, (size_t)c * sizeof(int));
            if (ids == NULL) {
                fail(s);
                return;
            }
            s->job_id = ids;
            double *left = realloc(s->job_left, (size_t)c * sizeof(double));
            if (left == NULL) {
                fail(s);
                return;
            }
            s->job_left = left;
            int *d = realloc(s->done_buf, (size_t)c * sizeof(int));
            if (d == NULL) {
                fail(s);
                return;
            }
            s->done_buf = d;
            s->jobs_cap = c;
        }
        s->job_id[s->njobs] = job;
        s->njobs++;
    }
    s->job_left[i] = work;
    if (job >= 0) {
        s->stage_jobs++;
        Worker *w = &s->ws[job];
        w->job_t = s->now;
        w->job_w = work;
    }
    cpu_schedule(s);
}

static void jobs_remove(Sim *s, Py_ssize_t i)
{
    memmove(s->job_id + i, s->job_id + i + 1, (size_t)(s->njobs - i - 1) * sizeof(int));
    memmove(s->job_left + i, s->job_left + i + 1, (size_t)(s->njobs - i - 1) * sizeof(double));
    s->njobs--;
}

/* Take a job off the cores (preempted); its work left. */
static double cpu_stop(Sim *s, int job)
{
    cpu_advance(s);
    Py_ssize_t i;
    for (i = 0; i < s->njobs; i++)
        if (s->job_id[i] == job)
            break;
    double left = i < s->njobs ? s->job_left[i] : 0.0;
    if (i < s->njobs)
        jobs_remove(s, i);
    if (job >= 0) {
        s->stage_jobs--;
        Worker *w = &s->ws[job];
        double done = w->job_w - pymax(left, 0.0);
        w->runq += (s->now - w->job_t) - done;
        w->worked += done;
    }
    cpu_schedule(s);
    return pymax(left, 0.0);
}

static void monitor(Sim *s)
{
    if (s->monitor_on || s->backlog < 1.0 || s->finished == s->n)
        return;
    s->monitor_on = 1;
    double job = pymin(s->backlog, s->monitor_job_ns);
    s->backlog -= job;
    cpu_start(s, MONITOR, job);
}

/* -- the steps (each the Python method of the same name) ------------------------------------ */

static void wake(Sim *s, Worker *w);
static void serve(Sim *s, Worker *w);
static void emit(Sim *s, Worker *w);
static void after_cpu(Sim *s, Worker *w);
static void finish(Sim *s, Worker *w);
static void drop(Sim *s, Worker *w);

static void schedule_switch(Sim *s, int li)
{
    Lock *lk = &s->locks[li];
    if (lk->switch_gen != lk->gen) {
        lk->switch_gen = lk->gen;
        at(s, s->now + lk->sw, SWITCH, li, lk->gen);
    }
}

static void take(Sim *s, int li, Worker *w)
{
    Lock *lk = &s->locks[li];
    lk->holder = w->idx;
    lk->since = s->now;
    lk->gen++;
    w->holds = 1;
    if (lk->wait.n)
        schedule_switch(s, li);
}

static void hand(Sim *s, int li, Worker *w)
{
    take(s, li, w);
    at(s, s->now, WAKE, w->idx, 0);
}

static void drop(Sim *s, Worker *w)
{
    if (!w->holds)
        return;
    w->holds = 0;
    int li = w->lock;
    Lock *lk = &s->locks[li];
    lk->busy += s->now - lk->since;
    lk->holder = -1;
    if (lk->wait.n)
        hand(s, li, &s->ws[iq_popleft(&lk->wait)]);
}

static void want_core(Sim *s, Worker *w)
{
    if (w->cpu > 0) {
        w->in_cpu = 1;
        cpu_start(s, w->idx, w->cpu);
    } else
        cpu_start(s, w->idx, w->unlocked);
}

static void cpu_done(Sim *s, Worker *w)
{
    w->in_cpu = 0;
    w->cpu = 0.0;
    if (w->unlocked > 0) {
        drop(s, w);
        cpu_start(s, w->idx, w->unlocked);
        return;
    }
    after_cpu(s, w);
}

static void after_cpu(Sim *s, Worker *w)
{
    w->unlocked = 0.0;
    if (w->free_ > 0) {
        drop(s, w);
        w->resume = R_EMIT;
        at(s, s->now + w->free_, WAKE, w->idx, 0);
    } else
        emit(s, w);
}

static void switch_(Sim *s, int li, int64_t gen)
{
    Lock *lk = &s->locks[li];
    if (gen != lk->gen || !lk->wait.n || lk->holder < 0)
        return;
    Worker *h = &s->ws[lk->holder];
    if (!h->in_cpu) {
        lk->switch_gen = -1;
        schedule_switch(s, li);
        return;
    }
    h->cpu = cpu_stop(s, h->idx);
    h->in_cpu = 0;
    h->resume = R_CPU;
    if (iq_push(&lk->wait, h->idx) < 0)
        fail(s);
    drop(s, h);
    schedule_switch(s, li);
}

static void room(Sim *s, int ci)
{
    Worker *p = &s->ws[iq_popleft(&s->chans[ci].putters)];
    p->resume = R_PUT;
    p->put_ci = ci;
    at(s, s->now, WAKE, p->idx, 0);
}

static void get(Sim *s, Worker *w)
{
    for (;;) {
        int na = 0;
        for (int k = 0; k < w->nins; k++) {
            Chan *c = &s->chans[w->ins[k]];
            if (!(c->ended && !c->items.n))
                w->active[na++] = w->ins[k];
        }
        if (!na) {
            if (w->zip_left && w->zip_left < w->nins) {
                w->zip_left = 0;
                serve(s, w);
                return;
            }
            finish(s, w);
            return;
        }
        int ci = w->active[na == 1 ? 0 : w->rr_in % na];
        Chan *ch = &s->chans[ci];
        if (ch->items.n && dq_first(&ch->items) <= s->now) {
            level(s, ch);
            dq_popleft(&ch->items);
            if (vec_push(&ch->takes, s->now) < 0)
                fail(s);
            if (ch->putters.n)
                room(s, ci);
            if (w->zip_in && w->nins > 1) {
                w->zip_left = (w->zip_left ? w->zip_left : na) - 1;
                w->rr_in++;
                if (w->zip_left > 0)
                    continue;
            } else
                w->rr_in++;
            serve(s, w);
            return;
        }
        set_state(s, w, BLOCKED_IN);
        w->resume = R_GET;
        if (ch->items.n)
            at(s, dq_first(&ch->items), WAKE, w->idx, 0);
        else
            ch->getter = w->idx;
        drop(s, w);
        return;
    }
}

static void put_one(Sim *s, Worker *w, int ci)
{
    Chan *ch = &s->chans[ci];
    level(s, ch);
    if (dq_push(&ch->items, s->now + ch->delay) < 0 || vec_push(&ch->puts, s->now) < 0)
        fail(s);
    if (!w->nins && s->monitor_ns > 0) {
        s->backlog += s->monitor_ns;
        monitor(s);
    }
    w->rr_out++;
    if (w->broadcast) {
        if (w->nouts == 1 || w->rr_out % w->nouts == 0)
            w->pending--;
    } else
        w->pending--;
    if (ch->getter >= 0) {
        int g = ch->getter;
        ch->getter = -1;
        at(s, pymax(s->now, dq_last(&ch->items)), WAKE, g, 0);
    }
}

static void resume(Sim *s, Worker *w)
{
    switch (w->resume) {
    case R_CPU:
        want_core(s, w);
        break;
    case R_GET:
        get(s, w);
        break;
    case R_PUT:
        put_one(s, w, w->put_ci);
        emit(s, w);
        break;
    case R_EMIT:
        emit(s, w);
        break;
    default:
        after_cpu(s, w);
    }
}

static void wake(Sim *s, Worker *w)
{
    if (w->holds) {
        resume(s, w);
        return;
    }
    Lock *lk = &s->locks[w->lock];
    if (lk->holder < 0) {
        take(s, w->lock, w);
        resume(s, w);
    } else {
        if (iq_push(&lk->wait, w->idx) < 0)
            fail(s);
        schedule_switch(s, w->lock);
    }
}

static void serve(Sim *s, Worker *w)
{
    set_state(s, w, BUSY);
    if (w->draw >= w->pool.len / 8 && refill(s, w) < 0) {
        fail(s);
        return;
    }
    double sv = ((const double *)w->pool.buf)[w->draw];
    w->draw++;
    double cpu = w->overhead + w->cpu_share * sv;
    w->cpu = cpu * w->locked;
    w->unlocked = cpu - w->cpu;
    w->free_ = sv - w->cpu_share * sv;
    w->credit += w->nins ? w->ratio : 1.0;
    w->pending = (int64_t)(w->credit + 1e-9);
    w->credit -= (double)w->pending;
    if (w->cpu > 0) {
        w->resume = R_CPU;
        wake(s, w);
    } else {
        drop(s, w);
        if (w->unlocked > 0)
            want_core(s, w);
        else
            after_cpu(s, w);
    }
}

static void emit(Sim *s, Worker *w)
{
    while (w->pending > 0 && w->nouts) {
        int ci = w->outs[w->nouts == 1 ? 0 : w->rr_out % w->nouts];
        Chan *ch = &s->chans[ci];
        if (ch->items.n >= ch->cap) {
            set_state(s, w, BLOCKED_OUT);
            if (iq_push(&ch->putters, w->idx) < 0)
                fail(s);
            drop(s, w);
            return;
        }
        put_one(s, w, ci);
        if (s->err)
            return;
    }
    w->pending = 0;
    if (w->nins) {
        set_state(s, w, BUSY);
        get(s, w);
    } else if (w->left != 0 && s->now < s->horizon) {
        if (w->left > 0)
            w->left--;
        if (w->left == 0)
            finish(s, w);
        else
            serve(s, w);
    } else
        finish(s, w);
}

static void finish(Sim *s, Worker *w)
{
    if (w->done)
        return;
    drop(s, w);
    set_state(s, w, IDLE);
    w->done = 1;
    s->finished++;
    for (int k = 0; k < w->nouts; k++) {
        Chan *ch = &s->chans[w->outs[k]];
        ch->ended = 1;
        if (ch->getter >= 0) {
            int g = ch->getter;
            ch->getter = -1;
            at(s, s->now, WAKE, g, 0);
        }
    }
}

static void cpu_tick(Sim *s)
{
    cpu_advance(s);
    Py_ssize_t nd = 0;
    for (Py_ssize_t i = 0; i < s->njobs;) {
        if (s->job_left[i] <= 1e-3) {
            int k = s->job_id[i];
            s->done_buf[nd++] = k;
            jobs_remove(s, i);
            if (k >= 0)
                s->stage_jobs--;
        } else
            i++;
    }
    cpu_schedule(s);
    /* the ids done, kept apart: the steps below start jobs of their own */
    int stack[16], *done = nd <= 16 ? stack : malloc((size_t)nd * sizeof(int));
    if (done == NULL) {
        fail(s);
        return;
    }
    memcpy(done, s->done_buf, (size_t)nd * sizeof(int));
    for (Py_ssize_t j = 0; j < nd && !s->err; j++) {
        int k = done[j];
        if (k >= 0) {
            Worker *w = &s->ws[k];
            w->runq += (s->now - w->job_t) - w->job_w;
            w->worked += w->job_w;
            if (w->in_cpu)
                cpu_done(s, w);
            else {
                w->resume = R_AFTER;
                wake(s, w);
            }
        } else if (k == MONITOR) {
            s->monitor_on = 0;
            monitor(s);
        }
    }
    if (done != stack)
        free(done);
}

static void run(Sim *s)
{
    for (int i = 0; i < s->n; i++)
        at(s, 0.0, START, i, 0);
    int64_t whole = (int64_t)s->bg_cores;
    for (int64_t i = 0; i < whole; i++)
        cpu_start(s, (int)(BG - 1 - i), INFINITY);
    s->bg_id = BG - 1 - whole;
    s->bg_part = s->bg_cores - (double)whole;
    if (s->bg_part > 1e-9)
        at(s, bg_gap(s), BACKGROUND, -1, 0);
    while (s->heap.n && !s->err) {
        Event e = heap_pop(&s->heap);
        if (e.t > s->horizon) {
            s->now = s->horizon;
            break;
        }
        s->now = e.t;
        if (e.kind == CPU_TICK) {
            if (e.token == s->cpu_token)
                cpu_tick(s);
        } else if (e.kind == BACKGROUND) {
            at(s, s->now + bg_gap(s), BACKGROUND, -1, 0);
            s->bg_id--;
            cpu_start(s, (int)s->bg_id, s->bg_job_ns);
        } else {
            s->live--;
            if (e.kind == SWITCH)
                switch_(s, e.who, e.token);
            else {
                Worker *w = &s->ws[e.who];
                if (e.kind == WAKE)
                    wake(s, w);
                else {
                    set_state(s, w, BUSY);
                    if (w->nins) {
                        w->resume = R_GET;
                        wake(s, w);
                    } else
                        serve(s, w);
                }
            }
        }
        if (s->finished == s->n || (!s->live && !s->stage_jobs))
            break;
    }
}

/* -- the Python side -------------------------------------------------------------------------- */

static int int_list(PyObject *seq, int **out, int *n, int limit, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return -1;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(fast);
    *out = calloc((size_t)(m ? m : 1), sizeof(int));
    if (*out == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        if (v < 0 || v >= limit) {
            Py_DECREF(fast);
            PyErr_Format(PyExc_ValueError, "%s: index %ld out of range", what, v);
            return -1;
        }
        (*out)[i] = (int)v;
    }
    *n = (int)m;
    Py_DECREF(fast);
    return 0;
}

static void sim_free(Sim *s)
{
    free(s->heap.a);
    for (int i = 0; s->chans && i < s->nchans; i++) {
        Chan *c = &s->chans[i];
        free(c->items.a);
        free(c->putters.a);
        free(c->levels);
        free(c->puts.a);
        free(c->takes.a);
    }
    free(s->chans);
    for (int i = 0; s->locks && i < s->nlocks; i++)
        free(s->locks[i].wait.a);
    free(s->locks);
    for (int i = 0; s->ws && i < s->n; i++) {
        Worker *w = &s->ws[i];
        if (w->has_pool)
            PyBuffer_Release(&w->pool);
        free(w->ins);
        free(w->outs);
        free(w->active);
    }
    free(s->ws);
    free(s->job_id);
    free(s->job_left);
    free(s->done_buf);
}

/* A block of doubles the loop filled, handed over (not copied) to a Python object that frees
   it when the last view of it goes: the Python side views it as float64 (numpy.frombuffer). */
typedef struct {
    PyObject_HEAD
    double *a;
    Py_ssize_t n;
} Block;

static void block_dealloc(Block *b)
{
    free(b->a);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int block_getbuffer(Block *b, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)b, b->a, b->n * (Py_ssize_t)sizeof(double), 0, flags);
}

static PyBufferProcs block_as_buffer = {(getbufferproc)block_getbuffer, NULL};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streamscope.model._netsim.Block",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = (destructor)block_dealloc,
    .tp_as_buffer = &block_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "doubles the simulation filled (their bytes, through the buffer protocol)",
};

/* *a (n doubles) handed to a Block; *a is the Block's from now on (NULL here). */
static PyObject *vec_array(double **a, Py_ssize_t n)
{
    Block *b = PyObject_New(Block, &BlockType);
    if (b == NULL)
        return NULL;
    b->a = *a;
    b->n = *a ? n : 0;
    *a = NULL;
    return (PyObject *)b;
}

/* run(workers, chans, switches, cores, bg_cores, bg_job_ns, monitor_ns, monitor_job_ns, horizon,
       pool, gap)
   workers: per stage (first pool, cpu_share, overhead, locked, ratio, lock, ins, outs,
   broadcast, zip_in, left, in_order); chans: per channel (capacity, delay); switches: per lock
   its switch interval; pool(i): stage i's next pool; gap(): the next background gap.
   Returns (end, finished, [(puts, takes, levels)], [(spent, runq, worked)], [lock busy],
   cores_busy): the arrays as bytearrays of float64. */
static PyObject *sim_run(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "run(workers, chans, switches, cores, bg_cores, bg_job_ns, "
                                         "monitor_ns, monitor_job_ns, horizon, pool, gap)");
        return NULL;
    }
    Sim s;
    memset(&s, 0, sizeof s);
    PyObject *result = NULL;
    PyObject *wl = PySequence_Fast(args[0], "workers"), *cl = NULL, *ll = NULL;
    if (wl == NULL)
        return NULL;
    cl = PySequence_Fast(args[1], "chans");
    if (cl == NULL)
        goto done;
    ll = PySequence_Fast(args[2], "switches");
    if (ll == NULL)
        goto done;
    s.cores = (int)PyLong_AsLong(args[3]);
    s.bg_cores = PyFloat_AsDouble(args[4]);
    s.bg_job_ns = PyFloat_AsDouble(args[5]);
    s.monitor_ns = PyFloat_AsDouble(args[6]);
    s.monitor_job_ns = PyFloat_AsDouble(args[7]);
    s.horizon = PyFloat_AsDouble(args[8]);
    s.pool_cb = args[9];
    s.gap_cb = args[10];
    if (PyErr_Occurred())
        goto done;
    if (s.cores < 1) {
        PyErr_SetString(PyExc_ValueError, "run: at least 1 core");
        goto done;
    }
    s.nchans = (int)PySequence_Fast_GET_SIZE(cl);
    s.chans = calloc((size_t)(s.nchans ? s.nchans : 1), sizeof(Chan));
    s.nlocks = (int)PySequence_Fast_GET_SIZE(ll);
    s.locks = calloc((size_t)(s.nlocks ? s.nlocks : 1), sizeof(Lock));
    s.n = (int)PySequence_Fast_GET_SIZE(wl);
    s.ws = calloc((size_t)(s.n ? s.n : 1), sizeof(Worker));
    if (s.chans == NULL || s.locks == NULL || s.ws == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < s.nchans; i++) {
        Chan *c = &s.chans[i];
        Py_ssize_t cap;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(cl, i), "nd", &cap, &c->delay))
            goto done;
        if (cap < 1) {
            PyErr_SetString(PyExc_ValueError, "run: a channel's capacity is at least 1");
            goto done;
        }
        c->cap = cap;
        c->getter = -1;
        c->levels = calloc((size_t)cap + 1, sizeof(double));
        if (c->levels == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (int i = 0; i < s.nlocks; i++) {
        Lock *lk = &s.locks[i];
        lk->sw = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(ll, i));
        if (lk->sw == -1.0 && PyErr_Occurred())
            goto done;
        lk->holder = -1;
        lk->switch_gen = -1;
    }
    for (int i = 0; i < s.n; i++) {
        Worker *w = &s.ws[i];
        PyObject *pool, *ins, *outs;
        long long left;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(wl, i), "OddddiOOppLp", &pool, &w->cpu_share,
                              &w->overhead, &w->locked, &w->ratio, &w->lock, &ins, &outs,
                              &w->broadcast, &w->zip_in, &left, &w->in_order))
            goto done;
        w->idx = i;
        w->left = left;
        w->state = IDLE;
        w->resume = R_GET;
        w->put_ci = -1;
        if (w->lock < 0 || w->lock >= s.nlocks) {
            PyErr_SetString(PyExc_ValueError, "run: a stage's lock out of range");
            goto done;
        }
        if (int_list(ins, &w->ins, &w->nins, s.nchans, "ins") < 0 ||
            int_list(outs, &w->outs, &w->nouts, s.nchans, "outs") < 0)
            goto done;
        w->active = calloc((size_t)(w->nins ? w->nins : 1), sizeof(int));
        if (w->active == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        if (PyObject_GetBuffer(pool, &w->pool, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            goto done;
        w->has_pool = 1;
        if (w->pool.itemsize != 8 || w->pool.format == NULL || strcmp(w->pool.format, "d") != 0 ||
            w->pool.len == 0) {
            PyErr_SetString(PyExc_ValueError, "run: a stage's pool is a float64 array, not empty");
            goto done;
        }
    }
    run(&s);
    if (s.err) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    /* _result */
    double end = s.now;
    cpu_advance(&s);
    for (int i = 0; i < s.n; i++)
        set_state(&s, &s.ws[i], s.ws[i].state);
    for (int i = 0; i < s.nchans; i++)
        level(&s, &s.chans[i]);
    PyObject *chans = PyList_New(s.nchans), *workers = PyList_New(s.n), *locks = PyList_New(s.nlocks);
    if (chans == NULL || workers == NULL || locks == NULL) {
        Py_XDECREF(chans);
        Py_XDECREF(workers);
        Py_XDECREF(locks);
        goto done;
    }
    for (int i = 0; i < s.nchans; i++) {
        Chan *c = &s.chans[i];
        PyObject *t = Py_BuildValue("(NNN)", vec_array(&c->puts.a, c->puts.n),
                                    vec_array(&c->takes.a, c->takes.n), vec_array(&c->levels, c->cap + 1));
        if (t == NULL)
            goto out;
        PyList_SET_ITEM(chans, i, t);
    }
    for (int i = 0; i < s.n; i++) {
        Worker *w = &s.ws[i];
        PyObject *t = Py_BuildValue("(NddO)", PyByteArray_FromStringAndSize((const char *)w->spent, sizeof w->spent), w->runq, w->worked,
                                    w->done ? Py_True : Py_False);
        if (t == NULL)
            goto out;
        PyList_SET_ITEM(workers, i, t);
    }
    for (int i = 0; i < s.nlocks; i++) {
        Lock *lk = &s.locks[i];
        if (lk->holder >= 0)
            lk->busy += end - lk->since;
        PyObject *f = PyFloat_FromDouble(lk->busy);
        if (f == NULL)
            goto out;
        PyList_SET_ITEM(locks, i, f);
    }
    result = Py_BuildValue("(diOOOd)", end, s.finished, chans, workers, locks, s.cores_busy);
out:
    Py_DECREF(chans);
    Py_DECREF(workers);
    Py_DECREF(locks);
done:
    sim_free(&s);
    Py_XDECREF(wl);
    Py_XDECREF(cl);
    Py_XDECREF(ll);
    return result;
}

static PyMethodDef methods[] = {
    {"run", (PyCFunction)(void (*)(void))sim_run, METH_FASTCALL,
     "One run of a pipeline network, event by event (model/network.py's _Simulation.run)."},
    {NULL}};

static struct PyModuleDef netsim_module = {
    PyModuleDef_HEAD_INIT, "_netsim", "The pipeline simulator's event loop, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__netsim(void)
{
    if (PyType_Ready(&BlockType) < 0)
        return NULL;
    return PyModule_Create(&netsim_module);
}
