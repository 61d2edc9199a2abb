"""Compiled kernels loaded without Numba: a warm program's fast path.

A serial kernel compiled by Numba (in a compile worker or in this process) is also written
beside its generated source as ``k_<key>.kernel.native``: its object code, the names of
its CPython wrapper and of its environment, and its argument types (``save``). A later
process loads that file with llvmlite alone (``load``): Numba's cache would first import
Numba (0.12 s, against 0.025 s for llvmlite) and then read, unpickle and link each entry
through a dispatcher (1.5 ms a kernel, against 0.25 ms here).

What a loaded kernel needs from Numba is three C extension modules: ``_helperlib`` and
``_dynfunc`` (helpers the wrapper calls, and the function object that wraps it) and NRT's
``_nrt_python`` (array unboxing and allocation). They are imported by file, under their
own names, without running ``numba/__init__``; a later ``import numba`` finds them in
``sys.modules``. Their symbols are registered with LLVM as Numba registers them
(``numba.core.base._load_global_helpers``, ``externals.c_math_functions``,
``rtsys.initialize``), so the loaded code calls the same functions as under Numba.

The same machine code runs as through Numba's dispatcher, so results are equal bit for
bit. Nothing here can make a wrong call: a file is used only when everything it was
written under is unchanged (the files of Numba's and llvmlite's binaries, the CPU, every
``NUMBA_*`` variable, no ``.numba_config.yaml``), when every symbol its code needs is
defined, and each call checks its arguments against the compiled types (the ones the
executor makes always match); anything else goes to the Numba dispatcher. A file that
cannot be read, whose checksum does not match (damaged on disk: its code could crash the
process), or that another kernel's compile wrote, is ignored (and rewritten by the next
compile).
"""
from __future__ import annotations

import os
import pickle
import sys
import threading
import zlib

FORMAT = 3
_HEADER = b"tracer native kernel 3\n"   # then the CRC-32 of the pickled record, the record
SUFFIX = ".kernel.native"
_lock = threading.Lock()
_state: dict = {}        # "engine", "dynfunc": once set up; "failed": why not
_keep = []               # environments (the loaded code holds their addresses)


def path_for(source_path: str) -> str:
    return source_path[:-3] + SUFFIX


# ------------------------------------------ writing ---------------------------------------

def save(dispatcher, spec, source_path: str) -> bool:
    """Write the native file of ``dispatcher``'s one compiled signature ``spec`` (the
    ``compile_worker.array_spec`` list), if the compile just happened in this process (a
    cache load has no object code to write) and the kernel is one this module can load:
    C-contiguous arrays only, an environment without constants. Returns whether it
    wrote; never raises for a file that cannot be written."""
    if any(len(s) > 3 for s in spec) or len(dispatcher.overloads) != 1:
        return False
    (cres,) = dispatcher.overloads.values()
    try:
        obj = cres.library._get_compiled_object()
    except (RuntimeError, ValueError, AttributeError):
        return False            # loaded from Numba's cache, or no object caching
    env = cres.environment
    if env is None or len(env.consts) or not isinstance(obj, bytes):
        return False
    record = {"format": FORMAT, "stamp": _stamp(), "magic": _magic(),
              "source": os.path.basename(source_path), "spec": [list(s) for s in spec],
              "object": obj,
              "wrapper": cres.fndesc.llvm_cpython_wrapper_name, "env": env.env_name,
              "module": cres.fndesc.modname, "name": cres.fndesc.qualname.split(".")[-1]}
    if record["stamp"] is None:
        return False
    path = path_for(source_path)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    payload = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        with open(tmp, "wb") as f:
            f.write(_HEADER + zlib.crc32(payload).to_bytes(4, "little") + payload)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True


def _stamp():
    """What the object code depends on besides its source: the binaries of Numba and
    llvmlite (their file sizes and times), the Python version and Numba's settings (its
    environment variables but for ``_NOT_CODE``; a ``.numba_config.yaml`` in the working
    directory rules this path out). None when one cannot be read."""
    if os.path.isfile(".numba_config.yaml"):
        return None
    files = []
    for pkg, stem in (("numba", "_helperlib"), ("numba", "_dynfunc"),
                      ("numba/core/runtime", "_nrt_python"), ("llvmlite/binding", "")):
        path = package_file(pkg, stem)
        if path is None:
            return None
        st = os.stat(path)
        files.append((os.path.basename(path), st.st_size, st.st_mtime_ns))
    env = sorted((k, v) for k, v in os.environ.items()
                 if k.startswith("NUMBA_") and k not in _NOT_CODE)
    return (sys.version, tuple(files), tuple(env))


# Numba's settings that do not change a serial kernel's machine code: where its thread
# pool runs parallel kernels and where its own cache lives
_NOT_CODE = frozenset(("NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER", "NUMBA_CACHE_DIR"))


def package_file(pkg: str, stem: str):
    """The path of an extension module (``stem``) or of llvmlite's shared library (empty
    ``stem``) in an installed package directory, found without importing it."""
    import importlib.machinery as machinery
    top = pkg.split("/")[0]
    base = _package_dir(top)
    if base is None:
        return None
    d = os.path.join(base, *pkg.split("/")[1:])
    try:
        names = os.listdir(d)
    except OSError:
        return None
    if stem:
        ok = [n for n in names if n.startswith(stem + ".")
              and n.endswith(tuple(machinery.EXTENSION_SUFFIXES))]
    else:
        ok = [n for n in names if n.startswith("libllvmlite.")]
    return os.path.join(d, ok[0]) if len(ok) == 1 else None


_dirs: dict = {}


def _package_dir(top: str):
    if top not in _dirs:
        mod = sys.modules.get(top)
        if mod is not None and getattr(mod, "__path__", None):
            _dirs[top] = list(mod.__path__)[0]
        else:
            import importlib.util
            try:
                spec = importlib.util.find_spec(top)
            except (ImportError, ValueError):
                spec = None
            locs = spec and spec.submodule_search_locations
            _dirs[top] = list(locs)[0] if locs else None
    return _dirs[top]


def _magic():
    """The codegen's description of the target: Numba's ``magic_tuple`` for this
    machine (the process triple, the host CPU and its features)."""
    import llvmlite.binding as ll
    _init_llvm(ll)
    return (ll.get_process_triple(), ll.get_host_cpu_name(),
            ll.get_host_cpu_features().flatten())


# ------------------------------------------ loading ---------------------------------------

def load(source_path: str, spec, fallback):
    """The kernel of ``source_path`` as a callable loaded from its native file, or None
    (no file, or one this process cannot use). ``spec``: the argument types the caller
    will pass; ``fallback()``: the Numba dispatcher, for a call whose arguments differ."""
    path = path_for(source_path)
    try:
        with open(path, "rb") as f:
            data = f.read()
        n = len(_HEADER)
        if data[:n] != _HEADER or \
                zlib.crc32(data[n + 4:]) != int.from_bytes(data[n:n + 4], "little"):
            return None     # another format, or damaged (its code must not run)
        record = pickle.loads(data[n + 4:])
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError,
            IndexError, TypeError, ValueError, MemoryError):
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT \
            or record.get("source") != os.path.basename(source_path) \
            or record.get("spec") != [list(s) for s in spec]:
        return None
    with _lock:
        if not _setup():
            return None
        if record.get("stamp") != _state["stamp"] or record.get("magic") != _state["magic"]:
            return None
        fn = _link(record)
    if fn is None:
        return None
    return _checked(fn, spec, fallback, record["name"])


def _extension(name: str):
    """Numba's C extension module ``name``, imported by file when Numba is not."""
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    pkg, _, stem = name.rpartition(".")
    path = package_file(pkg.replace(".", "/"), stem)
    if path is None:
        raise ImportError(f"no {name}")
    return sys.modules.setdefault(name, load_extension(name, path))


def load_extension(name: str, path: str):
    """The extension module at ``path``, executed as ``name`` without importing its
    package (nor putting it into ``sys.modules``)."""
    import importlib.machinery as machinery
    import importlib.util as util
    loader = machinery.ExtensionFileLoader(name, path)
    mod = util.module_from_spec(util.spec_from_loader(name, loader))
    loader.exec_module(mod)
    return mod


def _init_llvm(ll):
    if not _state.get("llvm"):
        ll.initialize_native_target()
        ll.initialize_native_asmprinter()
        _state["llvm"] = True


def _setup() -> bool:
    """Once: the extension modules, their symbols in LLVM, an execution engine."""
    if "engine" in _state:
        return True
    if "failed" in _state:
        return False
    try:
        stamp = _stamp()
        if stamp is None:
            raise ImportError("a .numba_config.yaml or an unreadable install")
        import llvmlite.binding as ll
        _init_llvm(ll)
        helperlib = _extension("numba._helperlib")
        dynfunc = _extension("numba._dynfunc")
        nrt = _extension("numba.core.runtime._nrt_python")
        _register_symbols(ll, helperlib, dynfunc)
        register_nrt(ll, nrt)
        target = ll.Target.from_triple(ll.get_process_triple())
        tm = target.create_target_machine(
            cpu=ll.get_host_cpu_name(), features=ll.get_host_cpu_features().flatten(),
            opt=3, reloc="static" if target.name.startswith("x86") else "default",
            codemodel="jitdefault", jit=True)
        engine = ll.create_mcjit_compiler(ll.parse_assembly(""), tm)
    except Exception as e:      # (any failure: Numba's own path is always there)
        _state["failed"] = repr(e)
        return False
    _state.update(engine=engine, tm=tm, ll=ll, dynfunc=dynfunc, stamp=stamp,
                  magic=_magic())
    return True


def register_nrt(ll, nrt) -> None:
    """LLVM's names for NRT's C functions (``rtsys.initialize``'s), and NRT's allocation
    statistics switched on where Numba's ``NRT_STATS`` asks."""
    from numba_backend.lazy_numba import setting
    if setting("NRT_STATS", "NUMBA_NRT_STATS", int, 0):
        nrt.memsys_enable_stats()
    for name, address in nrt.c_helpers.items():
        ll.add_symbol(name if name.startswith("_") else "NRT_" + name, address)


def _register_symbols(ll, helperlib, dynfunc):
    """LLVM's names for Numba's helper C functions and Python's exception objects, as
    Numba registers them (once per process: the same addresses either way)."""
    import builtins
    ll.add_symbol("_Py_NoneStruct", id(None))
    for helpers in (helperlib.c_helpers, dynfunc.c_helpers):
        for name, address in helpers.items():
            ll.add_symbol("numba_" + name, address)
    for obj in builtins.__dict__.values():
        if isinstance(obj, type) and issubclass(obj, BaseException):
            ll.add_symbol("PyExc_" + obj.__name__, id(obj))
    # the C math functions, bound to the C runtime Python uses (numba.core.externals)
    for name in _MATH:
        if name in helperlib.c_helpers:
            ll.add_symbol(name, helperlib.c_helpers[name])


# numba.core.intrinsics.INTR_MATH: the libm names Numba binds to ``_helperlib``'s
_MATH = frozenset((
    "acos", "acosf", "acosh", "acoshf", "asin", "asinf", "asinh", "asinhf", "atan",
    "atan2", "atan2f", "atanf", "atanh", "atanhf", "ceil", "ceilf", "cos", "cosf", "cosh",
    "coshf", "exp", "expf", "expm1", "expm1f", "fabs", "fabsf", "floor", "floorf", "fmod",
    "fmodf", "log", "log10", "log10f", "log1p", "log1pf", "logf", "pow", "powf", "round",
    "roundf", "sin", "sinf", "sinh", "sinhf", "sqrt", "sqrtf", "tan", "tanf", "tanh",
    "tanhf", "trunc", "truncf"))


def _link(record):
    """Add the record's object code to the engine and wrap its CPython wrapper; None
    when the code needs a symbol nothing defines (LLVM would end the process)."""
    import ctypes

    ll, engine, dynfunc = _state["ll"], _state["engine"], _state["dynfunc"]
    obj = record["object"]
    symbols = elf_symbols(obj)
    if symbols is None:
        return None
    defined_here, undefined = symbols
    defined = _state.setdefault("defined", set())    # (or resolved already)
    for name in undefined - defined:
        if not ll.address_of_symbol(name):
            return None
        defined.add(name)
    engine.add_object_file(ll.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    defined |= defined_here
    fnptr = engine.get_function_address(record["wrapper"])
    envptr = engine.get_global_value_address(record["env"])
    if not fnptr or not envptr:
        return None
    env = dynfunc.Environment({"__name__": record["module"]})
    _keep.append(env)
    ctypes.c_void_p.from_address(envptr).value = id(env)
    module = sys.modules.get(record["module"]) or type(sys)(record["module"])
    return dynfunc.make_function(module, record["name"], "native kernel", fnptr, env,
                                 (engine,))


def elf_symbols(obj):
    """The global and weak symbols of the ELF relocatable object ``obj`` (64-bit,
    little-endian: what LLVM emits for this machine on Linux): the names it defines and
    the names it needs. None for any other object format, or one it cannot read."""
    import struct
    if not isinstance(obj, bytes) or len(obj) < 64 or obj[:4] != b"\x7fELF" \
            or obj[4] != 2 or obj[5] != 1:
        return None
    try:
        shoff, = struct.unpack_from("<Q", obj, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
        if shoff == 0 or shnum == 0 or shentsize != 64 or shoff + shnum * 64 > len(obj):
            return None
        defined, undefined = set(), set()
        for i in range(shnum):
            _, sh_type, _, _, off, size, link, _, _, entsize = struct.unpack_from(
                "<IIQQQQIIQQ", obj, shoff + i * 64)
            if sh_type != 2:        # SHT_SYMTAB
                continue
            if entsize != 24 or off + size > len(obj) or link >= shnum:
                return None
            str_off, str_size = struct.unpack_from("<QQ", obj, shoff + link * 64 + 24)
            strtab = obj[str_off:str_off + str_size]
            for st_name, st_info, _, st_shndx, _, _ in struct.iter_unpack(
                    "<IBBHQQ", obj[off:off + size - size % 24]):
                if st_info >> 4 in (1, 2) and 0 < st_name < len(strtab):
                    name = strtab[st_name:strtab.index(b"\0", st_name)].decode()
                    (defined if st_shndx != 0 else undefined).add(name)
        return defined, undefined
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


_checkers: dict = {}


def _checked(fn, spec, fallback, name):
    """``fn`` behind a check of its arguments against ``spec`` (type, dtype, number of
    dimensions, C-contiguous and aligned; writable where the kernel writes), generated
    as one function per signature: a call that does not match goes to ``fallback()``."""
    key = (name, tuple(tuple(s) for s in spec))
    make = _checkers.get(key)
    if make is None:
        make = _checkers[key] = _checker(spec, name)
    return make(fn, fallback)


def _checker(spec, name):
    import numpy as np
    g = {"nd": np.ndarray}
    params, conds = [], []
    for i, (dt, ndim, readonly, *_) in enumerate(spec):
        a = f"a{i}"
        params.append(a)
        g[f"D{i}"] = np.dtype(dt)
        flags = f"{a}.flags.c_contiguous and {a}.flags.aligned" if readonly \
            else f"{a}.flags.carray"
        conds.append(f"type({a}) is nd and ({a}.dtype is D{i} or {a}.dtype == D{i}) "
                     f"and {a}.ndim == {int(ndim)} and {flags}")
    args = ", ".join(params)
    src = (f"def make(F, slow):\n"
           f"    def {name}({args}):\n"
           f"        if {' and '.join(conds) or 'True'}:\n"
           f"            return F({args})\n"
           f"        return slow()({args})\n"
           f"    return {name}\n")
    exec(compile(src, f"<native kernel {name}>", "exec"), g)
    return g["make"]
