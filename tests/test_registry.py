"""The primitive x rule-kind table (STYLE_ANCHORS 7.4-7.5): every primitive defined in
``tracer``, ``lax`` and ``lowering`` has its abstract eval, NumPy impl, jvp, batching rule,
a transpose rule when it is linear in some input, a lowering rule (or is an explicit host
step), and an op record in ``tests/op_records.py`` (or a named test module). Deliberate
absences are listed below with their reason; the tests fail with the list of holes.

Run ``python tests/test_registry.py`` to print the whole table.
"""
from __future__ import annotations

import sys
import pathlib

if __name__ == "__main__":  # as a script: the repository's packages, then op_records
    sys.path[:0] = [str(pathlib.Path(__file__).resolve().parent.parent)]

import importlib
import inspect
import pkgutil

import tracer
import lax
import lowering
from lowering import rules as lowering_rules
from tracer.core import Primitive
from tracer.interpreters import ad, batching

import op_records

KINDS = ("abstract_eval", "impl", "jvp", "transpose", "batching", "lowering", "record")

# Primitives linear in at least one input (so they need a transpose rule). Those with an
# op record get it from the record's ``linear`` groups; the others are named here.
LINEAR_ELSEWHERE = {
    "psum", "all_gather", "fft", "triangular_solve", "cumsum", "reduce_window_sum",
    "select_and_scatter_add", "select_and_gather_add", "dynamic_slice",
    "dynamic_update_slice", "gather", "scatter", "scatter-add", "scatter-sub", "scatter-mul",
    "conv_general_dilated", "cond", "scan", "while", "optimization_barrier", "jit",
    "closed_call", "checkpoint", "name", "custom_lin", "custom_jvp_call", "custom_vjp_call",
    "add_any", "ppermute", "pbroadcast", "reduce_scatter", "all_to_all",
    "ragged_all_to_all", "custom_linear_solve",
    # the MPI steps of multi-process pmap (tests/test_distributed.py)
    "mpi_allreduce", "mpi_allgather", "mpi_reduce_scatter", "mpi_alltoall", "mpi_ppermute",
    "mpi_bcast", "mpi_replicated_in", "mpi_replicated_out",
}

# kind -> {primitive name: why it has no such rule}
ABSENT = {
    "jvp": {
        "pmax": "not differentiable in JAX either (a collective max has no jvp rule)",
        "pmin": "not differentiable in JAX either",
        "next_after": "piecewise constant in a bit pattern; JAX defines no jvp either",
        "igamma_grad_a": "only used inside igamma's jvp; JAX defines no jvp either",
        "hyp1f1_grad": "only used inside hyp1f1's jvp (a NumPy series); first order only",
        "hyp2f1_grad": "only used inside hyp2f1's jvp (a NumPy series); first order only",
        "psend": "point-to-point transfer ordered by tokens; JAX defines no jvp either",
        "precv": "point-to-point transfer ordered by tokens; JAX defines no jvp either",
        "select_and_scatter": "user select/scatter computations; JAX defines no jvp "
                              "either (select_and_scatter_add carries pooling gradients)",
    },
    "batching": {
        "iota": "nullary: no operand can carry a batch dimension",
        "create_token": "nullary: no operand can carry a batch dimension",
    },
}

# Primitives tested by their own family's test module rather than by op records.
OWN_TESTS = {
    "lax.collectives": "tests/test_vmap.py",
    "lax.control_flow": "tests/lax/test_control_flow.py",
    "lax.convolution": "tests/test_convolution_windowed.py",
    "lax.windowed": "tests/test_convolution_windowed.py",
    "lax.decompositions": "tests/test_linalg_fft_sort.py",
    "lax.fft": "tests/test_linalg_fft_sort.py",
    "lax.sort": "tests/test_linalg_fft_sort.py",
    "lax.indexing": "tests/lax/test_indexing.py",
    "lax.random_bits": "tests/test_random.py",
    "lax.special": "tests/lax/test_special.py",
    "lax.special_extra": "tests/test_scipy_special_extra.py",
    "tracer.ad_checkpoint": "tests/test_autodiff.py",
    "tracer.api": "tests/test_jit.py",
    "tracer.interpreters.call": "tests/test_jit.py",
    "tracer.custom_derivatives": "tests/test_custom_derivatives.py",
    "lax.integer_ops": "tests/lax/test_lax_extras.py",
    "lax.tokens": "tests/lax/test_lax_extras.py",
    "lax.solves": "tests/lax/test_lax_extras.py",
    "lax.callbacks": "tests/test_callbacks.py",
    "lax.ffi": "tests/test_ffi.py",
    "lax.mpi": "tests/test_distributed.py",
}
RECORD_EXEMPT = {"stop_gradient": "tests/test_autodiff.py"}


def all_primitives() -> dict:
    """{Primitive: defining module name} for every module of tracer, lax and lowering."""
    holders = {}
    for pkg in (tracer, lax, lowering):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            mod = importlib.import_module(info.name)
            for v in vars(mod).values():
                if isinstance(v, Primitive):
                    holders.setdefault(v, []).append(mod)
    # Modules re-export primitives; the defining one spells the primitive's name as a
    # string (its Primitive("name") or family-helper call).
    found = {}
    for p, mods in holders.items():
        defining = [m for m in mods if f'"{p.name}"' in inspect.getsource(m)]
        found[p] = (defining or mods)[0].__name__
    return found


def _recorded():
    return {p for r in op_records.RECORDS for p in r.prims}


def _linear_names():
    names = set(LINEAR_ELSEWHERE)
    for r in op_records.RECORDS:
        if r.linear:
            names |= {p.name for p in r.prims}
    return names


def _lowered():
    return (set(lowering_rules.scalar_exprs) | set(lowering_rules.remap_rules)
            | set(lowering_rules.reduction_rules) | set(lowering_rules.lowering_rules))


def rule_table() -> dict:
    """{primitive: {kind: True | False | "n/a" | reason}}."""
    prims = all_primitives()  # imports every lowering module: their rules register
    lowered, recorded, linear = _lowered(), _recorded(), _linear_names()
    table = {}
    for p, mod in prims.items():
        row = {
            "abstract_eval": p.abstract_eval is not None,
            "impl": p.impl is not None,
            "jvp": p in ad.primitive_jvps or ABSENT["jvp"].get(p.name, False),
            "transpose": (p in ad.primitive_transposes) if p.name in linear else "n/a",
            "batching": p in batching.primitive_batchers
            or ABSENT["batching"].get(p.name, False),
            "lowering": p in lowered or "host",
            "record": p in recorded or OWN_TESTS.get(mod, False)
            or RECORD_EXEMPT.get(p.name, False),
        }
        table[p] = (mod, row)
    return table


def _holes(kinds):
    holes = []
    for p, (mod, row) in rule_table().items():
        for k in kinds:
            if row[k] is False:
                holes.append(f"{mod}.{p.name}: no {k} rule")
    return sorted(holes)


def test_every_primitive_has_its_rules():
    holes = _holes(("abstract_eval", "impl", "jvp", "transpose", "batching"))
    assert not holes, ("primitives missing rules (add them, or list a deliberate absence "
                       "with its reason in tests/test_registry.py):\n  " + "\n  ".join(holes))


def test_transpose_rules_belong_to_linear_primitives():
    """A transpose rule on a primitive not declared linear means the table is stale."""
    linear = _linear_names()
    extra = sorted(p.name for p in all_primitives() if p in ad.primitive_transposes
                   and p.name not in linear)
    assert not extra, (f"{extra} have transpose rules but are not declared linear: add a "
                       "`linear` group to their op record or a name to LINEAR_ELSEWHERE")


def test_every_primitive_is_tested():
    holes = _holes(("record",))
    assert not holes, ("primitives without an op record in tests/op_records.py (or a named "
                       "test module in OWN_TESTS):\n  " + "\n  ".join(holes))


def test_core_families_are_lowered():
    """Element-wise, shape, reduction and contraction primitives must not fall back to
    host steps under jit (their fusion is the point of the Numba backend)."""
    core = {"lax.elementwise", "lax.shapes", "lax.linalg", "lax.reductions"}
    allowed_host: dict = {}
    holes = sorted(f"{mod}.{p.name}" for p, (mod, row) in rule_table().items()
                   if mod in core and row["lowering"] == "host"
                   and p.name not in allowed_host)
    assert not holes, f"core primitives without a lowering rule: {holes}"


def test_named_test_modules_exist():
    root = pathlib.Path(__file__).resolve().parent.parent
    missing = sorted({f for f in list(OWN_TESTS.values()) + list(RECORD_EXEMPT.values())
                      if not (root / f).is_file()})
    assert not missing, f"OWN_TESTS / RECORD_EXEMPT name missing test modules: {missing}"


def test_absences_are_not_stale():
    """A listed absence whose rule now exists should be deleted from the lists."""
    names = {p.name: p for p in all_primitives()}
    stale = [n for n in ABSENT["jvp"] if n in names and names[n] in ad.primitive_jvps]
    stale += [n for n in ABSENT["batching"] if n in names
              and names[n] in batching.primitive_batchers]
    stale += [n for n in ABSENT["jvp"] | ABSENT["batching"] if n not in names]
    assert not stale, f"stale entries in ABSENT: {stale}"


def _first_params(rule, n):
    params = list(inspect.signature(rule).parameters.values())
    return tuple(q.name for q in params[:n])


def test_batching_rules_share_one_signature():
    """Every batching rule is ``rule(axis_data, vals, dims, **params)``; a rule written
    against another convention would only fail when a vmap first reaches it."""
    all_primitives()  # imports every module: their rules register
    odd = sorted(f"{p.name}: {_first_params(r, 3)}" for p, r in
                 batching.primitive_batchers.items()
                 if _first_params(r, 3) != ("axis_data", "vals", "dims"))
    assert not odd, f"batching rules with another signature: {odd}"
    assert batching.batch_when_unmapped <= set(batching.primitive_batchers), \
        "primitives in batch_when_unmapped without a batching rule"


def test_jvp_rules_share_one_signature():
    """Every jvp rule is ``rule(primals, tangents, **params)`` (JAX's); rules that need
    their trace ask ``ad.running_jvp_main()`` instead of taking another signature."""
    all_primitives()
    odd = sorted(f"{p.name}: {_first_params(r, 2)}" for p, r in ad.primitive_jvps.items()
                 if _first_params(r, 2) != ("primals", "tangents"))
    assert not odd, f"jvp rules with another signature: {odd}"


# jax.lax names issue 2 asks lax to export.
ISSUE_2_EXPORTS = """abs add bitwise_and atan2 cbrt ceil clz eq ne ge gt le lt complex cos div erf
exp expm1 floor imag is_finite log log1p logistic max min mul neg bitwise_not bitwise_or
population_count pow real rem round rsqrt shift_left shift_right_arithmetic
shift_right_logical sign sin sqrt sub tan tanh bitwise_xor select select_n clamp
convert_element_type bitcast_convert_type reduce_precision broadcast_in_dim reshape collapse
transpose rev slice concatenate pad iota broadcasted_iota reduce reduce_sum reduce_prod
reduce_max reduce_min reduce_and reduce_or reduce_xor argmax argmin dot_general dot
integer_pow square broadcast expand_dims squeeze RoundingMethod Precision""".split()


def test_lax_exports_issue_2_names():
    missing = [n for n in ISSUE_2_EXPORTS if not hasattr(lax, n)]
    assert not missing, f"lax does not export {missing}"


if __name__ == "__main__":
    table = rule_table()
    print(f"{'module':28s} {'primitive':26s} " + " ".join(f"{k[:9]:9s}" for k in KINDS))
    for p, (mod, row) in sorted(table.items(), key=lambda kv: (kv[1][0], kv[0].name)):
        cells = []
        for k in KINDS:
            v = row[k]
            cells.append(f"{'yes' if v is True else 'MISSING' if v is False else str(v)[:9]:9s}")
        print(f"{mod:28s} {p.name:26s} " + " ".join(cells))
