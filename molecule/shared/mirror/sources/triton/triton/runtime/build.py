"""What Triton demands of a host at run time: a C compiler and the Python headers.

As triton/runtime/build.py in triton-lang/triton (v3.5.0, `_build`): on the first kernel, Triton compiles its driver
launcher as a CPython extension with the compiler named by CC, else `gcc`, else `clang` on PATH ("Failed to find C
compiler. Please specify via CC environment variable."), against the interpreter's include directory from sysconfig
(Debian's posix_local scheme read as posix_prefix), with -O3 -shared -fPIC, and caches it under TRITON_CACHE_DIR or
~/.triton/cache. A host without python3-dev fails there ("Python.h: No such file or directory"), as the real one does.
The fixture's launcher is a minimal extension module, compiled and imported the same way.
"""

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sysconfig

LAUNCHER_SOURCE = """
#include <Python.h>
static struct PyModuleDef launcher = {PyModuleDef_HEAD_INIT, "__triton_launcher", NULL, -1, NULL};
PyMODINIT_FUNC PyInit___triton_launcher(void) { return PyModule_Create(&launcher); }
"""


def c_compiler():
    cc = os.environ.get("CC")
    if cc is None:
        cc = shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")
    return cc


def python_include_dir():
    scheme = sysconfig.get_default_scheme()
    if scheme == "posix_local":
        scheme = "posix_prefix"
    return sysconfig.get_paths(scheme=scheme)["include"]


def cache_dir():
    return os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")


def _build(name, src, srcdir):
    so = os.path.join(srcdir, name + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.check_call(
        [c_compiler(), src, "-O3", "-shared", "-fPIC", "-o", so, "-I" + srcdir, "-I" + python_include_dir()]
    )
    return so


def compile_launcher():
    """The launcher module, compiled once per source into the cache, then imported: what the first kernel does."""
    key = hashlib.sha256(LAUNCHER_SOURCE.encode()).hexdigest()
    directory = os.path.join(cache_dir(), key)
    so = os.path.join(directory, "__triton_launcher" + sysconfig.get_config_var("EXT_SUFFIX"))
    if not os.path.exists(so):
        os.makedirs(directory, exist_ok=True)
        src = os.path.join(directory, "main.c")
        with open(src, "w") as handle:
            handle.write(LAUNCHER_SOURCE)
        so = _build("__triton_launcher", src, directory)
    spec = importlib.util.spec_from_file_location("__triton_launcher", so)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return so
