"""Hugging Face folders come from elsewhere: every field this project reads from config.json,
tokenizer.json, special_tokens_map.json and tokenizer_config.json is checked, and a bad one is
one line through the command's error path, naming the file and the field (never a traceback,
never a silent wrong load). The folders are tiny and built here, without torch or the network:
a BERT of width 8 (fill-mask) and a GPT-2 of width 8 (generate), random weights in the
safetensors layout of the Hub's checkpoints."""
import json

import numpy as np
import pytest

from numpy_transformer.data.hub_tokenizer import HubTokenizer
from run_helpers import assert_clear_error, run_main
from test_pretrained import write_safetensors

WIDTH, FEED_FORWARD, POSITIONS = 8, 16, 16
WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "hat", "ran", "##s", "."]
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def bert_tokenizer(specials=BERT_SPECIALS):
    """A BERT-style WordPiece tokenizer over WORDS: [CLS] text [SEP], [MASK] matched whole."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    vocabulary = {token: i for i, token in enumerate(specials + WORDS)}
    tokenizer = Tokenizer(models.WordPiece(vocabulary, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.add_special_tokens([token for token in specials if token in BERT_SPECIALS])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocabulary["[CLS]"]), ("[SEP]", vocabulary["[SEP]"])])
    return tokenizer


def gpt2_tokenizer():
    """A GPT-2-style byte-level BPE: <|endoftext|> and the 256 bytes, no merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE({"<|endoftext|>": 0, **{c: i + 1 for i, c in enumerate(alphabet)}}, []))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(["<|endoftext|>"])
    return tokenizer


def bert_tensors(vocab_size, rng):
    d, m = WIDTH, FEED_FORWARD
    shapes = {"bert.embeddings.word_embeddings.weight": (vocab_size, d), "bert.embeddings.position_embeddings.weight":
              (POSITIONS, d), "bert.embeddings.token_type_embeddings.weight": (2, d),
              "cls.predictions.transform.dense.weight": (d, d), "cls.predictions.transform.dense.bias": (d,),
              "cls.predictions.bias": (vocab_size,)}
    norms = ["bert.embeddings.LayerNorm", "cls.predictions.transform.LayerNorm"]
    layer = "bert.encoder.layer.0"
    for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
        shapes.update({f"{layer}.{name}.weight": (d, d), f"{layer}.{name}.bias": (d,)})
    shapes.update({f"{layer}.intermediate.dense.weight": (m, d), f"{layer}.intermediate.dense.bias": (m,),
                   f"{layer}.output.dense.weight": (d, m), f"{layer}.output.dense.bias": (d,)})
    norms += [f"{layer}.attention.output.LayerNorm", f"{layer}.output.LayerNorm"]
    shapes.update({f"{norm}.{part}": (d,) for norm in norms for part in ("weight", "bias")})
    return {name: ("F32", rng.normal(size=shape).astype(np.float32)) for name, shape in shapes.items()}


def gpt2_tensors(vocab_size, rng):
    d, m = WIDTH, FEED_FORWARD
    shapes = {"wte.weight": (vocab_size, d), "wpe.weight": (POSITIONS, d), "h.0.attn.c_attn.weight": (d, 3 * d),
              "h.0.attn.c_attn.bias": (3 * d,), "h.0.attn.c_proj.weight": (d, d), "h.0.attn.c_proj.bias": (d,),
              "h.0.mlp.c_fc.weight": (d, m), "h.0.mlp.c_fc.bias": (m,), "h.0.mlp.c_proj.weight": (m, d),
              "h.0.mlp.c_proj.bias": (d,)}
    shapes.update({f"{norm}.{part}": (d,) for norm in ("ln_f", "h.0.ln_1", "h.0.ln_2") for part in ("weight", "bias")})
    return {name: ("F32", rng.normal(size=shape).astype(np.float32)) for name, shape in shapes.items()}


def bert_config(vocab_size):
    return {"model_type": "bert", "vocab_size": vocab_size, "hidden_size": WIDTH, "num_attention_heads": 2,
            "intermediate_size": FEED_FORWARD, "num_hidden_layers": 1, "max_position_embeddings": POSITIONS,
            "hidden_act": "gelu", "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.1, "pad_token_id": 0,
            "type_vocab_size": 2, "position_embedding_type": "absolute"}


def gpt2_config(vocab_size):
    return {"model_type": "gpt2", "vocab_size": vocab_size, "n_embd": WIDTH, "n_head": 2, "n_inner": FEED_FORWARD,
            "n_layer": 1, "n_positions": POSITIONS, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
            "resid_pdrop": 0.1, "bos_token_id": 0, "eos_token_id": 0}


def write_folder(folder, config, tensors, tokenizer, special_tokens=None, tokenizer_config=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    write_safetensors(folder / "model.safetensors", tensors)
    (folder / "tokenizer.json").write_text(tokenizer.to_str())
    for name, value in (("special_tokens_map.json", special_tokens), ("tokenizer_config.json", tokenizer_config)):
        if value is not None:
            (folder / name).write_text(json.dumps(value))
    return folder


@pytest.fixture
def bert(tmp_path):
    tokenizer = bert_tokenizer()
    return write_folder(tmp_path / "bert", bert_config(tokenizer.get_vocab_size()),
                        bert_tensors(tokenizer.get_vocab_size(), np.random.default_rng(0)), tokenizer,
                        {"mask_token": "[MASK]", "cls_token": {"content": "[CLS]", "lstrip": False}},
                        {"sep_token": "[SEP]", "model_max_length": 512})


@pytest.fixture
def gpt2(tmp_path):
    tokenizer = gpt2_tokenizer()
    return write_folder(tmp_path / "gpt2", gpt2_config(tokenizer.get_vocab_size()),
                        gpt2_tensors(tokenizer.get_vocab_size(), np.random.default_rng(1)), tokenizer,
                        {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})


def fill_mask(folder, text="the cat [MASK] on the mat"):
    return run_main(["fill-mask", "--checkpoint", folder, "--top-k", "3", text])


def generate(folder, prompt="the cat"):
    return run_main(["generate", "--checkpoint", folder, "--temperature", "0", "--max-new-tokens", "3", prompt])


def assert_one_line(result, *patterns):
    """Exit 1, one line on standard error, matching the regular expression `patterns[0]` and holding
    each of the other `patterns` as written."""
    status, _, err = result
    assert_clear_error(status, err, patterns[0])
    assert err.count("\n") == 1, err
    for pattern in patterns[1:]:
        assert pattern in err, err


def edit_json(path, change):
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value))


def test_the_built_folders_load_and_run(bert, gpt2):
    status, out, err = fill_mask(bert)
    assert status == 0, err
    assert len(out.splitlines()) == 3
    status, out, err = generate(gpt2)
    assert status == 0, err
    assert out.startswith("the cat")


@pytest.mark.parametrize("content, field", [
    ("[1, 2]", "expected a JSON object of the model's settings, got [1, 2]"),
    ("{\"model_type\": \"bert\", ", "not UTF-8 JSON"),
])
def test_a_config_json_that_is_not_an_object_is_one_line(bert, content, field):
    (bert / "config.json").write_text(content)
    assert_one_line(fill_mask(bert), "config.json: ", field)


def test_a_config_json_missing_a_size_names_the_field(bert):
    edit_json(bert / "config.json", lambda config: config.pop("num_hidden_layers"))
    assert_one_line(fill_mask(bert), "config.json: no field 'num_hidden_layers'")


@pytest.mark.parametrize("field, value, message", [
    ("n_layer", 1_000_000, "n_layer must be an integer in [1, 1024], got 1000000"),
    ("n_head", "2", "n_head must be an integer in [1, 8], got '2'"),
    ("n_embd", 2.5, "n_embd must be an integer in [1, 131072], got 2.5"),
    ("n_positions", None, "n_positions must be an integer in [1, 1048576], got None"),
    ("n_head", 3, "n_embd=8 is not divisible by n_head=3"),
    ("activation_function", "swish", "activation_function must be one of gelu_new, gelu_pytorch_tanh, gelu, relu"),
    ("layer_norm_epsilon", -1, "layer_norm_epsilon must be a number > 0, got -1"),
    ("resid_pdrop", "0.1", "resid_pdrop must be a number in [0, 1), got '0.1'"),
    ("pad_token_id", 10 ** 6, "pad_token_id must be an integer in [0, 256], got 1000000"),
    ("scale_attn_weights", "false", "scale_attn_weights='false' is an option this project does not implement"),
    ("add_cross_attention", True, "add_cross_attention=True is an option this project does not implement"),
])
def test_each_bad_field_of_a_gpt2_config_is_one_line_naming_it(gpt2, field, value, message):
    edit_json(gpt2 / "config.json", lambda config: config.update({field: value}))
    assert_one_line(generate(gpt2), "config.json: ", message)


@pytest.mark.parametrize("field, value, message", [
    ("position_embedding_type", "relative_key",
     "position_embedding_type='relative_key' is an option this project does not implement (it loads "
     "position_embedding_type=\"absolute\" only)"),
    ("tie_word_embeddings", False, "tie_word_embeddings=False is an option"),
    ("is_decoder", True, "is_decoder=True is an option"),
    ("hidden_act", ["gelu"], "hidden_act must be one of gelu_new, gelu_pytorch_tanh, gelu, relu, got ['gelu']"),
    ("vocab_size", 2 ** 22, "for its weights, would need 129.3 GiB, more than this machine's"),
])
def test_each_bad_field_of_a_bert_config_is_one_line_naming_it(bert, field, value, message, monkeypatch):
    from numpy_transformer import memory_budget

    monkeypatch.setattr(memory_budget, "machine_memory", lambda: 2 ** 30)        # the same verdict on every machine
    monkeypatch.setattr(memory_budget, "memory_limit", lambda: None)
    edit_json(bert / "config.json", lambda config: config.update({field: value, "hidden_size": 2 ** 13}
                                                                  if field == "vocab_size" else {field: value}))
    assert_one_line(fill_mask(bert), "config.json: ", message)


def test_a_tokenizer_json_that_is_not_a_tokenizer_is_one_line(bert, gpt2):
    (bert / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "Tokens"}}')
    assert_one_line(fill_mask(bert), "tokenizer.json: not a tokenizer `tokenizers` reads")
    (gpt2 / "tokenizer.json").write_bytes(b"\xff\xfe{}")
    assert_one_line(generate(gpt2), "tokenizer.json: not UTF-8 JSON")


@pytest.mark.parametrize("file", ["special_tokens_map.json", "tokenizer_config.json"])
@pytest.mark.parametrize("content, message", [
    ('["[MASK]"]', "expected a JSON object of special tokens"),
    ('{"mask_token": 5}', "mask_token must be a token (a string, or an object whose \"content\" is one), got 5"),
    ('{"mask_token": {"content": ["[MASK]"]}}', "mask_token must be a token"),
    ('{"mask_token": "[MASK]"', "not UTF-8 JSON"),
])
def test_special_token_files_that_are_not_objects_of_tokens_are_one_line(bert, file, content, message):
    (bert / file).write_text(content)
    assert_one_line(fill_mask(bert), f"{file}: ", message)


def test_special_tokens_as_transformers_writes_them_are_read(bert):
    added_token = {"__type": "AddedToken", "content": "[MASK]", "lstrip": True, "normalized": False}
    (bert / "tokenizer_config.json").write_text(json.dumps({"mask_token": added_token, "pad_token": None,
                                                             "model_max_length": 512, "do_lower_case": True}))
    tokenizer = HubTokenizer.load(bert)
    assert (tokenizer.mask_id, tokenizer.pad_id, tokenizer.cls_id) == (4, None, 2)
    assert fill_mask(bert)[0] == 0


def test_a_special_token_the_tokenizer_lacks_is_one_line_naming_token_and_file(bert, gpt2):
    (bert / "special_tokens_map.json").write_text('{"mask_token": "<mask>"}')
    assert_one_line(fill_mask(bert), "tokenizer.json has no token '<mask>', the mask_token of special_tokens_map.json: "
                                     "fill-mask needs it")
    (bert / "special_tokens_map.json").unlink()
    (bert / "tokenizer_config.json").write_text('{"cls_token": null}')
    assert_one_line(fill_mask(bert), r"tokenizer_config.json: cls_token is null, and fill-mask needs that token")
    (gpt2 / "special_tokens_map.json").write_text('{"bos_token": "<s>"}')
    assert_one_line(generate(gpt2, ""), "tokenizer.json has no token '<s>', the bos_token of special_tokens_map.json")


def test_a_tokenizer_without_the_default_special_tokens_is_one_line(tmp_path):
    tokenizer = bert_tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    folder = write_folder(tmp_path / "bert", bert_config(15), bert_tensors(15, np.random.default_rng(0)), tokenizer)
    assert_one_line(fill_mask(folder), r"tokenizer.json has no token '\[MASK\]', the mask_token by default: "
                                       r"fill-mask needs it")


def test_a_tokenizer_with_ids_beyond_the_models_vocabulary_is_refused(bert):
    edit_json(bert / "config.json", lambda config: config.update(vocab_size=10))
    write_safetensors(bert / "model.safetensors", bert_tensors(10, np.random.default_rng(0)))
    assert_one_line(fill_mask(bert), "tokenizer.json: the token '.' has id 15, beyond the model's vocabulary of 10 "
                                     "ids", "config.json")


def test_a_vocabulary_padded_past_its_tokenizer_loads_and_offers_only_real_tokens(bert):
    tensors = bert_tensors(64, np.random.default_rng(0))
    tensors["cls.predictions.bias"][1][16:] = 50.0                  # the padding ids would win every ranking
    edit_json(bert / "config.json", lambda config: config.update(vocab_size=64))
    write_safetensors(bert / "model.safetensors", tensors)
    status, out, err = fill_mask(bert)
    assert status == 0, err
    candidates = [line.split("\t")[0] for line in out.splitlines()]
    assert len(candidates) == 3 and set(candidates) <= set(WORDS) | {"s"}
    assert all(float(line.split("\t")[1]) < 0.01 for line in out.splitlines())


def test_a_template_naming_an_undefined_special_token_is_one_line_not_a_panic(bert):
    edit_json(bert / "tokenizer.json", lambda saved: saved["post_processor"]["special_tokens"].pop("[SEP]"))
    status, _, err = fill_mask(bert)
    assert_one_line((status, "", err), "tokenizer.json: post_processor: its template puts the special token "
                                       "'\\[SEP\\]', which its special_tokens do not define")
    assert "panicked" not in err


def test_a_wordpiece_vocabulary_without_its_unknown_token_is_one_line(bert):
    edit_json(bert / "tokenizer.json", lambda saved: saved["model"].update(unk_token="[NONE]"))
    assert_one_line(fill_mask(bert, "the zebra [MASK] on the mat"), "tokenizer.json: this tokenizer cannot encode")


def set_padding_and_truncation(folder, length):
    """What a sentence-embedding checkpoint's tokenizer.json sets: every text padded to, and cut at, `length`."""
    def change(saved):
        saved["padding"] = {"strategy": {"Fixed": length}, "direction": "Right", "pad_to_multiple_of": None,
                            "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"}
        saved["truncation"] = {"direction": "Right", "max_length": length, "strategy": "LongestFirst", "stride": 0}
    edit_json(folder / "tokenizer.json", change)


def test_the_padding_and_truncation_of_tokenizer_json_are_switched_off(bert, tmp_path):
    from tokenizers import Tokenizer

    unpadded = bert.parent / "unpadded"
    unpadded.mkdir()
    for file in bert.iterdir():
        (unpadded / file.name).write_bytes(file.read_bytes())
    set_padding_and_truncation(bert, 12)
    text = "the cat [MASK] on the mat"
    assert len(Tokenizer.from_file(str(bert / "tokenizer.json")).encode(text, add_special_tokens=False).ids) == 12
    assert HubTokenizer.load(bert).encode(text) == HubTokenizer.load(unpadded).encode(text)     # 6 ids, no [PAD]
    assert len(HubTokenizer.load(bert).encode(text)) == 6
    assert fill_mask(bert, text) == fill_mask(unpadded, text)
    long_text = "the cat sat on the mat and the dog sat on a hat . the [MASK] ran"     # 17 ids: cut at 12 before
    assert_one_line(fill_mask(bert, long_text),
                    r"the text is 19 tokens long \(\[CLS\] and \[SEP\] included\), and this model reads at most 16")


HOSTILE_VALUES = [None, True, False, 0, -1, 1, 2, 3, 7, 2 ** 31, 2 ** 70, 1e308, -0.5, 0.5, float("nan"),
                  float("inf"), "", "gelu", "[MASK]", "<|endoftext|>", "x" * 500, [], [1, 2], {}, {"content": "[SEP]"},
                  {"content": 1}, {"a": [None]}]
GPT2_FIELDS = ["model_type", "vocab_size", "n_embd", "n_head", "n_inner", "n_layer", "n_positions",
               "activation_function", "layer_norm_epsilon", "resid_pdrop", "pad_token_id", "scale_attn_weights",
               "tie_word_embeddings", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
               "add_cross_attention"]
BERT_FIELDS = ["model_type", "vocab_size", "hidden_size", "num_attention_heads", "intermediate_size",
               "num_hidden_layers", "max_position_embeddings", "hidden_act", "layer_norm_eps", "hidden_dropout_prob",
               "pad_token_id", "position_embedding_type", "tie_word_embeddings", "is_decoder", "add_cross_attention"]
ROLES = ["bos_token", "eos_token", "cls_token", "sep_token", "mask_token", "pad_token", "unk_token",
         "additional_special_tokens"]


def assert_runs_or_one_line(result, what):
    status, _, err = result
    assert status in (0, 1), (what, status, err)
    assert "Traceback" not in err and "panicked" not in err, (what, err)
    if status == 1:
        assert err.startswith("numpy-transformer ") and ": error: " in err and err.count("\n") == 1, (what, err)


def hostile_edits(rng, fields, n):
    """n (field, value) pairs: random fields, each given a random hostile JSON value."""
    return [(fields[rng.integers(len(fields))], HOSTILE_VALUES[rng.integers(len(HOSTILE_VALUES))]) for _ in range(n)]


def test_random_values_in_every_field_read_load_or_give_one_line(bert, gpt2):
    rng = np.random.default_rng(0)
    bert_config_text, gpt2_config_text = (bert / "config.json").read_text(), (gpt2 / "config.json").read_text()
    for folder, run, config_text, fields in ((bert, fill_mask, bert_config_text, BERT_FIELDS),
                                            (gpt2, generate, gpt2_config_text, GPT2_FIELDS)):
        for field, value in hostile_edits(rng, fields, 40):
            edit_json(folder / "config.json", lambda config: config.update({field: value}))
            assert_runs_or_one_line(run(folder), f"config.json {field}={value!r}")
            (folder / "config.json").write_text(config_text)
        for file in ("special_tokens_map.json", "tokenizer_config.json"):
            for role, value in hostile_edits(rng, ROLES, 15):
                (folder / file).write_text(json.dumps({role: value}))
                assert_runs_or_one_line(run(folder), f"{file} {role}={value!r}")
            (folder / file).unlink()


def test_truncated_or_bit_flipped_tokenizer_json_loads_or_gives_one_line(bert, gpt2):
    rng = np.random.default_rng(0)
    for folder, run in ((bert, fill_mask), (gpt2, generate)):
        original = (folder / "tokenizer.json").read_bytes()
        for trial in range(60):
            damaged = bytearray(original)
            if trial % 2:
                damaged = damaged[:rng.integers(len(damaged))]
            else:                    # flips inside the text of names and values, which keep the JSON readable
                letters = [i for i, byte in enumerate(damaged) if chr(byte).isalnum() or chr(byte) in "[]#_"]
                for i in rng.choice(letters, rng.integers(1, 4), replace=False):
                    damaged[i] ^= 1 << rng.integers(6)
            (folder / "tokenizer.json").write_bytes(bytes(damaged))
            assert_runs_or_one_line(run(folder), f"tokenizer.json, trial {trial}")


@pytest.mark.torch
def test_fill_mask_on_a_padding_tokenizer_gives_the_probabilities_of_transformers(bert):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    set_padding_and_truncation(bert, 12)
    text = "the cat [MASK] on the mat"
    status, out, err = fill_mask(bert, text)
    assert status == 0, err
    model = transformers.BertForMaskedLM.from_pretrained(bert).eval()
    reference = transformers.PreTrainedTokenizerFast(tokenizer_file=str(bert / "tokenizer.json"))
    inputs = reference(text, return_tensors="pt")["input_ids"]
    assert inputs.shape == (1, 8)                                  # [CLS] text [SEP], no padding
    with torch.no_grad():
        probabilities = torch.softmax(model(inputs).logits[0, 3].double(), -1)
    for line in out.splitlines():
        token, probability = line.split("\t")
        assert float(probability) == pytest.approx(probabilities[reference.convert_tokens_to_ids(token)].item(),
                                                   abs=1e-4), token
