"""One registry for every plugin kind: an entry is a name, the object registered under it, and what it declares.

    BENCHMARKS = Registry("benchmark", BenchEntry, package="experiments.bench")

    @BENCHMARKS.register("scaling", help="time and memory vs length", arguments=arguments)
    def scaling(args): ...

Each kind names the fields its entries must declare as a frozen dataclass (``TaskEntry``, ``SectionEntry``,
``BenchEntry``, ...); ``register`` refuses a missing or unknown field by name, so what an entry needs is read
from the registry, never from a list kept beside it. A registry that names its ``package`` finds its entries by
importing every module of that package (``pkgutil``), the first time one is asked for: a new module is a new
entry with no import list to edit. A duplicate name is refused naming both modules; an unknown name is one line
naming the kind, the key, the choices and the nearest one.

``kinds()`` lists every kind and ``registry(kind)`` returns its registry, imported on first use, so this module
(like ``import attnlab``) costs the standard library only.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class RegistryError(ValueError):
    """A bad name or declaration given to a registry (a user error, not a bug)."""


@dataclass(frozen=True)
class NoFields:
    """The declaration of a kind whose entries declare nothing beyond their name."""


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered entry: its name, the object (class or function), the module that registered it and the
    fields its kind asks for."""

    name: str
    target: T
    module: str
    declared: Any


class Registry(Generic[T]):
    """Entries of one plugin ``kind``, keyed by an explicit string; ``fields`` is the dataclass of what each
    entry declares and ``package`` the package whose modules register the built-in entries."""

    def __init__(self, kind: str, fields: type = NoFields, package: str | None = None) -> None:
        if not dataclasses.is_dataclass(fields):
            raise TypeError(f"Registry({kind!r}): fields must be a dataclass, got {fields!r}")
        self.kind = kind
        self.fields = fields
        self.package = package
        self._entries: dict[str, Entry[T]] = {}
        self._discovered = package is None

    def register(self, name: str, **declared: Any) -> Callable[[T], T]:
        """Decorator: ``@TASKS.register("copy", kind="seq2seq", ...)``; the keywords are the kind's fields."""
        if not isinstance(name, str) or not name:
            raise RegistryError(f"{self.kind}: a registry name must be a non-empty string, got {name!r}")
        fields = self._declaration(name, declared)

        def decorator(target: T) -> T:
            module = getattr(target, "__module__", None) or "?"
            if name in self._entries:
                first = self._entries[name].module
                raise RegistryError(
                    f"{self.kind}={name!r} is already registered by {first}; {module} registers it again; "
                    "choose another name"
                )
            self._entries[name] = Entry(name, target, module, fields)
            return target

        return decorator

    def _declaration(self, name: str, declared: dict[str, Any]) -> Any:
        """The kind's field dataclass filled from ``declared``; a missing or unknown field is a one-line error."""
        known = [f.name for f in dataclasses.fields(self.fields)]
        required = [
            f.name
            for f in dataclasses.fields(self.fields)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        unknown = sorted(set(declared) - set(known))
        missing = [k for k in required if k not in declared]
        if unknown or missing:
            said = f"unknown field(s) {unknown}" if unknown else f"missing field(s) {missing}"
            raise RegistryError(f"{self.kind}={name!r}: {said}; a {self.kind} declares {known}")
        return self.fields(**declared)

    def unregister(self, name: str) -> None:
        """Remove an entry (tests that register a throwaway entry take it out again)."""
        self.get(name)
        del self._entries[name]

    def discover(self) -> None:
        """Import every module of ``package`` once, so that each registers its entries."""
        if self._discovered:
            return
        self._discovered = True  # first: a module imported below may ask this registry for its names
        import_modules(str(self.package))

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._entries)

    def entry(self, name: str) -> Entry[T]:
        """The whole entry of ``name``: object, registering module and declared fields."""
        self.discover()
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            pass
        choices = self.names()
        near = difflib.get_close_matches(str(name), choices, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise RegistryError(f"{self.kind}={name!r} is unknown; choose one of {choices}{hint}")

    def get(self, name: str) -> T:
        """The object registered as ``name``."""
        return self.entry(name).target

    def declared(self, name: str) -> Any:
        """What ``name`` declared at registration: an instance of the kind's ``fields`` dataclass."""
        return self.entry(name).declared

    def __contains__(self, name: object) -> bool:
        self.discover()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


def import_modules(package: str) -> list[str]:
    """Import ``package`` and each of its modules and sub-packages whose name does not start with ``_``;
    returns the names imported. A new file in the package is found with no import list to edit."""
    root = importlib.import_module(package)
    found = []
    for info in pkgutil.iter_modules(getattr(root, "__path__", [])):
        if not info.name.startswith("_"):
            found.append(importlib.import_module(f"{package}.{info.name}").__name__)
    return found


# kind -> "module:attribute" of its registry, imported only when that kind is asked for (this module stays
# standard-library only). The claims' tests and the sweeper rules are not registries (docs/architecture.md).
HOMES = {
    "attention": "variants.registries:ATTENTION",
    "position": "variants.registries:POSITION",
    "task": "experiments.tasks.registry:TASKS",
    "benchmark": "experiments.bench.registry:BENCHMARKS",
    "report section": "analysis.report.sections.registry:SECTIONS",
    "statistical test": "analysis.stats.comparison_tests:TESTS",
    "sequential rule": "attnlab.rules:RULES",
}


def kinds() -> list[str]:
    """Every plugin kind that has a registry."""
    return sorted(HOMES)


def registry(kind: str) -> Registry[Any]:
    """The registry of ``kind`` (one of ``kinds()``), imported on first use."""
    if kind not in HOMES:
        near = difflib.get_close_matches(str(kind), kinds(), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise RegistryError(f"plugin kind={kind!r} is unknown; choose one of {kinds()}{hint}")
    module, attribute = HOMES[kind].split(":")
    found: Registry[Any] = getattr(importlib.import_module(module), attribute)
    return found
