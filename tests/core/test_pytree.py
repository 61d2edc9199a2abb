"""Pytrees (tracer.tree_util, mirroring jax.tree_util): round trips for every container
kind, leaf order and treedef reprs as JAX gives them (recorded from JAX 0.10.2), key
paths, tree_map over several trees, is_leaf, registration of classes and dataclasses,
and pytrees through transformations."""
from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest

import tracer
import tracer.numpy as tnp
from tracer import tree_util as tu

Point = collections.namedtuple("Point", ["x", "y"])


@tu.register_pytree_node_class
class Box:
    def __init__(self, a, b, tag):
        self.a, self.b, self.tag = a, b, tag

    def tree_flatten(self):
        return (self.a, self.b), self.tag

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, aux)

    def __eq__(self, other):
        return isinstance(other, Box) and (self.a, self.b, self.tag) == \
            (other.a, other.b, other.tag)


@dataclasses.dataclass
class Params:
    w: object
    b: object
    name: str = dataclasses.field(metadata=dict(static=True), default="layer")


tu.register_dataclass(Params)


class Pair:
    def __init__(self, first, second):
        self.first, self.second = first, second

    def __eq__(self, other):
        return isinstance(other, Pair) and (self.first, self.second) == \
            (other.first, other.second)


tu.register_pytree_node(Pair, lambda p: ((p.first, p.second), None),
                        lambda _, c: Pair(*c))

# (tree, leaves, repr of the treedef, number of nodes): recorded from jax.tree_util.
CASES = {
    "tuple": ((1, 2), [1, 2], "PyTreeDef((*, *))", 3),
    "list": ([1, [2, 3]], [1, 2, 3], "PyTreeDef([*, [*, *]])", 5),
    "dict_sorted_keys": ({"b": 1, "a": 2, "c": {"z": 3, "y": 4}}, [2, 1, 4, 3],
                         "PyTreeDef({'a': *, 'b': *, 'c': {'y': *, 'z': *}})", 6),
    "none": (None, [], "PyTreeDef(None)", 1),
    "nested_none": ((1, None, [None, 2]), [1, 2], "PyTreeDef((*, None, [None, *]))", 6),
    "namedtuple": (Point(1, (2, 3)), [1, 2, 3],
                   "PyTreeDef(CustomNode(namedtuple[Point], [*, (*, *)]))", 5),
    "ordered_dict": (collections.OrderedDict([("b", 1), ("a", 2)]), [1, 2],
                     "PyTreeDef(CustomNode(OrderedDict[('b', 'a')], [*, *]))", 3),
    "defaultdict": (collections.defaultdict(list, {"q": 1, "p": 2}), [2, 1],
                    "PyTreeDef(CustomNode(defaultdict[(<class 'list'>, ('p', 'q'))], "
                    "[*, *]))", 3),
    "leaf": (5, [5], "PyTreeDef(*)", 1),
    "empty_containers": (((), [], {}), [], "PyTreeDef(((), [], {}))", 4),
    "registered_class": (Box(1, [2], "t"), [1, 2], "PyTreeDef(CustomNode(Box[t], [*, [*]]))",
                         4),
    "dataclass": (Params(1, 2, "q"), [1, 2], "PyTreeDef(CustomNode(Params[('q',)], [*, *]))",
                  3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_flatten_unflatten_round_trip(name):
    tree, leaves, rep, nodes = CASES[name]
    got, td = tu.tree_flatten(tree)
    assert got == leaves
    assert repr(td) == rep
    assert td.num_leaves == len(leaves) and td.num_nodes == nodes
    back = tu.tree_unflatten(td, got)
    assert back == tree and type(back) is type(tree)
    if isinstance(tree, collections.OrderedDict):
        assert list(back) == list(tree)                 # insertion order kept
    if isinstance(tree, collections.defaultdict):
        assert back.default_factory is list
    assert tu.tree_structure(tree) == td
    assert tu.tree_leaves(tree) == leaves


def test_treedefs_compare_by_structure_and_aux_data():
    assert tu.tree_structure((1, {"a": 2})) == tu.tree_structure((5, {"a": 6}))
    assert tu.tree_structure((1, 2)) != tu.tree_structure([1, 2])
    assert tu.tree_structure({"a": 1}) != tu.tree_structure({"b": 1})
    assert tu.tree_structure(Params(1, 2, "x")) != tu.tree_structure(Params(1, 2, "y"))
    assert hash(tu.tree_structure((1, [2]))) == hash(tu.tree_structure((3, [4])))


def test_registered_pytree_node():
    leaves, td = tu.tree_flatten(Pair(1, (2, 3)))
    assert leaves == [1, 2, 3]
    assert tu.tree_unflatten(td, [4, 5, 6]) == Pair(4, (5, 6))


def test_dataclass_static_fields_stay_in_the_treedef():
    p = Params(np.ones(2), np.zeros(2), "first")
    leaves, td = tu.tree_flatten(p)
    assert len(leaves) == 2
    q = tu.tree_unflatten(td, [1, 2])
    assert (q.w, q.b, q.name) == (1, 2, "first")


def test_register_dataclass_with_explicit_fields_and_as_decorator():
    @dataclasses.dataclass
    class Opt:
        lr: float
        step: int

    tu.register_dataclass(Opt, data_fields=["step"], meta_fields=["lr"])
    leaves, td = tu.tree_flatten(Opt(0.1, 3))
    assert leaves == [3]
    assert tu.tree_unflatten(td, [4]) == Opt(0.1, 4)

    @tu.register_dataclass
    @dataclasses.dataclass
    class State:
        a: object
        b: object

    assert tu.tree_leaves(State(1, [2, 3])) == [1, 2, 3]


def test_tree_map_several_trees_and_is_leaf():
    assert tu.tree_map(lambda a, b: a + b, {"x": 1, "y": (2, 3)}, {"x": 10, "y": (20, 30)}) == \
        {"x": 11, "y": (22, 33)}
    assert tu.tree_map(lambda x: x, [1, None]) == [1, None]        # None is not a leaf
    assert tu.tree_leaves([1, (2, 3)], is_leaf=lambda x: isinstance(x, tuple)) == [1, (2, 3)]
    assert tu.tree_map(lambda t: len(t), [(1, 2), (3,)],
                       is_leaf=lambda x: isinstance(x, tuple)) == [2, 1]
    with pytest.raises(ValueError, match="tuple"):
        tu.tree_map(lambda a, b: a, (1, 2), [1, 2])


def test_key_paths():
    paths = [tu.keystr(p) for p, _ in
             tu.tree_flatten_with_path({"a": [1, Point(2, 3)], "b": (4,)})[0]]
    assert paths == ["['a'][0]", "['a'][1].x", "['a'][1].y", "['b'][0]"]
    paths = [tu.keystr(p) for p, _ in tu.tree_flatten_with_path(Params(1, (2,), "q"))[0]]
    assert paths == [".w", ".b[0]"]


def test_reduce_transpose_and_children():
    assert tu.tree_reduce(lambda a, b: a + b, [1, (2, 3)]) == 6
    assert tu.tree_transpose(tu.tree_structure([0, 0]), tu.tree_structure((0, 0)),
                             [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    td = tu.tree_structure((1, [2, 3]))
    assert [repr(c) for c in tu.treedef_children(td)] == ["PyTreeDef(*)", "PyTreeDef([*, *])"]
    assert tu.treedef_is_leaf(tu.tree_structure(1))
    assert tu.all_leaves([1, 2.0, np.ones(2)])


def test_unflatten_with_wrong_leaf_count():
    td = tu.tree_structure((1, 2))
    with pytest.raises(ValueError):
        tu.tree_unflatten(td, [1])


def test_pytrees_through_transformations():
    params = {"w": np.ones((2, 3)), "layers": [Params(np.ones(3), np.zeros(3))],
              "t": Point(np.float64(2.0), None)}

    def loss(p, x):
        h = x @ p["w"] + p["layers"][0].b
        return tnp.sum(h * p["layers"][0].w) * p["t"].x

    x = np.arange(2.0)
    g = tracer.grad(loss)(params, x)
    assert tu.tree_structure(g) == tu.tree_structure(params)
    assert g["layers"][0].name == "layer" and g["t"].y is None
    np.testing.assert_allclose(np.asarray(g["w"]), np.outer(x, np.ones(3)) * 2.0)
    out = tracer.vmap(lambda p, x: {"y": loss(p, x)}, in_axes=(None, 0))(params,
                                                                        np.ones((4, 2)))
    assert set(out) == {"y"} and out["y"].shape == (4,)
    closed = tracer.make_jaxpr(loss)(params, x)
    assert len(closed.jaxpr.invars) == len(tu.tree_leaves((params, x)))


def test_flattening_shares_treedefs_and_keeps_keys_and_leaf_types_right():
    """A structure flattened again gives the same treedef object (jit's calls hash and
    compare it at once), without mixing up equal keys of other types; a type flattened
    as a leaf becomes a node once registered; is_leaf still stops the descent."""
    tree = {"w": [np.ones(2), (1.0, 2)], "b": None}
    t1, t2 = tu.tree_structure(tree), tu.tree_structure(dict(tree))
    assert t1 is t2 and hash(t1) == hash(t2)
    assert tu.tree_structure({"w": [1, (1, 2, 3)], "b": None}) != t1
    assert tu.tree_unflatten(tu.tree_structure({1.0: 0}), [5]) == {1.0: 5}
    assert list(tu.tree_unflatten(tu.tree_structure({1: 0}), [5])) == [1]
    assert type(list(tu.tree_unflatten(tu.tree_structure({True: 0}), [5]))[0]) is bool

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    p = Pair(1.0, 2.0)
    assert tu.tree_leaves([p, p]) == [p, p]          # a leaf type, met twice
    tu.register_pytree_node(Pair, lambda q: ([q.a, q.b], None), lambda _, c: Pair(*c))
    assert tu.tree_leaves([p, p]) == [1.0, 2.0, 1.0, 2.0]
    assert tu.tree_leaves([p, (3.0,)], is_leaf=lambda x: isinstance(x, Pair)) == [p, 3.0]
    Point = collections.namedtuple("Point", "x y")
    assert tu.tree_leaves([Point(1, 2), Point(3, 4)]) == [1, 2, 3, 4]


def test_shared_treedefs_keep_nested_keys_and_uncomparable_aux_data():
    """Nested under a list, {1: x} then {1.0: x} (or {True: x}) keep their own keys, also
    through jit; a custom node whose aux data is an array flattens again and again."""
    assert tu.tree_map(lambda v: v, [{1: 0.0}]) == [{1: 0.0}]
    out = tu.tree_map(lambda v: v, [{1.0: 0.0}])
    assert type(next(iter(out[0]))) is float
    out = tracer.jit(lambda t: t)([{True: np.float32(1.0)}])
    assert type(next(iter(out[0]))) is bool

    class Box:
        def __init__(self, v, meta):
            self.v, self.meta = v, meta

    tu.register_pytree_node(Box, lambda b: ((b.v,), b.meta), lambda m, c: Box(c[0], m))
    for _ in range(3):
        r = tu.tree_map(lambda v: v + 1, [Box(1.0, np.arange(3))])
        assert r[0].v == 2.0 and list(r[0].meta) == [0, 1, 2]


def test_generated_unflatten_equals_the_recursive_one():
    """Treedefs of tuples, lists, string-keyed dicts and None rebuild through one
    generated expression (jit rebuilds its results' tree on every call): the same trees,
    key order kept, 1-tuples and empty containers included; other nodes keep the
    recursive path."""
    from tracer import pytree
    trees = [
        ([(1, 2), (3, 4), (5, 6)], {"step": 7, "m": [(8, 9)], "v": [(10, 11)]}, 12),
        {"b": None, "a": (1,), "c": [], "d": {}},
        ((((1,),),),), [None, 2, (None,)], 5, (),
        {"w": Point(1, 2), "z": [3]}, [Box(1, 2, "t"), {1: 3}],
    ]
    for tree in trees:
        leaves, td = tu.tree_flatten(tree)
        fresh = [object() for _ in leaves]
        got = tu.tree_unflatten(td, fresh)
        want = pytree._unflatten(td, iter(fresh))
        assert got == want and type(got) is type(want)
        assert tu.tree_leaves(got) == fresh or not fresh
        if isinstance(want, dict):
            assert list(got) == list(want)
    simple, _ = tu.tree_flatten(trees[0])
    assert tu.tree_structure(trees[0])._build          # generated
    assert tu.tree_structure(trees[6])._build is False  # a namedtuple inside: recursive
    with pytest.raises(ValueError, match="expects 12 leaves, got 11"):
        tu.tree_unflatten(tu.tree_structure(trees[0]), simple[:-1])


def test_matcher_answers_exactly_the_structure_it_was_made_for():
    """``pytree.matcher`` (jit's check of its arguments' structure) gives tree_flatten's
    leaves for a tree of the same structure, and None for anything else: other lengths,
    keys, container types, a leaf where a node was or the reverse, a leaf type it was not
    told is a leaf, and any tree once a new node type is registered."""
    from tracer import pytree
    leaf_types = frozenset({np.ndarray, float, int})
    x = np.ones(2)
    tree = ([(x, 1.0), (x, 2)], {"step": 3.0, "m": [(x, x)], "v": None}, x)
    td = tu.tree_structure(tree)
    match = pytree.matcher(td, leaf_types)
    assert match is not None
    other = ([(np.zeros(3), -1.0), (x, 5)], {"v": None, "m": [(x, x)], "step": 0}, x)
    assert match(other) == tu.tree_leaves(other)
    assert all(a is b for a, b in zip(match(tree), tu.tree_leaves(tree)))
    for bad in [
        ([(x, 1.0)], {"step": 3.0, "m": [(x, x)], "v": None}, x),                # shorter
        ([(x, 1.0), (x, 2), (x, 3)], {"step": 3.0, "m": [(x, x)], "v": None}, x),
        ([(x, 1.0), (x, 2)], {"stp": 3.0, "m": [(x, x)], "v": None}, x),          # a key
        ([(x, 1.0), (x, 2)], {"step": 3.0, "m": [(x, x)], "v": None, "u": 1}, x),
        ([(x, 1.0), [x, 2]], {"step": 3.0, "m": [(x, x)], "v": None}, x),         # list
        ([(x, 1.0), Point(x, 2)], {"step": 3.0, "m": [(x, x)], "v": None}, x),
        ([(x, 1.0), (x, 2)], {"step": 3.0, "m": [(x, x)], "v": x}, x),            # None
        ([(x, 1.0), (x, 2)], {"step": 3.0, "m": [(x, x)], "v": None}, (x,)),      # node
        ([(x, 1.0), (x, 2)], {"step": (3.0,), "m": [(x, x)], "v": None}, x),
        ([(x, 1.0), (x, 2)], {"step": 3.0, "m": x, "v": None}, x),                # leaf
        ([(x, np.float32(1.0)), (x, 2)], {"step": 3.0, "m": [(x, x)], "v": None}, x),
        ([(x, 1.0), (x, 2)], {"step": "3", "m": [(x, x)], "v": None}, x),
        [[(x, 1.0), (x, 2)], {"step": 3.0, "m": [(x, x)], "v": None}, x],          # top
    ]:
        assert match(bad) is None, bad
    assert pytree.matcher(tu.tree_structure([Point(x, x)]), leaf_types) is None
    assert pytree.matcher(tu.tree_structure([Box(x, x, "t")]), leaf_types) is None

    class Late:
        pass

    tu.register_pytree_node(Late, lambda v: ([], None), lambda _, c: Late())
    assert match(other) is None      # made before a registration: no longer trusted


def test_jit_calls_follow_structure_changes_of_their_arguments():
    """jit checks a pytree argument's structure by generated code after its first call:
    calls that change a list's length, a dict's keys, a container's type or a leaf's
    kind retrace and compute with the new structure; the results passed back in hit the
    cache (same treedef and aval objects); a function called with ever new structures
    stays right."""
    @tracer.jit
    def f(params, opt):
        return [p * 2.0 for p in params], {k: v + 1.0 for k, v in opt.items()}

    x = tnp.arange(3.0, dtype=tnp.float32)
    p, o = f([x, x], {"m": x})
    p, o = f(p, o)
    np.testing.assert_array_equal(np.asarray(p[1]), np.arange(3.0) * 4)
    assert f._cache_size() == 1
    (key,) = f._cache
    assert all(a is b for a, b in zip(f._key_and_args((p, o), {})[0][1], key[1]))
    p3, _ = f([x, x, x], {"m": x})
    assert len(p3) == 3 and f._cache_size() == 2
    _, o2 = f([x, x], {"n": x})
    assert list(o2) == ["n"]
    p4, _ = f((x, x), {"m": x})
    assert isinstance(p4, list) and f._cache_size() == 4
    _, o5 = f([x, x], {"m": 2.0})                 # a Python float leaf: weak
    assert o5["m"].weak_type and float(o5["m"]) == 3.0
    for n in range(1, 25):                         # beyond the matchers' budget
        out, _ = f([x] * n, {"m": x})
        assert len(out) == n
        np.testing.assert_array_equal(np.asarray(out[-1]), np.arange(3.0) * 2)
    out, _ = f([x, x], {"m": x})
    np.testing.assert_array_equal(np.asarray(out[0]), np.arange(3.0) * 2)


def test_jit_remakes_its_structure_check_after_a_node_registration():
    """A node type registered between calls retires the matchers made before; the next
    call makes a current one (without it, every later call flattens node by node)."""
    from tracer import pytree
    f = tracer.jit(lambda p, o: (p, o["m"][0][0] * 2.0))
    p = [(tnp.ones(2), tnp.ones(2))] * 2
    p, _ = f(p, {"m": p})
    f(p, {"m": p})
    (tree, match), = f._matchers[2]
    assert pytree.matcher_current(match)

    class Unrelated:
        pass

    tu.register_pytree_node(Unrelated, lambda u: ([], None), lambda _, c: Unrelated())
    assert not pytree.matcher_current(match) and match((p, {"m": p})) is None
    out = f(p, {"m": p})
    np.testing.assert_array_equal(np.asarray(out[1]), [2.0, 2.0])
    (tree2, match2), = f._matchers[2]
    assert tree2 is tree and pytree.matcher_current(match2)
    assert match2((p, {"m": p})) is not None
