"""JSON from elsewhere is parsed within bounds (issue 38, class 6): whatever a run folder's
model.json, training.json, data.json or tokenizer, a Hugging Face folder's config.json or
tokenizer.json, or a checkpoint's training state hold, nested 100,000 deep, a number of 400
digits, 1e400 or NaN, the command ends with one line naming the file and the field, never a
RecursionError or an OverflowError (`numpy_transformer/bounded_json.py`)."""
import io
import json
import os
import re
import zipfile

import numpy as np
import pytest

from numpy_transformer.bounded_json import MAX_DEPTH, nesting_depth, parse_json, read_json
from numpy_transformer.config import TransformerConfig
from run_helpers import assert_clear_error, run_main
from test_untrusted_hf_metadata import bert, gpt2, fill_mask, generate  # noqa: F401 (fixtures)
from test_untrusted_sizes import run_command, run_folder

DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "1" + "0" * 400


# The parser alone

@pytest.mark.parametrize("text, depth", [("1", 0), ("[]", 1), ('{"a": [1, {"b": 2}]}', 3),
                                         ('["[[[", "\\"]]]{{"]', 1), ('{"a": "}}}}"}', 1), (DEEP, 100_000)])
def test_the_nesting_depth_counts_brackets_outside_strings_without_recursion(text, depth):
    assert nesting_depth(text) == depth


@pytest.mark.parametrize("text, message", [
    (DEEP, r"^f\.json: arrays and objects nested 100,000 levels deep, past the 64 this project reads: "),
    ('{"a": ' * 65 + "1" + "}" * 65, r"nested 65 levels deep"),
    ('{"d_model": ' + HUGE + "}", r"^f\.json: d_model: 100000000000…\(401 digits\) is outside what a number"),
    ('{"a": {"b": [1, -' + HUGE + "]}}", r"^f\.json: a\.b\[1\]: -10000000000…\(401 digits\)"),
    ('{"lr": 1e400}', r"^f\.json: lr: inf is outside"),
    ('{"x": [NaN]}', r"^f\.json: x\[0\]: nan is outside"),
    ('{"x": -Infinity}', r"^f\.json: x: -inf is outside"),
    (b'{"x": "\xff"}', r"^f\.json: not UTF-8 JSON \(invalid start byte at byte 7\)"),
    ('{"x": ', r"^f\.json: not UTF-8 JSON \(Expecting value"),
])
def test_hostile_json_is_one_value_error_naming_the_place_and_the_field(text, message):
    with pytest.raises(ValueError, match=message):
        parse_json(text, "f.json")


def test_what_real_files_hold_is_read_as_json_reads_it():
    """transformers writes int(1e30) as model_max_length; deep but legal nesting; strings full of
    brackets; a log line's NaN where non-finite values are allowed."""
    deepest = json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    text = json.dumps({"model_max_length": int(1e30), "nested": deepest,
                       "text": "[[[{{{" * 1000, "e": 1e-300, "big": 2**63})
    assert parse_json(text, "f") == json.loads(text)
    assert np.isnan(parse_json('{"loss": NaN}', "f", finite=False)["loss"])
    with pytest.raises(ValueError, match=r"x: 100000000000…\(401 digits\)"):
        parse_json('{"loss": NaN, "x": ' + HUGE + "}", "f", finite=False)


def test_a_file_too_large_or_not_regular_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.json"
    path.write_text("[" + "0," * 1000 + "0]")
    assert read_json(path, max_bytes=5000) == [0] * 1001
    with pytest.raises(ValueError, match=r"big\.json: larger than the 1,000 bytes a file of this kind takes"):
        read_json(path, max_bytes=1000)
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"pipe\.json: not a regular file \(a named pipe \(FIFO\)\)"):
        read_json(fifo)                 # refused at once: opening a FIFO would wait for a writer
    with pytest.raises(ValueError, match=r"not a regular file \(a folder\)"):
        read_json(tmp_path)


def test_a_configuration_bounds_every_integer_to_64_bits_and_names_the_field():
    config = json.loads(TransformerConfig(10, 10, d_model=8, n_heads=2, d_ff=8, n_encoder_layers=1,
                                          n_decoder_layers=1).to_json())
    for field, value in (("d_model", 2**63), ("attention_options", {"window": -2**70})):
        with pytest.raises(ValueError, match=rf"model\.json: {field}.* must be an integer of 64 bits"):
            TransformerConfig.from_json(json.dumps({**config, field: value}), "model.json")


# Through the commands: a run folder

HOSTILE = {"deep": DEEP, "huge": HUGE, "infinite": "1e400", "nan": "NaN"}


def hostile_text(original, case, field):
    """The JSON text `original` with `field` made hostile (`HOSTILE[case]`): nested 100,000 deep,
    401 digits, 1e400, NaN."""
    values = json.loads(original)
    values[field] = "@"
    return json.dumps(values).replace('"@"', HOSTILE[case])


@pytest.mark.parametrize("case", HOSTILE)
@pytest.mark.parametrize("name, field", [("model.json", "d_model"), ("training.json", "lr"),
                                         ("data.json", "max_len")])
def test_a_run_folder_json_nested_deep_or_holding_a_huge_number_is_one_line_naming_the_file(
        tmp_path, case, name, field):
    directory = run_folder(tmp_path, "translation")
    (directory / name).write_text(hostile_text((directory / name).read_text(), case, field))
    status, _, err = run_command(directory, "translation")
    named = r"nested 100,001 levels deep" if case == "deep" else rf"{field}: .* is outside"
    assert_clear_error(status, err, rf"{name}: not a valid \w+ configuration \(.*{named}")


@pytest.mark.parametrize("kind", ["translation", "lm"])
def test_a_tokenizer_nested_deep_or_huge_is_one_line_naming_it(tmp_path, kind):
    directory = run_folder(tmp_path, kind)
    (directory / "tokenizer_en.json").write_text(DEEP)
    status, _, err = run_command(directory, kind)
    assert_clear_error(status, err, r"tokenizer_en\.json: not a tokenizer file: arrays and objects nested 100,000")
    (directory / "tokenizer_en.json").write_text('{"version": ' + HUGE + "}")
    status, _, err = run_command(directory, kind)
    assert_clear_error(status, err, r"tokenizer_en\.json: not a tokenizer file: version: 1000")


def test_a_checkpoint_state_nested_deep_is_one_line_naming_the_archive(tmp_path):
    directory = run_folder(tmp_path, "translation")
    path = directory / "checkpoint.npz"
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    deep = "[" * 2000 + "]" * 2000
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            if member == "state.npy":
                buffer = io.BytesIO()
                np.save(buffer, np.asarray(deep))
                data = buffer.getvalue()
            archive.writestr(member, data)
    status, _, err = run_command(directory, "translation")
    assert_clear_error(status, err, r"checkpoint\.npz: its 'state' entry: arrays and objects nested 2,000 levels")


# Through the commands: a Hugging Face folder

@pytest.mark.parametrize("case", HOSTILE)
def test_a_hugging_face_config_nested_deep_or_holding_a_huge_number_is_one_line(bert, gpt2, case):  # noqa: F811
    for folder, field, command in ((bert, "hidden_size", fill_mask), (gpt2, "n_embd", generate)):
        path = folder / "config.json"
        original = path.read_text()
        path.write_text(hostile_text(original, case, field))
        named = "nested 100,001 levels deep" if case == "deep" else rf"{field}: .* is outside"
        status, _, err = command(folder)
        assert_clear_error(status, err, rf"config\.json: .*{named}")
        path.write_text(original)


def test_a_hugging_face_tokenizer_nested_deep_is_one_line(bert):  # noqa: F811
    (bert / "tokenizer.json").write_text(DEEP)
    status, _, err = fill_mask(bert)
    assert_clear_error(status, err, r"tokenizer\.json: arrays and objects nested 100,000 levels deep")


def test_a_hugging_face_tokenizer_config_with_a_huge_number_is_one_line_naming_the_field(bert):  # noqa: F811
    (bert / "tokenizer_config.json").write_text('{"sep_token": "[SEP]", "model_max_length": ' + HUGE + "}")
    status, _, err = fill_mask(bert)
    assert_clear_error(status, err, r"tokenizer_config\.json: model_max_length: 100000000000…\(401 digits\)")


@pytest.mark.parametrize("value, message", [(DEEP, r"arrays and objects nested 100,000 levels deep"),
                                            ('{"window": ' + HUGE + "}", r"window: 100000000000…\(401 digits\)")])
def test_a_json_option_on_the_command_line_is_bounded_too(value, message):
    status, _, err = run_main(["train", "--attention", "window", "--attention-options", value])
    assert status == 2 and "Traceback" not in err
    assert re.search(rf"argument --attention-options: .*{message}", err), err
