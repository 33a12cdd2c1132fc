"""The attention benchmark (a command, not a timed test): a tiny run writes its table, figure and
numbers, with a row and a fitted slope for every variant."""
import json

import numpy as np

from numpy_transformer.benchmarks.attention import VARIANTS, goals, markdown_table, run, sizes, slope


def test_sizes_double_from_256_to_the_maximum():
    assert sizes(8192) == [256, 512, 1024, 2048, 4096, 8192]


def test_the_slope_of_a_power_law_is_its_exponent():
    ns = [1024, 2048, 4096]
    assert np.isclose(slope(ns, [3e-9 * n ** 2 for n in ns]), 2)
    assert np.isclose(slope(ns, [5 * n for n in ns]), 1)


def test_a_tiny_run_writes_the_table_figure_and_numbers(tmp_path):
    results = run(max_n=256, out_dir=tmp_path, log=lambda line: None)
    assert list(results) == [v.name for v in VARIANTS]
    assert all(r["seconds"][0] > 0 and r["peak_bytes"][0] > 0 for r in results.values())
    assert json.loads((tmp_path / "attention_benchmark.json").read_text())["full"]["n"] == [256]
    table = (tmp_path / "attention_benchmark.md").read_text()
    assert table.count("\n| ") == len(VARIANTS) and "| n = 256 |" in table        # one row per variant
    assert (tmp_path / "attention_benchmark.png").read_bytes()[:4] == b"\x89PNG"


def test_the_goals_say_met_or_missed_with_the_figures():
    n = [1024, 2048, 4096]
    fake = {name: {"n": n, "seconds": [1.0, 2.0, 4.0], "peak_bytes": [2 ** 20, 2 ** 21, 2 ** 22],
                   "time_complexity": "O(n)", "memory_complexity": "O(n)", "time_slope": 1.0, "memory_slope": 1.0}
            for name in ("full", "linear (elu + 1)", "block-wise exact (B = 128)")}
    fake["full"]["seconds"][2], fake["full"]["peak_bytes"][2] = 40.0, 100 * 2 ** 22
    text = goals(fake)
    assert "40000 ms / 4000.0 ms = 10× — met" in text and "= 1/100 — met" in text
    assert "| full | O(n), O(n) |" in markdown_table(fake)


def test_the_command_line_has_bench_attention():
    from numpy_transformer.benchmarks import bench_attention_command
    from numpy_transformer.cli import build_parser

    args = build_parser().parse_args(["bench", "attention", "--max-n", "1024", "--out", "results"])
    assert (args.max_n, args.out, args.blas_threads, args.run) == (1024, "results", 1, bench_attention_command)
