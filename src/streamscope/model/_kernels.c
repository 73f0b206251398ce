/* The queue models' per-customer loops, compiled: the recursions that do not vectorise
   (model/recursions.py keeps each one's Python loop, which is used where this extension was not
   built, and which the tests hold this to, bit for bit). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static int f64_buffer(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t n, const char *name)
{
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (view->itemsize != 8 || view->format == NULL || strcmp(view->format, "d") != 0 ||
        (n >= 0 && view->len != n * 8)) {
        PyErr_Format(PyExc_ValueError, "%s: a C-contiguous float64 array of the customers' length", name);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* tandem_loop(a, s1, s2, cap, leave1, depart): two FIFO stations with a buffer of cap places
   between them, blocking after service: fills leave1 and depart (see _tandem_loop). */
static PyObject *tandem_loop(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "tandem_loop(a, s1, s2, cap, leave1, depart)");
        return NULL;
    }
    Py_ssize_t cap = PyLong_AsSsize_t(args[3]);
    if (cap == -1 && PyErr_Occurred())
        return NULL;
    if (cap < 0) {
        PyErr_SetString(PyExc_ValueError, "tandem_loop: cap >= 0");
        return NULL;
    }
    Py_buffer a, s1, s2, l1, d2;
    if (f64_buffer(args[0], &a, 0, -1, "a") < 0)
        return NULL;
    Py_ssize_t n = a.len / 8;
    if (f64_buffer(args[1], &s1, 0, n, "s1") < 0)
        goto fail_a;
    if (f64_buffer(args[2], &s2, 0, n, "s2") < 0)
        goto fail_s1;
    if (f64_buffer(args[4], &l1, 1, n, "leave1") < 0)
        goto fail_s2;
    if (f64_buffer(args[5], &d2, 1, n, "depart") < 0)
        goto fail_l1;
    const double *av = a.buf, *s1v = s1.buf, *s2v = s2.buf;
    double *lv = l1.buf, *dv = d2.buf;
    Py_BEGIN_ALLOW_THREADS
    double e_prev = -INFINITY, d_prev = -INFINITY;
    for (Py_ssize_t k = 0; k < n; k++) {
        double e = (e_prev > av[k] ? e_prev : av[k]) + s1v[k];
        Py_ssize_t j = k - cap - 1;
        if (j >= 0 && dv[j] > e)
            e = dv[j];
        double d = (d_prev > e ? d_prev : e) + s2v[k];
        lv[k] = e;
        dv[k] = d;
        e_prev = e;
        d_prev = d;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&d2);
    PyBuffer_Release(&l1);
    PyBuffer_Release(&s2);
    PyBuffer_Release(&s1);
    PyBuffer_Release(&a);
    Py_RETURN_NONE;
fail_l1:
    PyBuffer_Release(&l1);
fail_s2:
    PyBuffer_Release(&s2);
fail_s1:
    PyBuffer_Release(&s1);
fail_a:
    PyBuffer_Release(&a);
    return NULL;
}

static Py_ssize_t bisect_right_f64(const double *v, double x, Py_ssize_t lo, Py_ssize_t hi)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (x < v[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static Py_ssize_t bisect_left_i64(const int64_t *v, int64_t x, Py_ssize_t lo, Py_ssize_t hi)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The bus rule of model/bulk.py's _transfers over items p..n-1 of the sorted arrivals av: the
   same operations in the same order. Transfer j takes trv[j * tstep] (tstep 0: one time for
   every transfer) plus per for each item; flush: the inactivity flush points (_flush_points),
   nf of them; with s2v (not NULL) a device buffer of cap2 places served in s2v's times. Writes
   each transfer's first item (fv), start (sv) and, with s2v, delivery (dlv), and with s2v every
   item's device departure (d2). Returns the transfers, or -1 where one would carry no item. */
static Py_ssize_t bus_loop(const double *av, Py_ssize_t n, Py_ssize_t p, Py_ssize_t b, Py_ssize_t lo,
                           const double *trv, Py_ssize_t tstep, double per, double tmo, double lat,
                           double end, const int64_t *flush, Py_ssize_t nf, const double *s2v,
                           Py_ssize_t cap2, int64_t *fv, double *sv, double *dlv, double *d2)
{
    int blocking = s2v != NULL, finite = tmo < INFINITY;
    Py_ssize_t ptr = 0, h = p, j = 0;
    double free_t = -INFINITY, d_prev = -INFINITY;
    if (blocking) {
        for (Py_ssize_t k = 0; k < p; k++) {
            d_prev = (d_prev > av[k] ? d_prev : av[k]) + s2v[k];
            d2[k] = d_prev;
        }
    }
    while (h < n) {
        Py_ssize_t q = h + lo - 1;
        Py_ssize_t bound = q < n ? q : n;
        double t = q < n ? av[q] : end;
        if (free_t > t)
            t = free_t;
        if (finite) {
            while (ptr < nf - 1 && flush[ptr] < h)
                ptr++;
            if (flush[ptr] < bound) {
                Py_ssize_t r = bisect_right_f64(av, free_t, h, bound < n ? bound + 1 : n);
                Py_ssize_t i = r - 1 > h ? (Py_ssize_t)flush[bisect_left_i64(flush, r - 1, ptr, nf)]
                                         : (Py_ssize_t)flush[ptr];
                if (i < bound) {
                    double x = av[i] + tmo;
                    if (free_t > x)
                        x = free_t;
                    if (x < t)
                        t = x;
                }
            }
        }
        Py_ssize_t hb = h + b;
        Py_ssize_t m = bisect_right_f64(av, t, h, hb < n ? hb : n) - h;
        if (m < 1)
            return -1;
        double fin = t + trv[j * tstep] + per * (double)m;
        if (blocking) {
            double arr = fin + lat, got = arr;
            Py_ssize_t w = h + m - cap2 - 2;
            if (w >= 0 && d2[w] > arr)
                got = d2[w];
            free_t = got > arr ? got : fin;
            double x = (got >= d_prev ? got : d_prev) + s2v[h];
            d2[h] = x;
            for (Py_ssize_t k = h + 1; k < h + m; k++) {
                x = x + s2v[k];
                d2[k] = x;
            }
            d_prev = x;
            dlv[j] = got;
        } else {
            free_t = fin;
        }
        fv[j] = h;
        sv[j] = t;
        h += m;
        j += 1;
    }
    return j;
}

/* bulk_transfers(a, p, bulk, min_batch, transfer, per_item, timeout, latency, end, flush, s2,
   cap2, first, start, deliver, depart) -> transfers: the bus rule of model/bulk.py's
   _transfers, the same operations in the same order; writes each transfer's first item, start
   and (with s2, a device buffer of cap2) delivery, and with s2 every item's device departure. */
static PyObject *bulk_transfers(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 16) {
        PyErr_SetString(PyExc_TypeError, "bulk_transfers takes 16 arguments");
        return NULL;
    }
    Py_ssize_t p = PyLong_AsSsize_t(args[1]), b = PyLong_AsSsize_t(args[2]);
    Py_ssize_t lo = PyLong_AsSsize_t(args[3]), cap2 = PyLong_AsSsize_t(args[11]);
    double per = PyFloat_AsDouble(args[5]), tmo = PyFloat_AsDouble(args[6]);
    double lat = PyFloat_AsDouble(args[7]), end = PyFloat_AsDouble(args[8]);
    if (PyErr_Occurred())
        return NULL;
    int blocking = args[10] != Py_None;
    Py_buffer a, tr, fl, s2 = {0}, first, start, deliver, depart;
    int got_a = 0, got_tr = 0, got_fl = 0, got_s2 = 0, got_first = 0, got_start = 0;
    int got_deliver = 0, got_depart = 0;
    PyObject *result = NULL;
    if (f64_buffer(args[0], &a, 0, -1, "a") < 0)
        goto done;
    got_a = 1;
    Py_ssize_t n = a.len / 8;
    if (f64_buffer(args[4], &tr, 0, n, "transfer") < 0)
        goto done;
    got_tr = 1;
    if (PyObject_GetBuffer(args[9], &fl, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        goto done;
    got_fl = 1;
    if (fl.itemsize != 8 || fl.len < 8) {
        PyErr_SetString(PyExc_ValueError, "flush: a C-contiguous int64 array, ending in n");
        goto done;
    }
    if (blocking) {
        if (f64_buffer(args[10], &s2, 0, n, "s2") < 0)
            goto done;
        got_s2 = 1;
    }
    if (PyObject_GetBuffer(args[12], &first, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    got_first = 1;
    if (first.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "first: an int64 array of n");
        goto done;
    }
    if (f64_buffer(args[13], &start, 1, n, "start") < 0)
        goto done;
    got_start = 1;
    if (f64_buffer(args[14], &deliver, 1, n, "deliver") < 0)
        goto done;
    got_deliver = 1;
    if (f64_buffer(args[15], &depart, 1, n, "depart") < 0)
        goto done;
    got_depart = 1;
    if (p < 0 || p > n || b < 1 || lo < 1 || lo > b || cap2 < 0) {
        PyErr_SetString(PyExc_ValueError, "bulk_transfers: 0 <= p <= n, 1 <= min_batch <= bulk");
        goto done;
    }
    {
        Py_ssize_t j;
        Py_BEGIN_ALLOW_THREADS
        j = bus_loop(a.buf, n, p, b, lo, tr.buf, 1, per, tmo, lat, end, fl.buf, fl.len / 8,
                     blocking ? s2.buf : NULL, cap2, first.buf, start.buf, deliver.buf, depart.buf);
        Py_END_ALLOW_THREADS
        if (j < 0)
            PyErr_SetString(PyExc_RuntimeError, "bulk_transfers: a transfer of no item");
        else
            result = PyLong_FromSsize_t(j);
    }
done:
    if (got_depart)
        PyBuffer_Release(&depart);
    if (got_deliver)
        PyBuffer_Release(&deliver);
    if (got_start)
        PyBuffer_Release(&start);
    if (got_first)
        PyBuffer_Release(&first);
    if (got_s2)
        PyBuffer_Release(&s2);
    if (got_fl)
        PyBuffer_Release(&fl);
    if (got_tr)
        PyBuffer_Release(&tr);
    if (got_a)
        PyBuffer_Release(&a);
    return result;
}

/* histogram_draws' guide table: the first bin of each of slices equal slices of the total
   (cv: the cumulative weights, m of them, total the last; a sentinel above it). */
static void guide_build(const double *cv, Py_ssize_t m, double total, Py_ssize_t slices, Py_ssize_t *guide)
{
    Py_ssize_t i = 0;
    for (Py_ssize_t j = 0; j < slices; j++) {
        double lo = total * ((double)j / (double)slices);
        while (i < m && cv[i] <= lo)
            i++;
        guide[j] = i;
    }
}

/* One histogram draw from its uniforms u (the bin) and v (inside it): histogram_draws'. */
static inline double draw_one(double u, double v, const double *ev, const double *cv, Py_ssize_t m,
                              double total, double per, Py_ssize_t slices, const Py_ssize_t *guide)
{
    double x = u * total;
    Py_ssize_t b = m - 1; /* x at or past the total (or NaN): searchsorted's m, clamped */
    if (x < total) {
        double g = x * per;
        Py_ssize_t j = g >= (double)slices ? slices - 1 : g > 0.0 ? (Py_ssize_t)g : 0;
        b = guide[j];
        if (b > 0 && cv[b - 1] > x)
            b = bisect_right_f64(cv, x, 0, b);
        /* below the total, so these stop by the last bin */
        b += cv[b] <= x; /* a slice seldom holds more than one bin's edge */
        while (cv[b] <= x)
            b++;
    }
    return ev[b] + v * (ev[b + 1] - ev[b]);
}

/* A histogram as the two draw loops take it: its edges and cumulative weights (cv, with a
   sentinel above them: the first step forward from a guess needs no test), and the guide
   table over slices equal slices of the total. */
typedef struct {
    Py_buffer e, c;
    Py_ssize_t m, slices;
    Py_ssize_t *guide;
    double *cv, total, per;
} Hist;

/* Open h on edges and cdf (who names the caller in errors): -1 with an error set (nothing to
   close), 0 when the weights' total is not finite and positive (the general path then draws),
   1 when it can be drawn from (the guide to be built with guide_build). Close it with
   hist_close in either of the last two cases. */
static int hist_open(PyObject *edges, PyObject *cdf, const char *who, Hist *h)
{
    if (f64_buffer(cdf, &h->c, 0, -1, "cdf") < 0)
        return -1;
    h->m = h->c.len / 8;
    if (h->m < 1) {
        PyErr_Format(PyExc_ValueError, "%s: at least one bin", who);
        PyBuffer_Release(&h->c);
        return -1;
    }
    if (f64_buffer(edges, &h->e, 0, h->m + 1, "edges") < 0) {
        PyBuffer_Release(&h->c);
        return -1;
    }
    h->slices = 8 * h->m;
    h->guide = PyMem_Malloc((size_t)h->slices * sizeof(Py_ssize_t));
    h->cv = PyMem_Malloc((size_t)(h->m + 1) * sizeof(double));
    if (h->guide == NULL || h->cv == NULL) {
        PyMem_Free(h->guide);
        PyMem_Free(h->cv);
        PyBuffer_Release(&h->e);
        PyBuffer_Release(&h->c);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(h->cv, h->c.buf, (size_t)h->m * sizeof(double));
    h->cv[h->m] = INFINITY;
    h->total = h->cv[h->m - 1];
    if (!(h->total > 0.0 && h->total < INFINITY))
        return 0;
    /* Slice j of the total starts at j * total / slices; its first bin is the first cdf
       above that. Rounding may misplace a draw by a slice, so each guess is checked. */
    h->per = (double)h->slices / h->total;
    return 1;
}

static void hist_close(Hist *h)
{
    PyMem_Free(h->cv);
    PyMem_Free(h->guide);
    PyBuffer_Release(&h->e);
    PyBuffer_Release(&h->c);
}

/* histogram_draws(edges, cdf, u, v) -> bool: model/sampling.py's sample_histogram after its two
   uniform draws: u[k] becomes edges[i] + v[k] * (edges[i + 1] - edges[i]), i the bin that
   searchsorted(cdf, u[k] * cdf[-1], side="right") finds (at most the last). The bin is looked
   up through a guide table: the first bin of each of 8 equal slices of the total per bin, so a
   slice seldom holds a bin's edge; each guess is checked and searched forward from, so one or
   two comparisons a draw rather than a bisection, and the same bin. False (u untouched) where
   the weights' total is not finite: the general path then draws. */
static PyObject *histogram_draws(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "histogram_draws(edges, cdf, u, v)");
        return NULL;
    }
    Hist h;
    int ok = hist_open(args[0], args[1], "histogram_draws", &h);
    if (ok < 0)
        return NULL;
    Py_buffer u, v;
    PyObject *result = NULL;
    if (f64_buffer(args[2], &u, 1, -1, "u") < 0)
        goto fail_h;
    Py_ssize_t n = u.len / 8;
    if (f64_buffer(args[3], &v, 0, n, "v") < 0)
        goto fail_u;
    if (ok) {
        const double *ev = h.e.buf, *vv = v.buf;
        double *uv = u.buf;
        Py_BEGIN_ALLOW_THREADS
        guide_build(h.cv, h.m, h.total, h.slices, h.guide);
        for (Py_ssize_t k = 0; k < n; k++)
            uv[k] = draw_one(uv[k], vv[k], ev, h.cv, h.m, h.total, h.per, h.slices, h.guide);
        Py_END_ALLOW_THREADS
    }
    /* False (u untouched): no finite positive total, the general path decides */
    result = ok ? Py_True : Py_False;
    Py_INCREF(result);
    PyBuffer_Release(&v);
fail_u:
    PyBuffer_Release(&u);
fail_h:
    hist_close(&h);
    return result;
}

/* occupancy_sorted(a, d, t0, t1, ns) -> levels: model/occupancy.py's occupancy_from_events
   where arrivals and departures (after d = max(d, a)) are each in order: the stable sort of
   the events is then a merge (arrivals first at equal times), and ns[level] gathers each
   interval's length in the same order as bincount would. ns (n + 1 places) is written up to
   the highest level reached; returns how many levels to keep (up to the highest held for a positive time, at least 1),
   or -1 where this does not apply (a value not finite, a departure before its arrival, events
   out of order, t1 < t0): then the general path decides. */
static inline double clip(double x, double lo, double hi)
{
    /* np.clip: the lower bound, then the upper */
    x = x > lo ? x : lo;
    return x < hi ? x : hi;
}

/* occupancy_sorted's work on raw arrays: ns (n + 1 places) from the n arrivals av and
   departures dv over [t0, t1), cd a scratch of n + 1 places; returns the levels to keep, or -1
   where the events are not of the ordered kind (the general path decides). */
static Py_ssize_t occupancy_merge(const double *restrict av, const double *restrict dv, Py_ssize_t n,
                                  double t0, double t1, double *restrict ns, double *restrict cd)
{
    /* restrict: the sums written to ns cannot move the events (else each is reloaded) */
    Py_ssize_t keep = -1;
    /* Checked without branches (a NaN fails every comparison, an infinity the magnitude
       test), in the pass that prepares the departures. */
    int bad = !(isfinite(t0) && isfinite(t1) && t1 >= t0);
    double a_prev = -DBL_MAX, d_prev = -DBL_MAX;
    for (Py_ssize_t k = 0; k < n; k++) {
        double x = av[k], y = dv[k], mag = fabs(x), my = fabs(y);
        bad |= !(mag <= DBL_MAX) | !(my <= DBL_MAX) | (y < x - 1e-12 * (1.0 > mag ? 1.0 : mag));
        y = y >= x ? y : x;
        bad |= (x < a_prev) | (y < d_prev);
        a_prev = x;
        d_prev = y;
        cd[k] = clip(y, t0, t1);
    }
    cd[n] = INFINITY;
    if (!bad) {
        /* ns is zeroed level by level as the queue first reaches it (most of its n + 1
           places are never reached) */
        ns[0] = 0.0;
        Py_ssize_t j = 0, level = 0, top = 0;
        double t = t0;
        /* Arrival by arrival, the departures before it first (an arrival goes first at
           equal times; the sentinel ends the last run): faster than a branch-free merge,
           measured, as the runs between arrivals are short and predictable enough. */
        for (Py_ssize_t i = 0; i < n; i++) {
            double x = clip(av[i], t0, t1);
            while (cd[j] < x) {
                ns[level] += cd[j] - t;
                t = cd[j];
                level--;
                j++;
            }
            ns[level] += x - t;
            t = x;
            level++;
            if (level > top) {
                top = level;
                ns[level] = 0.0;
            }
        }
        for (; j < n; j++) {
            ns[level] += cd[j] - t;
            t = cd[j];
            level--;
        }
        ns[level] += t1 - t;
        keep = 1;
        for (Py_ssize_t k = top; k > 0; k--)
            if (ns[k] > 0.0) {
                keep = k + 1;
                break;
            }
    }
    return keep;
}

/* occupancy_merge where every departure is its arrival (av both; stays of no length, as a
   bus that never waits makes its queue's): the merge then adds each gap between successive
   events to level 0 and nothing but zeros elsewhere (an event's tie with the one before adds
   0 ns, to whichever level), so level 0's sum is the gaps' in turn and it is the one level
   kept: the same sum in the same order, one pass. Returns 1, or -1 as the merge would. */
static Py_ssize_t occupancy_still(const double *av, Py_ssize_t n, double t0, double t1, double *ns)
{
    int bad = !(isfinite(t0) && isfinite(t1) && t1 >= t0);
    double a_prev = -DBL_MAX, acc = 0.0, t = t0;
    for (Py_ssize_t k = 0; k < n; k++) {
        double x = av[k];
        bad |= !(fabs(x) <= DBL_MAX) | (x < a_prev);
        a_prev = x;
        x = clip(x, t0, t1);
        acc += x - t;
        t = x;
    }
    if (bad)
        return -1;
    ns[0] = acc + (t1 - t);
    return 1;
}

static PyObject *occupancy_sorted(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "occupancy_sorted(a, d, t0, t1, ns)");
        return NULL;
    }
    double t0 = PyFloat_AsDouble(args[2]), t1 = PyFloat_AsDouble(args[3]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer a, d, o;
    PyObject *result = NULL;
    if (f64_buffer(args[0], &a, 0, -1, "a") < 0)
        return NULL;
    Py_ssize_t n = a.len / 8;
    if (f64_buffer(args[1], &d, 0, n, "d") < 0)
        goto fail_a;
    if (f64_buffer(args[4], &o, 1, n + 1, "ns") < 0)
        goto fail_d;
    /* the departures, max(d, a), clipped to the window, ending in a sentinel above it */
    double *dc = PyMem_Malloc((size_t)(n + 1) * sizeof(double));
    if (dc == NULL) {
        PyErr_NoMemory();
        goto fail_o;
    }
    {
        Py_ssize_t keep;
        Py_BEGIN_ALLOW_THREADS
        keep = occupancy_merge(a.buf, d.buf, n, t0, t1, o.buf, dc);
        Py_END_ALLOW_THREADS
        result = PyLong_FromSsize_t(keep);
    }
    PyMem_Free(dc);
fail_o:
    PyBuffer_Release(&o);
fail_d:
    PyBuffer_Release(&d);
fail_a:
    PyBuffer_Release(&a);
    return result;
}

/* floor(a / b) as numpy's floor_divide computes it for doubles (and Python's float //):
   through fmod, so that a == b * (a // b) + a % b holds as far as rounding lets it. */
static double floor_divide(double a, double b)
{
    double mod = fmod(a, b);
    if (b == 0.0)
        return a / b;
    double div = (a - mod) / b;
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0))
            div -= 1.0;
    }
    double floordiv;
    if (div != 0.0) {
        floordiv = floor(div);
        if (div - floordiv > 0.5)
            floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, a / b);
    }
    return floordiv;
}

/* window_counts(gaps, span, width, counts) -> 0 or -1: model/dependence.py's renewal_profiles
   for one replication: the insertions at the running sums of gaps, those before span, counted
   per sub-window of width (floor division, as numpy's //); counts (the sub-windows) is
   overwritten. -1 (counts undefined) where an insertion falls before 0, which bincount
   refuses: the general path then reports it. */
static PyObject *window_counts(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "window_counts(gaps, span, width, counts)");
        return NULL;
    }
    double span = PyFloat_AsDouble(args[1]), width = PyFloat_AsDouble(args[2]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer g, c;
    if (f64_buffer(args[0], &g, 0, -1, "gaps") < 0)
        return NULL;
    if (PyObject_GetBuffer(args[3], &c, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&g);
        return NULL;
    }
    if (c.itemsize != 8 || c.format == NULL || (strcmp(c.format, "q") != 0 && strcmp(c.format, "l") != 0)) {
        PyErr_SetString(PyExc_ValueError, "counts: a C-contiguous int64 array");
        PyBuffer_Release(&c);
        PyBuffer_Release(&g);
        return NULL;
    }
    const double *gv = g.buf;
    int64_t *cv = c.buf;
    Py_ssize_t n = g.len / 8, k = c.len / 8;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    memset(cv, 0, (size_t)k * sizeof(int64_t));
    double t = 0.0, inv = 1.0 / width;
    /* the insertions of the sub-window being counted, kept in a register until the next
       sub-window (consecutive insertions mostly share one: counting in memory made each
       wait for the previous one's store) */
    Py_ssize_t cq = -1;
    int64_t run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        t = i ? t + gv[i] : gv[0];
        if (!(t < span))
            continue;
        /* floor_divide gives the floor of the exact quotient; so does the floor of an
           approximate one (t times 1 / width: a few ulps off) wherever that is farther from
           an integer than the approximation can be (the margin, 1e-12 of it, is some 10^4
           ulps), which spares fmod for all but the insertions at a sub-window's edge. */
        double x = t * inv, q = floor(x), margin = (1.0 + fabs(x)) * 1e-12;
        if (!(x - q > margin && q + 1.0 - x > margin))
            q = floor_divide(t, width);
        if (!(q >= 0.0)) {
            bad = 1;
            break;
        }
        if (q < (double)k) {
            Py_ssize_t w = (Py_ssize_t)q;
            if (w != cq) {
                if (cq >= 0)
                    cv[cq] += run;
                cq = w;
                run = 0;
            }
            run++;
        }
    }
    if (cq >= 0)
        cv[cq] += run;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&c);
    PyBuffer_Release(&g);
    return PyLong_FromLong(bad ? -1 : 0);
}

/* transfer_items(a, p, first, start, got, transfer, per_item, latency, start1, done1, deliver):
   model/bulk.py's _batches after the transfers: each item's start1, done1 and deliver from its
   transfer's (the first p items preloaded: their arrival for all three), done1 recomputed as
   the bus loop computes it (start + transfer + per_item * items); deliver is got (a device
   buffer's delivery, per transfer) or, with got None, done1 + latency. */
static PyObject *transfer_items(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "transfer_items takes 11 arguments");
        return NULL;
    }
    Py_ssize_t p = PyLong_AsSsize_t(args[1]);
    double per = PyFloat_AsDouble(args[6]), lat = PyFloat_AsDouble(args[7]);
    if (PyErr_Occurred())
        return NULL;
    int held = args[4] != Py_None;
    Py_buffer a, fi, st, got = {0}, tr, s1, d1, dl;
    int n_got = 0;
    PyObject *result = NULL;
    Py_buffer *views[8] = {&a, &fi, &st, &got, &tr, &s1, &d1, &dl};
    int taken[8] = {0};
    if (f64_buffer(args[0], &a, 0, -1, "a") < 0)
        goto done;
    taken[0] = 1;
    Py_ssize_t n = a.len / 8;
    if (PyObject_GetBuffer(args[2], &fi, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        goto done;
    taken[1] = 1;
    if (fi.itemsize != 8 || fi.format == NULL || (strcmp(fi.format, "q") != 0 && strcmp(fi.format, "l") != 0)) {
        PyErr_SetString(PyExc_ValueError, "first: a C-contiguous int64 array");
        goto done;
    }
    Py_ssize_t k = fi.len / 8;
    if (f64_buffer(args[3], &st, 0, k, "start") < 0)
        goto done;
    taken[2] = 1;
    if (held) {
        if (f64_buffer(args[4], &got, 0, k, "got") < 0)
            goto done;
        taken[3] = 1;
        n_got = 1;
    }
    if (f64_buffer(args[5], &tr, 0, -1, "transfer") < 0)
        goto done;
    taken[4] = 1;
    if (f64_buffer(args[8], &s1, 1, n, "start1") < 0)
        goto done;
    taken[5] = 1;
    if (f64_buffer(args[9], &d1, 1, n, "done1") < 0)
        goto done;
    taken[6] = 1;
    if (f64_buffer(args[10], &dl, 1, n, "deliver") < 0)
        goto done;
    taken[7] = 1;
    const int64_t *fv = fi.buf;
    if (p < 0 || p > n || tr.len / 8 < k || (k > 0 && fv[0] != p) || (k == 0 && p != n)) {
        PyErr_SetString(PyExc_ValueError, "transfer_items: the transfers do not cover items p..n-1");
        goto done;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        Py_ssize_t hi = j + 1 < k ? (Py_ssize_t)fv[j + 1] : n;
        if (hi <= (Py_ssize_t)fv[j] || hi > n) {
            PyErr_SetString(PyExc_ValueError, "transfer_items: first must rise from p to below n");
            goto done;
        }
    }
    {
        const double *av = a.buf, *sv = st.buf, *gv = n_got ? got.buf : NULL, *tv = tr.buf;
        double *s1v = s1.buf, *d1v = d1.buf, *dlv = dl.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < p; i++)
            s1v[i] = d1v[i] = dlv[i] = av[i];
        for (Py_ssize_t j = 0; j < k; j++) {
            Py_ssize_t lo = (Py_ssize_t)fv[j], hi = j + 1 < k ? (Py_ssize_t)fv[j + 1] : n;
            double t = sv[j];
            double fin = t + tv[j] + per * (double)(hi - lo);
            double to = n_got ? gv[j] : fin + lat;
            for (Py_ssize_t i = lo; i < hi; i++) {
                s1v[i] = t;
                d1v[i] = fin;
                dlv[i] = to;
            }
        }
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
done:
    for (int v = 7; v >= 0; v--)
        if (taken[v])
            PyBuffer_Release(views[v]);
    return result;
}

/* profile_times(draws, counts, busy, total, width, out): model/sampling.py's sample_profile
   after its draws: sub-window busy[q] holds counts[q] items and took counts[q] + 1 of the draws
   in turn, summing to total[q]; its items sit at the first counts[q] running sums (of all the
   draws, as numpy's cumsum), less the sum before the sub-window, over total[q] (evenly spaced
   where total[q] is 0), of the sub-window: out[k] = (busy[q] + within) * width. */
static PyObject *profile_times(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "profile_times(draws, counts, busy, total, width, out)");
        return NULL;
    }
    double width = PyFloat_AsDouble(args[4]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer dr, cn, bz, tt, out;
    Py_buffer *views[5] = {&dr, &cn, &bz, &tt, &out};
    int taken[5] = {0};
    PyObject *result = NULL;
    if (f64_buffer(args[0], &dr, 0, -1, "draws") < 0)
        goto done;
    taken[0] = 1;
    for (int v = 1; v <= 2; v++) {
        if (PyObject_GetBuffer(args[v], views[v], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            goto done;
        taken[v] = 1;
        if (views[v]->itemsize != 8 || views[v]->format == NULL ||
            (strcmp(views[v]->format, "q") != 0 && strcmp(views[v]->format, "l") != 0)) {
            PyErr_SetString(PyExc_ValueError, "counts, busy: C-contiguous int64 arrays");
            goto done;
        }
    }
    Py_ssize_t k = cn.len / 8, nd = dr.len / 8;
    if (bz.len != cn.len) {
        PyErr_SetString(PyExc_ValueError, "profile_times: a busy sub-window per count");
        goto done;
    }
    if (f64_buffer(args[3], &tt, 0, k, "total") < 0)
        goto done;
    taken[3] = 1;
    const int64_t *cv = cn.buf, *bv = bz.buf;
    Py_ssize_t items = 0;
    for (Py_ssize_t q = 0; q < k; q++) {
        if (cv[q] < 0) {
            PyErr_SetString(PyExc_ValueError, "profile_times: counts >= 0");
            goto done;
        }
        items += (Py_ssize_t)cv[q];
    }
    if (nd != items + k) {
        PyErr_SetString(PyExc_ValueError, "profile_times: counts + 1 draws per sub-window");
        goto done;
    }
    if (f64_buffer(args[5], &out, 1, items, "out") < 0)
        goto done;
    taken[4] = 1;
    {
        const double *dv = dr.buf, *tv = tt.buf;
        double *ov = out.buf;
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t pos = 0, o = 0;
        double cum = 0.0;
        for (Py_ssize_t q = 0; q < k; q++) {
            double before = cum, tot = tv[q], denom = tot > 0.0 ? tot : 1.0;
            double cq = (double)cv[q], bq = (double)bv[q];
            for (int64_t r = 0; r < cv[q]; r++) {
                cum = pos ? cum + dv[pos] : dv[0];
                pos++;
                double within = tot <= 0.0 ? ((double)r + 1.0) / (cq + 1.0) : (cum - before) / denom;
                ov[o++] = (bq + within) * width;
            }
            cum = pos ? cum + dv[pos] : dv[0];
            pos++;
        }
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
done:
    for (int v = 4; v >= 0; v--)
        if (taken[v])
            PyBuffer_Release(views[v]);
    return result;
}

/* tandem_frame(a, s, p, bulk, min_batch, transfer, per_item, timeout, latency, end, cap2,
   frame_ns, tail_ns, head_ns, out) -> (whole, tail, head) levels, or None: model/replay.py's
   tandem replication in one call, where the bus has a device buffer of cap2 places (tandem_bulk
   with capacity2): the bus loop (bus_loop, its flush points as _flush_points takes them), each
   item's start1 and delivery from its transfer's (as transfer_items), the device's service
   starts (the later of the delivery and the previous departure, as np.maximum with the
   departures shifted), then occupancy_merge of (a, start2) over [0, frame_ns), (a, start1) over
   [0, tail_ns) and (deliver, start2) over [0, head_ns), written to out's three rows of n + 1
   places: the same operations in the same order as those calls. None (out undefined) where an
   input is not one the Python path would take without an error, or an occupancy's events are
   not of the ordered kind: that path then decides. */
static PyObject *tandem_frame(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "tandem_frame takes 15 arguments");
        return NULL;
    }
    Py_ssize_t p = PyLong_AsSsize_t(args[2]), b = PyLong_AsSsize_t(args[3]);
    Py_ssize_t lo = PyLong_AsSsize_t(args[4]), cap2 = PyLong_AsSsize_t(args[10]);
    double tr = PyFloat_AsDouble(args[5]), per = PyFloat_AsDouble(args[6]);
    double tmo = PyFloat_AsDouble(args[7]), lat = PyFloat_AsDouble(args[8]);
    double end = PyFloat_AsDouble(args[9]), frame_ns = PyFloat_AsDouble(args[11]);
    double tail_ns = PyFloat_AsDouble(args[12]), head_ns = PyFloat_AsDouble(args[13]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer a, sb, o;
    PyObject *result = NULL;
    if (f64_buffer(args[0], &a, 0, -1, "a") < 0)
        return NULL;
    Py_ssize_t n = a.len / 8;
    if (f64_buffer(args[1], &sb, 0, n, "s") < 0)
        goto fail_a;
    if (f64_buffer(args[14], &o, 1, 3 * (n + 1), "out") < 0)
        goto fail_s;
    /* the scalars as bulk.py's checks take them; anything else is left to them */
    int ok = n > 0 && p >= 0 && p <= n && b >= 1 && lo >= 1 && lo <= b && cap2 >= 0 &&
             b <= cap2 + 1 && tr >= 0.0 && tr < INFINITY && per >= 0.0 && per < INFINITY &&
             tmo >= 0.0 && lat >= 0.0 && lat < INFINITY;
    double *work = ok ? PyMem_Malloc((size_t)(7 * n + 1) * sizeof(double)) : NULL;
    int64_t *ints = ok ? PyMem_Malloc((size_t)(2 * n + 2) * sizeof(int64_t)) : NULL;
    if (ok && (work == NULL || ints == NULL)) {
        PyMem_Free(work);
        PyMem_Free(ints);
        PyErr_NoMemory();
        goto fail_o;
    }
    Py_ssize_t keep[3] = {-1, -1, -1};
    if (ok) {
        const double *av = a.buf, *s2v = sb.buf;
        double *ns = o.buf;
        double *sv = work, *dlv = work + n, *d2 = work + 2 * n, *s1 = work + 3 * n;
        double *dl = work + 4 * n, *st2 = work + 5 * n, *cd = work + 6 * n;
        int64_t *fv = ints, *flush = ints + n;
        Py_BEGIN_ALLOW_THREADS
        /* as_times, check_sorted and as_durations: finite, ordered arrivals; finite service
           times >= 0; the stream's end not before the last arrival */
        int bad = !(end >= av[n - 1]);
        double a_prev = -INFINITY;
        for (Py_ssize_t k = 0; k < n; k++) {
            double x = av[k], y = s2v[k];
            bad |= !(fabs(x) <= DBL_MAX) | (x < a_prev) | !(y >= 0.0 && y <= DBL_MAX);
            a_prev = x;
        }
        Py_ssize_t nf = 0;
        if (!bad && tmo < INFINITY) {
            for (Py_ssize_t i = p; i + 1 < n; i++)
                if (av[i + 1] > av[i] + tmo)
                    flush[nf++] = i;
            flush[nf++] = n - 1;
        }
        flush[nf++] = n;
        Py_ssize_t k = bad ? -1 : bus_loop(av, n, p, b, lo, &tr, 0, per, tmo, lat, end, flush, nf,
                                           s2v, cap2, fv, sv, dlv, d2);
        if (k >= 0) {
            for (Py_ssize_t i = 0; i < p; i++)
                s1[i] = dl[i] = av[i];
            for (Py_ssize_t j = 0; j < k; j++) {
                Py_ssize_t hi = j + 1 < k ? (Py_ssize_t)fv[j + 1] : n;
                double t = sv[j], got = dlv[j];
                for (Py_ssize_t i = (Py_ssize_t)fv[j]; i < hi; i++) {
                    s1[i] = t;
                    dl[i] = got;
                }
            }
            st2[0] = dl[0];
            for (Py_ssize_t i = 1; i < n; i++)
                st2[i] = dl[i] >= d2[i - 1] ? dl[i] : d2[i - 1];
            keep[0] = occupancy_merge(av, st2, n, 0.0, frame_ns, ns, cd);
            /* Where the bus never waits, each item leaves the tail as it arrives, and where it
               also delivers at once over the whole frame, the head's events are the whole
               queue's: the same levels, without the merges. */
            if (keep[0] > 0)
                keep[1] = memcmp(s1, av, (size_t)n * sizeof(double)) == 0
                              ? occupancy_still(av, n, 0.0, tail_ns, ns + (n + 1))
                              : occupancy_merge(av, s1, n, 0.0, tail_ns, ns + (n + 1), cd);
            if (keep[1] > 0) {
                if (head_ns == frame_ns && memcmp(dl, av, (size_t)n * sizeof(double)) == 0) {
                    memcpy(ns + 2 * (n + 1), ns, (size_t)keep[0] * sizeof(double));
                    keep[2] = keep[0];
                } else {
                    keep[2] = occupancy_merge(dl, st2, n, 0.0, head_ns, ns + 2 * (n + 1), cd);
                }
            }
        }
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(ints);
    PyMem_Free(work);
    if (keep[0] > 0 && keep[1] > 0 && keep[2] > 0)
        result = Py_BuildValue("(nnn)", keep[0], keep[1], keep[2]);
    else {
        result = Py_None;
        Py_INCREF(result);
    }
fail_o:
    PyBuffer_Release(&o);
fail_s:
    PyBuffer_Release(&sb);
fail_a:
    PyBuffer_Release(&a);
    return result;
}

/* pcg64_doubles(state_hi, state_lo, inc_hi, inc_lo, out) -> (state_hi, state_lo), or None:
   numpy's PCG64 (XSL-RR 128/64: a 128-bit LCG whose state, after each step, gives the top and
   bottom halves xored and rotated by its top 6 bits) from the given state and increment, each
   double the top 53 bits of one output over 2^53, as Generator.random; out filled, the state
   after it returned. Four steps ahead of each other at a time, each by the LCG's 4-step jump
   (the same states: 128-bit arithmetic is exact modulo 2^128), so that the four products
   overlap rather than wait on each other. None where 128-bit integers are not to hand. */
static PyObject *pcg64_doubles(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "pcg64_doubles(state_hi, state_lo, inc_hi, inc_lo, out)");
        return NULL;
    }
#ifdef __SIZEOF_INT128__
    uint64_t w[4];
    for (int k = 0; k < 4; k++) {
        w[k] = PyLong_AsUnsignedLongLong(args[k]);
        if (w[k] == (uint64_t)-1 && PyErr_Occurred())
            return NULL;
    }
    Py_buffer o;
    if (f64_buffer(args[4], &o, 1, -1, "out") < 0)
        return NULL;
    typedef unsigned __int128 u128;
    const u128 mult = ((u128)2549297995355413924ULL << 64) | 4865540595714422341ULL;
    u128 state = ((u128)w[0] << 64) | w[1], inc = ((u128)w[2] << 64) | w[3];
    double *ov = o.buf;
    Py_ssize_t n = o.len / 8;
    Py_BEGIN_ALLOW_THREADS
#define PCG_OUT(x) \
    ((double)((((uint64_t)((x) >> 64) ^ (uint64_t)(x)) >> (unsigned)((x) >> 122) | \
               ((uint64_t)((x) >> 64) ^ (uint64_t)(x)) << ((-(unsigned)((x) >> 122)) & 63)) >> 11) * \
     (1.0 / 9007199254740992.0))
    Py_ssize_t k = 0;
    if (n >= 8) {
        /* the states of the next four draws, then each four steps on: x' = m4 x + c4 */
        u128 s0 = state * mult + inc, s1 = s0 * mult + inc, s2 = s1 * mult + inc, s3 = s2 * mult + inc;
        u128 m2 = mult * mult, m4 = m2 * m2;
        u128 c4 = inc * (((mult + 1) * (m2 + 1)));
        for (; k + 4 <= n; k += 4) {
            ov[k] = PCG_OUT(s0);
            ov[k + 1] = PCG_OUT(s1);
            ov[k + 2] = PCG_OUT(s2);
            ov[k + 3] = PCG_OUT(s3);
            state = s3;
            s0 = s0 * m4 + c4;
            s1 = s1 * m4 + c4;
            s2 = s2 * m4 + c4;
            s3 = s3 * m4 + c4;
        }
    }
    for (; k < n; k++) {
        state = state * mult + inc;
        ov[k] = PCG_OUT(state);
    }
#undef PCG_OUT
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o);
    return Py_BuildValue("(KK)", (unsigned long long)(state >> 64), (unsigned long long)state);
#else
    Py_RETURN_NONE;
#endif
}

#ifdef __SIZEOF_INT128__
typedef unsigned __int128 pcg_u128;
#define PCG_MULT (((pcg_u128)2549297995355413924ULL << 64) | 4865540595714422341ULL)

/* PCG64's output from a state (XSL-RR), as a double of its top 53 bits over 2^53. */
static inline double pcg_double(pcg_u128 x)
{
    uint64_t v = (uint64_t)(x >> 64) ^ (uint64_t)x;
    unsigned rot = (unsigned)(x >> 122);
    v = (v >> rot) | (v << ((-rot) & 63));
    return (double)(v >> 11) * (1.0 / 9007199254740992.0);
}

/* The LCG's state delta steps on (by squaring: the jump's multiplier and increment). */
static pcg_u128 pcg_advance(pcg_u128 state, pcg_u128 inc, uint64_t delta)
{
    pcg_u128 acc_mult = 1, acc_plus = 0, cur_mult = PCG_MULT, cur_plus = inc;
    while (delta > 0) {
        if (delta & 1) {
            acc_mult *= cur_mult;
            acc_plus = acc_plus * cur_mult + cur_plus;
        }
        cur_plus = (cur_mult + 1) * cur_plus;
        cur_mult *= cur_mult;
        delta >>= 1;
    }
    return acc_mult * state + acc_plus;
}
#endif

/* pcg64_histogram_draws(state_hi, state_lo, inc_hi, inc_lo, edges, cdf, out) ->
   (state_hi, state_lo), or None: histogram_draws with its uniforms drawn here as
   pcg64_doubles would draw them (u the first len(out), v the next), without holding them:
   the uniforms of draw k and k + 1, for the bin and inside it, from four states stepped
   two at a time (v's n steps ahead of u's, by the LCG's jump), so that their products
   overlap. out filled, the state 2 len(out) steps on returned; None (state and out
   untouched) where the weights' total is not finite or 128-bit integers are not to hand. */
static PyObject *pcg64_histogram_draws(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "pcg64_histogram_draws(state_hi, state_lo, inc_hi, inc_lo, edges, cdf, out)");
        return NULL;
    }
#ifdef __SIZEOF_INT128__
    uint64_t w[4];
    for (int k = 0; k < 4; k++) {
        w[k] = PyLong_AsUnsignedLongLong(args[k]);
        if (w[k] == (uint64_t)-1 && PyErr_Occurred())
            return NULL;
    }
    Hist h;
    int ok = hist_open(args[4], args[5], "pcg64_histogram_draws", &h);
    if (ok < 0)
        return NULL;
    Py_buffer o;
    PyObject *result = NULL;
    if (f64_buffer(args[6], &o, 1, -1, "out") < 0)
        goto fail_h;
    Py_ssize_t n = o.len / 8;
    if (!ok) {
        result = Py_None;
        Py_INCREF(result);
    } else {
        const double *ev = h.e.buf, *cv = h.cv, total = h.total, per = h.per;
        const Py_ssize_t m = h.m, slices = h.slices, *guide = h.guide;
        double *ov = o.buf;
        pcg_u128 inc = ((pcg_u128)w[2] << 64) | w[3];
        pcg_u128 state = ((pcg_u128)w[0] << 64) | w[1], after;
        Py_BEGIN_ALLOW_THREADS
        guide_build(h.cv, m, total, slices, h.guide);
        const pcg_u128 mult = PCG_MULT, m2 = PCG_MULT * PCG_MULT, c2 = inc * (PCG_MULT + 1);
        /* u_k is the state k + 1 steps on, v_k the state n + k + 1 steps on */
        pcg_u128 u0 = state * mult + inc, v0 = pcg_advance(u0, inc, (uint64_t)n);
        pcg_u128 u1 = u0 * mult + inc, v1 = v0 * mult + inc;
        Py_ssize_t k = 0;
        for (; k + 2 <= n; k += 2) {
            double a0 = pcg_double(u0), b0 = pcg_double(v0);
            double a1 = pcg_double(u1), b1 = pcg_double(v1);
            u0 = u0 * m2 + c2;
            u1 = u1 * m2 + c2;
            v0 = v0 * m2 + c2;
            v1 = v1 * m2 + c2;
            ov[k] = draw_one(a0, b0, ev, cv, m, total, per, slices, guide);
            ov[k + 1] = draw_one(a1, b1, ev, cv, m, total, per, slices, guide);
        }
        if (k < n)
            ov[k] = draw_one(pcg_double(u0), pcg_double(v0), ev, cv, m, total, per, slices, guide);
        after = pcg_advance(state, inc, 2 * (uint64_t)n);
        Py_END_ALLOW_THREADS
        result = Py_BuildValue("(KK)", (unsigned long long)(after >> 64), (unsigned long long)after);
    }
    PyBuffer_Release(&o);
fail_h:
    hist_close(&h);
    return result;
#else
    Py_RETURN_NONE;
#endif
}

static PyMethodDef methods[] = {
    {"bulk_transfers", (PyCFunction)(void (*)(void))bulk_transfers, METH_FASTCALL,
     "The bus rule of model/bulk.py's _transfers: fills first, start, deliver, depart; returns the transfers."},
    {"histogram_draws", (PyCFunction)(void (*)(void))histogram_draws, METH_FASTCALL,
     "Histogram draws from two uniforms each: u becomes the draws; False where the total is not finite."},
    {"occupancy_sorted", (PyCFunction)(void (*)(void))occupancy_sorted, METH_FASTCALL,
     "ns at each level from ordered arrivals and departures: fills ns, returns the levels kept or -1."},
    {"window_counts", (PyCFunction)(void (*)(void))window_counts, METH_FASTCALL,
     "Insertions per sub-window from gaps: fills counts; returns 0, or -1 where one is before 0."},
    {"transfer_items", (PyCFunction)(void (*)(void))transfer_items, METH_FASTCALL,
     "Each item's start1, done1 and deliver from its transfer's: fills them."},
    {"profile_times", (PyCFunction)(void (*)(void))profile_times, METH_FASTCALL,
     "Insertion times from a profile's draws: fills out."},
    {"pcg64_histogram_draws", (PyCFunction)(void (*)(void))pcg64_histogram_draws, METH_FASTCALL,
     "Histogram draws from a PCG64 state: fills out, returns the state after; None where it does not apply."},
    {"pcg64_doubles", (PyCFunction)(void (*)(void))pcg64_doubles, METH_FASTCALL,
     "Doubles in [0, 1) as numpy's PCG64 draws them from a state: fills out, returns the state after."},
    {"tandem_frame", (PyCFunction)(void (*)(void))tandem_frame, METH_FASTCALL,
     "One tandem replication: the bus, its items' times and three occupancies; their levels, or None."},
    {"tandem_loop", (PyCFunction)(void (*)(void))tandem_loop, METH_FASTCALL,
     "Two FIFO stations, a buffer of cap between them, blocking after service: fills leave1 and depart."},
    {NULL}};

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The queue models' per-customer loops, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__kernels(void)
{
    return PyModule_Create(&kernels_module);
}
