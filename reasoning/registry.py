"""The reasoning-parser registry: names -> parser classes, imported lazily.

Built-in names are listed in one place, ``_BUILTIN_MODULES`` below: each name -> the module of
``reasoning/`` that defines its family (one module per family). ``get_reasoning_parser(name)`` imports
only that module, so the registry must know every built-in name before any family module is imported;
that is why the map, not the modules, is the list. A built-in family class is decorated with
``@register_reasoning_parser()`` *without names*: the decorator registers it under exactly the names the
map gives its module, in the map's order (the first is the class's primary ``name``), and it raises
when a built-in class is given names of its own or its module is not in the map. A name therefore
cannot be added to, or left out of, one list and not the other.

A plugin is a dotted module path: ``get_reasoning_parser("my_pkg.my_parser")`` (or
``load_reasoning_plugin``) imports it, and the module registers its own names with
``@register_reasoning_parser("my_name", ...)`` (names are required outside ``reasoning/``); when the
path names exactly one new parser, that parser is returned.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

from thinkgate.reasoning.base import ReasoningParser

__all__ = ["register_reasoning_parser", "get_reasoning_parser", "list_reasoning_parsers",
           "load_reasoning_plugin"]

_REGISTRY: dict[str, type[ReasoningParser]] = {}
_PLUGINS: dict[str, list[str]] = {}  # plugin module path -> the names it registered
_LOCK = threading.RLock()

# The list of built-in names: name -> module (relative to this package) that defines its family. The
# first name of a module is its class's primary name. Add a family here, and decorate its class with
# ``@register_reasoning_parser()`` (no names).
_BUILTIN_MODULES: dict[str, str] = {
    "qwen3": "qwen3",
    "mimo": "qwen3",
    "nemotron_v3": "qwen3",
    "step3p5": "qwen3",
    "minicpmv": "qwen3",
    "deepseek_r1": "deepseek_r1",
    "deepseek_v3": "deepseek_v3",
    "deepseek_v4": "deepseek_v4",
    "deepseek_v41": "deepseek_v4",
    "poolside_v1": "poolside_v1",
    "holo2": "holo2",
    "step5": "step5",
    "glm45": "glm45",
    "glm47": "glm45",
    "ling3": "ling3",
    "kimi_k2": "kimi_k2",
    "kimi_k3": "kimi_k3",
    "kimi_vl": "kimi_vl",
    "apertus": "apertus",
    "iquest_q1": "iquest_q1",
    "k2_horizon": "k2_horizon",
    "minimax_m2": "minimax_m2",
    "minimax_m2_append_think": "minimax_m2_append_think",
    "minimax_m3": "minimax_m3",
    "seed_oss": "seed_oss",
    "ernie45": "ernie45",
    "step3": "step3",
    "cohere_command": "cohere_command",
    "cohere_command3": "cohere_command",
    "cohere_command4": "cohere_command",
    "gemma4": "gemma4",
    "mistral": "mistral",
    "magistral": "mistral",
    "olmo3": "olmo3",
    "hunyuan_a13b": "hunyuan_a13b",
    "hy_v3": "hy_v3",
    "hy_v4": "hy_v4",
    "granite": "granite",
    "granite_thinking_parser": "granite_thinking",
    "plamo3": "plamo3",
    "ripple": "ripple",
    "inkling": "inkling",
    "zaya": "zaya",
    "openai_gptoss": "gptoss",
    "gpt_oss": "gptoss",
    "hf": "hf",
    "beam": "hf",
    "muse": "muse",
    "musespark": "muse",
    "muse_glimmer": "muse_glimmer",
}


def _builtin_names(module: str) -> tuple[str, ...] | None:
    """The names ``_BUILTIN_MODULES`` gives the module ``module`` (a full dotted name) in map order;
    None when it is not a module of this package."""
    prefix = f"{__package__}."
    if not module.startswith(prefix):
        return None
    short = module[len(prefix):]
    return tuple(n for n, m in _BUILTIN_MODULES.items() if m == short)


def register_reasoning_parser(*names: str) -> Callable[[type[ReasoningParser]], type[ReasoningParser]]:
    """Class decorator: register a ReasoningParser subclass.

    A built-in family (a module of this package) passes no names: it is registered under the names
    ``_BUILTIN_MODULES`` gives its module. A plugin passes one or more names."""

    def deco(cls: type[ReasoningParser]) -> type[ReasoningParser]:
        if not (isinstance(cls, type) and issubclass(cls, ReasoningParser)):
            raise ValueError(f"{cls!r} is not a ReasoningParser subclass")
        builtin = _builtin_names(cls.__module__)
        if builtin is not None:
            if names:
                raise ValueError(
                    f"built-in reasoning parser {cls.__qualname__} is registered under the names "
                    f"_BUILTIN_MODULES gives its module {builtin!r}; decorate it without names, got {names!r}")
            if not builtin:
                raise ValueError(f"built-in reasoning parser {cls.__qualname__}: its module {cls.__module__!r} "
                                 "is not in _BUILTIN_MODULES; list its names there")
            use = builtin
        elif not names:
            raise ValueError("register_reasoning_parser needs at least one name outside the built-in families")
        else:
            use = names
        with _LOCK:
            for n in use:
                prev = _REGISTRY.get(n)
                if prev is not None and prev is not cls and prev.__qualname__ != cls.__qualname__:
                    raise ValueError(f"reasoning parser name {n!r} is already registered to {prev.__qualname__}")
                _REGISTRY[n] = cls
            if not cls.__dict__.get("name"):
                cls.name = use[0]
        return cls

    return deco


def list_reasoning_parsers() -> list[str]:
    """Every known name: the built-ins (importable on demand) and whatever has registered since."""
    with _LOCK:
        return sorted(set(_BUILTIN_MODULES) | set(_REGISTRY))


def load_reasoning_plugin(module_path: str) -> list[str]:
    """Import a plugin module by dotted path; return the names it registered (the same names on
    every call: a module is imported once, and what it registered is remembered)."""
    with _LOCK:
        known = _PLUGINS.get(module_path)
        if known is not None:
            return list(known)
        before = set(_REGISTRY)
        try:
            importlib.import_module(module_path)
        except ImportError as e:
            raise ValueError(f"cannot import reasoning parser plugin {module_path!r}: {e}") from e
        names = sorted(set(_REGISTRY) - before)
        if not names:  # imported earlier by other means: its classes' module tells what it registered
            names = sorted(n for n, c in _REGISTRY.items() if c.__module__ == module_path)
        _PLUGINS[module_path] = names
        return list(names)


def get_reasoning_parser(name: str) -> type[ReasoningParser]:
    """The parser class registered as ``name`` (a built-in name or a plugin's dotted module path)."""
    with _LOCK:
        cls = _REGISTRY.get(name)
        if cls is not None:
            return cls
        module = _BUILTIN_MODULES.get(name)
    if module is not None:
        importlib.import_module(f"{__package__}.{module}")
        with _LOCK:
            cls = _REGISTRY.get(name)
        if cls is None:  # pragma: no cover - a broken built-in mapping
            raise ValueError(f"built-in module {module!r} did not register reasoning parser {name!r}")
        return cls
    if "." in name:
        new = load_reasoning_plugin(name)
        with _LOCK:
            if name in _REGISTRY:
                return _REGISTRY[name]
            if len(new) == 1:
                return _REGISTRY[new[0]]
        raise ValueError(
            f"reasoning parser plugin {name!r} registered {new or 'no names'}; ask for one of them by name"
        )
    raise ValueError(
        f"unknown reasoning parser {name!r}; known: {', '.join(list_reasoning_parsers())}"
        " (or a plugin's dotted module path)"
    )
