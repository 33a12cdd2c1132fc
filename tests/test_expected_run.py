"""The main job's numbers stay what the docs show: a short seeded run of the default preset is
compared with the expectation `scripts/regenerate_outputs.py` recorded, and every region of
expected output in the docs belongs to an output that script regenerates.

A change that moves the numbers (a new initialisation, another rounding) fails here until
`python scripts/regenerate_outputs.py` has regenerated the docs' outputs and this expectation.
The tolerance is far above what another BLAS moves: on the development machine (AMD EPYC) the
OpenBLAS kernels for Haswell, SkylakeX and Sandybridge and OpenBLAS 0.3.21 (NumPy 1.24) gave these
numbers within 4e-6 of each other, relatively; on an Intel Xeon (Sapphire Rapids) the same three
kernels of OpenBLAS 0.3.31 came within 3.3e-8 of the recorded ones (docs/outputs.md). Another
seed moves them by more than ten times the tolerance (the second test)."""
import importlib.util
import json
from pathlib import Path
import re

import numpy as np
import pytest

from run_helpers import run_main

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("regenerate_outputs", REPO / "scripts" / "regenerate_outputs.py")
regenerate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(regenerate)

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("short") / "run"
    status, out, err = run_main(["train", "--out", folder, *regenerate.SHORT_RUN_ARGUMENTS])
    assert status == 0, err
    log = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    return log, json.loads((folder / "metrics.json").read_text())


@pytest.mark.numerics
def test_the_short_run_of_the_main_job_gives_the_numbers_the_docs_were_regenerated_with(short_run):
    expected = json.loads(regenerate.SHORT_RUN.read_text())
    assert expected["arguments"] == regenerate.SHORT_RUN_ARGUMENTS, \
        "the short run's arguments changed: run python scripts/regenerate_outputs.py short-run"
    log, metrics = short_run
    got = {"losses": {str(r["step"]): r["loss"] for r in log if "loss" in r},
           "grad_norms": {str(r["step"]): r["grad_norm"] for r in log if "grad_norm" in r},
           "validation_losses": {str(r["step"]): r["validation_loss"] for r in log if "validation_loss" in r}}
    advice = "the default run's numbers moved: run python scripts/regenerate_outputs.py (README.md and docs/)"
    assert metrics["parameters"] == expected["parameters"], advice
    for key, values in got.items():
        assert values.keys() == expected[key].keys(), advice
        np.testing.assert_allclose([values[s] for s in values], [expected[key][s] for s in values],
                                   rtol=TOLERANCE, err_msg=f"{key}: {advice}")
    np.testing.assert_allclose(metrics["test_cross_entropy"], expected["test_cross_entropy"], rtol=TOLERANCE,
                               err_msg=advice)


def test_the_tolerance_catches_a_change_that_moves_the_numbers(short_run, tmp_path):
    """The same short run with another seed, a change far smaller than a new initialisation,
    falls outside the tolerance."""
    status, out, err = run_main(["train", "--out", tmp_path / "run", *regenerate.SHORT_RUN_ARGUMENTS, "--seed", "1"])
    assert status == 0, err
    other = json.loads((tmp_path / "run" / "metrics.json").read_text())
    expected = json.loads(regenerate.SHORT_RUN.read_text())
    assert abs(other["test_cross_entropy"] - expected["test_cross_entropy"]) > 10 * TOLERANCE * expected["test_cross_entropy"]


def test_every_region_of_expected_output_in_the_docs_is_one_the_script_regenerates():
    declared = [region for output in regenerate.OUTPUTS for region in output.regions
                if "/" not in region]   # the others are files (the expectation, figures)
    assert len(declared) == len(set(declared))
    found = regenerate.all_regions()
    assert sorted(found) == sorted([*declared, regenerate.LEDGER_REGION])
    for page in regenerate.PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        begins = re.findall(r"^<!-- begin output ([\w.-]+) -->$", text, re.M)
        assert sorted(begins) == sorted(regenerate.regions_of(text)), f"{page}: a begin marker without its end"


def test_the_ledger_names_a_machine_and_a_date_for_every_output():
    ledger = json.loads(regenerate.LEDGER.read_text(encoding="utf-8"))
    assert sorted(ledger) == sorted(output.name for output in regenerate.OUTPUTS)
    for name, row in ledger.items():
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", row["date"]) and "NumPy" in row["machine"], name
    page = (REPO / "docs" / "outputs.md").read_text(encoding="utf-8")
    for name in ledger:
        assert f"`{name}`" in page, f"docs/outputs.md does not list {name}"


def test_a_region_is_replaced_whole_and_alone():
    text = "a\n<!-- begin output x -->\nold\n<!-- end output x -->\nb\n<!-- begin output y -->\nkeep\n<!-- end output y -->\n"
    new = regenerate.replace_region(text, "x", "new\nlines\n")
    assert new == "a\n<!-- begin output x -->\nnew\nlines\n<!-- end output x -->\nb\n<!-- begin output y -->\nkeep\n<!-- end output y -->\n"


# a duration as the docs write one: "about a minute", "about 4 minutes", "~2 minutes", "(~1 min)"
DURATION = re.compile(r"(?:about|~) ?(?:a|\d+(?:\.\d+)?) ?(?:minute|min\b|second)s?")


def printed_preset_lines(text):
    """(preset, line) for each line, outside the script's regions, that prints a train command
    running a preset as it is or is a row of a presets table."""
    outside = regenerate.REGION.sub("", text)
    for line in outside.splitlines():
        command = re.search(r"numpy-transformer train[^#`]*", line)
        if command and regenerate.trained_preset(command.group(0).strip()):
            yield regenerate.trained_preset(command.group(0).strip()), line
        row = re.match(r"\| `([\w-]+)` ", line)
        if row:
            yield row.group(1), line


def test_the_help_and_the_docs_give_a_preset_the_duration_measured_for_it(monkeypatch):
    from numpy_transformer.training.presets import about, measured_duration
    measured = json.loads(regenerate.DURATIONS.read_text(encoding="utf-8"))["presets"]
    monkeypatch.setenv("COLUMNS", "100000")
    status, out, err = run_main(["train", "--help"])
    options = out[out.index("options:"):]
    presets_help = options[options.index("--preset"):options.index("--resume")]
    from numpy_transformer.training.presets import PRESETS
    for preset in measured:
        assert f"({measured_duration(preset)})" in presets_help, preset
        assert not DURATION.search(PRESETS[preset].description), f"{preset}: a duration typed in by hand"
    stated = {name: about(measured[name]) if name in measured else "".join(DURATION.findall(preset.description))
              for name, preset in PRESETS.items()}
    for page in regenerate.PAGES:
        for preset, line in printed_preset_lines((REPO / page).read_text(encoding="utf-8")):
            for phrase in DURATION.findall(line):
                assert phrase == stated[preset], \
                    f"{page}: {line.strip()!r} gives {phrase!r}; train --help gives {preset} {stated[preset]!r}"
