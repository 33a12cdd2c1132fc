"""A model.safetensors from elsewhere is untrusted (numpy_transformer/interop/pretrained.py,
`SafetensorsWeights`): each hostile file below, put into a tiny GPT-2 folder, makes `generate`
exit with status 1 and one line naming the file, never a traceback and never a model built from
the wrong bytes; and a fuzz of many broken files either loads the very weights the file holds or
fails with one ValueError naming the file."""
import json

import numpy as np
import pytest

from numpy_transformer.interop.pretrained import SafetensorsWeights, load_hugging_face
from numpy_transformer.training.output_folder import OUTPUT_MANIFEST
from run_helpers import assert_clear_error, run_main

WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    """A GPT-2 folder written by this project's exporter: (folder, header, data) of its
    model.safetensors, the header a dict in the file's order. The export's manifest is removed,
    as a folder from the Hub has none: the reader's own checks are under test here, not the
    manifest's record of each file (tests/test_untrusted_writes.py tests that)."""
    from numpy_transformer.config import TransformerConfig
    from numpy_transformer.data.tokenizer import train_text_tokenizer
    from numpy_transformer.interop.export import save_gpt2
    from numpy_transformer.language_model import DecoderOnlyTransformer

    tokenizer = train_text_tokenizer(["the cat sat on the mat .", "a dog ."] * 3, "en", min_frequency=1)
    config = TransformerConfig.decoder_only(tokenizer.vocab_size, d_model=8, n_heads=2, d_ff=16, n_layers=1,
                                            max_len=16, pad_id=tokenizer.pad_id)
    folder = tmp_path_factory.mktemp("gpt2")
    save_gpt2(DecoderOnlyTransformer(config, np.random.default_rng(0)), tokenizer, folder)
    (folder / OUTPUT_MANIFEST).unlink()
    return (folder, *split_file((folder / WEIGHTS).read_bytes()))


def split_file(raw):
    """(header as a dict in the file's order, data bytes) of a well-formed safetensors file."""
    length = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8:8 + length]), raw[8 + length:]


def joined(header, data, length=None):
    """A safetensors file: the 8-byte length (`length` when given, else the header's), the
    header (a dict or list, written as JSON, or bytes as they are), the data."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return (len(text) if length is None else length).to_bytes(8, "little") + text + data


def hostile_folder(tmp_path, gpt2_folder, raw):
    """A copy of the GPT-2 folder whose model.safetensors is `raw`."""
    folder = tmp_path / "hostile"
    folder.mkdir()
    for path in gpt2_folder[0].iterdir():
        (folder / path.name).write_bytes(raw if path.name == WEIGHTS else path.read_bytes())
    return folder


def entries(header):
    return [(name, entry) for name, entry in header.items() if name != "__metadata__"]


def with_entry(header, index, **changes):
    """The header with the index-th tensor's entry changed."""
    name, entry = entries(header)[index]
    return {**header, name: {**entry, **changes}}


def offsets_into_the_header(header, data):
    begin, end = entries(header)[0][1]["data_offsets"]
    return joined(with_entry(header, 0, data_offsets=[begin - 64, end - 64]), data)


def overlapping_ranges(header, data):
    """ln_f's bias given the bytes of ln_f's weight: both of shape (8,), one range."""
    weight, bias = header["transformer.ln_f.weight"], header["transformer.ln_f.bias"]
    return joined({**header, "transformer.ln_f.bias": {**bias, "data_offsets": weight["data_offsets"]}}, data)


def a_gap_between_tensors(header, data):
    end = entries(header)[0][1]["data_offsets"][1]
    moved = {name: {**entry, "data_offsets": [offset + 8 for offset in entry["data_offsets"]]}
             for name, entry in entries(header)[1:]}
    return joined({**header, **moved}, data[:end] + bytes(8) + data[end:])


def a_name_twice_with_the_same_entry(header, data):
    text = json.dumps(header)
    name, entry = entries(header)[-1]
    return joined(f'{text[:-1]}, {json.dumps(name)}: {json.dumps(entry)}}}'.encode(), data)


def a_name_twice_with_other_bytes(header, data):
    """ln_f's bias renamed as its weight (both of shape (8,)): the library would keep the
    second's bytes under the first's name, were the first's range not left uncovered."""
    text = json.dumps(header).replace('"transformer.ln_f.bias"', '"transformer.ln_f.weight"')
    return joined(text.encode(), data)


def a_json_list(header, data):
    return joined([entry for _, entry in entries(header)], data)


def an_entry_without_dtype(header, data):
    name, entry = entries(header)[0]
    return joined({**header, name: {key: value for key, value in entry.items() if key != "dtype"}}, data)


def a_string_shape(header, data):
    return joined(with_entry(header, 0, shape=",".join(map(str, entries(header)[0][1]["shape"]))), data)


def a_header_length_of_2_to_the_64_minus_1(header, data):
    return joined(header, data, length=2 ** 64 - 1)


def a_truncated_file(header, data):
    return joined(header, data[:-5])


def a_byte_count_that_is_not_shape_times_dtype(header, data):
    shape = entries(header)[0][1]["shape"]
    return joined(with_entry(header, 0, shape=[shape[0] - 1, *shape[1:]]), data)


def nan_weights(header, data):
    begin = entries(header)[2][1]["data_offsets"][0]
    return joined(header, data[:begin] + np.float32(np.nan).tobytes() + data[begin + 4:])


def an_infinite_weight(header, data):
    begin = entries(header)[0][1]["data_offsets"][0]
    return joined(header, data[:begin] + np.float32(-np.inf).tobytes() + data[begin + 4:])


def a_weight_under_two_names(header, data):
    """transformer.ln_f.bias and ln_f.bias: the same weight once the prefix is dropped."""
    entry = header["transformer.ln_f.bias"]
    size = entry["data_offsets"][1] - entry["data_offsets"][0]
    end = len(data)
    return joined({**header, "ln_f.bias": {**entry, "data_offsets": [end, end + size]}},
                  data + data[entry["data_offsets"][0]:entry["data_offsets"][1]])


def a_missing_tensor(header, data):
    """The last tensor of the file left out (with its bytes)."""
    name, entry = entries(header)[-1]
    return joined({key: value for key, value in header.items() if key != name}, data[:entry["data_offsets"][0]])


def a_shape_the_config_does_not_give(header, data):
    """c_attn's weight, (8, 24), stored as (24, 8): the same bytes, the wrong layout."""
    name = next(name for name, _ in entries(header) if name.endswith("c_attn.weight"))
    return joined({**header, name: {**header[name], "shape": header[name]["shape"][::-1]}}, data)


def a_layer_the_config_does_not_give(header, data):
    """Layer 0's c_proj bias also stored as layer 1's: the weights of a deeper model."""
    entry, end = header["transformer.h.0.mlp.c_proj.bias"], len(data)
    return joined({**header, "transformer.h.1.mlp.c_proj.bias": {**entry, "data_offsets": [end, end + 32]}},
                  data + data[slice(*entry["data_offsets"])])


HOSTILE = {  # how the file is made: what the one line says
    offsets_into_the_header: "invalid JSON in header: invalid value: integer `-",
    overlapping_ranges: "invalid offset for tensor",
    a_gap_between_tensors: "invalid offset for tensor",
    a_name_twice_with_the_same_entry: "the header names transformer.h.0.mlp.c_proj.bias more than once",
    a_name_twice_with_other_bytes: "invalid offset for tensor `transformer.ln_f.weight`",
    a_json_list: "invalid type: sequence",
    an_entry_without_dtype: "missing field `dtype`",
    a_string_shape: "invalid type: string",
    a_header_length_of_2_to_the_64_minus_1: "header too large",
    a_truncated_file: "file not fully covered",
    a_byte_count_that_is_not_shape_times_dtype: "invalid shape, data type, or offset for tensor",
    nan_weights: "holds NaN or infinite values",
    an_infinite_weight: "the tensor transformer.wte.weight holds NaN or infinite values",
    a_weight_under_two_names: "the tensors transformer.ln_f.bias and ln_f.bias are the same weight ln_f.bias",
    a_missing_tensor: "no tensor h.0.mlp.c_proj.bias",
    a_shape_the_config_does_not_give: r"c_attn.weight has shape \(24, 8\); config.json asks for \(8, 24\)",
    a_layer_the_config_does_not_give: r"the tensor transformer.h.1.mlp.c_proj.bias is of layer 1, but config.json's "
                                      r"model has 1 layer\(s\)",
}


@pytest.mark.parametrize("make", HOSTILE, ids=[make.__name__ for make in HOSTILE])
def test_a_hostile_safetensors_file_is_one_line_naming_it(tmp_path, gpt2_folder, make):
    folder = hostile_folder(tmp_path, gpt2_folder, make(*gpt2_folder[1:]))
    status, out, err = run_main(["generate", "--checkpoint", folder, "--max-new-tokens", "2", "the cat"])
    assert_clear_error(status, err, HOSTILE[make])
    assert err.count("\n") == 1 and f"{folder / WEIGHTS}: " in err, err
    assert out == ""


def test_the_unchanged_folder_loads(gpt2_folder):
    status, out, err = run_main(["generate", "--checkpoint", gpt2_folder[0], "--max-new-tokens", "2", "the cat"])
    assert status == 0 and out.startswith("the cat"), err


def file_tensors(header, data):
    """{name: array} of a well-formed file, decoded here from its bytes."""
    return {name: np.frombuffer(data[slice(*entry["data_offsets"])], "<f4").reshape(entry["shape"])
            for name, entry in entries(header)}


def outcome(path):
    """{name: array} of every tensor `SafetensorsWeights` reads from `path`, or the ValueError."""
    try:
        weights = SafetensorsWeights(path)
        return {name: weights[name] for name in weights.entries}
    except ValueError as error:
        assert type(error) is ValueError and str(error).startswith(f"{path}: ") and "\n" not in str(error), error
        return error


RANDOM_JSON = [None, True, -1, 0, 1, 7, 2 ** 64, 2 ** 70, -2 ** 63, 1.5, "F32", "F64", "BF16", "I8", "", "x" * 300,
               [], [0], [8], [-1, 8], [0, 0], [2 ** 63, 2], [1, "2"], {}, {"dtype": "F32"}, [[8]]]


def broken_files(header, data, rng, count):
    """(raw bytes, expected {name: array} or None when the file must be refused or load as it
    is) of `count` broken files: truncations, byte flips in the header and in the data, and
    random JSON values in each field of each entry."""
    raw = joined(header, data)
    start = len(raw) - len(data)
    names = [name for name, _ in entries(header)]
    for case in range(count):
        kind = case % 4
        if kind == 0:
            yield raw[:rng.integers(0, len(raw))], None
        elif kind == 1:
            at = rng.integers(0, start)
            yield raw[:at] + bytes([raw[at] ^ (1 << rng.integers(8))]) + raw[at + 1:], None
        elif kind == 2:
            at = rng.integers(start, len(raw))
            flipped = raw[:at] + bytes([raw[at] ^ (1 << rng.integers(8))]) + raw[at + 1:]
            yield flipped, file_tensors(header, flipped[start:])
        else:
            name = names[rng.integers(len(names))]
            field = ["dtype", "shape", "data_offsets"][rng.integers(3)]
            value = RANDOM_JSON[rng.integers(len(RANDOM_JSON))]
            yield joined({**header, name: {**header[name], field: value}}, data), None


def test_broken_files_load_exactly_what_they_hold_or_fail_with_one_line(tmp_path, gpt2_folder):
    _, header, data = gpt2_folder
    original = file_tensors(header, data)
    path, refused = tmp_path / WEIGHTS, 0
    for raw, expected in broken_files(header, data, np.random.default_rng(0), 800):
        path.write_bytes(raw)
        result = outcome(path)
        if isinstance(result, ValueError):
            refused += 1
            if expected is not None:                   # a flipped data byte: refused only for a non-finite value
                assert not all(np.isfinite(a).all() for a in expected.values()), result
            continue
        expected = original if expected is None else expected      # a flip in a name may rename a tensor
        assert len(result) == len(expected)
        for (name, array), value in zip(result.items(), expected.values()):
            np.testing.assert_array_equal(array, value, err_msg=name)
    assert refused > 300                                     # most broken files are refused, not all


def test_broken_files_never_build_a_model_from_wrong_weights(tmp_path, gpt2_folder):
    """The same header faults through the whole loader (config.json's shapes included): the model
    either holds the weights of the unchanged file or one ValueError names the file."""
    folder, header, data = gpt2_folder
    reference = {name: p.data for name, p in load_hugging_face(folder).named_parameters()}
    copy = hostile_folder(tmp_path, gpt2_folder, joined(header, data))
    rng = np.random.default_rng(1)
    for raw, expected in broken_files(header, data, rng, 200):
        if expected is not None:
            continue
        (copy / WEIGHTS).write_bytes(raw)
        try:
            model = load_hugging_face(copy)
        except ValueError as error:
            assert type(error) is ValueError and str(error).startswith(f"{copy / WEIGHTS}: "), error
            assert "\n" not in str(error), error
            continue
        for name, parameter in model.named_parameters():
            np.testing.assert_array_equal(parameter.data, reference[name], err_msg=name)


def bert_folder(folder, weights_of=lambda name, array: array):
    """A tiny BERT folder (config.json, model.safetensors, tokenizer.json) written here;
    weights_of(name, array) may change a tensor on its way into the file."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat"]
    tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(words[:5])
    tokenizer.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                             special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tokenizer.save(str(folder / "tokenizer.json"))
    v, d, d_ff = len(words), 8, 16
    (folder / "config.json").write_text(json.dumps({
        "model_type": "bert", "vocab_size": v, "hidden_size": d, "num_attention_heads": 2, "intermediate_size": d_ff,
        "num_hidden_layers": 1, "max_position_embeddings": 16, "hidden_act": "gelu"}))
    shapes = {"bert.embeddings.word_embeddings.weight": (v, d), "bert.embeddings.position_embeddings.weight": (16, d),
              "bert.embeddings.token_type_embeddings.weight": (2, d), "cls.predictions.transform.dense.weight": (d, d),
              "cls.predictions.bias": (v,)}
    layer = "bert.encoder.layer.0"
    shapes.update({f"{layer}.{part}.weight": (d, d) for part in ("attention.self.query", "attention.self.key",
                                                                  "attention.self.value", "attention.output.dense")})
    shapes.update({f"{layer}.intermediate.dense.weight": (d_ff, d), f"{layer}.intermediate.dense.bias": (d_ff,),
                   f"{layer}.output.dense.weight": (d, d_ff)})
    for name in ("bert.embeddings.LayerNorm", "cls.predictions.transform.LayerNorm", "cls.predictions.transform.dense",
                 f"{layer}.attention.output.LayerNorm", f"{layer}.output.LayerNorm", f"{layer}.output.dense",
                 *(f"{layer}.attention.self.{part}" for part in ("query", "key", "value")),
                 f"{layer}.attention.output.dense"):
        shapes.setdefault(f"{name}.weight", (d,))
        shapes[f"{name}.bias"] = (d,)
    rng = np.random.default_rng(0)
    save_file({name: weights_of(name, rng.normal(0, 0.1, shape).astype(np.float32)) for name, shape in shapes.items()},
              str(folder / WEIGHTS))
    return folder


def test_nan_weights_in_a_bert_folder_are_refused_by_fill_mask(tmp_path):
    (tmp_path / "good").mkdir()
    (tmp_path / "nan").mkdir()
    status, out, err = run_main(["fill-mask", "--checkpoint", bert_folder(tmp_path / "good"), "the [MASK] sat"])
    assert status == 0 and len(out.splitlines()) == 5, err

    def with_nan(name, array):
        if name.endswith("intermediate.dense.weight"):
            array[3, 1] = np.nan
        return array

    folder = bert_folder(tmp_path / "nan", with_nan)
    status, _, err = run_main(["fill-mask", "--checkpoint", folder, "the [MASK] sat"])
    assert_clear_error(status, err, f"{folder / WEIGHTS}: the tensor bert.encoder.layer.0.intermediate.dense.weight "
                                    f"holds NaN or infinite values")


def test_a_one_row_position_table_is_not_broadcast_over_the_positions(tmp_path):
    folder = bert_folder(tmp_path, lambda name, array: array[:1] if "position_embeddings" in name else array)
    status, _, err = run_main(["fill-mask", "--checkpoint", folder, "the [MASK] sat"])
    assert_clear_error(status, err, r"position_embeddings.weight has shape \(1, 8\); config.json asks for \(16, 8\)")


def test_an_exported_folder_is_read_with_the_same_checks(tmp_path):
    from numpy_transformer.config import TransformerConfig
    from numpy_transformer.interop.export import load_torch, save_torch
    from numpy_transformer.language_model import DecoderOnlyTransformer

    config = TransformerConfig.decoder_only(12, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=8,
                                            positional="learned")
    save_torch(DecoderOnlyTransformer(config, np.random.default_rng(0)), tmp_path)
    (tmp_path / OUTPUT_MANIFEST).unlink()                  # the reader's checks, not the manifest's
    header, data = split_file((tmp_path / WEIGHTS).read_bytes())
    (tmp_path / WEIGHTS).write_bytes(nan_weights(header, data))
    with pytest.raises(ValueError, match="holds NaN or infinite values"):
        load_torch(tmp_path)
    (tmp_path / WEIGHTS).write_bytes(a_gap_between_tensors(header, data))
    with pytest.raises(ValueError, match="not a valid safetensors file"):
        load_torch(tmp_path)
