"""A reasoning-parser plugin, as a user would write one: a module that registers its own names.

Load it by dotted path: ``get_reasoning_parser("tests.reasoning_plugin_example")`` (or
``load_reasoning_plugin``), then use the names it registered, e.g. ``get_reasoning_parser("example_think")``.
Its family writes ``<reasoning>`` … ``</reasoning>`` and ends its thinking implicitly at ``<call>``.
Asking for the path again returns the same class: the registry remembers what a plugin registered.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser


@register_reasoning_parser("example_think")
class ExampleThinkParser(TokenMarkerParser):
    start_markers = ("<reasoning>",)
    end_markers = ("</reasoning>",)
    optional_implicit_end_markers = ("<call>",)
    turn_start_markers = ("<turn>",)
    default_mode = "first_token"
