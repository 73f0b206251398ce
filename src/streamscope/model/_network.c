/* The pipeline simulator's event loop (model/_netloop.py's Simulation), compiled. Its rules,
   its order of events and its arithmetic are the Python loop's, step for step (IEEE doubles as
   written; Python's min and max, which keep the first of equals); the random numbers come from
   the same generator through two calls back (a worker's next pool of service times, the next gap
   between background jobs), made in the same order. The tests hold it to the Python loop bit for
   bit on random pipelines.

   One worker of a stage is one Worker here (a stage of several workers: several, in a row, each
   with its own lock index and items to make, as model/_netloop.py lays them out). This file
   holds what the parts share (the state of a run: channels, locks, workers) and the module (the
   arguments in, the figures out); the parts are each in a file of its own, included below as
   one translation unit: _network_containers.c (the event heap, rings, vectors),
   _network_cores.c (the cores' CPU jobs, the interpreters' locks) and _network_steps.c (a
   worker's steps and the event loop). */
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

#include "_network_containers.c"

/* -- the simulation ------------------------------------------------------------------------- */

/* A channel: its items, the workers waiting to take (in the order they asked) and for room (in
   the order they came), the room already handed to woken putters (reserved), the workers of its
   producer stage still running (it ends when none is). */
typedef struct {
    Py_ssize_t cap;
    double delay;
    DQueue items; /* ready times */
    IQueue getters, putters;
    Py_ssize_t reserved;
    int producers;
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
    double start; /* when it begins (ns) */
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

#include "_network_cores.c"
#include "_network_steps.c"

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
        free(c->getters.a);
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
   workers: per worker (first pool, cpu_share, overhead, locked, ratio, lock, ins, outs,
   broadcast, zip_in, left, in_order, start); chans: per channel (capacity, delay); switches: per lock
   its switch interval; pool(i): worker i's next pool; gap(): the next background gap.
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
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(wl, i), "OddddiOOppLpd", &pool, &w->cpu_share,
                              &w->overhead, &w->locked, &w->ratio, &w->lock, &ins, &outs,
                              &w->broadcast, &w->zip_in, &left, &w->in_order, &w->start))
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
        for (int k = 0; k < w->nouts; k++)
            s.chans[w->outs[k]].producers++;
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
     "One run of a pipeline network, event by event (model/network.py's Simulation.run)."},
    {NULL}};

static struct PyModuleDef netsim_module = {
    PyModuleDef_HEAD_INIT, "_netsim", "The pipeline simulator's event loop, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__netsim(void)
{
    if (PyType_Ready(&BlockType) < 0)
        return NULL;
    return PyModule_Create(&netsim_module);
}
