"""Numba, imported once, the cheap way: every module of ``numba_backend`` that uses Numba
imports this one first (``import numba_backend._numba``), and so does a compile worker.
Once Numba is in, the helper modules' registrations that waited for it run
(``lazy_numba.numba_ready``)."""

import importlib.util as _util
import os as _os
import sys as _sys

from numba_backend.lazy_numba import numba_ready as _numba_ready


def import_numba():
    """Import Numba, leaving its array-math registry (and SciPy's linalg) to the first
    compile.

    Numba's ``numba.np.arraymath`` checks at import that BLAS is there by importing
    ``scipy.linalg.cython_blas``, and a submodule import runs its package's
    ``__init__``: the whole of ``scipy.linalg``, 0.27 s, against 0.01 s for the
    extension module itself. ``_import_arraymath`` loads the extension module on its own
    for the check and takes it out of ``sys.modules`` again at once, so that a later
    ``import scipy.linalg`` (a compiled BLAS call's first use, or the user's) imports it
    the normal way. Numba imports ``arraymath`` when a compile first installs its
    registries (``CPUContext.load_additional_registries``); that is where it is done
    here. A program that only loads cached kernels never needs it: 0.05 s of its start.
    """
    if "numba" in _sys.modules:
        return
    # Numba imports ``importlib.metadata`` to find its extensions when it first compiles:
    # 0.015 s of its 0.15 s import, which a program that only loads cached kernels never
    # uses. It goes into ``sys.modules`` as the standard library's lazy module, which runs
    # on its first attribute access (by Numba or anyone else). (Not PyYAML, which Numba
    # imports as ``import yaml``: that statement reads the module's ``__spec__``, which
    # runs a lazy module at once.)
    _lazy_module("importlib.metadata")
    with _skipped_imports() as skipped:
        import numba  # noqa: F401
    _attach_loaded_extensions()
    if "yaml" in skipped.names:
        skipped.restore_yaml()
    from numba.core import cpu
    cls = cpu.CPUContext
    if getattr(cls.load_additional_registries, "_tracer", False):
        return
    load = cls.load_additional_registries

    def load_additional_registries(self):
        _import_arraymath()
        return load(self)

    load_additional_registries._tracer = True
    cls.load_additional_registries = load_additional_registries


def _attach_loaded_extensions():
    """Make the C extension modules that ``numba_backend.native`` imported by file before
    Numba (``numba._helperlib``, ...) attributes of their packages, as an import of them
    through Numba makes them (code that reads ``numba._helperlib`` finds them)."""
    for name, mod in list(_sys.modules.items()):
        parent, _, child = name.rpartition(".")
        if parent.split(".")[0] == "numba" and parent in _sys.modules \
                and not hasattr(_sys.modules[parent], child):
            setattr(_sys.modules[parent], child, mod)


class _skipped_imports:
    """A context in which this thread's ``import scipy`` and ``import yaml`` fail, as if
    neither were installed (other threads import them as usual).

    Numba's ``__init__`` imports SciPy only to check that its version is at least 1.0
    (this package requires 1.10) and its config imports PyYAML only to read a
    ``.numba_config.yaml`` in the working directory: 0.02 s of a warm program's start
    for two imports it never uses otherwise. With such a file there, PyYAML is imported
    as usual; without, Numba's config gets PyYAML as a lazy module (``restore_yaml``),
    imported when a compile finds such a file in the directory it then runs in. A module
    imported already is left alone."""

    def __enter__(self):
        import threading
        self.thread = threading.get_ident()
        self.names = {n for n in ("scipy", "yaml") if n not in _sys.modules}
        if _os.path.isfile(".numba_config.yaml"):
            self.names.discard("yaml")
        _sys.meta_path.insert(0, self)
        return self

    def __exit__(self, *exc):
        try:
            _sys.meta_path.remove(self)
        except ValueError:
            pass

    @staticmethod
    def restore_yaml():
        """Give Numba's config PyYAML (where installed) as a lazy module: Numba reads a
        ``.numba_config.yaml`` whenever it reloads its config, in the directory the
        process is in then, and its flag of PyYAML's presence is set once, at import."""
        from numba.core import config
        _lazy_module("yaml")
        if _sys.modules.get("yaml") is not None and hasattr(config, "_HAVE_YAML"):
            config.yaml = _sys.modules["yaml"]
            config._HAVE_YAML = True

    def find_spec(self, name, path=None, target=None):
        import threading
        if name in self.names and threading.get_ident() == self.thread:
            raise ModuleNotFoundError(f"No module named {name!r} (skipped while Numba "
                                      "imports)", name=name)
        return None


def _lazy_module(name: str) -> None:
    """Put ``name`` into ``sys.modules`` as an ``importlib.util.LazyLoader`` module, unless
    it is imported already or cannot be found (an import of it then goes as usual)."""
    if name in _sys.modules:
        return
    try:
        spec = _util.find_spec(name)
    except (ImportError, ValueError):
        return
    if spec is None or not hasattr(spec.loader, "exec_module"):
        return
    spec.loader = _util.LazyLoader(spec.loader)
    module = _util.module_from_spec(spec)
    if _sys.modules.setdefault(name, module) is not module:
        return      # another thread imported it meanwhile
    spec.loader.exec_module(module)     # (arranges its execution on first attribute use)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(_sys.modules[parent], child, module)


def _import_arraymath():
    if "numba.np.arraymath" in _sys.modules:
        return
    placed = None
    if "scipy.linalg" not in _sys.modules:
        from numba_backend import native
        try:
            name = "scipy.linalg.cython_blas"
            path = native.package_file("scipy/linalg", "cython_blas")
            if path is not None:
                placed = _sys.modules.setdefault(name, native.load_extension(name, path))
        except Exception:     # another layout: Numba's own check decides
            placed = None
    try:
        import numba.np.arraymath  # noqa: F401  (runs the BLAS check)
    finally:
        if placed is not None and "scipy.linalg" not in _sys.modules:
            _sys.modules.pop("scipy.linalg.cython_blas", None)


def load_without_refresh():
    """Load cached functions without first loading every typing and lowering registry.

    Numba's ``Cache.load_overload`` refreshes the target context before it reads a cache
    entry: it imports and installs all of Numba's registries (255 of them), 0.3 s of CPU
    of a warm program's first call, where the rest of that call loads its kernels in
    milliseconds. Loading compiled code needs only the addresses of Numba's runtime
    functions (NRT's C functions, which the loaded code links against): they are
    registered with LLVM here (``_register_nrt_symbols``). ``rtsys.initialize`` would also
    compile NRT's LLVM module (its reference counting, which every compiled function
    carries a copy of), 0.02 s of a warm program's first load that no loaded code uses.
    Every compile refreshes the contexts itself (``compiler.compile_extra``) and
    initializes the runtime fully, so a process that goes on to compile still gets both.
    """
    from numba.core import caching
    cls = caching.Cache
    if getattr(cls.load_overload, "_tracer", False) or not all(
            hasattr(cls, a) for a in ("_load_overload", "_guard_against_spurious_io_errors")):
        return   # patched already, or another Numba: its own load_overload stays

    def load_overload(self, sig, target_context):
        _register_nrt_symbols()
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    load_overload._tracer = True
    cls.load_overload = load_overload


def _elf_defined_globals(obj: bytes):
    """The names of the global and weak symbols that the ELF relocatable object ``obj``
    defines (``native.elf_symbols``); None for any other object format, or one it cannot
    read, so that the caller falls back to Numba's own reading."""
    from numba_backend.native import elf_symbols
    symbols = elf_symbols(obj)
    return None if symbols is None else symbols[0]


def _defer_shared_modules():
    """Load a cached library without parsing its bitcode for linking.

    Numba's cache stores a library as its object code, which the engine loads, and its
    bitcode, which Numba parses at once (``ll.parse_bitcode``) to list the symbols the
    library defines (``JitEngine._defined_symbols``: the guard that keeps a lookup of an
    undefined name from ending the process) and to link the library into a later
    compile. Those two took half of a warm MLP's 12 loads (15 of 32 ms). The symbols
    come from the object file's symbol table instead (``_elf_defined_globals``: the
    global and weak ones, which the engine can look up), and the bitcode is parsed when a
    compile first links the library, or when a lookup misses (then every deferred
    library's symbols are read as Numba reads them, so a miss is answered as Numba would).
    """
    from numba.core import codegen as cg
    lib_cls, engine_cls = cg.CPUCodeLibrary, cg.JitEngine
    if getattr(lib_cls._unserialize, "_tracer", False) or not all(
            hasattr(lib_cls, a) for a in ("_get_module_for_linking", "enable_object_caching",
                                          "_set_compiled_object", "_finalize_final_module")) \
            or not hasattr(engine_cls, "_load_defined_symbols"):
        return
    unserialize = lib_cls._unserialize.__func__
    get_module_for_linking = lib_cls._get_module_for_linking
    is_symbol_defined = engine_cls.is_symbol_defined
    import weakref
    deferred = weakref.WeakSet()

    def parse_deferred(lib):
        bitcode = lib.__dict__.pop("_tracer_shared_bitcode", None)
        deferred.discard(lib)
        if bitcode is not None and lib._shared_module is None:
            import llvmlite.binding as ll
            lib._shared_module = ll.parse_bitcode(bitcode)
            lib._codegen._engine._load_defined_symbols(lib._shared_module)

    def _unserialize(cls, codegen, state):
        name, kind, data = state
        names = _elf_defined_globals(data[0]) if kind == "object" else None
        if not names:
            return unserialize(cls, codegen, state)
        self = codegen.create_library(name)
        self.enable_object_caching()
        self._set_compiled_object(data[0])
        self._tracer_shared_bitcode = data[1]
        deferred.add(self)
        self._finalize_final_module()
        codegen._engine._defined_symbols |= names
        return self

    def _get_module_for_linking(self):
        parse_deferred(self)
        return get_module_for_linking(self)

    def _is_symbol_defined(self, name):
        if is_symbol_defined(self, name):
            return True
        for lib in list(deferred):
            parse_deferred(lib)
        return is_symbol_defined(self, name)

    _unserialize._tracer = True
    lib_cls._unserialize = classmethod(_unserialize)
    lib_cls._get_module_for_linking = _get_module_for_linking
    engine_cls.is_symbol_defined = _is_symbol_defined


_nrt_symbols_registered = []


def _register_nrt_symbols():
    """The part of Numba's ``rtsys.initialize`` that loaded code needs: LLVM's symbols
    for NRT's C functions (``native.register_nrt``)."""
    if _nrt_symbols_registered:
        return
    from numba.core.runtime import _nrt_python as _nrt
    from numba.core.runtime import rtsys
    if not rtsys._init:
        import llvmlite.binding as ll

        from numba_backend.native import register_nrt
        register_nrt(ll, _nrt)
    _nrt_symbols_registered.append(True)


def _rebuild_env_without_import(modname, consts, env_name):
    """``numba.core.environment._rebuild_env``, which a cached function's pickled
    environments call, without importing a Numba module that is not imported yet.

    Every function a kernel inlines from Numba's own implementation modules (``np.empty``
    from ``numba.np.arrayobj``, integer arithmetic from ``numba.cpython.numbers``) carries
    an environment whose globals are its module's: rebuilding one imports the module,
    0.02 s of a warm program's first call for ``arrayobj`` and the unicode and charseq
    modules it imports, where the loaded code never reads those globals (only
    object-mode code does, and Numba's implementations are nopython). Such an environment
    gets the module's name alone and goes into Numba's memo like any other: a later
    compile in the process imports the module as usual and finds this environment for
    the same function (which, nopython, never reads it)."""
    from numba.core import environment as env_mod
    env = env_mod.lookup_environment(env_name)
    if env is not None or consts or not isinstance(modname, str) \
            or not modname.startswith("numba.") or modname in _sys.modules:
        return _numba_rebuild_env(modname, consts, env_name)
    env = env_mod.Environment({"__name__": modname})
    env.env_name = env_name
    env_mod.Environment._memo[env_name] = env
    return env


_numba_rebuild_env = None


def _typeof_ndarray_without_numpy_ma(val, c):
    """Numba's ``typeof`` of an ndarray, which a dispatcher asks once per array type it
    is first called with, without importing ``numpy.ma``: Numba's own rule rejects a
    ``MaskedArray`` by reading ``np.ma``, and NumPy imports that package on first access
    (0.02 s of a warm program's first call). No MaskedArray exists before ``numpy.ma`` is
    imported; once it is, Numba's own rule runs."""
    if "numpy.ma" in _sys.modules:
        return _numba_typeof_ndarray(val, c)
    from numba.core import errors, types
    from numba.np import numpy_support
    try:
        dtype = numpy_support.from_dtype(val.dtype)
    except errors.NumbaNotImplementedError:
        raise errors.NumbaValueError(f"Unsupported array dtype: {val.dtype}")
    return types.Array(dtype, val.ndim, numpy_support.map_layout(val),
                       readonly=not val.flags.writeable)


_numba_typeof_ndarray = None


def _spare_warm_imports():
    """Install ``_rebuild_env_without_import`` and ``_typeof_ndarray_without_numpy_ma``
    (once; a Numba without those hooks keeps its own)."""
    global _numba_rebuild_env, _numba_typeof_ndarray
    import numpy as np
    from numba.core import environment as env_mod
    from numba.core.typing import typeof as typeof_mod
    if _numba_rebuild_env is None and callable(getattr(env_mod, "_rebuild_env", None)):
        _numba_rebuild_env = env_mod._rebuild_env
        env_mod._rebuild_env = _rebuild_env_without_import
    impl = getattr(typeof_mod, "typeof_impl", None)
    if _numba_typeof_ndarray is None and impl is not None \
            and getattr(typeof_mod, "_typeof_ndarray", None) is impl.dispatch(np.ndarray):
        _numba_typeof_ndarray = typeof_mod._typeof_ndarray
        impl.register(np.ndarray)(_typeof_ndarray_without_numpy_ma)


def njit(**options):
    """``numba.njit`` with this package's defaults: no C-callable wrapper
    (``no_cfunc_wrapper``). Our compiled functions are called from Python through their
    dispatchers or from compiled code through their own addresses, never as C functions,
    and Numba otherwise compiles that wrapper for every function: about 10 ms of a kernel
    of 7 arrays (a sixth of a small kernel's compile).

    The dispatchers skip Numba's extension initialization (``_without_extensions``)."""
    import numba
    decorate = numba.njit(**{"no_cfunc_wrapper": True, **options})

    def wrapper(fn):
        disp = decorate(fn)
        disp._compilation_chain_init_hook = _without_extensions
        return disp
    return wrapper


def _without_extensions():
    """The compilation-chain hook of this package's dispatchers: nothing.

    A Numba dispatcher's first call with new argument types runs every installed
    package's ``numba_extensions`` entry point first (``entrypoints.init_all``, reading
    every installed distribution's metadata: 11 ms here with 54 packages, more in larger
    environments), even when the call then loads its code from the disk cache: a warm
    convolution's first call paid it. This package's functions take NumPy arrays and
    scalars and use no extension's types; a user's own Numba functions keep Numba's hook,
    which initializes the extensions before their first compile as always."""


import_numba()
load_without_refresh()
_spare_warm_imports()
_defer_shared_modules()
_numba_ready()
