"""lightning.Trainer's keywords and their types, read from Lightning's source without importing Lightning.

The command line checks every ``trainer.<key>`` before anything trains. Asking
``inspect.signature(lightning.Trainer.__init__)`` would import Lightning, and with it torch and
torch._dynamo (seconds), for a one-line refusal; so ``Trainer.__init__`` is read from its file with
``ast`` and each annotation is evaluated here:

- a name Lightning defines as an alias (``_PRECISION_INPUT``, a ``Literal`` of the precisions) is
  followed through the imports of the module that uses it to its assignment, and evaluated there;
- a name from the standard library (``Optional``, ``Iterable``, ``timedelta``, ``Path``) or typing_extensions
  is the real one;
- any other name (a class of Lightning's or torch's: ``Accelerator``) stands as an opaque class of that
  name, which no plain config value (bool, int, float, str, list, dict) is, as the real class is not.

tests/experiments/training/test_trainer_signature.py compares the result with ``inspect.signature`` of the imported
Trainer.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

TRAINER_MODULE = "lightning.pytorch.trainer.trainer"
READ_PACKAGE = "lightning"  # the package whose source is followed for an alias
MAX_DEPTH = 12  # imports followed for one name; Lightning's aliases are 2-3 modules deep


@functools.cache
def trainer_parameters() -> dict[str, Any]:
    """``Trainer.__init__``'s parameters but ``self``, in order: name -> annotation
    (``inspect.Parameter.empty`` where there is none)."""
    tree = _tree(TRAINER_MODULE)
    if tree is None:
        raise ModuleNotFoundError(f"lightning is not installed: no source for {TRAINER_MODULE}")
    init = _trainer_init(tree)
    args = init.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    return {
        a.arg: inspect.Parameter.empty if a.annotation is None else _evaluate(a.annotation, TRAINER_MODULE, 0)
        for a in params
        if a.arg != "self"
    }


def _trainer_init(tree: ast.Module) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Trainer":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    return item
    raise LookupError(f"{TRAINER_MODULE} has no Trainer.__init__; this Lightning is not one attnlab reads")


def source_file(module: str) -> Path | None:
    """The file of ``module`` (its ``__init__.py`` for a package), found without importing any package
    above it (``importlib.util.find_spec`` of a dotted name imports its parents)."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return Path(spec.origin) if spec is not None and spec.origin and not rest else None
    folder = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for candidate in (folder / "__init__.py", folder.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _tree(module: str) -> ast.Module | None:
    path = source_file(module)
    return None if path is None else ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@functools.cache
def opaque(name: str) -> type:
    """A stand-in for a class this reader does not import; subscripting it (``Foo[int]``) gives itself."""
    return type(name, (), {"__class_getitem__": classmethod(lambda cls, _: cls)})


class _ModuleRef:
    """A module named in an annotation (``pl.LightningModule`` after ``import lightning.pytorch as pl``)."""

    def __init__(self, name: str) -> None:
        self.name = name


def _imported_for_names(module: str) -> bool:
    """Modules imported for their names: the standard library, and typing's backport (cheap, and what an
    annotation may take ``Literal`` or ``TypeAlias`` from)."""
    top = module.split(".")[0]
    return top in sys.stdlib_module_names or top == "typing_extensions"


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The module an ``ImportFrom`` in ``module`` names, its leading dots resolved."""
    if not node.level:
        return node.module or ""
    path = source_file(module)
    package = module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """A module's top-level statements, those under ``if``/``try`` too (``if TYPE_CHECKING:`` imports)."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.If):
            out += _statements(node.body) + _statements(node.orelse)
        elif isinstance(node, ast.Try):
            out += _statements(node.body) + _statements(node.orelse)
    return out


def _resolve(module: str, name: str, depth: int) -> Any:
    """What ``name`` means at the top of ``module``: the first definition or import of it found."""
    if _imported_for_names(module):
        return getattr(importlib.import_module(module), name, None) or opaque(name)
    if module.split(".")[0] != READ_PACKAGE:  # torch's and other packages' classes: never imported, never read
        return opaque(name)
    tree = _tree(module) if depth <= MAX_DEPTH else None
    for node in _statements(tree.body) if tree is not None else []:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return _evaluate(node.value, module, depth + 1)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return opaque(name) if node.value is None else _evaluate(node.value, module, depth + 1)
        if isinstance(node, ast.ClassDef) and node.name == name:
            return opaque(name)
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = _absolute(module, node)
                    if source_file(f"{source}.{alias.name}") is not None:  # a submodule, not a name in it
                        return _ModuleRef(f"{source}.{alias.name}")
                    return _resolve(source, alias.name, depth + 1)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname == name:
                    return _ModuleRef(alias.name)
                if alias.asname is None and alias.name.split(".")[0] == name:
                    return _ModuleRef(name)
    if tree is not None and hasattr(builtins, name):
        return getattr(builtins, name)
    return opaque(name)


def _evaluate(node: ast.expr, module: str, depth: int) -> Any:
    """An annotation's expression as the typing object it builds when ``module`` runs."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return _resolve(module, node.id, depth)
    if isinstance(node, ast.Attribute):
        owner = _evaluate(node.value, module, depth)
        if isinstance(owner, _ModuleRef):
            return _resolve(owner.name, node.attr, depth + 1)
        return getattr(owner, node.attr, None) or opaque(node.attr)
    if isinstance(node, ast.Subscript):
        base = _evaluate(node.value, module, depth)
        index = _evaluate(node.slice, module, depth)
        return base[index]
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_evaluate(e, module, depth) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        import typing

        return typing.Union[_evaluate(node.left, module, depth), _evaluate(node.right, module, depth)]
    return opaque(ast.unparse(node))


__all__ = ["TRAINER_MODULE", "opaque", "source_file", "trainer_parameters"]
