"""What every engine's glue does the same way, written once: patch an engine attribute undoably, keep
one object per model, and register one generated subclass per thinkgate name with an engine's registry.

- :class:`Patch`: an engine has no registry for a piece (vLLM's structured-output backend, its CPU
  worker's bitmask apply), so thinkgate rebinds one attribute; ``install`` is idempotent and
  ``uninstall`` restores exactly what was there.
- :class:`PerModel`: objects built once per model (per vocabulary, or per tokenizer) and shared by every
  request; weakly keyed, so a model that goes takes them along.
- :func:`register_subclasses`: one subclass of thinkgate's adapter class per name (``thinkgate_<name>``),
  each handed to the engine's registry.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

__all__ = ["Patch", "PerModel", "register_subclasses"]

T = TypeVar("T")
C = TypeVar("C", bound=type)


class Patch:
    """``owner().<attr>`` replaced by ``replacement`` while installed. ``owner`` is called at each use (the
    engine's module or class is imported only then), and the original is kept until ``uninstall``."""

    def __init__(self, owner: Callable[[], Any], attr: str, replacement: Any) -> None:
        self._owner = owner
        self.attr = attr
        self.replacement = replacement
        self._original: Any = None
        self._saved = False
        self._lock = threading.Lock()

    def install(self) -> None:
        """Rebind the attribute (idempotent: a second install keeps the first original)."""
        owner = self._owner()
        with self._lock:
            current = getattr(owner, self.attr)
            if current is not self.replacement:
                if not self._saved:
                    self._original, self._saved = current, True
                setattr(owner, self.attr, self.replacement)

    def uninstall(self) -> None:
        """Put the original back (nothing when not installed)."""
        owner = self._owner()
        with self._lock:
            if self._saved:
                setattr(owner, self.attr, self._original)
                self._original, self._saved = None, False

    def installed(self) -> bool:
        return getattr(self._owner(), self.attr) is self.replacement

    def original(self, default: Any = None) -> Any:
        """What the attribute held before ``install`` (``default`` when not installed)."""
        with self._lock:
            return self._original if self._saved else default


class PerModel(Generic[T]):
    """``get(model, *key)``: ``build(model, *key)`` once per (model, key), shared by every caller. The
    build runs outside the lock (it may be slow: a parser checks its markers, a builder reads the table); two
    threads that race keep the first one stored."""

    def __init__(self, build: Callable[..., T]) -> None:
        self._build = build
        self._items: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], T]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, model: Any, *key: Any) -> T:
        with self._lock:
            found = self._items.get(model, {}).get(key)
        if found is not None:
            return found
        made = self._build(model, *key)
        with self._lock:
            return self._items.setdefault(model, {}).setdefault(key, made)


def register_subclasses(names: Iterable[str], base: C, attr: str, *, prefix: str, module: str, option: str,
                        register: Callable[[str, C], Any]) -> dict[str, C]:
    """For each thinkgate ``name``: a subclass of ``base`` with ``<attr> = name``, registered as
    ``<prefix><name>`` through ``register(engine_name, cls)``; returns engine name -> class. ``option`` is the
    engine's command-line option that selects it (for the class's docstring)."""
    out: dict[str, C] = {}
    for name in names:
        engine_name = prefix + name
        cls = type(f"{base.__name__}_{name}", (base,),
                   {attr: name, "__module__": module,
                    "__doc__": f"thinkgate's {name!r} for the engine ({option} {engine_name})."})
        register(engine_name, cls)
        out[engine_name] = cls
    return out
