"""The literals that end a structural tag's free text (structured_output/compilation/closers.py): read off the tag,
within a sequence and past its end, into the tag's end and what follows the tag."""

from __future__ import annotations

from thinkgate.structured_output.compilation.closers import text_closers


def _cs(value):
    return {"type": "const_string", "value": value}


RAW = {"type": "regex", "pattern": "[^<]*"}


def test_a_raw_value_last_in_its_call_is_closed_by_the_call_end_and_the_section_end():
    """dots' call (vLLM's format): the last parameter's raw value is followed by no literal of its own sequence; the
    way out is the tag's end, then the section's end token (an id once resolved)."""
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "token", "token": 256}, _cs("\n"),
        {"type": "tag", "begin": '<invoke name="f">\n<parameter name="a">', "content": {"type": "sequence", "elements": [
            RAW, _cs('</parameter>\n<parameter name="b">'), RAW]},
         "end": "</parameter>\n</invoke>\n"},
        {"type": "token", "token": 257}]}}
    assert text_closers(tag) == [('</parameter>\n<parameter name="b">',), ("</parameter>\n</invoke>\n", 257)]


def test_closers_stop_at_the_first_element_that_is_not_a_literal_and_take_every_end_and_branch():
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "or", "elements": [
            {"type": "tag", "begin": "<a>", "content": RAW, "end": ["</a>", "</A>"]},
            {"type": "sequence", "elements": [_cs("<b>"), {"type": "any_text"}]}]},
        _cs("!"), {"type": "json_schema", "json_schema": {}}, _cs("?")]}}
    assert text_closers(tag) == [("</a>", "!"), ("</A>", "!"), ("!",)]


def test_a_tag_with_an_empty_end_passes_on_what_follows_it():
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<a>", "content": RAW, "end": ""}, _cs("</b>")]}}
    assert text_closers(tag) == [("</b>",)]


def test_json_schemas_inside_are_not_read_as_formats():
    """A json_schema element's schema (``"type": ["string", "null"]``, a property named ``regex``) is no format."""
    schema = {"type": "object", "properties": {"a": {"type": ["string", "null"]}, "b": {"type": "regex"}}}
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "json_schema", "json_schema": schema}, RAW, _cs("</x>")]}}
    assert text_closers(tag) == [("</x>",)]
