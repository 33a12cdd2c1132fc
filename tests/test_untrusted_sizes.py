"""Files from elsewhere are untrusted (issue 27, classes 3 and 7): sizes are bounded before
anything is allocated, non-finite numbers never pass silently, and no run-folder JSON, however
broken, gives a traceback.

Every test breaks a copy of the run folders of tests/data/checkpoints_0_1 and runs the command
in-process (`run_main`): exit 1 and one line naming the file and what to do, or a correct output.
"""
import json
import random
import re
import shutil
import struct
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from numpy_transformer.decoding import beam_search
from numpy_transformer.inference import checked_scores
from numpy_transformer.sampling import next_token_distribution, sample_next
from numpy_transformer.training.checkpoint import CheckpointError, load_checkpoint
from run_helpers import run_main

FIXTURES = Path(__file__).parent / "data" / "checkpoints_0_1"
COMMANDS = {"translation": ["translate", "the man eats ."], "lm": ["generate", "--max-new-tokens", "3", "the"],
            "mlm": ["fill-mask", "the [MASK] ."]}


def run_folder(tmp_path, kind):
    directory = tmp_path / kind
    shutil.copytree(FIXTURES / kind, directory)
    return directory


def run_command(directory, kind, *options):
    command, *arguments = COMMANDS[kind]
    return run_main([command, "--checkpoint", directory, *options, *arguments])


def edit_json(path, **fields):
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def assert_one_line(status, err):
    """Exit 0, or exit 1 with exactly one error line (notes about the data, and the line saying
    which weights were loaded, aside)."""
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if not line.startswith(("note: ", "model: "))]
    if status == 0:
        assert errors == [], err
    else:
        assert status == 1 and len(errors) == 1 and ": error: " in errors[0], err


def assert_refused(status, err, message):
    """Exit 1 with one error line that matches `message`."""
    assert status == 1
    assert_one_line(status, err)
    assert re.search(message, err), err


# Class 3: sizes bounded before they are allocated
# what the refusal compares with: the machine's memory, or a container's, job's or service's limit
ANY_MEMORY = r"(this machine's|the [\d,.]+ GiB this process may still use)"


@pytest.mark.parametrize("field", ["n_encoder_layers", "d_model", "d_ff", "max_len"])
def test_a_model_json_asking_for_more_than_any_memory_is_refused_before_building(tmp_path, field):
    directory = run_folder(tmp_path, "translation")
    edit_json(directory / "model.json", **{field: 2 * 10**9 if field == "d_model" else 10**12})
    status, _, err = run_command(directory, "translation")
    assert_refused(status, err, r"model\.json: the model it describes would need [\d,.]+ GiB, more than "
                                    + ANY_MEMORY)


def npy_member(header, data=b""):
    """The bytes of an .npy file of version 1.0 with `header` (a dict) and `data` after it."""
    text = repr(header).encode("latin1")
    text += b" " * (-(len(text) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


def replace_member(path, name, content, compression=zipfile.ZIP_STORED):
    """Rewrite the archive at `path` with member `name` (".npy" added) holding `content`."""
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    members[name + ".npy"] = content
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data, compress_type=compression)


WEIGHT = "model/encoder.embedding.weight"


def test_a_member_whose_header_declares_a_huge_shape_is_refused_before_its_data_is_read(tmp_path):
    directory = run_folder(tmp_path, "translation")
    replace_member(directory / "checkpoint.npz", WEIGHT,
                   npy_member({"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6)}))
    status, _, err = run_command(directory, "translation")
    assert_refused(status, err, r"checkpoint\.npz: the weights do not fit the configuration in .*model\.json: "
                                    r"member 'model/encoder\.embedding\.weight' declares float32 \(1000000, 1000000\)")


def test_a_member_that_unpacks_past_its_declared_size_is_refused_without_unpacking_it(tmp_path):
    directory = run_folder(tmp_path, "translation")
    shape = np.load(directory / "checkpoint.npz")[WEIGHT].shape
    data = np.zeros(shape, np.float32).tobytes() + bytes(64 * 2**20)            # 64 MiB more than declared
    replace_member(directory / "checkpoint.npz", WEIGHT,
                   npy_member({"descr": "<f4", "fortran_order": False, "shape": shape}, data), zipfile.ZIP_DEFLATED)
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match=r"member 'model/encoder\.embedding\.weight\.npy': its header "
                                                  r"declares [\d,]+ bytes of data .* but the archive says it "
                                                  r"unpacks to"):
            load_checkpoint(directory)
        assert tracemalloc.get_traced_memory()[1] < 16 * 2**20
    finally:
        tracemalloc.stop()


def test_a_member_holding_python_objects_is_refused(tmp_path):
    directory = run_folder(tmp_path, "translation")
    replace_member(directory / "checkpoint.npz", WEIGHT,
                   npy_member({"descr": "|O", "fortran_order": False, "shape": (2,)}, b"\x80\x04N."))
    status, _, err = run_command(directory, "translation")
    assert_refused(status, err, r"member 'model/encoder\.embedding\.weight\.npy': it holds Python objects")


def test_a_member_the_model_does_not_have_is_refused(tmp_path):
    directory = run_folder(tmp_path, "translation")
    replace_member(directory / "checkpoint.npz", "model/extra",
                   npy_member({"descr": "<f4", "fortran_order": False, "shape": (10**9,)}))
    status, _, err = run_command(directory, "translation")
    assert_refused(status, err, r"member 'model/extra' declares float32 \(1000000000,\), the model has no such entry")


def test_a_beam_that_cannot_fit_in_memory_is_refused_before_decoding():
    status, _, err = run_command(FIXTURES / "translation", "translation", "--beam", str(10**13))
    assert_refused(status, err, r"decoding 1 sentences with 10000000000000 beams each would need [\d,.]+ GiB, "
                                    r"more than " + ANY_MEMORY + r".*: choose a smaller --beam")


def test_beam_search_refuses_a_beam_that_cannot_fit_before_allocating_it():
    model = load_checkpoint(FIXTURES / "translation").model
    with pytest.raises(ValueError, match="choose a smaller --beam"):
        beam_search(model, np.array([[4, 5, 2]]), sos_id=2, eos_id=3, beam_size=10**13)


# Class 7: non-finite numbers

def test_a_temperature_so_small_that_the_logits_overflow_is_the_greedy_limit():
    logits = np.array([[1.0, 3.0, -2.0, 3.0], [0.5, -1.0, 2.0, -np.inf]], dtype=np.float32)
    p = next_token_distribution(logits, temperature=1e-310)
    np.testing.assert_array_equal(p, [[0, 0.5, 0, 0.5], [0, 0, 1, 0]])       # ties share the mass
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((50, 30)).astype(np.float32)
    np.testing.assert_array_equal(sample_next(logits, rng, temperature=1e-310), logits.argmax(axis=-1))


def test_generate_at_a_vanishing_temperature_prints_the_greedy_continuation():
    greedy = run_command(FIXTURES / "lm", "lm", "--temperature", "0")
    assert greedy[0] == 0
    assert run_command(FIXTURES / "lm", "lm", "--temperature", "1e-310")[:2] == greedy[:2]


def test_scores_that_are_not_finite_are_a_clear_error():
    checked_scores(np.array([[0.0, -np.inf]]), "logits")                     # −∞: a token never chosen
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="the model's logits are not finite"):
            checked_scores(np.array([[0.0, bad]]), "logits")


@pytest.mark.parametrize("kind, command", [("translation", None), ("lm", None), ("mlm", None),
                                           ("translation", "evaluate"), ("lm", "evaluate")])
def test_weights_that_overflow_the_scores_stop_with_one_line(tmp_path, kind, command):
    directory = run_folder(tmp_path, kind)
    with np.load(directory / "checkpoint.npz") as archive:
        arrays = {key: np.full_like(value, 3e38) if key.startswith("model/") else value
                  for key, value in archive.items()}
    np.savez(directory / "checkpoint.npz", **arrays)
    if command is None:
        status, _, err = run_command(directory, kind)
    else:
        status, _, err = run_main([command, "--checkpoint", directory, "--quiet", "--samples", "1"])
    assert_refused(status, err, r"the model's (logits|log-probabilities) are not finite \(NaN or \+inf\): its "
                                    r"weights are so large")


# Fuzzing the run folder's JSON files

JSON_VALUES = [None, True, False, 0, -1, 1, 3, 2**62, -(2**62), 1e308, -0.5, float("nan"), "", "x", "en-it",
               [], [1, "a"], {}, {"a": 1}]


def fuzzed_texts(text, rng):
    """Broken versions of a JSON file's text: each field set to random JSON values, the text
    cut short, bytes overwritten, the wrong kind of document."""
    fields = json.loads(text)
    for field in fields:
        for value in rng.sample(JSON_VALUES, 2):
            yield json.dumps({**fields, field: value})
    data = text.encode()
    for _ in range(6):
        yield data[:rng.randrange(len(data))]
    for _ in range(6):
        flipped = bytearray(data)
        flipped[rng.randrange(len(data))] = rng.randrange(256)
        yield bytes(flipped)
    yield from (b"[]", b"null", b'"text"', b"\xff\xfe", json.dumps({"a": fields}))


@pytest.mark.parametrize("kind", ["translation", "lm"])
@pytest.mark.parametrize("name", ["model.json", "training.json", "data.json"])
def test_no_broken_run_folder_json_gives_a_traceback(tmp_path, kind, name):
    directory = run_folder(tmp_path, kind)
    original = (directory / name).read_text()
    for number, text in enumerate(fuzzed_texts(original, random.Random(f"{kind}/{name}"))):
        (directory / name).write_bytes(text if isinstance(text, bytes) else text.encode())
        status, _, err = run_command(directory, kind)
        assert_one_line(status, err)
