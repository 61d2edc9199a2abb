"""The one-way layering of the packages (DESIGN.md section 2):

    tracer core (core, jaxpr, dtypes, pytree, ...) -> tracer.interpreters -> lax
      -> lowering -> numba_backend

with tracer's public face (``tracer.api``, ``tracer.numpy``, ``tracer.nn``,
``tracer.scipy``, ``tracer.random``) importing everything above. These tests read the
sources (every import, at the top of a module or lazily inside a function, and every
``importlib.import_module``/``__import__`` of a constant name) and fail on a crossing:

- no module of ``tracer/`` imports ``lowering`` or ``numba_backend``, except
  ``tracer/_jit_backend.py``, the jit bridge (which imports them lazily, on the first jit);
- no module of ``lax/`` imports ``lowering``, ``numba_backend``, tracer's public face or
  the jit bridge;
- no module of ``lowering/`` or ``numba_backend/`` imports tracer's public face.

The import order is one way whichever package comes first: ``lax/__init__.py`` starts by
importing ``tracer``, whose ``__init__`` imports the core, ``lax`` and then the public
face. When ``import lax`` comes first, the public face is imported while the ``lax``
package is still empty, so no module of ``tracer/`` reads ``lax.<name>`` at import (it
imports the family module instead); a subprocess per import order checks the result.

(tests/lowering/test_layering.py checks, besides, that lowering imports no Numba.)
"""
import ast
import json
import pathlib
import pickle
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PUBLIC_FACE = ("tracer.api", "tracer.numpy", "tracer.nn", "tracer.scipy", "tracer.random")
COMPILER = ("lowering", "numba_backend")
JIT_BRIDGE = "tracer/_jit_backend.py"


def imported_modules(src: str, filename: str = "<src>"):
    """(line, dotted module name) of every import in ``src``: ``import a.b`` gives a.b;
    ``from a import b`` gives a and a.b (b may be a submodule); a call of
    ``importlib.import_module``/``__import__`` with a constant string gives that name."""
    for node in ast.walk(ast.parse(src, filename)):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield node.lineno, node.module
                for a in node.names:
                    yield node.lineno, f"{node.module}.{a.name}"
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            arg = node.args[0]
            if (name in ("import_module", "__import__") and isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)):
                yield node.lineno, arg.value


def _within(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def crossings(path: pathlib.Path, forbidden) -> list:
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    return sorted({f"{rel}:{line}: imports {m}"
                   for line, m in imported_modules(path.read_text(), str(path))
                   if _within(m, forbidden)})


def _modules(package: str):
    files = sorted((ROOT / package).rglob("*.py"))
    assert len(files) > 5, (package, files)
    return files


def test_tracer_imports_the_compiler_only_through_the_jit_bridge():
    bridge = ROOT / JIT_BRIDGE
    bad = [c for f in _modules("tracer") if f != bridge for c in crossings(f, COMPILER)]
    assert not bad, ("only tracer/_jit_backend.py may import lowering/numba_backend:\n"
                     + "\n".join(bad))
    # the bridge is what jit uses (so the exception above is not stale)
    assert crossings(bridge, ("lowering.pipeline",)), crossings(bridge, COMPILER)


def test_lax_imports_neither_the_compiler_nor_the_public_face():
    forbidden = COMPILER + PUBLIC_FACE + ("tracer._jit_backend",)
    bad = [c for f in _modules("lax") for c in crossings(f, forbidden)]
    assert not bad, "lax/ sits below lowering and tracer's public face:\n" + "\n".join(bad)


def test_the_compiler_imports_no_public_face():
    bad = [c for pkg in COMPILER for f in _modules(pkg) for c in crossings(f, PUBLIC_FACE)]
    assert not bad, "lowering/ and numba_backend/ sit below tracer.api/numpy:\n" + "\n".join(bad)


def test_the_scan_catches_every_form_of_import(tmp_path):
    p = tmp_path / "bad.py"
    p.write_text("import os\n"
                 "from tracer import numpy as tnp\n"          # 2: a submodule by from
                 "def f():\n"
                 "    from lowering import passes\n"          # 4: lazy
                 "    import numba_backend.executor\n"        # 5
                 "    importlib.import_module('tracer.api')\n"  # 6: by name
                 "    __import__('lowering.ir')\n"            # 7
                 "from tracer import dtypes\n"                 # 8: allowed
                 "# from lowering import passes\n"            # a comment: allowed
                 "s = 'lowering'\n")                          # a plain string: allowed
    got = crossings(p, COMPILER + PUBLIC_FACE)
    assert got == ["bad.py:2: imports tracer.numpy", "bad.py:4: imports lowering",
                   "bad.py:4: imports lowering.passes", "bad.py:5: imports numba_backend.executor",
                   "bad.py:6: imports tracer.api", "bad.py:7: imports lowering.ir"], got
    p.write_text("from tracer.numpyish import x\nimport loweringx\n")
    assert crossings(p, COMPILER + PUBLIC_FACE) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_import_tracer_loads_no_compiler(mode):
    # the compiler is loaded by the first jit, not by ``import tracer``; with the default
    # tier, ``import tracer`` starts one compile worker through numba_backend.workers (a
    # module of plain subprocesses, with the thread policy it reports to: no Numba, no
    # lowering in this process)
    code = ("import sys, tracer, tracer.numpy, lax\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('lowering', 'numba_backend', 'numba')))\n")
    env = {**__import__("os").environ, "TRACER_JIT_COMPILE": mode}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    want = "[]" if mode == "sync" else \
        "['numba_backend', 'numba_backend.threads', 'numba_backend.workers']"
    assert res.stdout.strip() == want, res.stdout


def _run_python(code, cache_dir=None, timeout=300):
    """``code`` in a fresh interpreter (with its own kernel cache when given): its stdout,
    after checking that it exited 0."""
    env = dict(__import__("os").environ)
    if cache_dir is not None:
        env["TRACER_CACHE_DIR"] = str(cache_dir)
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=timeout, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def test_ml_dtypes_loads_on_first_need(tmp_path):
    # importing ml_dtypes costs ~0.7 s: a program that never names a low-precision type
    # (eager and jitted, in the compile workers too) never imports it; naming one
    # (tnp.bfloat16), or an array of one made after the user imported ml_dtypes, loads
    # the types, with promotion and classification as if they had been there from the start
    code = (
        "import sys, numpy as np, tracer, tracer.numpy as jnp\n"
        "tracer.config.update('jit_compile', 'sync')\n"
        "x = jnp.arange(4.0, dtype=jnp.float32)\n"
        "y = tracer.jit(lambda x: jnp.sin(x) * 2 + x.astype(jnp.int8).sum())(x)\n"
        "print('ml_dtypes' in sys.modules)\n"
        "print(jnp.promote_types(jnp.int8, jnp.uint8), jnp.issubdtype(jnp.float32, "
        "jnp.floating))\n"
        "import ml_dtypes\n"
        "a = np.array([1.5, -2.0], ml_dtypes.float8_e4m3fn)\n"
        "print((jnp.asarray(a) * 2).dtype, jnp.issubdtype(a.dtype, jnp.floating))\n"
        "print(jnp.promote_types(ml_dtypes.bfloat16, np.float32), "
        "tracer.jit(lambda v: v + 1)(a).dtype)\n"
        "print(jnp.bfloat16 is jnp.bfloat16, jnp.finfo(jnp.bfloat16).eps)\n")
    out = _run_python(code, tmp_path)
    assert out.split("\n")[:5] == [
        "False", "int16 True", "float8_e4m3fn True", "float32 float8_e4m3fn",
        "True 0.0078125"], out
    # the types named by string, in a process where nothing has loaded them yet: NumPy
    # knows 'bfloat16' only once ml_dtypes is imported
    code3 = (
        "import sys, tracer, tracer.numpy as jnp, tracer.lax as lax\n"
        "x = jnp.arange(3.0)\n"
        "print('ml_dtypes' in sys.modules)\n"
        "print(jnp.zeros(2, 'bfloat16').dtype, x.astype('float8_e4m3fn').dtype, "
        "lax.convert_element_type(x, 'int4').dtype, "
        "tracer.jit(lambda v: v.astype('uint4') + 1)(x).dtype)\n"
        "print(jnp.promote_types('bfloat16', 'float16'), jnp.dtype('float8_e5m2'), "
        "jnp.result_type('bfloat16', 1.0), jnp.can_cast('bfloat16', 'float32'), "
        "jnp.finfo('bfloat16').eps, jnp.iinfo('int4').max)\n"
        "print(jnp.issubdtype('bfloat16', jnp.floating), jnp.isdtype('int2', 'integral'), "
        "jnp.zeros(2, 'uint16').view('bfloat16').dtype)\n")
    out = _run_python(code3, tmp_path)
    assert out.split("\n")[:4] == [
        "False", "bfloat16 float8_e4m3fn int4 uint4",
        "float32 float8_e5m2 bfloat16 True 0.0078125 7", "True True bfloat16"], out
    code2 = ("import sys, tracer.numpy as jnp\n"
             "print(jnp.promote_types(jnp.bfloat16, jnp.float16), "
             "'ml_dtypes' in sys.modules)\n")
    out = _run_python(code2)
    assert out.split() == ["float32", "True"], out


def test_the_first_jit_loads_numba_without_all_of_scipy_linalg(tmp_path):
    # numba_backend._import_numba: Numba's BLAS check sees only the extension module, and
    # a compiled BLAS call (np.dot in a scan's driver) and the user's own scipy.linalg
    # imports still work afterwards
    code = (
        "import sys, numpy as np, tracer, tracer.numpy as jnp\n"
        "from tracer import lax\n"
        "tracer.config.update('jit_compile', 'sync')\n"
        "y = tracer.jit(lambda x: jnp.exp(x) + 1)(np.zeros(3))\n"
        "print(float(y[0]), 'scipy.linalg' in sys.modules)\n"
        "w = np.arange(9.0).reshape(3, 3) / 10\n"
        "def body(c, _):\n"
        "    return jnp.tanh(jnp.dot(c, w)), None\n"
        "c, _ = tracer.jit(lambda c: lax.scan(body, c, None, length=4))(np.ones(3))\n"
        "e = np.ones(3)\n"
        "for _ in range(4):\n"
        "    e = np.tanh(e @ w)\n"
        "print(np.allclose(np.asarray(c), e, rtol=1e-12, atol=0))\n"
        "import scipy.linalg.cython_blas\n"
        "print(len(scipy.linalg.cython_blas.__pyx_capi__) > 0)\n")
    out = _run_python(code, tmp_path)
    assert out.split() == ["2.0", "False", "True", "True"], out


def test_numba_leaves_importlib_metadata_lazy_until_it_is_used(tmp_path):
    # numba_backend._numba puts importlib.metadata in sys.modules as a lazy module: a
    # program that loads cached kernels never runs it; Numba's first compile (its
    # extension entry points) and the user's own use get the real module.
    code = (
        "import sys, importlib.util\n"
        "import numba_backend._numba\n"
        "m = sys.modules['importlib.metadata']\n"
        "print(type(m).__name__, 'email' in sys.modules)\n"
        "from importlib.metadata import version\n"
        "import numpy\n"
        "print(version('numpy') == numpy.__version__, type(m).__name__)\n"
        "import numba\n"
        "print(numba.njit(lambda x: x + 1)(1))\n")
    out = _run_python(code, tmp_path)
    assert out.split() == ["_LazyModule", "False", "True", "module", "2"], out


class _ImportTimeLaxReads(ast.NodeVisitor):
    """``lax.<name>`` read when the module is imported (outside any function body)."""

    def __init__(self):
        self.hits = []
        self.depth = 0

    def visit_FunctionDef(self, node):
        for d in node.decorator_list + node.args.defaults + [
                d for d in node.args.kw_defaults if d is not None]:
            self.visit(d)
        self.depth += 1
        for b in node.body:
            self.visit(b)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        for d in node.args.defaults:
            self.visit(d)
        self.depth += 1
        self.visit(node.body)
        self.depth -= 1

    def visit_Attribute(self, node):
        if self.depth == 0 and isinstance(node.value, ast.Name) and node.value.id == "lax":
            self.hits.append(f"{node.lineno}: lax.{node.attr}")
        self.generic_visit(node)


def import_time_lax_reads(src: str) -> list:
    v = _ImportTimeLaxReads()
    v.visit(ast.parse(src))
    return v.hits


def test_tracer_reads_no_lax_attribute_at_import():
    bad = [f"{f.relative_to(ROOT).as_posix()}:{h}" for f in _modules("tracer")
           for h in import_time_lax_reads(f.read_text())]
    assert not bad, ("read these through their family module (``from lax import "
                     "elementwise``): with ``import lax`` first the package is still empty "
                     "here:\n" + "\n".join(bad))


def test_the_import_time_scan():
    src = ("import lax\n"
           "sub = lax.sub\n"                                   # 2
           "@deco(lax.max)\n"                                  # 3
           "def f(x, y=lax.min):\n"                            # 4
           "    return lax.add(x, y)\n"                        # inside: fine
           "g = lambda x: lax.neg(x)\n"                        # inside: fine
           "table = [lax.exp(v) for v in ()]\n"                # 7: a comprehension runs now
           "class C:\n    op = lax.mul\n"                     # 9: a class body runs now
           "    def m(self):\n        return lax.div\n")
    assert import_time_lax_reads(src) == ["2: lax.sub", "3: lax.max", "4: lax.min",
                                          "7: lax.exp", "9: lax.mul"]


_ORDERS = ["import tracer", "import lax", "from tracer import lax", "import tracer.lax",
           "import tracer.numpy as tnp", "from lax.control_flow import scan",
           "import tracer.core", "from tracer.interpreters import ad",
           "import lowering.pipeline"]

_AFTER = """
import json, sys
import numpy as np
import lax, tracer
import tracer.numpy as tnp
from tracer import lax as tlax
import tracer.lax
assert tlax is lax and tracer.lax is lax and sys.modules["tracer.lax"] is lax
assert tracer.numpy is tnp
y = tracer.grad(lambda x: tnp.sum(lax.sin(x) * 2.0))(np.ones(3))
np.testing.assert_allclose(np.asarray(y), 2.0 * np.cos(np.ones(3)), rtol=1e-15)
print(json.dumps({"tracer": sorted(dir(tracer)), "lax": sorted(dir(lax)),
                  "tnp": sorted(dir(tnp))}))
"""


def _names_after(first: str) -> dict:
    res = subprocess.run([sys.executable, "-c", first + "\n" + _AFTER], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, (first, res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def names_after_import_tracer():
    return _names_after("import tracer")


@pytest.mark.parametrize("first", _ORDERS[1:])
def test_every_import_order_gives_the_same_packages(first, names_after_import_tracer):
    # a fresh process per order; the same public names whichever package comes first
    names = _names_after(first)
    for pkg in ("tracer", "lax", "tnp"):
        assert names[pkg] == names_after_import_tracer[pkg], (
            first, pkg, set(names[pkg]) ^ set(names_after_import_tracer[pkg]))
    assert {"grad", "jit", "vmap", "numpy", "random", "nn", "scipy", "lax",
            "custom_jvp"} <= set(names["tracer"])


def _cold_then_warm(program, cache_dir, before="", after=""):
    """Run ``program`` (whose first line of output is its answer) once compiling into
    ``cache_dir`` ("sync"), then again on that cache with ``before`` and ``after``
    around it: the warm run's lines after its answer, once the answer is checked equal
    to the cold run's, bit for bit."""
    cold = _run_python("import tracer\ntracer.config.update('jit_compile', 'sync')\n"
                       + program, cache_dir)
    lines = _run_python(before + program + after, cache_dir).splitlines()
    assert lines[0] == cold.strip(), (cold, lines)
    return lines[1:]


def test_a_warm_program_imports_no_module_its_loaded_kernels_never_run(tmp_path):
    # numba_backend._numba: a program whose kernels all come from the disk cache imports
    # neither the Numba modules its kernels inlined code from (their environments get
    # the module's name alone) nor numpy.ma (Numba's typeof of an ndarray), nor SciPy and
    # PyYAML (Numba's import-time version check and config file); its answers are the
    # cold run's, bit for bit, and a later compile in that process still works
    program = (
        "import sys, numpy as np, tracer, tracer.numpy as jnp\n"
        "x = np.linspace(-3.0, 2.0, 300).reshape(3, 100).astype(np.float32)\n"
        "f = tracer.jit(lambda x: jnp.sum(jnp.exp(x - jnp.max(x, axis=1, keepdims=True)),"
        " axis=1) * jnp.arange(3))\n"
        "print(np.asarray(f(x)).tobytes().hex())\n")
    warm = _cold_then_warm(
        program, tmp_path, after=
        "from numba_backend import cache\n"
        "print(cache.stats['cache_loads'] > 0, cache.stats['compiled'])\n"
        "print(*(type(sys.modules.get(m)).__name__ == 'module' for m in ("
        "'numba.np.arrayobj', 'numba.cpython.numbers', 'numpy.ma', 'scipy', 'yaml')))\n"
        "tracer.config.update('jit_compile', 'sync')\n"
        "g = tracer.jit(lambda x: jnp.cumsum(x[::-1] * 2.5, axis=1))\n"
        "print(np.array_equal(np.asarray(g(x)), np.cumsum(x[::-1] * np.float32(2.5), axis=1)),"
        " 'numba.np.arrayobj' in sys.modules)\n")
    assert warm == ["True 0", "False False False False False", "True True"], warm


def test_typeof_of_an_ndarray_without_numpy_ma_is_numbas_own(tmp_path):
    # numba_backend._numba._typeof_ndarray_without_numpy_ma: the same Numba type as
    # Numba's own rule for every kind of array, without importing numpy.ma; once numpy.ma
    # is imported, Numba's own rule runs again (a MaskedArray is rejected)
    code = (
        "import sys, numpy as np, numba_backend._numba as nb\n"
        "from numba import typeof\n"
        "a = np.arange(24.0).reshape(2, 3, 4)\n"
        "ro = np.ones(3, np.int16); ro.flags.writeable = False\n"
        "arrays = [a, a.T, a[:, ::2], np.asfortranarray(a), np.zeros((), np.bool_),\n"
        "          np.zeros((0, 5), np.complex64), ro, np.broadcast_to(np.ones(2), (3, 2)),\n"
        "          np.zeros(4, np.uint64), np.ones((1, 1), np.float16), np.zeros(2, object),\n"
        "          np.zeros(2, 'U3'), np.zeros(2, 'M8[s]')]\n"
        "ours = [typeof(v) for v in arrays]\n"
        "print('numpy.ma' in sys.modules)\n"
        "try:\n"
        "    typeof(np.zeros(2, 'V8'))\n"
        "except Exception as e:\n"
        "    print(type(e).__name__)\n"
        "theirs = [nb._numba_typeof_ndarray(v, None) for v in arrays]\n"
        "print(ours == theirs, [t.mutable for t in ours[6:8]], ours[1].layout)\n"
        "try:\n"
        "    typeof(np.ma.masked_array([1.0, 2.0], mask=[0, 1]))\n"
        "except Exception as e:\n"
        "    print(type(e).__name__)\n")
    out = _run_python(code, tmp_path)
    assert out.splitlines() == ["False", "NumbaValueError", "True [False, False] F",
                                "NumbaTypeError"], out


def test_imports_skipped_while_numba_imports_fail_in_that_thread_only(tmp_path):
    # numba_backend._numba._skipped_imports: the importing thread's `import scipy` fails
    # as if SciPy were absent, another thread's succeeds, and so does a later one; PyYAML
    # stays importable for Numba where a .numba_config.yaml asks for it
    code = (
        "import os, sys, threading\n"
        "import numba_backend._numba as nb\n"
        "sys.modules.pop('scipy', None)\n"
        "got = []\n"
        "with nb._skipped_imports() as s:\n"
        "    try:\n"
        "        import scipy\n"
        "        got.append('imported')\n"
        "    except ImportError:\n"
        "        got.append('skipped')\n"
        "    t = threading.Thread(target=lambda: got.append(__import__('scipy').__name__))\n"
        "    t.start(); t.join()\n"
        "import scipy.special\n"
        "print(*got, scipy.special.erf(0.0) == 0.0, s in sys.meta_path)\n"
        "os.chdir(sys.argv[1] if len(sys.argv) > 1 else '.')\n"
        "open('.numba_config.yaml', 'w').close()\n"
        "with nb._skipped_imports() as s:\n"
        "    print('yaml' in s.names)\n")
    code = code.replace("sys.argv[1] if len(sys.argv) > 1 else '.'", repr(str(tmp_path)))
    out = _run_python(code, tmp_path)
    assert out.splitlines() == ["skipped scipy True False", "False"], out


def test_numba_config_file_is_read_after_numba_is_imported_the_cheap_way(tmp_path):
    # _skipped_imports leaves Numba's config PyYAML as a lazy module: a .numba_config.yaml
    # in the directory a later compile runs in is read as with Numba imported directly
    # (Numba re-reads it from the current directory whenever it reloads its config)
    (tmp_path / ".numba_config.yaml").write_text("developer_mode: 1\n")
    lib = tmp_path / "lib"        # a stand-in PyYAML, first on the path (reads that file)
    lib.mkdir()
    (lib / "yaml.py").write_text(
        "def safe_load(f):\n"
        "    k, v = f.read().split(':')\n"
        "    return {k.strip(): int(v)}\n")
    code = (
        "import os, sys, warnings\n"
        f"sys.path.insert(0, {str(lib)!r})\n"
        "warnings.simplefilter('error')\n"
        "import numba_backend._numba\n"
        "from numba.core import config\n"
        "print(config.DEVELOPER_MODE, type(sys.modules['yaml']).__name__)\n"
        f"os.chdir({str(tmp_path)!r})\n"
        "import numba\n"
        "@numba.njit\n"
        "def f(x):\n"
        "    return x + 1\n"
        "print(f(1), config.DEVELOPER_MODE)\n")
    out = _run_python(code)
    assert out.splitlines() == ["0 _LazyModule", "2 1"], out


def test_cached_libraries_load_without_their_bitcode_until_linked(tmp_path):
    # numba_backend._numba._defer_shared_modules: a warm program's loads read the symbols
    # each library defines from its object code (global ones only, all of which Numba's
    # own reading lists too) and parse no bitcode; a later compile that links a loaded
    # library (the pairwise-sum helpers a float reduction calls) parses its bitcode then,
    # and answers stay right
    program = (
        "import sys, numpy as np, tracer, tracer.numpy as jnp\n"
        "x = np.linspace(-3.0, 2.0, 300).reshape(3, 100).astype(np.float32)\n"
        "f = tracer.jit(lambda x: jnp.sum(jnp.exp(x) * 2.0, axis=1))\n"
        "print(np.asarray(f(x)).tobytes().hex())\n")
    warm = _cold_then_warm(
        program, tmp_path, before=
        "import llvmlite.binding as ll, numba_backend._numba as nb\n"
        "import numba_backend.native as nv\n"
        "nv.load = lambda *a: None     # (Numba's cache, not the native files)\n"
        "parsed, objects = [], []\n"
        "parse = ll.parse_bitcode\n"
        "ll.parse_bitcode = lambda bc: parsed.append(1) or parse(bc)\n"
        "elf = nb._elf_defined_globals\n"
        "nb._elf_defined_globals = lambda obj: objects.append(obj) or elf(obj)\n", after=
        "n_loaded = len(objects)\n"
        "print(n_loaded > 0, len(parsed))\n"
        "for obj in objects:\n"
        "    names = elf(obj)\n"
        "    assert any(n.startswith('_ZN7cpython') for n in names), names\n"
        "tracer.config.update('jit_compile', 'sync')\n"
        "y = np.linspace(0.0, 1.0, 700).reshape(7, 100).astype(np.float32) + np.float32(1e4)\n"
        "g = tracer.jit(lambda y: jnp.sum(y * 3.0, axis=1))\n"
        "want = np.sum(y * np.float32(3.0), axis=1)\n"
        "print(np.allclose(np.asarray(g(y)), want, rtol=1e-6), len(parsed) > 0)\n")
    assert warm == ["True 0", "True True"], warm


def test_package_dispatchers_skip_numba_extension_init_and_users_keep_it(tmp_path):
    # numba_backend._numba.njit: this package's dispatchers do not run the installed
    # numba_extensions entry points on their first call (Numba reads every installed
    # distribution's metadata for them, even for a call that loads from the disk cache);
    # a user's own Numba function still runs them before its first compile
    dist = tmp_path / "fakeext-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeext\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[numba_extensions]\ninit = fakeext_mod:init\n")
    (tmp_path / "fakeext_mod.py").write_text("def init():\n    print('extension init')\n")
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "import numpy as np, tracer, tracer.numpy as jnp\n"
        "tracer.config.update('jit_compile', 'sync')\n"
        "print(np.asarray(tracer.jit(jnp.sort)(np.array([3.0, 1.0, 2.0]))))\n"
        "x = np.ones((1, 6, 6, 2), np.float32); w = np.ones((3, 3, 2, 4), np.float32)\n"
        "y = tracer.jit(lambda x, w: tracer.lax.conv_general_dilated(x, w, (1, 1), 'SAME',"
        " dimension_numbers=('NHWC', 'HWIO', 'NHWC')))(x, w)\n"
        "print(float(np.asarray(y)[0, 2, 2, 0]))\n"
        "import numba\n"
        "@numba.njit\n"
        "def g(a):\n"
        "    return a + 1\n"
        "print(g(1))\n")
    out = _run_python(code, tmp_path / "cache")
    assert out.splitlines() == ["[1. 2. 3.]", "18.0", "extension init", "2"], out


_NATIVE_PROGRAM = (
    "import sys, numpy as np, tracer, tracer.numpy as jnp\n"
    "x = np.array([[0.0, -0.0, 3.0, 3.0, np.nan, -np.inf, 1e-30, 7.5],\n"
    "              [2.0, 2.0, -1.0, np.inf, 0.5, -0.0, 0.0, 1e30]], np.float32)\n"
    "i = np.array([3, -7, 0, 2**31 - 1], np.int32)\n"
    "f = tracer.jit(lambda x, i: (jnp.max(x, axis=1), jnp.sum(jnp.exp(x) * 2.0, axis=1),\n"
    "                             jnp.argmax(x, axis=0), jnp.tanh(x) - x.mean(), i // 3 + i % 5))\n"
    "print(''.join(np.asarray(o).tobytes().hex() for o in f(x, i)))\n")


def test_native_kernels_answer_as_numbas_bit_for_bit(tmp_path):
    # numba_backend.native: a warm program loads its kernels from their native files,
    # without Numba's dispatcher, and answers as the cold run (Numba's compile) and as a
    # warm run through Numba's cache, bit for bit, at ties, signed zeros, inf and NaN
    count = "from numba_backend import cache\nprint(cache.stats['native_loads'])\n"
    native = _cold_then_warm(_NATIVE_PROGRAM, tmp_path, after=count)
    assert int(native[0]) > 0, native
    numba_only = _cold_then_warm(_NATIVE_PROGRAM, tmp_path, before=(
        "import numba_backend.native as nv\nnv.load = lambda *a: None\n"), after=count)
    assert numba_only == ["0"], numba_only


def _native_record(data):
    from numba_backend import native
    return pickle.loads(data[len(native._HEADER) + 4:])


def _native_file(record):
    import zlib

    from numba_backend import native
    payload = pickle.dumps(record)
    return native._HEADER + zlib.crc32(payload).to_bytes(4, "little") + payload


def test_native_files_it_cannot_use_go_to_numba(tmp_path):
    # a native file that is truncated or damaged, that another kernel wrote, that needs a
    # symbol nothing defines, or that was written under other Numba settings is not used (LLVM would end the process on an
    # unresolved symbol); the kernel loads through Numba and the answer is the same
    _run_python("import tracer\ntracer.config.update('jit_compile', 'sync')\n"
                + _NATIVE_PROGRAM, tmp_path)
    files = sorted((tmp_path / "kernels").glob("*.kernel.native"))
    assert len(files) >= 2, files
    originals = {p: p.read_bytes() for p in files}
    want = None
    for damage in ("truncate", "bit", "swap", "symbol", "stamp", None):
        for p, data in originals.items():
            p.write_bytes(data)
        if damage == "truncate":
            files[0].write_bytes(files[0].read_bytes()[:100])
        elif damage == "bit":       # one bit of the object code flipped (a crash if run)
            data = bytearray(files[0].read_bytes())
            data[len(data) // 2] ^= 8
            files[0].write_bytes(bytes(data))
        elif damage == "swap":      # another kernel's file, of the same argument types
            recs = [_native_record(originals[p]) for p in files[:2]]
            recs[0]["spec"], recs[1]["spec"] = recs[1]["spec"], recs[0]["spec"]
            files[0].write_bytes(_native_file(recs[1]))
            files[1].write_bytes(_native_file(recs[0]))
        elif damage == "symbol":
            for p in files:
                rec = _native_record(p.read_bytes())
                assert b"\0NRT_MemInfo_call_dtor\0" in rec["object"] or \
                    b"\0PyArg_UnpackTuple\0" in rec["object"]
                rec["object"] = rec["object"].replace(b"\0PyArg_UnpackTuple\0",
                                                      b"\0PyArg_UnpackTupXe\0")
                p.write_bytes(_native_file(rec))
        env = "import os\nos.environ['NUMBA_OPT'] = '2'\n" if damage == "stamp" else \
            "import os\nos.environ['NUMBA_NUM_THREADS'] = '1'\n"   # (no change to code)
        out = _run_python(env + _NATIVE_PROGRAM + "from numba_backend import cache\n"
                          "print(cache.stats['native_loads'], cache.stats['kernels'])\n",
                          tmp_path).splitlines()
        loads, kernels = map(int, out[1].split())
        if damage in ("truncate", "bit", "swap"):
            assert 0 < loads == kernels - (2 if damage == "swap" else 1), out
        elif damage is None:
            assert loads == kernels, out
        else:
            assert loads == 0, (damage, out)
        want = want or out[0]
        assert out[0] == want, damage


def test_a_native_kernel_called_with_other_arguments_runs_numbas(tmp_path):
    # the executor always passes the compiled argument types; a call that does not (a
    # strided input here) is not given to the native code but to Numba's dispatcher,
    # with the same answer
    out = _cold_then_warm(_NATIVE_PROGRAM, tmp_path, before=(
        "import numba_backend.native as nv\n"
        "calls, load = [], nv.load\n"
        "def recording(path, spec, fallback):\n"
        "    fn = load(path, spec, fallback)\n"
        "    def run(*a):\n"
        "        calls.append((fn, fallback, a))\n"
        "        return fn(*a)\n"
        "    return None if fn is None else run\n"
        "nv.load = recording\n"), after=(
        "fn, fallback, args = calls[0]\n"
        "ins = [a for a in args if not a.flags.writeable]\n"
        "outs = [a for a in args if a.flags.writeable]\n"
        "want = [o.copy() for o in outs]\n"
        "strided = []\n"
        "for a in args:\n"
        "    if a.flags.writeable or a.ndim == 0:\n"
        "        strided.append(a)\n"
        "        continue\n"
        "    s = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)[..., ::2]\n"
        "    s[...] = a\n"
        "    strided.append(s)\n"
        "for o in outs:\n"
        "    o[...] = 0\n"
        "print(type(fallback.__self__._numba).__name__)\n"
        "fn(*strided)\n"
        "print(type(fallback.__self__._numba).__name__,\n"
        "      all(np.array_equal(o, w, equal_nan=True) for o, w in zip(outs, want)))\n"))
    assert out == ["NoneType", "CPUDispatcher True"], out


def test_a_warm_program_never_imports_numba_and_can_still_compile(tmp_path):
    # numba_backend.lazy_numba: a program whose kernels all load from their native files
    # does not import Numba (its helper modules' registrations wait for it); a compile
    # later in that process imports it, registers them and answers as NumPy does
    program = _NATIVE_PROGRAM.replace("print(", "a = (") + (
        "w = np.linspace(-1.0, 1.0, 12).reshape(4, 3).astype(np.float32)\n"
        "g = tracer.jit(tracer.grad(lambda w, x: jnp.sum(jnp.tanh(x[:, :4] @ w) ** 2)))\n"
        "print(a, np.asarray(g(w, np.nan_to_num(x, posinf=1.0, neginf=-1.0))).tobytes().hex())\n")
    warm = _cold_then_warm(program, tmp_path, after=(
        "from numba_backend import cache\n"
        "print('numba' in sys.modules, cache.stats['native_loads'] > 0, "
        "cache.stats['compiled'])\n"
        "tracer.config.update('jit_compile', 'sync')\n"
        "y = np.linspace(0.0, 3.0, 700).reshape(7, 100)\n"
        "h = tracer.jit(lambda y: jnp.sum(jnp.exp(-y) * 3.0, axis=1) + jnp.max(y, axis=1))\n"
        "want = np.sum(np.exp(-y) * 3.0, axis=1) + np.max(y, axis=1)\n"
        "print(np.array_equal(np.asarray(h(y)), want), 'numba' in sys.modules, "
        "cache.stats['compiled'] > 0)\n"))
    assert warm == ["False True 0", "True True True"], warm


def test_the_backend_helpers_serve_a_users_own_numba_code(tmp_path):
    # numba_backend.lazy_numba: a user who imports Numba after the helper modules and
    # compiles a function calling them finds them registered (this package's
    # numba_extensions entry point runs the registrations before Numba's first compile)
    out = _run_python(
        "import numpy as np\n"
        "import numba_backend.scalar as S, numba_backend.vecmath as V\n"
        "import numba_backend.pairwise as P\n"
        "import numba\n"
        "@numba.njit\n"
        "def f(x, a):\n"
        "    return S.f16_to_f32(np.uint16(15360)), V.fma(x, x, x), "
        "P.pairwise(a, 0, a.shape[0])\n"
        "print(f(0.5, np.arange(1000.0)))\n", tmp_path)
    assert out.strip() == "(1.0, 0.75, 499500.0)", out


def test_threads_making_their_first_calls_at_once_in_a_warm_process(tmp_path):
    # many threads' first jitted calls at the same moment, in a process that has not
    # imported Numba: the ones whose library kernels or loops need it import it once
    # (no thread registers the helpers with a half-imported Numba: that deadlocked, or
    # found numba.core.extending half initialized); every answer is the cold run's
    program = (
        "import sys, threading, numpy as np, tracer, tracer.numpy as jnp\n"
        "from tracer import lax\n"
        "rng = np.random.default_rng(0)\n"
        "x = rng.standard_normal((37, 53))\n"
        "xf = x.astype(np.float32)\n"
        "img = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)\n"
        "ker = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)\n"
        "def scan(a):\n"
        "    return lax.scan(lambda c, r: (c * 0.9 + jnp.sin(r), c.sum()),\n"
        "                    jnp.zeros(a.shape[1]), a)\n"
        "jobs = [(lambda a: jnp.sum(a, axis=0), xf), (lambda a: jnp.exp(a), xf),\n"
        "        (lambda a: jnp.exp(a.astype(jnp.float16)) * 2, xf),\n"
        "        (lambda a: jnp.cumsum(a, axis=1), x), (lambda a: jnp.sort(a, axis=0), x),\n"
        "        (lambda a, k: lax.conv_general_dilated(a, k, (1, 1), 'SAME'), img, ker),\n"
        "        (scan, x), (tracer.grad(lambda a: jnp.sum(jnp.tanh(a) ** 2)), x),\n"
        "        (lambda a: lax.fori_loop(0, 5, lambda i, v: v * 1.01 + jnp.exp(-v), a), xf),\n"
        "        (tracer.vmap(lambda a: jnp.dot(a, a)), x),\n"
        "        (lambda a: (jnp.argmax(a, axis=1), jnp.max(a)), x)]\n"
        "out, errors = [None] * len(jobs), []\n"
        "start = threading.Barrier(len(jobs))\n"
        "def work(i):\n"
        "    start.wait()\n"
        "    try:\n"
        "        leaves = tracer.tree_util.tree_leaves(tracer.jit(jobs[i][0])(*jobs[i][1:]))\n"
        "        out[i] = ''.join(np.asarray(v).tobytes().hex() for v in leaves)\n"
        "    except Exception as e:\n"
        "        errors.append(repr(e))\n"
        "threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "print(errors or ' '.join(out))\n")
    _run_python("import tracer\ntracer.config.update('jit_compile', 'sync')\n" + program,
                tmp_path)
    for _ in range(2):
        warm = _cold_then_warm(program, tmp_path, before=(
            "import logging\n"
            "logging.getLogger('tracer').addFilter(lambda r: print('LOG', r.getMessage()))\n"),
            after="")
        assert not any(line.startswith("LOG") for line in warm), warm
