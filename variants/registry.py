"""A small typed registry: variants are chosen by an explicit string key.

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

import difflib
import inspect
import re
from typing import Any, Callable, Generic, Iterator, TypeVar

T = TypeVar("T")
# A BibTeX citation key: no white space and none of the characters that end or open one.
CITATION_KEY = re.compile(r"[^\s,{}()@=\"#%']+")


class RegistryError(ValueError):
    """A bad name or parameter given to a registry (a user error, not a bug)."""


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Callable[..., T]] = {}
        self._references: dict[str, tuple[str, ...]] = {}

    def register(
        self, name: str, references: str | tuple[str, ...] | list[str] = ()
    ) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator: ``@ATTENTION.register("soft", references=("bahdanau2015neural", ...))``. A duplicate name
        is an error.

        ``references``: the citation keys (into ``attnlab/bibliography.py``) of the papers the entry
        implements, one or several.
        """
        if not isinstance(name, str) or not name:
            raise RegistryError(f"{self.kind}: a registry name must be a non-empty string, got {name!r}")
        refs = (references,) if isinstance(references, str) else tuple(references)
        for ref in refs:
            if not isinstance(ref, str) or not CITATION_KEY.fullmatch(ref):
                raise RegistryError(
                    f"{self.kind}={name!r}: references are citation keys into attnlab/bibliography.py "
                    f"(e.g. 'vaswani2017attention'), got {str(ref)[:60]!r}"
                )

        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries:
                raise RegistryError(
                    f"{self.kind}={name!r} is already registered (by {self._entries[name]!r}); choose another name"
                )
            self._entries[name] = factory
            self._references[name] = refs
            return factory

        return decorator

    def unregister(self, name: str) -> None:
        """Remove an entry (used by tests that register throw-away variants)."""
        self.get(name)
        del self._entries[name]
        self._references.pop(name, None)

    def references(self, name: str) -> tuple[str, ...]:
        """The citation keys the entry declared at registration (empty if none)."""
        self.get(name)
        return self._references.get(name, ())

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str) -> Callable[..., T]:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            pass
        choices = self.names()
        near = difflib.get_close_matches(str(name), choices, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise RegistryError(f"{self.kind}={name!r} is unknown; choose one of {choices}{hint}")

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
