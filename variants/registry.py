"""The variants' registry: the shared ``attnlab.registry.Registry``, plus construction by name.

A registry entry is a class or factory registered with a decorator. ``get`` on an
unknown name and ``build`` with an unknown parameter fail loudly, naming the key,
the value and what is allowed, so a typo on the command line is a one-line error.

An entry may declare ``options``, a dict from parameter name to the discrete
values that parameter takes (``{"mode": ("monotonic", "predictive")}``);
``variations`` turns it into the parameter sets a sweep or a test should cover.

An entry also declares the papers it comes from beside its class, as citation keys into the
one bibliography, ``attnlab/bibliography.py`` (``register("alibi", references="press2022train")``);
a run records their BibTeX in its result.json and a report cites them in ``references.bib``.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from attnlab import registry as attnlab_registry
from attnlab.registry import RegistryError

T = TypeVar("T")
# A BibTeX citation key: no white space and none of the characters that end or open one.
CITATION_KEY = re.compile(r"[^\s,{}()@=\"#%']+")

__all__ = ["CITATION_KEY", "Registry", "RegistryError", "VariantFields", "keyword_parameters"]


@dataclass(frozen=True)
class VariantFields:
    """What a variant, or a task, declares: the citation keys of the papers it implements."""

    references: tuple[str, ...] = ()


class Registry(attnlab_registry.Registry[Callable[..., T]]):
    """A variant registry: the shared ``attnlab.registry.Registry`` whose entries declare their papers, with
    construction by name (``build``) and the option sets a test or sweep covers (``variations``)."""

    def __init__(self, kind: str, fields: type = VariantFields, package: str | None = None) -> None:
        super().__init__(kind, fields, package)

    def register(
        self, name: str, references: str | tuple[str, ...] | list[str] = (), **declared: Any
    ) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator: ``@ATTENTION.register("soft", references=("bahdanau2015neural", ...))``. A duplicate name
        is an error.

        ``references``: the citation keys (into ``attnlab/bibliography.py``) of the papers the entry
        implements, one or several; ``declared``: the other fields of the registry's ``fields`` (which has
        ``references`` too).
        """
        refs = (references,) if isinstance(references, str) else tuple(references)
        for ref in refs:
            if not isinstance(ref, str) or not CITATION_KEY.fullmatch(ref):
                raise RegistryError(
                    f"{self.kind}={name!r}: references are citation keys into attnlab/bibliography.py "
                    f"(e.g. 'vaswani2017attention'), got {str(ref)[:60]!r}"
                )
        return super().register(name, references=refs, **declared)

    def references(self, name: str) -> tuple[str, ...]:
        """The citation keys the entry declared at registration (empty if none)."""
        refs: tuple[str, ...] = self.declared(name).references
        return refs

    def accepted_params(self, name: str) -> list[str]:
        """The keyword parameters the entry's constructor accepts."""
        return list(keyword_parameters(self.get(name)))

    def variations(self, name: str) -> list[dict[str, Any]]:
        """The defaults, then each declared option value that differs from its default, one at a time."""
        factory = self.get(name)
        defaults = {n: p.default for n, p in keyword_parameters(factory).items() if p.default is not p.empty}
        cases: list[dict[str, Any]] = [{}]
        for key, values in getattr(factory, "options", {}).items():
            cases += [{key: value} for value in values if key not in defaults or value != defaults[key]]
        return cases

    def build(self, name: str, **params: Any) -> T:
        """Construct the entry, rejecting unknown parameters by name."""
        factory = self.get(name)
        accepted = self.accepted_params(name)
        unknown = sorted(set(params) - set(accepted))
        if unknown:
            raise RegistryError(
                f"{self.kind}={name!r} got unknown parameter(s) {unknown}; accepted: {sorted(accepted)}"
            )
        return factory(**params)


def keyword_parameters(factory: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """The parameters ``factory`` takes by name, in order.

    A class whose ``__init__`` takes ``**kwargs`` hands them to its base class, so the
    parameters of the bases' ``__init__`` count too, up to the first without ``**kwargs``;
    a subclass's parameter wins over a base's of the same name.
    """
    if inspect.isclass(factory):
        signatures = [inspect.signature(vars(c)["__init__"]) for c in factory.__mro__ if "__init__" in vars(c)]
    else:
        signatures = [inspect.signature(factory)]
    found: dict[str, inspect.Parameter] = {}
    for sig in signatures:
        for p in sig.parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self":
                found.setdefault(p.name, p)
        if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            break
    return found
