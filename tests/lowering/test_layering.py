"""The compiler's layering: ``lowering`` is data and passes only (jaxpr -> Program), and
``numba_backend`` owns everything that runs. These tests fail when lowering regresses:

- no module of ``lowering`` imports Numba or ``numba_backend`` -- not even lazily inside a
  function -- or names ``numba_backend`` at all (say, as a helper's module string);
- with ``numba`` and ``numba_backend`` blocked from importing, programs with kernels,
  reductions, control flow, a convolution, a sort, a scatter and a dot_general still
  lower to Programs whose text prints;
- every module of the package is either a rule module the pipeline loads
  (``pipeline.RULE_MODULES``) or one of the pipeline's own, and every library-call kind
  the rules make has an implementation in the backend.
"""
import ast
import pathlib
import subprocess
import sys
import textwrap

import numpy as np

import lax
import tracer
from lowering import ir, pipeline

LOWERING = pathlib.Path(pipeline.__file__).parent
ROOT = LOWERING.parent
BLOCKED = ("numba", "numba_backend")
# the modules of the pipeline itself (the rest register rules)
PIPELINE_MODULES = {"__init__", "fusion", "ir", "passes", "pipeline", "rules", "schedule",
                    "verify"}


def _blocked(module: str) -> bool:
    return module.split(".")[0] in BLOCKED


def _violations(path: pathlib.Path) -> list:
    src = path.read_text()
    out = []
    if "numba_backend" in src:
        lines = [i + 1 for i, line in enumerate(src.splitlines()) if "numba_backend" in line]
        out.append(f"{path.name}: names numba_backend (lines {lines})")
    for node in ast.walk(ast.parse(src, str(path))):
        if isinstance(node, ast.Import):
            out += [f"{path.name}:{node.lineno}: import {a.name}" for a in node.names
                    if _blocked(a.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and _blocked(node.module):
                out.append(f"{path.name}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # importlib.import_module("numba"), __import__("numba.core"), ...
            if node.value in BLOCKED or node.value.startswith("numba."):
                out.append(f"{path.name}:{node.lineno}: string {node.value!r}")
    return out


def test_lowering_modules_import_no_backend():
    files = sorted(LOWERING.glob("*.py"))
    assert len(files) > 10, files
    bad = [v for f in files for v in _violations(f)]
    assert not bad, "lowering/ must not import Numba or numba_backend:\n" + "\n".join(bad)


def test_the_scan_catches_lazy_imports_and_module_strings(tmp_path):
    # the checker itself: an import inside a function and a helper string are caught
    p = tmp_path / "bad.py"
    p.write_text("def f():\n    from numba_backend import sort_kernels\n    import numba\n"
                 "    return ctx.call('numba_backend.scalar.sign_f')\n")
    bad = _violations(p)
    assert len(bad) == 3 and any("names numba_backend" in b for b in bad), bad
    p.write_text("import importlib\nm = importlib.import_module('numba.core')\n")
    assert _violations(p) == ["bad.py:2: string 'numba.core'"]
    p.write_text("from lowering.ir import LibraryCall\n# lowered for a backend (Numba)\n")
    assert _violations(p) == []


def test_rule_modules_are_listed():
    modules = {f.stem for f in LOWERING.glob("*.py")}
    listed = set(pipeline.RULE_MODULES)
    assert len(listed) == len(pipeline.RULE_MODULES), "a module listed twice"
    assert listed <= modules, listed - modules
    assert not listed & PIPELINE_MODULES
    missing = modules - listed - PIPELINE_MODULES
    assert not missing, f"lowering modules not in pipeline.RULE_MODULES: {sorted(missing)}"


_LOWER_WITHOUT_BACKEND = textwrap.dedent(r'''
    import sys
    for name in ("numba", "numba_backend"):
        sys.modules[name] = None          # any import of them now raises ImportError

    import numpy as np

    import lax
    import tracer
    import tracer.numpy as tnp
    from lax import ScatterDimensionNumbers
    from lowering import ir, pipeline, verify

    def lower(f, *args):
        program = pipeline.lower(tracer.make_jaxpr(f)(*args))
        verify.check_program(program)
        return program

    x = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    cases = {
        "softmax": (lambda x: tnp.exp(x - tnp.max(x, axis=1, keepdims=True)).sum(axis=1),
                    (x,)),
        "scan": (lambda x: lax.scan(lambda c, r: (c * 2.0 + tnp.sin(r), c.sum()), x[0], x),
                 (x,)),
        "conv": (lambda a, w: lax.conv_general_dilated(a, w, (1, 1), "SAME"),
                 (np.ones((1, 2, 5, 5)), np.ones((3, 2, 3, 3)))),
        "sort": (lambda x: lax.sort(x, 1), (x,)),
        "scatter": (lambda x, i, u: lax.scatter_add(
            x, i, u, ScatterDimensionNumbers((), (0,), (0,))),
            (np.zeros(4), np.array([[1], [3]]), np.ones(2))),
        "dot_general": (lambda a, b: a @ b, (x, x.T)),
    }
    for name, (f, args) in cases.items():
        program = lower(f, *args)
        kinds = sorted({s.kind for s in program.steps if isinstance(s, ir.LibraryCall)})
        print(f"== {name}: {kinds}")
        print(program.pretty())
    assert not pipeline.failed_rule_modules, pipeline.failed_rule_modules
    loaded = sorted(m for m, v in sys.modules.items()
                    if v is not None and m.split(".")[0] in ("numba", "numba_backend"))
    assert not loaded, loaded
    print("LOWERED WITHOUT THE BACKEND")
''')


def test_lowering_runs_with_numba_and_the_backend_blocked():
    res = subprocess.run([sys.executable, "-c", _LOWER_WITHOUT_BACKEND], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    out = res.stdout
    assert out.rstrip().endswith("LOWERED WITHOUT THE BACKEND"), out[-2000:]
    kinds = {line[3:].split(":")[0]: ast.literal_eval(line.split(": ", 1)[1])
             for line in out.splitlines() if line.startswith("== ")}
    expected = {"softmax": None, "scan": "scan", "conv": "conv_general_dilated",
                "sort": "sort", "scatter": "scatter", "dot_general": "dot_general"}
    assert set(kinds) == set(expected), out
    for name, kind in expected.items():
        assert kind is None or kind in kinds[name], (name, kinds[name])
    assert "library_call scan[length=3" in out and "kernel(" in out
    assert "host_step" not in out, out


def test_every_library_kind_has_a_backend_implementation():
    from numba_backend import library
    import tracer.numpy as tnp

    x = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    progs = [pipeline.lower(tracer.make_jaxpr(f)(*args)) for f, args in [
        (lambda x: (lax.sort(x, 1), lax.top_k(x, 2)[0], x.reshape(4, 3) @ x,
                    lax.cumsum(x, 1)), (x,)),
        (lambda x: lax.while_loop(lambda c: c[0, 0] < 3.0, lambda c: c + 1.0, x), (x,)),
        (lambda x: lax.cond(x[0, 0] > 0, tnp.sin, tnp.cos, x), (x,)),
        (lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1), "VALID"), (x,)),
    ]]

    def kinds(program):
        for s in program.steps:
            if isinstance(s, ir.LibraryCall):
                yield s.kind
                spec = dict(s.params).get("spec")
                for p in (spec.programs if spec is not None else ()):
                    yield from kinds(p)

    seen = {k for p in progs for k in kinds(p)}
    assert {"sort", "top_k", "reshape_view", "dot_general", "cumulative", "while", "cond",
            "reduce_window"} <= seen, seen
    assert seen <= set(library.library_impls), seen - set(library.library_impls)
    for step in (s for p in progs for s in p.steps if isinstance(s, ir.LibraryCall)):
        assert not any(callable(v) and not isinstance(v, type) for _, v in step.params), step
