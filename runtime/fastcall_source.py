"""The C source of the Executable's call path, compiled by runtime/fastcall.py.

Kept as a Python string (as runtime/export.py keeps its C) so that it ships with every
install of the package: a wheel carries the package's Python files only.
"""

SOURCE = r'''/* The common case of an Executable call in C (runtime/fastcall.py builds and loads it).
 *
 * A `FastCall` knows the entry point `_mlir__mlir_ciface_main(void **args)` and, per
 * parameter and result, the dtype, dims and (for parameters) the byte strides the code was
 * compiled for. `run(args)` checks that every argument is exactly what the code reads in
 * place (an ndarray of that dtype, shape and strides, a numpy scalar of that type, or a
 * Python scalar that converts without any rounding flag), fills the memref descriptors on
 * the C stack, allocates the results, releases the GIL for the native call and returns the
 * result. Anything else returns NotImplemented and the caller takes the ctypes path
 * (runtime/executable.py), which coerces or raises the errors: the two paths then agree on
 * every result and every error by construction.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>
#if NPY_ABI_VERSION < 0x02000000 /* numpy 1.x: no accessor, the field */
#define PyDataType_ELSIZE(descr) ((descr)->elsize)
#endif

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Descriptor words, slot pointers and packed pointers of one call live on the C stack. */
#define MAX_WORDS 1024
#define MAX_LEAVES 64
#define MAX_RANK 32
#define SCALAR_BYTES 16

typedef struct {
    PyArray_Descr *descr;
    int rank;
    npy_intp dims[MAX_RANK];
    npy_intp strides[MAX_RANK]; /* byte strides (parameters only) */
    Py_ssize_t offset;          /* the descriptor's first word */
} Leaf;

typedef struct {
    PyObject_HEAD
    void (*entry)(void **);
    int nparams, nresults, tuple_result;
    Py_ssize_t slots; /* descriptor words of every leaf */
    Leaf *leaves;     /* parameters, then results */
    int64_t *template; /* the descriptors with sizes and strides filled in */
} FastCall;

static void fastcall_dealloc(FastCall *self) {
    if (self->leaves != NULL) {
        for (int i = 0; i < self->nparams + self->nresults; i++) {
            Py_XDECREF(self->leaves[i].descr);
        }
        PyMem_Free(self->leaves);
    }
    PyMem_Free(self->template);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* One leaf from (dtype, dims, byte strides, offset). */
static int parse_leaf(PyObject *item, Leaf *leaf) {
    PyObject *dtype, *dims, *strides;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(item, "OOOn", &dtype, &dims, &strides, &offset)) {
        return -1;
    }
    if (!PyArray_DescrCheck(dtype) || !PyTuple_Check(dims) || !PyTuple_Check(strides)) {
        PyErr_SetString(PyExc_TypeError, "a leaf is (np.dtype, dims tuple, strides tuple, offset)");
        return -1;
    }
    Py_ssize_t rank = PyTuple_GET_SIZE(dims);
    if (rank > MAX_RANK || PyTuple_GET_SIZE(strides) != rank) {
        PyErr_SetString(PyExc_ValueError, "rank too large, or strides do not match dims");
        return -1;
    }
    leaf->rank = (int)rank;
    for (Py_ssize_t d = 0; d < rank; d++) {
        leaf->dims[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(dims, d));
        leaf->strides[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, d));
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    Py_INCREF(dtype);
    leaf->descr = (PyArray_Descr *)dtype;
    leaf->offset = offset;
    return 0;
}

/* FastCall(entry address, parameter leaves, result leaves, template bytes, tuple_result) */
static int fastcall_init(FastCall *self, PyObject *args, PyObject *kwds) {
    (void)kwds;
    unsigned long long address;
    PyObject *params, *results;
    Py_buffer template;
    int tuple_result;
    if (!PyArg_ParseTuple(args, "KO!O!y*p", &address, &PyList_Type, &params, &PyList_Type,
                          &results, &template, &tuple_result)) {
        return -1;
    }
    Py_ssize_t np_ = PyList_GET_SIZE(params), nr = PyList_GET_SIZE(results);
    Py_ssize_t words = template.len / (Py_ssize_t)sizeof(int64_t);
    if (address == 0 || np_ + nr > MAX_LEAVES || nr < 1 || words + 2 * (np_ + nr) > MAX_WORDS ||
        template.len % sizeof(int64_t) != 0 || self->leaves != NULL) {
        PyBuffer_Release(&template);
        PyErr_SetString(PyExc_ValueError, "FastCall: not a call this fast path takes");
        return -1;
    }
    self->leaves = PyMem_Calloc((size_t)(np_ + nr), sizeof(Leaf));
    self->template = PyMem_Malloc((size_t)template.len + 1);
    if (self->leaves == NULL || self->template == NULL) {
        PyBuffer_Release(&template);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(self->template, template.buf, (size_t)template.len);
    PyBuffer_Release(&template);
    self->slots = words;
    self->entry = (void (*)(void **))(uintptr_t)address;
    self->tuple_result = tuple_result;
    for (Py_ssize_t i = 0; i < np_ + nr; i++) {
        PyObject *item = i < np_ ? PyList_GET_ITEM(params, i) : PyList_GET_ITEM(results, i - np_);
        if (parse_leaf(item, &self->leaves[i]) < 0) {
            return -1;
        }
        Leaf *leaf = &self->leaves[i];
        if (leaf->offset < 0 || leaf->offset + 3 + 2 * leaf->rank > words) {
            PyErr_SetString(PyExc_ValueError, "FastCall: a descriptor outside the template");
            return -1;
        }
        /* Counted only once parsed: dealloc releases exactly the descrs it holds. */
        if (i < np_) {
            self->nparams++;
        } else {
            self->nresults++;
        }
    }
    return 0;
}

/* The bytes of a Python scalar as `descr`'s type, when the conversion is exact enough that
 * numpy would neither raise nor round differently (else 0: the caller defers). */
/* A double as float64 or float32, when the narrowing surely raises no floating-point flag
 * (else 0). numpy casts the same way and raises on a flag (np.errstate(all="raise") in
 * runtime/arguments.py): an overflow, a result that may be tiny (underflow), a signaling
 * NaN (invalid) go to that path. Checked on the values: reading the FP status costs more
 * than the rest of the call. */
static int store_double(double value, int type, char *out) {
    if (type == NPY_DOUBLE) {
        memcpy(out, &value, sizeof value);
        return 1;
    }
    if (type != NPY_FLOAT) {
        return 0;
    }
    float narrowed = (float)value;
    if (isnan(value)) {
        uint64_t bits;
        memcpy(&bits, &value, sizeof bits);
        if (!(bits & (1ULL << 51))) { /* the quiet bit clear: signaling */
            return 0;
        }
    } else if ((isinf(narrowed) && !isinf(value)) || (value != 0 && fabs(value) < 2.0 * FLT_MIN)) {
        return 0;
    }
    memcpy(out, &narrowed, sizeof narrowed);
    return 1;
}

static int python_scalar(PyObject *obj, PyArray_Descr *descr, char *out) {
    int type = descr->type_num;
    PyTypeObject *kind = Py_TYPE(obj);
    if (kind == &PyBool_Type) {
        if (type != NPY_BOOL) {
            return 0;
        }
        *(npy_bool *)out = obj == Py_True;
        return 1;
    }
    if (kind == &PyFloat_Type) {
        return store_double(PyFloat_AS_DOUBLE(obj), type, out);
    }
    if (kind == &PyComplex_Type) {
        if (type != NPY_CDOUBLE) {
            return 0;
        }
        Py_complex value = PyComplex_AsCComplex(obj);
        memcpy(out, &value.real, sizeof(double));
        memcpy(out + sizeof(double), &value.imag, sizeof(double));
        return 1;
    }
    if (kind == &PyLong_Type) {
        int overflow = 0;
        long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (overflow != 0) {
            return 0;
        }
        if (type == NPY_DOUBLE || type == NPY_FLOAT) {
            /* Exact as a double up to 2**53: one rounding to float32, as numpy's. */
            const long long exact = 1LL << 53;
            return value >= -exact && value <= exact && store_double((double)value, type, out);
        }
        switch (type) {
#define FIT(NPY, CTYPE, LO, HI)                                  \
    case NPY:                                                    \
        if (value < (long long)(LO) || value > (long long)(HI)) { \
            return 0;                                            \
        }                                                        \
        *(CTYPE *)out = (CTYPE)value;                            \
        return 1;
            FIT(NPY_INT8, npy_int8, NPY_MIN_INT8, NPY_MAX_INT8)
            FIT(NPY_INT16, npy_int16, NPY_MIN_INT16, NPY_MAX_INT16)
            FIT(NPY_INT32, npy_int32, NPY_MIN_INT32, NPY_MAX_INT32)
            FIT(NPY_INT64, npy_int64, NPY_MIN_INT64, NPY_MAX_INT64)
            FIT(NPY_UINT8, npy_uint8, 0, NPY_MAX_UINT8)
            FIT(NPY_UINT16, npy_uint16, 0, NPY_MAX_UINT16)
            FIT(NPY_UINT32, npy_uint32, 0, NPY_MAX_UINT32)
            FIT(NPY_UINT64, npy_uint64, 0, NPY_MAX_INT64)
#undef FIT
        default:
            return 0;
        }
    }
    return 0;
}

static int same_dtype(PyArray_Descr *a, PyArray_Descr *b) {
    return a == b || PyArray_EquivTypes(a, b);
}

/* Where a scalar of a built-in numeric type keeps its value (NULL for other types). */
static void *builtin_value(PyObject *obj, int type) {
    switch (type) {
#define VALUE(NPY, NAME) \
    case NPY:            \
        return &PyArrayScalar_VAL(obj, NAME);
        VALUE(NPY_BOOL, Bool)
        VALUE(NPY_BYTE, Byte)
        VALUE(NPY_UBYTE, UByte)
        VALUE(NPY_SHORT, Short)
        VALUE(NPY_USHORT, UShort)
        VALUE(NPY_INT, Int)
        VALUE(NPY_UINT, UInt)
        VALUE(NPY_LONG, Long)
        VALUE(NPY_ULONG, ULong)
        VALUE(NPY_LONGLONG, LongLong)
        VALUE(NPY_ULONGLONG, ULongLong)
        VALUE(NPY_HALF, Half)
        VALUE(NPY_FLOAT, Float)
        VALUE(NPY_DOUBLE, Double)
        VALUE(NPY_CFLOAT, CFloat)
        VALUE(NPY_CDOUBLE, CDouble)
#undef VALUE
    default:
        return NULL;
    }
}

/* A user dtype's scalar (bfloat16, float8_*, int4, ...) as bytes in `out`; 0: defer. */
static int user_scalar(PyObject *obj, PyArray_Descr *descr, char *out) {
    if (descr->type_num < NPY_USERDEF) {
        return 0;
    }
#if NPY_FEATURE_VERSION >= NPY_2_0_API_VERSION
    PyArray_Descr *own = PyArray_DescrFromScalar(obj);
    if (own == NULL) { /* the ctypes path says what is wrong with it */
        PyErr_Clear();
        return 0;
    }
    int same = PyDataType_ELSIZE(own) == PyDataType_ELSIZE(descr) && same_dtype(own, descr);
    Py_DECREF(own);
    /* PyArray_ScalarAsCtype guesses where a user type's scalar keeps its value (wrongly for
     * ml_dtypes' bfloat16); the dtype's own setitem knows. */
    if (!same || PyArray_Pack(descr, out, obj) < 0) {
        PyErr_Clear();
        return 0;
    }
    return 1;
#else
    (void)obj;
    (void)out;
    return 0;
#endif
}

static PyObject *fastcall_run(FastCall *self, PyObject *args) {
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != self->nparams) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int nleaves = self->nparams + self->nresults;
    Py_ssize_t slots = self->slots;
    int64_t buffer[MAX_WORDS];
    /* Numpy scalars' and Python scalars' values, 16-byte aligned as numpy's would be. */
    _Alignas(16) char scalars[MAX_LEAVES][SCALAR_BYTES];
    memcpy(buffer, self->template, (size_t)slots * sizeof(int64_t));
    for (int i = 0; i < self->nparams; i++) {
        PyObject *obj = PyTuple_GET_ITEM(args, i);
        Leaf *leaf = &self->leaves[i];
        void *data;
        if (PyArray_CheckExact(obj)) {
            PyArrayObject *array = (PyArrayObject *)obj;
            if (PyArray_NDIM(array) != leaf->rank || !same_dtype(PyArray_DESCR(array), leaf->descr)) {
                Py_RETURN_NOTIMPLEMENTED;
            }
            npy_intp *dims = PyArray_DIMS(array), *strides = PyArray_STRIDES(array);
            for (int d = 0; d < leaf->rank; d++) {
                if (dims[d] != leaf->dims[d] || strides[d] != leaf->strides[d]) {
                    Py_RETURN_NOTIMPLEMENTED;
                }
            }
            data = PyArray_DATA(array);
        } else if (leaf->rank != 0 || PyDataType_ELSIZE(leaf->descr) > SCALAR_BYTES) {
            Py_RETURN_NOTIMPLEMENTED;
        } else if (Py_TYPE(obj) == leaf->descr->typeobj && PyArray_IsScalar(obj, Generic)) {
            /* A numpy scalar of the parameter's exact type (the ctypes path's np.array(x)):
             * a built-in type's value is read where it is (the object is immutable and the
             * args tuple keeps it alive); a user type's (bfloat16, the narrow types) is
             * written by its dtype. */
            data = builtin_value(obj, leaf->descr->type_num);
            if (data == NULL && !user_scalar(obj, leaf->descr, scalars[i])) {
                Py_RETURN_NOTIMPLEMENTED;
            }
            if (data == NULL) {
                data = scalars[i];
            }
        } else if (python_scalar(obj, leaf->descr, scalars[i])) {
            data = scalars[i];
        } else {
            Py_RETURN_NOTIMPLEMENTED;
        }
        buffer[leaf->offset] = (int64_t)(uintptr_t)data;
        buffer[leaf->offset + 1] = (int64_t)(uintptr_t)data;
    }
    PyObject *outputs[MAX_LEAVES];
    for (int r = 0; r < self->nresults; r++) {
        Leaf *leaf = &self->leaves[self->nparams + r];
        Py_INCREF(leaf->descr);
        outputs[r] = PyArray_NewFromDescr(&PyArray_Type, leaf->descr, leaf->rank, leaf->dims,
                                          NULL, NULL, 0, NULL);
        if (outputs[r] == NULL) {
            for (int k = 0; k < r; k++) {
                Py_DECREF(outputs[k]);
            }
            return NULL;
        }
        void *data = PyArray_DATA((PyArrayObject *)outputs[r]);
        buffer[leaf->offset] = (int64_t)(uintptr_t)data;
        buffer[leaf->offset + 1] = (int64_t)(uintptr_t)data;
    }
    /* args[i] -> slot i -> descriptor i, as `_mlir__mlir_ciface_main(void **)` reads them. */
    for (int i = 0; i < nleaves; i++) {
        buffer[slots + i] = (int64_t)(uintptr_t)&buffer[self->leaves[i].offset];
        buffer[slots + nleaves + i] = (int64_t)(uintptr_t)&buffer[slots + i];
    }
    void (*entry)(void **) = self->entry;
    void **packed = (void **)&buffer[slots + nleaves];
    Py_BEGIN_ALLOW_THREADS
    entry(packed);
    Py_END_ALLOW_THREADS
    if (!self->tuple_result) {
        return outputs[0];
    }
    PyObject *tuple = PyTuple_New(self->nresults);
    if (tuple == NULL) {
        for (int r = 0; r < self->nresults; r++) {
            Py_DECREF(outputs[r]);
        }
        return NULL;
    }
    for (int r = 0; r < self->nresults; r++) {
        PyTuple_SET_ITEM(tuple, r, outputs[r]);
    }
    return tuple;
}

static PyMethodDef fastcall_methods[] = {
    {"run", (PyCFunction)fastcall_run, METH_O,
     "run(args: tuple) -> the result, or NotImplemented when the ctypes path must take the call"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FastCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_fastcall.FastCall",
    .tp_basicsize = sizeof(FastCall),
    .tp_dealloc = (destructor)fastcall_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "FastCall(entry, params, results, template, tuple_result): see runtime/fastcall.py",
    .tp_methods = fastcall_methods,
    .tp_init = (initproc)fastcall_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef fastcall_module = {
    PyModuleDef_HEAD_INIT, "_fastcall", "xlamlir's C call path (runtime/fastcall.py)", -1, NULL,
};

PyMODINIT_FUNC PyInit__fastcall(void) {
    import_array();
    if (PyType_Ready(&FastCallType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&fastcall_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&FastCallType);
    if (PyModule_AddObject(module, "FastCall", (PyObject *)&FastCallType) < 0) {
        Py_DECREF(&FastCallType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
'''
