/* The Python module init of the installed CPU kernel (thinkgate.kernels._cpu_bitmask).

   The module has no Python functions: importing it proves the shared object was built for this
   interpreter and gives its path; kernels/cpu_bitmask.py then calls thinkgate_apply_bitmask
   (cpu_bitmask.c) through ctypes, the same way as a runtime-built one. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef cpu_bitmask_module = {
    PyModuleDef_HEAD_INIT,
    "_cpu_bitmask",
    "thinkgate's CPU bitmask kernel (called through ctypes: see thinkgate.kernels.cpu_bitmask).",
    -1,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__cpu_bitmask(void) { return PyModule_Create(&cpu_bitmask_module); }
