/* The pipeline simulator's cores and interpreters' locks (included by _network.c; each
   function the Python method of model/_netloop.py of the same name).

   The cores: CPU jobs (a worker's CPU part, the monitor's, the background load's) kept in the
   order they came (a Python dict's), sharing the cores equally (each as fast as a core while
   there are no more jobs than cores); one tick due, at the next job's end, earlier ones void.
   The locks: taken in FIFO order, handed to the first waiting worker when their holder drops
   them, taken from a holder running its Python code when a waiting worker has waited the
   switch interval (CPython's rule). */

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

/* -- the interpreters' locks ------------------------------------------------------------------ */

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

