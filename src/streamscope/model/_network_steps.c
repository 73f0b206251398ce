/* The pipeline simulator's steps (included by _network.c; each the Python method of
   model/_netloop.py of the same name): a worker's taking an input (the channel's waiting
   getters in the order they asked), serving it in parts (its CPU part on the cores, holding its
   lock or not, then the rest of its service time free), putting its outputs (waiting for room
   behind the workers that waited before it) and finishing (a channel ends with the last worker
   of its producer stage); the CPU tick, and the loop of events. */

static void wake(Sim *s, Worker *w);
static void serve(Sim *s, Worker *w);
static void emit(Sim *s, Worker *w);
static void after_cpu(Sim *s, Worker *w);
static void finish(Sim *s, Worker *w);

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

static void room(Sim *s, int ci)
{
    Chan *ch = &s->chans[ci];
    ch->reserved++;
    Worker *p = &s->ws[iq_popleft(&ch->putters)];
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
        else if (iq_push(&ch->getters, w->idx) < 0)
            fail(s);
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
    if (ch->getters.n)
        at(s, pymax(s->now, dq_last(&ch->items)), WAKE, iq_popleft(&ch->getters), 0);
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
        s->chans[w->put_ci].reserved--;
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
        if (ch->items.n + ch->reserved >= ch->cap) {
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
        if (--ch->producers == 0) {
            ch->ended = 1;
            while (ch->getters.n)
                at(s, s->now, WAKE, iq_popleft(&ch->getters), 0);
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
        at(s, s->ws[i].start > 0 ? s->ws[i].start : 0.0, START, i, 0);
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
                    } else if (w->left == 0) /* a source's worker left no item of its own */
                        finish(s, w);
                    else
                        serve(s, w);
                }
            }
        }
        if (s->finished == s->n || (!s->live && !s->stage_jobs))
            break;
    }
}

