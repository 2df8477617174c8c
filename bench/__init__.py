"""thinkgate benchmarks: ``python -m bench [name] [options]``; ``python -m bench --help`` lists them."""
