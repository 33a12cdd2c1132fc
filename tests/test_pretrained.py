"""Pretrained checkpoints without the network: a Hub name that is neither a folder here nor
cached gives one clear error within seconds naming the ways on, and a folder is used as it is.
(The exactness against `transformers` is in tests/test_torch_pretrained.py.)"""
import time

import huggingface_hub.constants
import pytest

from numpy_transformer.data import DataUnavailableError
from numpy_transformer.data.hub import model_folder
from run_helpers import assert_clear_error, run_main

CLOSED_PORT = "http://127.0.0.1:9"


@pytest.fixture
def unreachable_hub(monkeypatch, tmp_path):
    """Every request to the Hub goes to a closed local port, and the cache is an empty folder."""
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", CLOSED_PORT)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))


def test_a_folder_is_its_own_model_folder(tmp_path):
    assert model_folder(str(tmp_path)) == tmp_path


def test_an_uncached_hub_name_offline_is_one_error_within_seconds(unreachable_hub, tmp_path):
    start = time.perf_counter()
    with pytest.raises(DataUnavailableError) as failure:
        model_folder("gpt2", cache_dir=str(tmp_path / "cache"))
    assert time.perf_counter() - start < 10
    message = str(failure.value)
    assert message.startswith(f"gpt2 is not a folder here, and the Hub model of that name cannot be loaded: the "
                              f"Hugging Face Hub ({CLOSED_PORT}) cannot be reached")
    for hint in ("--checkpoint DIR holding config.json, model.safetensors and tokenizer.json", "HF_HUB_CACHE",
                 "HF_HUB_OFFLINE=1", "huggingface_hub.snapshot_download('gpt2')", "numpy-transformer train --task lm"):
        assert hint in message, hint


def test_offline_mode_says_so(unreachable_hub, monkeypatch, tmp_path):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(DataUnavailableError, match=r"offline mode is on \(HF_HUB_OFFLINE\)"):
        model_folder("bert-base-uncased", cache_dir=str(tmp_path / "cache"))


def test_generate_and_fill_mask_with_an_unreachable_hub_name_are_one_clear_line(unreachable_hub):
    for command in (["generate", "--checkpoint", "gpt2", "Hello"],
                    ["fill-mask", "--checkpoint", "bert-base-uncased", "a [MASK]"]):
        start = time.perf_counter()
        status, _, err = run_main(command)
        assert time.perf_counter() - start < 10
        assert_clear_error(status, err, "is not a folder here, and the Hub model of that name cannot be loaded")


def test_what_counts_as_a_hub_name(tmp_path):
    from numpy_transformer.interop.pretrained import names_pretrained

    assert names_pretrained("gpt2") and names_pretrained("openai-community/gpt2")
    assert not names_pretrained(str(tmp_path / "missing" / "run"))           # a path: the run folder's error
    assert not names_pretrained(str(tmp_path))                                # a folder without config.json
    (tmp_path / "config.json").write_text("{}")
    assert names_pretrained(str(tmp_path))


def write_safetensors(path, tensors):
    """A safetensors file written by hand: {name: (dtype name, array)} in the format's layout."""
    import json

    header, data = {}, b""
    for name, (dtype, array) in tensors.items():
        raw = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps({"__metadata__": {"format": "np"}, **header}).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)
    return path


def test_the_safetensors_format_is_read_directly_in_every_float_dtype(tmp_path):
    import numpy as np

    from numpy_transformer.interop.pretrained import SafetensorsWeights, hugging_face_name

    values = np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5         # exact in every format below
    bfloat16 = (values.view(np.uint32) >> 16).astype(np.uint16)
    path = write_safetensors(tmp_path / "model.safetensors", {
        "transformer.h.0.a": ("F32", values), "b.gamma": ("F64", values.astype(np.float64)),
        "c": ("F16", values.astype(np.float16)), "d": ("BF16", bfloat16)})
    assert set(SafetensorsWeights(path).entries) == {"transformer.h.0.a", "b.gamma", "c", "d"}
    weights = SafetensorsWeights(path, hugging_face_name)
    assert set(weights.entries) == {"h.0.a", "b.weight", "c", "d"}           # prefix dropped, gamma renamed
    for name in weights.entries:
        np.testing.assert_array_equal(weights[name], values, err_msg=name)
    write_safetensors(path, {"e": ("I64", np.arange(3))})
    with pytest.raises(ValueError, match="tensors of dtype I64, which this project does not read"):
        SafetensorsWeights(path)
