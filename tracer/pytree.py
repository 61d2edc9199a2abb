"""Pytrees: nested containers of leaves, flattened to a list of leaves and a treedef.

Containers: tuple, list, dict (flattened in sorted-key order), None (no leaves),
namedtuple, OrderedDict (insertion order), and anything registered with
``register_pytree_node`` / ``register_pytree_node_class`` / ``register_dataclass``.
Mirrors ``jax.tree_util``.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, NamedTuple


class _NodeType(NamedTuple):
    to_iterable: Callable      # node -> (children, aux_data)
    from_iterable: Callable    # (aux_data, children) -> node
    keys: Callable | None      # (node, aux_data) -> list of key-path entries


_registry: dict[type, _NodeType] = {}
# Types met as leaves (whether a type is a namedtuple, and so a node, depends on the type
# only); registering a type takes it out.
_leaf_types: set = set()


def register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func=None):
    """Register ``nodetype`` as a container.

    ``flatten_func(node) -> (children, aux_data)`` and
    ``unflatten_func(aux_data, children) -> node``; aux_data must be hashable.
    """
    keys = None
    if flatten_with_keys_func is not None:
        keys = lambda node, aux: [k for k, _ in flatten_with_keys_func(node)[0]]
    _register(nodetype, _NodeType(flatten_func, unflatten_func, keys))
    return nodetype


def _register(nodetype, node_type: _NodeType) -> None:
    _registry[nodetype] = node_type
    _leaf_types.discard(nodetype)       # (a leaf until now)
    _registry_version[0] += 1           # (matchers made before no longer apply)


_registry_version = [0]


def register_pytree_node_class(cls):
    """Class decorator: ``cls.tree_flatten()`` and ``cls.tree_unflatten(aux, children)``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(nodetype=None, data_fields=None, meta_fields=None):
    """Register a dataclass: ``data_fields`` are children, ``meta_fields`` go in the treedef.

    Without field lists, fields marked ``field(metadata=dict(static=True))`` are meta
    fields and all others are data fields. Usable as a decorator.
    """
    if nodetype is None:
        return lambda cls: register_dataclass(cls, data_fields, meta_fields)
    if data_fields is None:
        fields = dataclasses.fields(nodetype)
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields or ())

    def flatten(x):
        return [getattr(x, n) for n in data_fields], tuple(getattr(x, n) for n in meta_fields)

    def unflatten(aux, children):
        return nodetype(**dict(zip(data_fields, children)), **dict(zip(meta_fields, aux)))

    _register(nodetype, _NodeType(flatten, unflatten,
                                  lambda x, aux: [GetAttrKey(n) for n in data_fields]))
    return nodetype


# Key-path entries, as in jax.tree_util.
@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self):
        return f"[{self.idx}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    key: Any

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


def keystr(path) -> str:
    """A key path as text, e.g. ``[0]['w'].b``."""
    return "".join(str(k) for k in path)


def _dict_flatten(d):
    keys = sorted(d)
    return [d[k] for k in keys], tuple(keys)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


register_pytree_node(tuple, lambda t: (list(t), None), lambda _, c: tuple(c))
register_pytree_node(list, lambda l: (list(l), None), lambda _, c: list(c))
register_pytree_node(dict, _dict_flatten, lambda keys, c: dict(zip(keys, c)))
register_pytree_node(collections.OrderedDict, lambda d: (list(d.values()), tuple(d.keys())),
                     lambda keys, c: collections.OrderedDict(zip(keys, c)))
register_pytree_node(collections.defaultdict,
                     lambda d: ([d[k] for k in sorted(d)], (d.default_factory, tuple(sorted(d)))),
                     lambda aux, c: collections.defaultdict(aux[0], zip(aux[1], c)))
register_pytree_node(type(None), lambda n: ([], None), lambda _, c: None)


_TUPLE_NODE, _LIST_NODE = _registry[tuple], _registry[list]


def _node_type(x):
    t = type(x)
    nt = _registry.get(t)
    if nt is not None:
        return t, nt
    if _is_namedtuple(x):
        return t, _NodeType(lambda n: (list(n), None), lambda _, c, t=t: t(*c), None)
    return None, None


def _keys_for(x, node_type, aux, n):
    if node_type.keys is not None:
        return node_type.keys(x, aux)
    if isinstance(x, collections.defaultdict):
        return [DictKey(k) for k in aux[1]]
    if isinstance(x, dict):
        return [DictKey(k) for k in aux]
    if _is_namedtuple(x):
        return [GetAttrKey(f) for f in type(x)._fields]
    if isinstance(x, (tuple, list)):
        return [SequenceKey(i) for i in range(n)]
    return [FlattenedIndexKey(i) for i in range(n)]


class PyTreeDef:
    """The structure of a pytree: a node type, its aux data and child treedefs (None: leaf)."""

    __slots__ = ("node_type", "node_data", "children", "num_leaves", "_hash", "shared",
                 "_build")

    def __init__(self, node_type, node_data, children):
        self.node_type = node_type
        self.node_data = node_data
        self.children = children = tuple(children)
        if node_type is None:
            self.num_leaves = 1
        else:
            n = 0
            for c in children:
                n += c.num_leaves
            self.num_leaves = n
        self._hash = None
        self.shared = False      # (one of _interned's, or the leaf)
        self._build = None       # (tree_unflatten's generated builder; False: none)

    @property
    def num_nodes(self):
        return 1 + sum(c.num_nodes for c in self.children)

    def unflatten(self, leaves):
        return tree_unflatten(self, leaves)

    def __eq__(self, other):
        if self is other:
            return True
        return (isinstance(other, PyTreeDef) and self.node_type == other.node_type
                and self.node_data == other.node_data and self.children == other.children)

    def __hash__(self):
        if self._hash is None:
            try:
                self._hash = hash((self.node_type, self.node_data, self.children))
            except TypeError:
                self._hash = hash((self.node_type, self.children))
        return self._hash

    def __repr__(self):
        return f"PyTreeDef({self._str()})"

    def _str(self):
        if self.node_type is None:
            return "*"
        kids = [c._str() for c in self.children]
        t = self.node_type
        if t is tuple:
            return "(" + ", ".join(kids) + ("," if len(kids) == 1 else "") + ")"
        if t is list:
            return "[" + ", ".join(kids) + "]"
        if t is dict:
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.node_data, kids)) + "}"
        if t is type(None):
            return "None"
        # JAX's spelling: CustomNode(<type>[<aux data>], [<children>])
        if issubclass(t, tuple) and hasattr(t, "_fields") and t not in _registry:
            head = f"namedtuple[{t.__name__}]"
        else:
            head = f"{t.__name__}[{self.node_data}]"
        return f"CustomNode({head}, [{', '.join(kids)}])"


_LEAF = PyTreeDef(None, None, ())


def tree_flatten(tree, is_leaf: Callable | None = None):
    """Returns (leaves, treedef). ``is_leaf(x)`` True stops the descent at ``x``."""
    leaves = []
    treedef = _flatten(tree, is_leaf, leaves)
    return leaves, treedef


# Treedefs made by flattening, one per structure: {(node type, aux data, *ids of the
# children): PyTreeDef}, for nodes with no aux data or string keys (lists, tuples, dicts)
# whose children are shared too. A jit call flattens its arguments every time; a treedef
# met before comes back with its hash computed and compares by identity, where a new one
# would hash and compare its whole tree (16 nodes of an MLP's params and Adam state: about
# 20 us a call). Children are keyed by identity (each entry's treedef holds them, so an id
# cannot name another object meanwhile): equal-but-different aux data below, {1: x} and
# {1.0: x}, or an array, is never compared. Bounded: once cleared, new treedefs are made
# again (equal to the old ones, as before).
_interned: dict = {}
_LEAF.shared = True


def _treedef(t, aux, children):
    if aux is not None and not (type(aux) is tuple and all(type(k) is str for k in aux)):
        # (other aux data may be equal but not the same: {1: x} and {1.0: x} must keep
        # their own keys)
        return PyTreeDef(t, aux, children)
    for c in children:
        if not c.shared:
            return PyTreeDef(t, aux, children)
    key = (t, aux, *map(id, children))
    hit = _interned.get(key)
    if hit is None:
        if len(_interned) >= 50_000:
            _interned.clear()
        hit = _interned[key] = PyTreeDef(t, aux, children)
        hit.shared = True
    return hit


def _flatten(x, is_leaf, leaves):
    # (on every jit call's path: the common containers and leaves take the fewest calls)
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    t = type(x)
    nt = _registry.get(t)
    if nt is None:
        if t in _leaf_types:
            leaves.append(x)
            return _LEAF
        nt = _node_type(x)[1]       # a namedtuple, or a leaf
        if nt is None:
            _leaf_types.add(t)
            leaves.append(x)
            return _LEAF
    elif nt is _TUPLE_NODE or nt is _LIST_NODE:
        return _treedef(t, None, _flatten_children(x, is_leaf, leaves))
    children, aux = nt.to_iterable(x)
    return _treedef(t, aux, _flatten_children(children, is_leaf, leaves))


def _flatten_children(children, is_leaf, leaves):
    # (children of a leaf type are appended here, without a call each: is_leaf cannot
    # change what a leaf flattens to)
    kids = []
    for c in children:
        if type(c) in _leaf_types:
            leaves.append(c)
            kids.append(_LEAF)
        else:
            kids.append(_flatten(c, is_leaf, leaves))
    return kids


def tree_unflatten(treedef: PyTreeDef, leaves):
    """The pytree of ``treedef``'s structure holding ``leaves`` (ValueError on a bad count)."""
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"tree_unflatten: treedef {treedef} expects {treedef.num_leaves} "
                         f"leaves, got {len(leaves)}")
    build = treedef._build
    if build is None:
        build = treedef._build = _builder(treedef)
    if build:
        return build(leaves)
    it = iter(leaves)
    return _unflatten(treedef, it)


class _NotBuilt(Exception):
    pass


def _builder(td: PyTreeDef):
    """A function ``leaves -> tree`` for ``td`` made of tuples, lists, string-keyed dicts
    and None, as one generated expression (a jit call rebuilds its results' tree every
    time: the recursion costs a call per node), or False for any other treedef."""
    if td.node_type is None or td.num_leaves > 2000:
        return False
    n = iter(range(td.num_leaves))

    def expr(t, depth):
        nt = t.node_type
        if nt is None:
            return f"l[{next(n)}]"
        if depth > 50:
            raise _NotBuilt
        kids = [expr(c, depth + 1) for c in t.children]
        if nt is tuple:
            return "(" + "".join(k + ", " for k in kids) + ")"
        if nt is list:
            return "[" + ", ".join(kids) + "]"
        if nt is dict and type(t.node_data) is tuple and \
                all(type(k) is str for k in t.node_data):
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(t.node_data, kids)) + "}"
        if nt is type(None):
            return "None"
        raise _NotBuilt

    try:
        return eval("lambda l: " + expr(td, 0), {})
    except (_NotBuilt, RecursionError, SyntaxError, MemoryError):
        return False


def matcher(td: PyTreeDef, leaf_types: frozenset):
    """A function ``tree -> leaves or None`` for ``td`` made of tuples, lists,
    string-keyed dicts and None: the leaves ``tree_flatten(tree)`` gives when ``tree`` has
    ``td``'s structure exactly, with every leaf's type in ``leaf_types`` (types that are
    leaves), else None. Generated code (a jit call flattens its arguments every time;
    this checks them without a call per node); None for any other treedef. A node type
    registered later makes it answer None from then on."""
    if td.num_leaves > 2000 or any(t in _registry for t in leaf_types):
        return None
    lines = ["def match(x):", "    if VERSION[0] != V:", "        return None"]
    leaves = []
    names = iter(range(1 << 30))

    def visit(t, var, depth):
        nt = t.node_type
        if nt is None:
            lines.append(f"    if type({var}) not in P:")
            lines.append("        return None")
            leaves.append(var)
            return
        if depth > 50:
            raise _NotBuilt
        if nt is type(None):
            lines.append(f"    if {var} is not None:")
            lines.append("        return None")
            return
        if nt is tuple or nt is list:
            lines.append(f"    if type({var}) is not {nt.__name__} or "
                         f"len({var}) != {len(t.children)}:")
            lines.append("        return None")
            kids = [f"{var}[{i}]" for i in range(len(t.children))]
        elif nt is dict and type(t.node_data) is tuple and \
                all(type(k) is str for k in t.node_data):
            lines.append(f"    if type({var}) is not dict or len({var}) != {len(t.children)}:")
            lines.append("        return None")
            kids = []
            for k in t.node_data:
                v = f"v{next(names)}"
                lines.append(f"    {v} = {var}.get({k!r}, MISSING)")
                lines.append(f"    if {v} is MISSING:")
                lines.append("        return None")
                kids.append(v)
        else:
            raise _NotBuilt
        for c, k in zip(t.children, kids):
            if c.node_type is None or k.startswith("v"):
                v = k
            else:
                v = f"v{next(names)}"
                lines.append(f"    {v} = {k}")
            visit(c, v, depth + 1)

    try:
        visit(td, "x", 0)
    except (_NotBuilt, RecursionError):
        return None
    lines.append("    return [" + ", ".join(leaves) + "]")
    g = {"P": leaf_types, "MISSING": object(), "V": _registry_version[0],
         "VERSION": _registry_version}
    try:
        exec("\n".join(lines), g)
    except (SyntaxError, RecursionError, MemoryError):
        return None
    match = g["match"]
    match.version = _registry_version[0]    # (``matcher_current`` compares it)
    return match


def matcher_current(match) -> bool:
    """Whether ``match`` (a ``matcher``) was made after the last node registration."""
    return match.version == _registry_version[0]


def _unflatten(td, it):
    if td.node_type is None:
        return next(it)
    children = [_unflatten(c, it) for c in td.children]
    t = td.node_type
    nt = _registry.get(t)
    if nt is _TUPLE_NODE:
        return tuple(children)
    if nt is _LIST_NODE:
        return children
    if nt is None:  # namedtuple
        return t(*children)
    return nt.from_iterable(td.node_data, children)


def tree_leaves(tree, is_leaf=None):
    """The leaves of a pytree, in flattening order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    """The treedef of a pytree."""
    return tree_flatten(tree, is_leaf)[1]


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """True if ``treedef`` is a single leaf."""
    return treedef.node_type is None


def treedef_children(treedef: PyTreeDef):
    """The child treedefs of a treedef's root node."""
    return list(treedef.children)


def tree_map(f: Callable, tree, *rest, is_leaf=None):
    """Apply ``f`` leaf-wise over one or more trees of the same structure.

    The structure of ``tree`` decides; each tree in ``rest`` must have it as a prefix-equal
    structure (ValueError naming both structures otherwise).
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    all_leaves = [leaves] + [_flatten_up_to(treedef, r) for r in rest]
    return treedef.unflatten(f(*xs) for xs in zip(*all_leaves))


def _flatten_up_to(treedef: PyTreeDef, tree):
    out = []

    def go(td, x):
        if td.node_type is None:
            out.append(x)
            return
        t, nt = _node_type(x)
        if t != td.node_type:
            raise ValueError(f"tree structures differ: expected a {td.node_type.__name__} "
                             f"(structure {td}), got {type(x).__name__}: {x!r}")
        children, aux = nt.to_iterable(x)
        if aux != td.node_data or len(children) != len(td.children):
            raise ValueError(f"tree structures differ: expected {td}, got "
                             f"{tree_structure(x)}")
        for c, ctd in zip(children, td.children):
            go(ctd, c)

    go(treedef, tree)
    return out


def broadcast_prefix(prefix_tree, full_tree, is_leaf=None):
    """Leaves of ``prefix_tree`` repeated over the matching subtrees of ``full_tree``."""
    out = []
    def go(prefix, full):
        if prefix is None or _node_type(prefix)[1] is None or (is_leaf and is_leaf(prefix)):
            out.extend([prefix] * tree_structure(full).num_leaves)
            return
        t, nt = _node_type(prefix)
        ft, fnt = _node_type(full)
        if t != ft:
            raise ValueError(f"pytree prefix mismatch: {tree_structure(prefix)} is not a "
                             f"prefix of {tree_structure(full)}")
        pc, paux = nt.to_iterable(prefix)
        fc, faux = fnt.to_iterable(full)
        if paux != faux or len(pc) != len(fc):
            raise ValueError(f"pytree prefix mismatch: {tree_structure(prefix)} is not a "
                             f"prefix of {tree_structure(full)}")
        for p, f in zip(pc, fc):
            go(p, f)

    go(prefix_tree, full_tree)
    return out


def tree_flatten_with_path(tree, is_leaf=None):
    """Returns ([(key_path, leaf)], treedef)."""
    out = []

    def go(x, path):
        if is_leaf is not None and is_leaf(x):
            out.append((path, x))
            return
        t, nt = _node_type(x)
        if nt is None:
            out.append((path, x))
            return
        children, aux = nt.to_iterable(x)
        for k, c in zip(_keys_for(x, nt, aux, len(children)), children):
            go(c, path + (k,))

    go(tree, ())
    return out, tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf=None):
    """[(key_path, leaf)] of a pytree."""
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(f, tree, *rest, is_leaf=None):
    """``tree_map`` whose function also receives each leaf's key path."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf)
    rests = [_flatten_up_to(treedef, r) for r in rest]
    return treedef.unflatten(f(p, x, *(r[i] for r in rests)) for i, (p, x) in enumerate(pairs))


def tree_reduce(function, tree, initializer=None, is_leaf=None):
    """``functools.reduce`` over the leaves of a pytree."""
    import functools as _ft
    leaves = tree_leaves(tree, is_leaf)
    if initializer is None:
        return _ft.reduce(function, leaves)
    return _ft.reduce(function, leaves, initializer)


def all_leaves(iterable, is_leaf=None):
    """True if every element of ``iterable`` is a leaf."""
    return all(tree_structure(x, is_leaf).node_type is None for x in iterable)


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """Turn a tree of ``outer`` structure with ``inner``-structured leaves inside out."""
    flat = _flatten_up_to(outer_treedef, pytree_to_transpose)
    inner = [_flatten_up_to(inner_treedef, x) for x in flat]
    transposed = [outer_treedef.unflatten(col) for col in zip(*inner)] if inner else []
    return inner_treedef.unflatten(transposed)


# ---------------------- flattening a function's inputs and outputs ----------------------

class FlatOutput:
    """What a function wrapped by ``flatten_fun`` returned on its first call: ``tree`` (the
    output's treedef), ``paths`` (the key paths of its leaves, recorded when a
    ``check_out`` was given) and ``aux`` (with ``has_aux``). Reading one before the wrapped
    function has run raises IndexError."""

    __slots__ = ("_trees", "_paths", "_auxes")

    def __init__(self):
        self._trees, self._paths, self._auxes = [], [], []

    @property
    def tree(self) -> PyTreeDef:
        return self._trees[0]

    @property
    def paths(self) -> list:
        return self._paths[0]

    @property
    def aux(self):
        return self._auxes[0]


def flatten_fun(f, in_tree: PyTreeDef, *, kwargs: bool = False, check_out=None,
                has_aux: bool = False, fname: str = ""):
    """Wrap the pytree function ``f`` as a function of flat leaves, the form the tracing
    interpreters take (``jax``'s ``flatten_fun`` / ``flatten_fun_nokwargs``).

    ``flat_fun(*leaves)`` rebuilds the arguments from ``leaves`` with ``in_tree`` -- the
    treedef of ``(args, kwargs)`` with ``kwargs=True``, else of the tuple of positional
    arguments -- calls ``f``, and returns the list of the output's leaves. The output's
    treedef of the first call is ``out.tree``; callers unflatten the traced results with it.

    Args:
      f: the function (static arguments already bound by the caller).
      in_tree: the treedef the flat leaves are unflattened with.
      kwargs: ``in_tree`` describes ``(args, kwargs)`` rather than ``args``.
      check_out: ``check_out(pairs)`` is called with the output's ``[(key_path, leaf)]``
        before it is returned, to reject non-array leaves with the caller's message; the
        paths are then kept in ``out.paths``.
      has_aux: ``f`` returns ``(output, aux)``; ``aux`` is kept, unflattened, in
        ``out.aux`` and only ``output`` is flattened.
      fname: the public function's name, for the ``has_aux`` error.

    Returns:
      ``(flat_fun, out)``, ``out`` a ``FlatOutput``.

    Raises (from ``flat_fun``): TypeError naming ``fname`` when ``has_aux`` and ``f``'s
    result is not a pair; whatever ``check_out`` raises.
    """
    out = FlatOutput()

    def flat_fun(*leaves):
        if kwargs:
            args, kw = tree_unflatten(in_tree, leaves)
            res = f(*args, **kw)
        else:
            res = f(*tree_unflatten(in_tree, leaves))
        if has_aux:
            res, aux = _split_aux(res, fname)
            out._auxes.append(aux)
        if check_out is None:
            out_leaves, out_tree = tree_flatten(res)
        else:
            pairs, out_tree = tree_flatten_with_path(res)
            check_out(pairs)
            out._paths.append([p for p, _ in pairs])
            out_leaves = [x for _, x in pairs]
        out._trees.append(out_tree)
        return out_leaves

    return flat_fun, out


def _split_aux(res, fname):
    if not (isinstance(res, (tuple, list)) and len(res) == 2):
        raise TypeError(f"{fname} with has_aux=True: expected the function to return a pair "
                        f"(output, aux) (a two-element tuple), but got "
                        f"{type(res).__name__}" +
                        (f" of length {len(res)}" if isinstance(res, (tuple, list)) else ""))
    return res[0], res[1]
