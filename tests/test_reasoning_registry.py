"""The reasoning-parser registry: names, lazy imports, plugins by dotted path, clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from thinkgate.testing.vocabularies import byte_level_vocabulary
from thinkgate.reasoning import get_reasoning_parser, list_reasoning_parsers, load_reasoning_plugin, register_reasoning_parser
from thinkgate.reasoning.base import ReasoningParser
from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import _BUILTIN_MODULES

ROOT = Path(__file__).resolve().parent.parent

TOKEN_FAMILIES = ["qwen3", "mimo", "nemotron_v3", "step3p5", "deepseek_r1", "deepseek_v3", "deepseek_v4", "glm45",
                  "kimi_k2", "minimax_m2", "seed_oss", "ernie45", "step3", "cohere_command", "gemma4", "mistral"]
TEXT_FAMILIES = ["olmo3", "hunyuan_a13b"]


def test_every_family_is_listed_and_resolves():
    names = list_reasoning_parsers()
    assert names == sorted(names)
    for n in TOKEN_FAMILIES + TEXT_FAMILIES:
        assert n in names and n in _BUILTIN_MODULES
        cls = get_reasoning_parser(n)
        assert issubclass(cls, ReasoningParser)
    for n in TOKEN_FAMILIES:
        assert issubclass(get_reasoning_parser(n), TokenMarkerParser)


def test_lazy_import_by_name():
    """A fresh interpreter imports only the family module asked for."""
    code = ("import sys, thinkgate.reasoning as reasoning; "
            "assert 'thinkgate.reasoning.qwen3' not in sys.modules; "
            "reasoning.get_reasoning_parser('glm45'); "
            "assert 'thinkgate.reasoning.glm45' in sys.modules and 'thinkgate.reasoning.qwen3' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError) as e:
        get_reasoning_parser("no_such_family")
    msg = str(e.value)
    assert "no_such_family" in msg and "qwen3" in msg and "deepseek_r1" in msg and "gemma4" in msg


def test_plugin_by_dotted_path(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    cls = get_reasoning_parser("tests.reasoning_plugin_example")
    assert cls.__name__ == "ExampleThinkParser"
    assert get_reasoning_parser("example_think") is cls
    assert "example_think" in list_reasoning_parsers()
    assert get_reasoning_parser("tests.reasoning_plugin_example") is cls  # asking again is fine
    assert load_reasoning_plugin("tests.reasoning_plugin_example") == ["example_think"]  # remembered
    v = byte_level_vocabulary(["<end>", "<turn>", "<reasoning>", "</reasoning>", "<call>"])
    p = cls(v)
    ids = v.encode("<reasoning>hmm</reasoning>ok")
    assert p.extract_content_ids(ids) == v.encode("ok")
    assert p.count_reasoning_tokens(ids) == 3
    assert p.extract_reasoning("<reasoning>hmm</reasoning>ok") == ("hmm", "ok")
    assert p.split(v.encode("<reasoning>x<call>{}")).content_ids == v.encode("<call>{}")
    with pytest.raises(ValueError, match=r"'example_think'.*'<reasoning>'"):
        cls(byte_level_vocabulary(["<end>"]))


def test_plugin_that_cannot_be_imported():
    with pytest.raises(ValueError, match="cannot import reasoning parser plugin 'no_such_pkg.parser'"):
        get_reasoning_parser("no_such_pkg.parser")


def test_register_errors():
    class Other(TokenMarkerParser):
        pass

    with pytest.raises(ValueError, match="at least one name"):
        register_reasoning_parser()(Other)  # outside the built-in families, names are required
    with pytest.raises(ValueError, match="not a ReasoningParser subclass"):
        register_reasoning_parser("bad_example")(int)  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="'qwen3' is already registered"):
        get_reasoning_parser("qwen3")
        register_reasoning_parser("qwen3")(Other)


def test_parser_accepts_a_vocabulary_name():
    p = get_reasoning_parser("qwen3")("qwen3_6")
    assert p.reasoning_end_token_ids == {248069}


def test_builtin_names_come_from_the_map_only():
    """A built-in family is decorated without names and gets exactly its module's names from the map."""
    for name, module in _BUILTIN_MODULES.items():
        cls = get_reasoning_parser(name)
        names = [n for n, m in _BUILTIN_MODULES.items() if m == module]
        assert cls.name == names[0]
    deco = register_reasoning_parser("qwen3_alias")
    bad = type("Bad", (TokenMarkerParser,), {"__module__": "thinkgate.reasoning.qwen3"})
    with pytest.raises(ValueError, match="without names"):
        deco(bad)
    unlisted = type("Unlisted", (TokenMarkerParser,), {"__module__": "thinkgate.reasoning.no_such_module"})
    with pytest.raises(ValueError, match="not in _BUILTIN_MODULES"):
        register_reasoning_parser()(unlisted)
