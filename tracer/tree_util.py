"""Pytree utilities (``jax.tree_util``)."""
from tracer.pytree import (DictKey, FlattenedIndexKey, GetAttrKey, PyTreeDef, SequenceKey,
                           all_leaves, keystr, register_dataclass, register_pytree_node,
                           register_pytree_node_class, tree_flatten, tree_flatten_with_path,
                           tree_leaves, tree_leaves_with_path, tree_map, tree_map_with_path,
                           tree_reduce, tree_structure, tree_transpose, tree_unflatten,
                           treedef_children, treedef_is_leaf)

__all__ = [n for n in dir() if not n.startswith("_")]
