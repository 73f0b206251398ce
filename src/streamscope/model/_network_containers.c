/* The pipeline simulator's growable containers (included by _network.c): the heap of events
   (ordered by time, then by the order they were made: Python's heapq on (t, seq, ...)), rings
   of doubles and of ints (Python's deques: a channel's items, the workers waiting on a channel
   or on a lock) and vectors of doubles (Python's lists: a channel's insertion and removal
   times). A push that cannot grow its container returns -1. */

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

