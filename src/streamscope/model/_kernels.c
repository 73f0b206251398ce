/* The queue models' per-customer loops, compiled: the recursions that do not vectorise
   (model/recursions.py keeps each one's Python loop, which is used where this extension was not
   built, and which the tests hold this to, bit for bit). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
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
        const double *av = a.buf, *trv = tr.buf, *s2v = blocking ? s2.buf : NULL;
        const int64_t *flush = fl.buf;
        Py_ssize_t nf = fl.len / 8;
        int64_t *fv = first.buf;
        double *sv = start.buf, *dlv = deliver.buf, *d2 = depart.buf;
        int finite = tmo < INFINITY, stuck = 0;
        Py_ssize_t ptr = 0, h = p, j = 0;
        double free_t = -INFINITY, d_prev = -INFINITY;
        Py_BEGIN_ALLOW_THREADS
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
            if (m < 1) {
                stuck = 1;
                break;
            }
            double fin = t + trv[j] + per * (double)m;
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
        Py_END_ALLOW_THREADS
        if (stuck)
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

static PyMethodDef methods[] = {
    {"bulk_transfers", (PyCFunction)(void (*)(void))bulk_transfers, METH_FASTCALL,
     "The bus rule of model/bulk.py's _transfers: fills first, start, deliver, depart; returns the transfers."},
    {"tandem_loop", (PyCFunction)(void (*)(void))tandem_loop, METH_FASTCALL,
     "Two FIFO stations, a buffer of cap between them, blocking after service: fills leave1 and depart."},
    {NULL}};

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The queue models' per-customer loops, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__kernels(void)
{
    return PyModule_Create(&kernels_module);
}
