"""``python -m bench [SUB] [options]``: the benchmark entry point.

Each sub-benchmark is a module of this package with ``DESCRIPTION``, ``add_arguments(parser)`` and
``main(args) -> int``; every one takes ``--no-write`` (added here) and its ``--help`` shows each option's default. Modules keep their heavy imports (torch, xgrammar, vocabularies) inside ``main`` so that ``--help`` is
quick and one benchmark's imports never slow another's.
With no sub-benchmark, the default one runs with its default options.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line description). The order is the order of --help.
SUBBENCHMARKS: dict[str, tuple[str, str]] = {
    "loop": ("bench.loop", "simulated continuous-batching engine loop: fill + apply + accept (the default)"),
    "reasoning": ("bench.reasoning", "per-step cost of the streaming reasoning trackers vs output length"),
    "kernels": ("bench.kernels", "bitmask apply: our CPU path / Triton vs xgrammar vs logits.fill_"),
    "step": ("bench.step", "manager per-step time (fill + accept) vs xgrammar matchers called directly"),
    "gil": ("bench.gil", "whether xgrammar's fill / accept calls release the GIL: a pure-Python thread beside each"),
    "tools": ("bench.tools", "tool-choice constraint compile time, cold and cached, per format"),
    "jsonws": ("bench.jsonws", "JSON whitespace bound: compile, memory and fill vs xgrammar's defaults on real schemas"),
    "first_token": ("bench.first_token", "time to the first constrained token for cold real schemas: compile while thinking off vs on"),
    "hostile": ("bench.hostile", "add_request cost and a trivial schema's time-to-ready while hostile compiles run"),
    "parse": ("bench.parse", "front-end Parser: per-delta cost at 1k / 10k / 100k output tokens, per tool format"),
    "vllm": ("bench.vllm", "thinkgate's manager vs vLLM 0.34's StructuredOutputManager, per step, same requests"),
    "vllm_cpu": ("bench.vllm_cpu_apply", "vLLM's CPU-worker bitmask apply: its torch path vs thinkgate's C kernel (needs vLLM)"),
    "sglang": ("bench.sglang_step", "one SGLang step: thinkgate's grammar backend vs SGLang's xgrammar + reasoner (needs SGLang)"),
}
DEFAULT = "loop"


class _ShowDefaults(argparse.HelpFormatter):
    """Each option's help ends with its default, unless the help already states it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (not action.option_strings or "default" in text or text == argparse.SUPPRESS
                or default is None or default is False or default is argparse.SUPPRESS):
            return text
        shown = ",".join(map(str, default)) if isinstance(default, (list, tuple)) else default
        return f"{text} (default: {shown})"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="thinkgate benchmarks. With no sub-benchmark, runs '%s'." % DEFAULT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="'python -m bench SUB --help' lists the options of one.",
    )
    sub = p.add_subparsers(dest="bench", metavar="SUB")
    for name, (module, desc) in SUBBENCHMARKS.items():
        sp = sub.add_parser(name, help=desc, description=desc, formatter_class=_ShowDefaults)
        sp.set_defaults(_module=module)
        sp.add_argument("--no-write", action="store_true", help="write no results file (JSON lines, plots)")
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            sp.set_defaults(_missing=True)
            continue
        mod.add_arguments(sp)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = [DEFAULT, *argv]
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_missing", False):
        parser.error(f"sub-benchmark {args.bench!r} is not available in this build")
    mod = importlib.import_module(args._module)
    return int(mod.main(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
