/* The queue models' per-customer loops, compiled: the recursions that do not vectorise
   (model/recursions.py keeps each one's Python loop, which is used where this extension was not
   built, and which the tests hold this to, bit for bit). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

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

static PyMethodDef methods[] = {
    {"tandem_loop", (PyCFunction)(void (*)(void))tandem_loop, METH_FASTCALL,
     "Two FIFO stations, a buffer of cap between them, blocking after service: fills leave1 and depart."},
    {NULL}};

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The queue models' per-customer loops, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__kernels(void)
{
    return PyModule_Create(&kernels_module);
}
