/* The JSON whitespace bound's per-request lexer and row clear, in C (see jsonws/bound.py and
 * jsonws/lexer.py; jsonws/lexer_ref.py is the pure-Python reference with the same interface).
 *
 * Bound: one WhitespaceBound's tables, copied once (the lexer's step table, state x token -> state
 *   or reject, and per state the words of a bitmask row to AND and their masks).
 * Lexer: one request's lexer state and one small int per accepted token (for rollback), bound to
 *   the grammar's own accept / rollback / fill callables, so that one C call does the lexer step and
 *   the grammar's call (no Python frame of ours per token or per row).
 * clear_rows: the clears of many rows of a bitmask in one call (after xgrammar's batch fill).
 *
 * Every index the C code follows is checked once, when a Bound is built (step entries < num_states
 * or == reject, clear words < num_words), or per call (token ids, row numbers, the array's shape). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* Bound                                                                                          */

typedef struct {
    PyObject_HEAD
    Py_ssize_t width;      /* tokens per state in the step table (the logits width) */
    Py_ssize_t num_states; /* B + 3 */
    Py_ssize_t num_words;  /* words of a bitmask row */
    int wide;              /* step entries are uint16 (more than 255 states), else uint8 */
    void *step;            /* num_states * width: next state, or num_states (reject) */
    Py_ssize_t *off;       /* num_states + 1: state s clears words idx[off[s] .. off[s+1]) */
    int32_t *idx;
    uint32_t *keep;
} Bound;

static PyTypeObject BoundType;

static void Bound_dealloc(Bound *self) {
    PyMem_Free(self->step);
    PyMem_Free(self->off);
    PyMem_Free(self->idx);
    PyMem_Free(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* `obj` as a C-contiguous 1-D buffer of 1, 2, 4 or 8-byte integers (read with int_at), or -1 with an error */
static int get_ints(PyObject *obj, const char *what, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->ndim != 1 || !(view->itemsize == 1 || view->itemsize == 2 || view->itemsize == 4 ||
                             view->itemsize == 8)) {
        PyErr_Format(PyExc_ValueError, "%s: expected a 1-D buffer of integers", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static long long int_at(const Py_buffer *v, Py_ssize_t i) {
    const char *p = (const char *)v->buf + i * v->itemsize;
    const char *f = v->format != NULL ? v->format : "B";
    while (*f == '@' || *f == '=' || *f == '<' || *f == '>' || *f == '!') f++;
    int sgn = *f == 'b' || *f == 'h' || *f == 'i' || *f == 'l' || *f == 'q';
    switch (v->itemsize) {
    case 1: return sgn ? (long long)*(const int8_t *)p : (long long)*(const uint8_t *)p;
    case 2: return sgn ? (long long)*(const int16_t *)p : (long long)*(const uint16_t *)p;
    case 4: return sgn ? (long long)*(const int32_t *)p : (long long)*(const uint32_t *)p;
    default: return *(const long long *)p;
    }
}

/* Bound(step, num_states, width, num_words, offsets, idx, keep) */
static PyObject *Bound_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"step", "num_states", "width", "num_words", "offsets", "idx", "keep", NULL};
    PyObject *step_o, *off_o, *idx_o, *keep_o;
    Py_ssize_t num_states, width, num_words;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OnnnOOO", kw, &step_o, &num_states, &width, &num_words,
                                     &off_o, &idx_o, &keep_o))
        return NULL;
    if (num_states < 1 || num_states >= 0xFFFF || width < 1 || num_words < 1 || num_words * 32 < width) {
        PyErr_SetString(PyExc_ValueError, "Bound: bad num_states / width / num_words");
        return NULL;
    }
    Py_buffer sv, ov, iv, kv;
    if (get_ints(step_o, "step", &sv) < 0) return NULL;
    if (get_ints(off_o, "offsets", &ov) < 0) { PyBuffer_Release(&sv); return NULL; }
    if (get_ints(idx_o, "idx", &iv) < 0) { PyBuffer_Release(&sv); PyBuffer_Release(&ov); return NULL; }
    if (get_ints(keep_o, "keep", &kv) < 0) {
        PyBuffer_Release(&sv); PyBuffer_Release(&ov); PyBuffer_Release(&iv);
        return NULL;
    }
    Bound *self = NULL;
    const char *bad = NULL;
    Py_ssize_t n_step = num_states * width, n_clear = iv.shape[0];
    if (sv.shape[0] != n_step) bad = "step must hold num_states * width entries";
    else if (ov.shape[0] != num_states + 1) bad = "offsets must hold num_states + 1 entries";
    else if (kv.shape[0] != n_clear) bad = "idx and keep must have the same length";
    if (bad == NULL) {
        self = (Bound *)type->tp_alloc(type, 0);
        if (self == NULL) goto done;
        self->width = width;
        self->num_states = num_states;
        self->num_words = num_words;
        self->wide = num_states >= 0xFF;
        self->step = PyMem_Malloc((self->wide ? sizeof(uint16_t) : sizeof(uint8_t)) * (size_t)n_step);
        self->off = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(num_states + 1));
        self->idx = PyMem_Malloc(sizeof(int32_t) * (size_t)(n_clear ? n_clear : 1));
        self->keep = PyMem_Malloc(sizeof(uint32_t) * (size_t)(n_clear ? n_clear : 1));
        if (!self->step || !self->off || !self->idx || !self->keep) {
            PyErr_NoMemory();
            Py_CLEAR(self);
            goto done;
        }
        for (Py_ssize_t i = 0; i < n_step && bad == NULL; i++) {
            long long s = int_at(&sv, i);
            if (s < 0 || s > num_states) bad = "a step entry is not a state or the reject state";
            else if (self->wide) ((uint16_t *)self->step)[i] = (uint16_t)s;
            else ((uint8_t *)self->step)[i] = (uint8_t)s;
        }
        for (Py_ssize_t s = 0; s <= num_states && bad == NULL; s++) {
            long long o = int_at(&ov, s);
            if (o < 0 || o > n_clear || (s > 0 && o < self->off[s - 1]) || (s == 0 && o != 0) ||
                (s == num_states && o != n_clear))
                bad = "offsets must rise from 0 to len(idx)";
            else self->off[s] = (Py_ssize_t)o;
        }
        for (Py_ssize_t i = 0; i < n_clear && bad == NULL; i++) {
            long long w = int_at(&iv, i);
            if (w < 0 || w >= num_words) bad = "a clear word index is outside the row";
            else {
                self->idx[i] = (int32_t)w;
                self->keep[i] = (uint32_t)int_at(&kv, i);
            }
        }
        if (bad != NULL) Py_CLEAR(self);
    }
    if (bad != NULL) PyErr_Format(PyExc_ValueError, "Bound: %s", bad);
done:
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ov);
    PyBuffer_Release(&iv);
    PyBuffer_Release(&kv);
    return (PyObject *)self;
}

static PyObject *Bound_get_width(Bound *self, void *c) { (void)c; return PyLong_FromSsize_t(self->width); }
static PyObject *Bound_get_num_states(Bound *self, void *c) { (void)c; return PyLong_FromSsize_t(self->num_states); }
static PyObject *Bound_get_nbytes(Bound *self, void *c) {
    (void)c;
    Py_ssize_t n = self->num_states * self->width * (self->wide ? 2 : 1) +
                   (Py_ssize_t)sizeof(Py_ssize_t) * (self->num_states + 1) + 8 * self->off[self->num_states];
    return PyLong_FromSsize_t(n);
}

static PyGetSetDef Bound_getset[] = {
    {"width", (getter)Bound_get_width, NULL, "tokens per state (the logits width)", NULL},
    {"num_states", (getter)Bound_get_num_states, NULL, "states of the lexer (the reject state is this)", NULL},
    {"nbytes", (getter)Bound_get_nbytes, NULL, "bytes of the copied tables", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BoundType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "thinkgate.structured_output.compilation.jsonws._lexer.Bound",
    .tp_basicsize = sizeof(Bound),
    .tp_dealloc = (destructor)Bound_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One whitespace bound's tables (step table and row clears), immutable.",
    .tp_getset = Bound_getset,
    .tp_new = Bound_new,
};

/* ---------------------------------------------------------------------------------------------- */
/* row clears                                                                                     */

/* the int32 [rows, num_words] C-contiguous writable array `obj`, or -1 with an error */
static int get_rows(PyObject *obj, Py_ssize_t num_words, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear(); /* not a buffer, read-only or strided: one message for all */
        PyErr_Format(PyExc_ValueError, "the bitmask must be a writable C-contiguous int32 array [rows, %zd]",
                     num_words);
        return -1;
    }
    const char *f = view->format != NULL ? view->format : "B";
    while (*f == '@' || *f == '=' || *f == '<' || *f == '>' || *f == '!') f++;
    int int32 = view->itemsize == 4 && (*f == 'i' || *f == 'l') && f[1] == '\0'; /* signed, as numpy's int32 */
    if (view->ndim != 2 || !int32 || view->shape[1] != num_words) {
        PyErr_Format(PyExc_ValueError, "the bitmask must be a writable C-contiguous int32 array [rows, %zd]",
                     num_words);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static inline void clear_row(const Bound *b, int state, uint32_t *row) {
    Py_ssize_t a = b->off[state], z = b->off[state + 1];
    const int32_t *idx = b->idx;
    const uint32_t *keep = b->keep;
    for (Py_ssize_t i = a; i < z; i++) row[idx[i]] &= keep[i];
}

/* ---------------------------------------------------------------------------------------------- */
/* Lexer                                                                                          */

typedef struct {
    PyObject_HEAD
    Bound *bound;
    PyObject *accept;   /* the grammar's accept(token_id, debug_print) -> bool */
    PyObject *rollback; /* the grammar's rollback(num_tokens) */
    PyObject *fill;     /* the grammar's fill(bitmask, index, debug_print) -> bool */
    int state;
    uint16_t *hist;     /* the state before each accepted token */
    Py_ssize_t depth, cap;
} Lexer;

static PyTypeObject LexerType;

static int Lexer_traverse(Lexer *self, visitproc visit, void *arg) {
    Py_VISIT(self->bound);
    Py_VISIT(self->accept);
    Py_VISIT(self->rollback);
    Py_VISIT(self->fill);
    return 0;
}

static int Lexer_clear(Lexer *self) {
    Py_CLEAR(self->bound);
    Py_CLEAR(self->accept);
    Py_CLEAR(self->rollback);
    Py_CLEAR(self->fill);
    return 0;
}

static void Lexer_dealloc(Lexer *self) {
    PyObject_GC_UnTrack(self);
    Lexer_clear(self);
    PyMem_Free(self->hist);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Lexer(bound, accept, rollback, fill) */
static PyObject *Lexer_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"bound", "accept", "rollback", "fill", NULL};
    PyObject *bound, *accept, *rollback, *fill;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOO", kw, &BoundType, &bound, &accept, &rollback, &fill))
        return NULL;
    Lexer *self = (Lexer *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    Py_INCREF(bound);
    self->bound = (Bound *)bound;
    Py_INCREF(accept);
    self->accept = accept;
    Py_INCREF(rollback);
    self->rollback = rollback;
    Py_INCREF(fill);
    self->fill = fill;
    self->state = 0;
    self->cap = 64;
    self->hist = PyMem_Malloc(sizeof(uint16_t) * (size_t)self->cap);
    if (self->hist == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

/* the state after `token` from the current state (num_states: reject); -1 with an error for a
 * token that is not an integer. Ids outside [0, width) leave the state as it is. */
static int next_state(const Lexer *self, PyObject *token) {
    int overflow = 0;
    long long t = PyLong_AsLongLongAndOverflow(token, &overflow);
    if (t == -1 && PyErr_Occurred()) return -1;
    const Bound *b = self->bound;
    if (overflow || t < 0 || t >= b->width) return self->state;
    Py_ssize_t at = (Py_ssize_t)self->state * b->width + (Py_ssize_t)t;
    return b->wide ? ((const uint16_t *)b->step)[at] : ((const uint8_t *)b->step)[at];
}

static int push(Lexer *self, int next) {
    if (self->depth == self->cap) {
        Py_ssize_t cap = self->cap * 2;
        uint16_t *h = PyMem_Realloc(self->hist, sizeof(uint16_t) * (size_t)cap);
        if (h == NULL) { PyErr_NoMemory(); return -1; }
        self->hist = h;
        self->cap = cap;
    }
    self->hist[self->depth++] = (uint16_t)self->state;
    self->state = next;
    return 0;
}

/* accept(token_id, debug_print=False) -> bool: refuse a token that breaks the bound (the grammar is
 * not called), else the grammar's accept; the lexer moves only when the grammar accepted. */
static PyObject *Lexer_accept(Lexer *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *debug = nargs > 1 ? args[1] : Py_False;
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs < 1 || nargs + nkw > 2 ||
        (nkw == 1 && !PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0))) ||
        (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "debug_print") != 0)) {
        PyErr_SetString(PyExc_TypeError, "accept(token_id, debug_print=False)");
        return NULL;
    }
    if (nkw == 1) debug = args[1];
    int next = next_state(self, args[0]);
    if (next < 0) return NULL;
    if (next == self->bound->num_states) Py_RETURN_FALSE;
    PyObject *call[2] = {args[0], debug};
    PyObject *r = PyObject_Vectorcall(self->accept, call, 2, NULL);
    if (r == NULL) return NULL;
    int ok = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (ok < 0) return NULL;
    if (!ok) Py_RETURN_FALSE;
    if (push(self, next) < 0) {
        /* the grammar moved and the lexer cannot follow: undo the grammar's step */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *one = PyLong_FromLong(1);
        PyObject *u = one ? PyObject_CallOneArg(self->rollback, one) : NULL;
        Py_XDECREF(one);
        Py_XDECREF(u);
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
        return NULL;
    }
    Py_RETURN_TRUE;
}

/* accept_many(token_ids: list, stops: set | frozenset) -> int: accept() on each token in turn, up to
 * the first one refused (its index is returned) or through the first stop token (the index after
 * it: the tokens after a stop are never offered); len(token_ids) when all were accepted. */
static PyObject *Lexer_accept_many(Lexer *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0]) || !PyAnySet_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "accept_many(token_ids: list, stops: set)");
        return NULL;
    }
    PyObject *tokens = args[0], *stops = args[1];
    Py_ssize_t n = PyList_GET_SIZE(tokens), k = 0;
    for (; k < n; k++) {
        PyObject *t = PyList_GET_ITEM(tokens, k);
        Py_INCREF(t); /* the list may change under a callback */
        int next = next_state(self, t);
        if (next < 0) { Py_DECREF(t); return NULL; }
        if (next == self->bound->num_states) { Py_DECREF(t); break; }
        PyObject *call[2] = {t, Py_False};
        PyObject *r = PyObject_Vectorcall(self->accept, call, 2, NULL);
        if (r == NULL) { Py_DECREF(t); return NULL; }
        int ok = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (ok <= 0) { Py_DECREF(t); if (ok < 0) return NULL; break; }
        if (push(self, next) < 0) {
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            PyObject *one = PyLong_FromLong(1);
            PyObject *u = one ? PyObject_CallOneArg(self->rollback, one) : NULL;
            Py_XDECREF(one);
            Py_XDECREF(u);
            PyErr_Clear();
            PyErr_Restore(et, ev, tb);
            Py_DECREF(t);
            return NULL;
        }
        int stop = PySet_Contains(stops, t);
        Py_DECREF(t);
        if (stop < 0) return NULL;
        if (stop) { k++; break; }
        if (n != PyList_GET_SIZE(tokens)) n = PyList_GET_SIZE(tokens);
    }
    return PyLong_FromSsize_t(k);
}

/* rollback(num_tokens=1): the grammar's rollback, then the lexer's (ValueError for more tokens than
 * were accepted: then nothing moves) */
static PyObject *Lexer_rollback(Lexer *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "rollback(num_tokens=1)");
        return NULL;
    }
    Py_ssize_t n = 1;
    if (nargs == 1) {
        n = PyNumber_AsSsize_t(args[0], PyExc_OverflowError);
        if (n == -1 && PyErr_Occurred()) return NULL;
    }
    if (n > self->depth) {
        PyErr_Format(PyExc_ValueError, "cannot roll back %zd tokens: %zd accepted", n, self->depth);
        return NULL;
    }
    PyObject *num = nargs == 1 ? (Py_INCREF(args[0]), args[0]) : PyLong_FromLong(1);
    if (num == NULL) return NULL;
    PyObject *r = PyObject_CallOneArg(self->rollback, num);
    Py_DECREF(num);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    if (n > 0) {
        self->depth -= n;
        self->state = self->hist[self->depth];
    }
    Py_RETURN_NONE;
}

/* fill(bitmask, index=0, np_bitmask=None, *, debug_print=False) -> bool: the grammar's fill of row
 * `index` of `bitmask`, then this state's clear of that row of `np_bitmask` (the same memory as an
 * int32 array; None: bitmask.numpy()). True when the row masks something. The signature of
 * BoundedMatcher.fill_next_token_bitmask, so that the lexer's method can stand in for it. */
static PyObject *Lexer_fill(Lexer *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    static const char *const names[] = {"bitmask", "index", "np_bitmask", "debug_print"};
    PyObject *vals[4] = {NULL, NULL, Py_None, Py_False};
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 3) goto usage;
    for (Py_ssize_t k = 0; k < nargs; k++) vals[k] = args[k];
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int found = 0;
        for (int p = 0; p < 4 && !found; p++) {
            if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, names[p]) == 0) {
                if (p < nargs) goto usage; /* given twice */
                vals[p] = args[nargs + k];
                found = 1;
            }
        }
        if (!found) goto usage;
    }
    if (vals[0] == NULL) goto usage;
    PyObject *index = vals[1];
    Py_ssize_t i = 0;
    if (index != NULL) {
        i = PyNumber_AsSsize_t(index, PyExc_IndexError);
        if (i == -1 && PyErr_Occurred()) return NULL;
    }
    PyObject *zero = NULL;
    if (index == NULL) {
        zero = PyLong_FromLong(0);
        if (zero == NULL) return NULL;
        index = zero;
    }
    PyObject *call[3] = {vals[0], index, vals[3]};
    PyObject *r = PyObject_Vectorcall(self->fill, call, 3, NULL);
    Py_XDECREF(zero);
    if (r == NULL) return NULL;
    const Bound *b = self->bound;
    if (b->off[self->state] == b->off[self->state + 1]) return r; /* nothing to clear here */
    Py_DECREF(r);
    PyObject *np = vals[2];
    PyObject *owned = NULL;
    if (np == Py_None) {
        owned = PyObject_CallMethod(vals[0], "numpy", NULL);
        if (owned == NULL) return NULL;
        np = owned;
    }
    Py_buffer v;
    int got = get_rows(np, b->num_words, &v);
    Py_XDECREF(owned); /* the buffer view keeps the memory alive */
    if (got < 0) return NULL;
    if (i < 0 || i >= v.shape[0]) {
        PyBuffer_Release(&v);
        PyErr_Format(PyExc_IndexError, "row %zd outside the bitmask's %zd rows", i, v.shape[0]);
        return NULL;
    }
    clear_row(b, self->state, (uint32_t *)v.buf + i * b->num_words);
    PyBuffer_Release(&v);
    Py_RETURN_TRUE;
usage:
    PyErr_SetString(PyExc_TypeError, "fill(bitmask, index=0, np_bitmask=None, *, debug_print=False)");
    return NULL;
}

/* clear(np_bitmask, index) -> bool: this state's clear of row `index` (True when it clears something) */
static PyObject *Lexer_clear_row(Lexer *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "clear(np_bitmask, index)");
        return NULL;
    }
    const Bound *b = self->bound;
    Py_ssize_t i = PyNumber_AsSsize_t(args[1], PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return NULL;
    Py_buffer v;
    if (get_rows(args[0], b->num_words, &v) < 0) return NULL;
    if (i < 0 || i >= v.shape[0]) {
        PyBuffer_Release(&v);
        PyErr_Format(PyExc_IndexError, "row %zd outside the bitmask's %zd rows", i, v.shape[0]);
        return NULL;
    }
    int any = b->off[self->state] < b->off[self->state + 1];
    clear_row(b, self->state, (uint32_t *)v.buf + i * b->num_words);
    PyBuffer_Release(&v);
    return PyBool_FromLong(any);
}

/* breaks(token_id) -> bool: the token would make a gap longer than the bound from here */
static PyObject *Lexer_breaks(Lexer *self, PyObject *token) {
    int next = next_state(self, token);
    if (next < 0) return NULL;
    return PyBool_FromLong(next == self->bound->num_states);
}

/* reset(): back to the start state, no history (the grammar's reset is the caller's) */
static PyObject *Lexer_reset(Lexer *self, PyObject *unused) {
    (void)unused;
    self->state = 0;
    self->depth = 0;
    Py_RETURN_NONE;
}

static PyObject *Lexer_get_state(Lexer *self, void *c) { (void)c; return PyLong_FromLong(self->state); }
static PyObject *Lexer_get_depth(Lexer *self, void *c) { (void)c; return PyLong_FromSsize_t(self->depth); }
static PyObject *Lexer_get_clears(Lexer *self, void *c) {
    (void)c;
    return PyBool_FromLong(self->bound->off[self->state] < self->bound->off[self->state + 1]);
}

static PyMethodDef Lexer_methods[] = {
    {"accept", (PyCFunction)(void (*)(void))Lexer_accept, METH_FASTCALL | METH_KEYWORDS,
     "accept(token_id, debug_print=False) -> bool"},
    {"accept_many", (PyCFunction)(void (*)(void))Lexer_accept_many, METH_FASTCALL,
     "accept_many(token_ids, stops) -> int: tokens accepted, through the first stop token"},
    {"rollback", (PyCFunction)(void (*)(void))Lexer_rollback, METH_FASTCALL, "rollback(num_tokens=1)"},
    {"fill", (PyCFunction)(void (*)(void))Lexer_fill, METH_FASTCALL | METH_KEYWORDS,
     "fill(bitmask, index=0, np_bitmask=None, *, debug_print=False) -> bool"},
    {"clear", (PyCFunction)(void (*)(void))Lexer_clear_row, METH_FASTCALL, "clear(np_bitmask, index) -> bool"},
    {"breaks", (PyCFunction)Lexer_breaks, METH_O, "breaks(token_id) -> bool"},
    {"reset", (PyCFunction)Lexer_reset, METH_NOARGS, "reset()"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Lexer_getset[] = {
    {"state", (getter)Lexer_get_state, NULL, "the lexer state now", NULL},
    {"depth", (getter)Lexer_get_depth, NULL, "tokens accepted and not rolled back", NULL},
    {"clears", (getter)Lexer_get_clears, NULL, "the state now forbids some tokens", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LexerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "thinkgate.structured_output.compilation.jsonws._lexer.Lexer",
    .tp_basicsize = sizeof(Lexer),
    .tp_dealloc = (destructor)Lexer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One request's whitespace lexer, bound to its grammar's accept / rollback / fill.",
    .tp_traverse = (traverseproc)Lexer_traverse,
    .tp_clear = (inquiry)Lexer_clear,
    .tp_methods = Lexer_methods,
    .tp_getset = Lexer_getset,
    .tp_new = Lexer_new,
};

/* ---------------------------------------------------------------------------------------------- */
/* module                                                                                         */

/* clear_rows(np_bitmask, lexers, first): row first + i gets the clear of lexers[i] (None: no clear) */
static PyObject *clear_rows(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "clear_rows(np_bitmask, lexers, first)");
        return NULL;
    }
    Py_ssize_t first = PyNumber_AsSsize_t(args[2], PyExc_IndexError);
    if (first == -1 && PyErr_Occurred()) return NULL;
    PyObject *seq = PySequence_Fast(args[1], "lexers must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    Py_buffer v;
    int have = 0;
    Py_ssize_t words = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *o = items[k];
        if (o == Py_None) continue;
        if (!PyObject_TypeCheck(o, &LexerType)) {
            PyErr_Format(PyExc_TypeError, "lexers[%zd] is a %s, not a Lexer or None", k, Py_TYPE(o)->tp_name);
            goto fail;
        }
        const Bound *b = ((Lexer *)o)->bound;
        if (!have) {
            if (get_rows(args[0], b->num_words, &v) < 0) goto fail;
            have = 1;
            words = b->num_words;
            if (first < 0 || first + n > v.shape[0]) {
                PyErr_Format(PyExc_IndexError, "rows %zd..%zd outside the bitmask's %zd rows", first, first + n,
                             v.shape[0]);
                goto fail;
            }
        } else if (b->num_words != words) {
            PyErr_SetString(PyExc_ValueError, "lexers of bounds with different row widths");
            goto fail;
        }
        clear_row(b, ((Lexer *)o)->state, (uint32_t *)v.buf + (first + k) * words);
    }
    if (have) PyBuffer_Release(&v);
    Py_DECREF(seq);
    Py_RETURN_NONE;
fail:
    if (have) PyBuffer_Release(&v);
    Py_DECREF(seq);
    return NULL;
}

static PyMethodDef module_methods[] = {
    {"clear_rows", (PyCFunction)(void (*)(void))clear_rows, METH_FASTCALL,
     "clear_rows(np_bitmask, lexers, first): the clear of lexers[i] on row first + i (None: none)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lexer",
    "The JSON whitespace bound's lexer and row clears in C (see thinkgate.structured_output.compilation.jsonws.lexer).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lexer(void) {
    if (PyType_Ready(&BoundType) < 0 || PyType_Ready(&LexerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&BoundType);
    if (PyModule_AddObject(m, "Bound", (PyObject *)&BoundType) < 0) {
        Py_DECREF(&BoundType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&LexerType);
    if (PyModule_AddObject(m, "Lexer", (PyObject *)&LexerType) < 0) {
        Py_DECREF(&LexerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
