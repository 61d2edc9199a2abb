"""Extract the StableHLO interpreter's op test cases that use the low-precision element
types (bf16, the f8/f4 formats, i4/ui4, i2/ui2) into tests/data/stablehlo_lowp_cases.json.

Usage: python tools/extract_stablehlo_lowp_cases.py GIT_DIR [OUT]

GIT_DIR is a git directory of github.com/openxla/stablehlo (a bare clone works); the cases
are read from its HEAD, under stablehlo/tests/interpret/. The test data keeps the source
commit, each case's file and its MLIR text (the StableHLO project's test values, Apache
License 2.0; see the "source" entry of the output).

Every ``// -----``-separated case whose text names one of the types is kept. Each becomes
a list of operations in SSA order and the checks on their results:

- ``constant``: its literal elements as written (decimal, or ``0x..`` bit patterns) and
  the bits MLIR's parser gives them: a decimal literal is parsed as a double and rounded
  to the type to nearest even (APFloat's convert, as ml_dtypes' conversion from float64
  does), except that APFloat has no zero in f8E8M0FNU and makes 0.0 its smallest value
  (2^-127, encoding 0x00) where a conversion gives NaN;
- element-wise ops, ``convert``, ``iota`` and ``dot_general`` with their attributes;
- ``check.expect_eq_const`` / ``check.expect_almost_eq_const`` (tolerance, default 1e-4)
  with the expected values, parsed as the constants are.

Anything else (``interpreter.probe``, a function returning values for FileCheck) is kept
as an ``unsupported`` entry naming it, so the test can list each such case and why.
"""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import ml_dtypes
import numpy as np

TYPES = {
    "bf16": "bfloat16", "f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2",
    "f8E4M3FNUZ": "float8_e4m3fnuz", "f8E5M2FNUZ": "float8_e5m2fnuz",
    "f8E4M3B11FNUZ": "float8_e4m3b11fnuz", "f8E3M4": "float8_e3m4", "f8E4M3": "float8_e4m3",
    "f8E8M0FNU": "float8_e8m0fnu", "f4E2M1FN": "float4_e2m1fn", "f6E2M3FN": "float6_e2m3fn",
    "i1": "bool", "i2": "int2", "ui2": "uint2", "i4": "int4", "ui4": "uint4",
    "i8": "int8", "ui8": "uint8", "i16": "int16", "ui16": "uint16", "i32": "int32",
    "ui32": "uint32", "i64": "int64", "ui64": "uint64", "f16": "float16", "f32": "float32",
    "f64": "float64", "complex<f32>": "complex64", "complex<f64>": "complex128",
}
LOWP = re.compile(r"[x<](bf16|f8E\w+|f4E\w+|u?i4|u?i2)>")
BITS = {"bfloat16": 16, "float4_e2m1fn": 4, "float6_e2m3fn": 6}   # others: 8-bit floats

OPS = {"add", "subtract", "multiply", "maximum", "minimum", "negate", "and", "or", "xor",
       "not", "ceil", "floor", "cosine", "sine", "tanh", "convert", "dot_general", "iota",
       "constant", "abs", "compare", "select", "clamp", "bitcast_convert", "divide",
       "remainder", "power", "sqrt", "rsqrt", "exponential", "log", "sign", "popcnt",
       "count_leading_zeros", "shift_left", "shift_right_arithmetic",
       "shift_right_logical", "round_nearest_even", "round_nearest_afz", "atan2", "cbrt",
       "exponential_minus_one", "log_plus_one", "logistic", "tan", "is_finite"}


def git(git_dir, *args):
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True,
                          capture_output=True, text=True).stdout


def parse_tensor_type(t):
    """'4x2xbf16' -> ((4, 2), 'bfloat16'); 'i4' -> ((), 'int4')."""
    m = re.fullmatch(r"((?:\d+x)*)(.+)", t.strip())
    dims = [int(d) for d in m.group(1).split("x") if d]
    elem = m.group(2)
    return tuple(dims), TYPES[elem]


def _split_top(s):
    """The elements of a literal body: brackets dropped, ``(re, im)`` pairs kept whole."""
    out, parens, cur = [], 0, ""
    for ch in s:
        if ch in "[]":
            continue
        parens += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and parens == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    out.append(cur.strip())
    return [o for o in out if o]


def literal_bits(lit, dtype):
    """The bits (floats; integers: the value) MLIR's parser gives ``lit`` in ``dtype``."""
    if dtype in ("complex64", "complex128"):
        re_, im = lit.strip("()").split(",")
        return [float(re_), float(im)]
    if dtype == "bool":
        return {"true": 1, "false": 0}[lit]
    dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    if dtype in ("int2", "uint2", "int4", "uint4") or dt.kind in "iu":
        v = int(lit, 0)
        info = ml_dtypes.iinfo(dt)
        assert info.min <= v <= info.max, (lit, dtype)
        return v
    nbits = BITS.get(dtype, dt.itemsize * 8)
    if lit.lower().startswith("0x"):
        return int(lit, 16)
    v = float(lit)
    if dtype == "float8_e8m0fnu" and v == 0.0:
        return 0x00          # APFloat: no zero in E8M0FNU, makeZero gives the smallest
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    b = int(np.array(v, np.float64).astype(dt).view(u))
    r = float(np.array(b, u).view(dt))
    assert not np.isnan(r) and (np.isinf(r) == np.isinf(v)), \
        f"literal {lit} out of range for {dtype}"
    assert b < (1 << nbits)
    return b


def parse_dense(body, shape, dtype):
    items = _split_top(body)
    n = int(np.prod(shape)) if shape else 1
    if len(items) == 1 and n != 1:
        items = items * n            # splat
    assert len(items) == n, (body, shape)
    return {"dtype": dtype, "shape": list(shape), "literals": items,
            "bits": [literal_bits(i, dtype) for i in items]}


def statements(func_body):
    """The function's statements, continuation lines joined."""
    out = []
    for line in func_body.splitlines():
        s = line.strip()
        if not s or s.startswith("//"):
            continue
        if re.match(r"(%|check\.|func\.return|interpreter\.)", s) or not out:
            out.append(s)
        else:
            out[-1] += " " + s
    return out


DENSE = r"dense<(.*?)>\s*:\s*tensor<([^>]*(?:<[^>]*>)?)>"


def parse_statement(s):
    m = re.fullmatch(r"(%\w+) = stablehlo\.constant " + DENSE, s)
    if m:
        shape, dt = parse_tensor_type(m.group(3))
        return {"kind": "op", "result": m.group(1), "op": "constant", "operands": [],
                "attrs": {}, "value": parse_dense(m.group(2), shape, dt),
                "shape": list(shape), "dtype": dt}
    m = re.fullmatch(r"(%\w+) = stablehlo\.iota dim = (\d+) : tensor<(.*)>", s)
    if m:
        shape, dt = parse_tensor_type(m.group(3))
        return {"kind": "op", "result": m.group(1), "op": "iota", "operands": [],
                "attrs": {"iota_dimension": int(m.group(2))}, "shape": list(shape),
                "dtype": dt}
    m = re.fullmatch(r"(%\w+) = stablehlo\.convert (%\w+) : \(tensor<(.*)>\) -> "
                     r"tensor<(.*)>", s)
    if m:
        shape, dt = parse_tensor_type(m.group(4))
        return {"kind": "op", "result": m.group(1), "op": "convert",
                "operands": [m.group(2)], "attrs": {}, "shape": list(shape), "dtype": dt}
    m = re.fullmatch(r"(%\w+) = stablehlo\.dot_general (%\w+), (%\w+),(.*?)"
                     r": \((.*)\) -> tensor<(.*)>", s)
    if m:
        attrs = {"lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
                 "lhs_contracting_dimensions": [], "rhs_contracting_dimensions": []}
        for kind, lhs, rhs in re.findall(r"(batching_dims|contracting_dims) = "
                                         r"\[([\d, ]*)\] x \[([\d, ]*)\]", m.group(4)):
            k = kind.split("_")[0]
            attrs[f"lhs_{k}_dimensions"] = [int(v) for v in lhs.split(",") if v.strip()]
            attrs[f"rhs_{k}_dimensions"] = [int(v) for v in rhs.split(",") if v.strip()]
        rest = re.sub(r"(batching_dims|contracting_dims) = \[[\d, ]*\] x \[[\d, ]*\]", "",
                      m.group(4)).strip(" ,")
        if rest:
            return {"kind": "unsupported", "text": s, "why": f"dot_general attributes {rest}"}
        shape, dt = parse_tensor_type(m.group(6))
        return {"kind": "op", "result": m.group(1), "op": "dot_general",
                "operands": [m.group(2), m.group(3)], "attrs": attrs, "shape": list(shape),
                "dtype": dt}
    m = re.fullmatch(r"(%\w+) = stablehlo\.(\w+) ((?:%\w+, )*%\w+) : tensor<(.*)>", s)
    if m and m.group(2) in OPS:
        shape, dt = parse_tensor_type(m.group(4))
        return {"kind": "op", "result": m.group(1), "op": m.group(2),
                "operands": m.group(3).split(", "), "attrs": {}, "shape": list(shape),
                "dtype": dt}
    m = re.fullmatch(r"check\.(expect_eq_const|expect_almost_eq_const) (%\w+), " + DENSE +
                     r"(?:, tolerance = ([\d.e+-]+))?", s)
    if m:
        shape, dt = parse_tensor_type(m.group(4))
        check = {"kind": "check", "check": m.group(1), "operand": m.group(2),
                 "expected": parse_dense(m.group(3), shape, dt)}
        if m.group(1) == "expect_almost_eq_const":
            check["tolerance"] = float(m.group(5)) if m.group(5) else 1e-4
        return check
    if s == "func.return":
        return None
    return {"kind": "unsupported", "text": s}


def extract(git_dir):
    commit = git(git_dir, "rev-parse", "HEAD").strip()
    files = [f for f in git(git_dir, "ls-tree", "-r", "--name-only", "HEAD",
                            "stablehlo/tests/interpret/").split()
             if f.endswith(".mlir")]
    cases = []
    for path in sorted(files):
        text = git(git_dir, "show", f"HEAD:{path}")
        for chunk in text.split("// -----"):
            if not LOWP.search(chunk):
                continue
            for fm in re.finditer(r"func\.func @(\w+)\((.*?)\)(.*?)\{\n(.*?)\n\}", chunk,
                                  re.S):
                name, sig, ret, body = fm.groups()
                case = {"name": name, "file": path, "mlir": fm.group(0), "ops": [],
                        "checks": [], "unsupported": []}
                if sig.strip() or ret.strip():
                    case["unsupported"].append(
                        f"function signature ({sig}){ret.strip()}: its results are "
                        f"checked by FileCheck on the printed output, not by check ops")
                for s in statements(body):
                    p = parse_statement(s)
                    if p is None:
                        continue
                    if p["kind"] == "op":
                        case["ops"].append(p)
                    elif p["kind"] == "check":
                        case["checks"].append(p)
                    else:
                        case["unsupported"].append(p.get("why") or p["text"])
                cases.append(case)
    names = [c["name"] for c in cases]
    seen = {}
    for c in cases:     # a name used twice in a file gets its occurrence as a suffix
        if names.count(c["name"]) > 1:
            seen[c["name"]] = seen.get(c["name"], 0) + 1
            c["name"] += f"_{seen[c['name']]}"
    return {"source": {
        "repository": "https://github.com/openxla/stablehlo",
        "commit": commit,
        "directory": "stablehlo/tests/interpret",
        "license": "Apache License 2.0 (the StableHLO project's test cases, as test data)",
        "extracted_by": "tools/extract_stablehlo_lowp_cases.py"},
        "cases": cases}


def main():
    git_dir = sys.argv[1]
    out = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else \
        pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / \
        "stablehlo_lowp_cases.json"
    data = extract(git_dir)
    # one case a line
    cases = ",\n".join(json.dumps(c, separators=(",", ":")) for c in data["cases"])
    out.write_text(f'{{"source": {json.dumps(data["source"], indent=1)},\n'
                   f'"cases": [\n{cases}\n]}}\n')
    print(f"{len(data['cases'])} cases from {data['source']['commit']} -> {out}")


if __name__ == "__main__":
    main()
