"""The engine glue's shared helpers (thinkgate/engines/registration.py), without an engine: an undoable
patch, per-model objects, generated subclasses handed to a registry."""

from __future__ import annotations

import gc
import threading

from thinkgate.engines.registration import Patch, PerModel, register_subclasses


class Engine:
    def apply(self) -> str:
        return "engine"


def ours(self: Engine) -> str:
    return "thinkgate"


def test_patch_installs_once_and_restores_the_original() -> None:
    original = Engine.apply
    patch = Patch(lambda: Engine, "apply", ours)
    assert not patch.installed() and patch.original("none") == "none"
    patch.install()
    patch.install()  # idempotent: the original kept is the engine's, not ours
    assert patch.installed() and Engine().apply() == "thinkgate"
    assert patch.original() is original
    patch.uninstall()
    assert Engine.apply is original and not patch.installed()
    patch.uninstall()  # nothing to undo
    assert Engine.apply is original


class Model:
    """A stand-in for a vocabulary: hashable and weakly referencable."""


def test_per_model_builds_once_per_key_and_lets_the_model_go() -> None:
    built: list[tuple[int, str]] = []

    def build(model: Model, name: str) -> list[str]:
        built.append((id(model), name))
        return [name]

    cache: PerModel[list[str]] = PerModel(build)
    m = Model()
    a = cache.get(m, "a")
    assert cache.get(m, "a") is a and cache.get(m, "b") == ["b"] and len(built) == 2
    other = Model()
    assert cache.get(other, "a") is not a and len(built) == 3
    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(m, "c"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r is results[0] for r in results)  # racing builds keep the first one stored
    del m, other
    gc.collect()
    assert len(cache._items) == 0


class Base:
    name = ""


def test_register_subclasses_names_each_class_and_hands_it_to_the_registry() -> None:
    registry: dict[str, type] = {}
    out = register_subclasses(["qwen3", "hermes"], Base, "name", prefix="thinkgate_", module=__name__,
                              option="--parser", register=registry.__setitem__)
    assert out == registry and sorted(out) == ["thinkgate_hermes", "thinkgate_qwen3"]
    cls = out["thinkgate_qwen3"]
    assert issubclass(cls, Base) and cls.name == "qwen3" and cls.__module__ == __name__
    assert cls.__name__ == "Base_qwen3" and "--parser thinkgate_qwen3" in (cls.__doc__ or "")
