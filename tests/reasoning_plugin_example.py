"""A reasoning-parser plugin, as a user would write one: a module that registers its own names.

Load it by dotted path: ``get_reasoning_parser("tests.reasoning_plugin_example")`` (or
``load_reasoning_plugin``), then use the names it registered, e.g. ``get_reasoning_parser("example_think")``.
Its family writes ``<reasoning>`` … ``</reasoning>`` and ends its thinking implicitly at ``<call>``.
The dotted path is registered too, so asking for the path again returns the same class.
"""

from __future__ import annotations

from reasoning.markers import TokenMarkerParser
from reasoning.registry import register_reasoning_parser


@register_reasoning_parser("example_think", __name__)
class ExampleThinkParser(TokenMarkerParser):
    start_markers = ("<reasoning>",)
    end_markers = ("</reasoning>",)
    optional_implicit_end_markers = ("<call>",)
    turn_start_markers = ("<turn>",)
    default_mode = "first_token"
