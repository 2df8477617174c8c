"""The bench command line: every sub-benchmark takes ``--no-write`` and its ``--help`` shows each default."""

from __future__ import annotations

import argparse

from bench.__main__ import build_parser, main


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    p = build_parser()
    return next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_every_sub_benchmark_takes_no_write_and_its_help_shows_each_default() -> None:
    for name, sp in _subparsers().items():
        assert any("--no-write" in a.option_strings for a in sp._actions), name
        fmt = sp._get_formatter()
        for a in sp._actions:
            if not a.option_strings or a.default in (None, False, argparse.SUPPRESS):
                continue
            assert "default" in fmt._get_help_string(a), (name, a.option_strings)
        assert "default" in sp.format_help()


def test_no_write_leaves_no_results_file(tmp_path) -> None:
    out = tmp_path / "parse.jsonl"
    rc = main(["parse", "--formats", "hermes", "--sizes", "120", "--window", "30", "--repeat", "1",
               "--out", str(out), "--no-write"])
    assert rc == 0 and not out.exists()
    rc = main(["parse", "--formats", "hermes", "--sizes", "120", "--window", "30", "--repeat", "1", "--out", str(out)])
    assert rc == 0 and out.exists()
