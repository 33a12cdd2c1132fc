"""Sentence embeddings without torch: a BERT checkpoint without its masked-LM head (`BertModel`
weights, as sentence-transformers' models have them) loads as the encoder alone, its pooling
and normalisation are read from sentence-transformers' files (each field checked as untrusted
input), `embed` pools as the formulas say whatever the batching, and `numpy-transformer embed`
prints, writes, compares and ranks. The folders are tiny random BERTs built here (the exactness
against sentence-transformers on the real all-MiniLM-L6-v2 is in tests/test_torch_minilm.py)."""
import json

import numpy as np
import pytest

from numpy_transformer.interop.pretrained import load_hugging_face
from numpy_transformer.interop.sentence_encoder import load_sentence_encoder
from numpy_transformer.sentence_embedding import (EmbeddingRecipe, POOLING_MODES, cosine_similarity, embed,
                                                  framed_ids, pool, rank)
from run_helpers import run_main
from test_untrusted_hf_metadata import (HOSTILE_VALUES, assert_one_line, assert_runs_or_one_line, bert_config,
                                        bert_tensors, bert_tokenizer, edit_json, gpt2_config, gpt2_tensors,
                                        gpt2_tokenizer, write_folder)

TEXTS = ["the cat sat on the mat .", "a dog ran", "the hat", "cats sat on a mat", "the dog sat on the cat ."]
MODULES = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
           {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
           {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
POOLING = {"word_embedding_dimension": 8, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
           "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}


def bert_model_tensors(vocab_size, rng):
    """A `BertModel` checkpoint as older sentence-transformers saved it: no `bert.` prefix, no
    cls.* head, the pooler, and the integer buffer embeddings.position_ids."""
    tensors = {name.removeprefix("bert."): value for name, value in bert_tensors(vocab_size, rng).items()
               if not name.startswith("cls.")}
    tensors["pooler.dense.weight"] = ("F32", rng.normal(size=(8, 8)).astype(np.float32))
    tensors["pooler.dense.bias"] = ("F32", rng.normal(size=8).astype(np.float32))
    tensors["embeddings.position_ids"] = ("I64", np.arange(16, dtype=np.int64)[None])
    return tensors


def write_sentence_folder(folder, modules=MODULES, pooling=POOLING, settings=None, seed=0):
    tokenizer = bert_tokenizer()
    write_folder(folder, bert_config(tokenizer.get_vocab_size()),
                 bert_model_tensors(tokenizer.get_vocab_size(), np.random.default_rng(seed)), tokenizer,
                 {"mask_token": "[MASK]"}, {"model_max_length": 512})
    if modules is not None:
        (folder / "modules.json").write_text(json.dumps(modules))
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    settings = {"max_seq_length": 12, "do_lower_case": False} if settings is None else settings
    (folder / "sentence_bert_config.json").write_text(json.dumps(settings))
    return folder


@pytest.fixture
def minilm_like(tmp_path):
    return write_sentence_folder(tmp_path / "encoder")


def embed_command(folder, *args):
    return run_main(["embed", "--checkpoint", folder, *args])


# the loader

def test_a_bert_model_checkpoint_loads_as_the_encoder_of_the_same_weights_with_a_head(tmp_path):
    """The same random weights, saved as BertForMaskedLM (bert.* and cls.*) and as BertModel
    (no prefix, no head, a pooler and position_ids besides), give the same encoder outputs."""
    tokenizer = bert_tokenizer()
    with_head = write_folder(tmp_path / "mlm", bert_config(tokenizer.get_vocab_size()),
                             bert_tensors(tokenizer.get_vocab_size(), np.random.default_rng(3)), tokenizer)
    headless = write_sentence_folder(tmp_path / "encoder", seed=3)
    full, encoder = load_hugging_face(with_head), load_hugging_face(headless)
    assert full.masked_lm_head and not encoder.masked_lm_head
    assert {name for name, _ in encoder.named_parameters()} == \
        {name for name, _ in full.named_parameters() if name.startswith("stack.")}
    ids = np.array([[2, 5, 6, 7, 3], [2, 8, 3, 0, 0]])
    np.testing.assert_array_equal(encoder.encode(ids).data, full.encode(ids).data)
    with pytest.raises(ValueError, match="no masked-LM head"):
        encoder(ids)


def test_fill_mask_on_an_encoder_without_a_head_is_one_line_pointing_to_embed(minilm_like):
    assert_one_line(run_main(["fill-mask", "--checkpoint", minilm_like, "the [MASK]"]),
                    "without a masked-LM head", "numpy-transformer embed")


def test_attention_reads_the_heads_of_an_encoder_without_a_head(minilm_like, tmp_path):
    from numpy_transformer.analysis.capture import capture_text
    from numpy_transformer.interop.pretrained import load_pretrained

    status, out, err = run_main(["attention", "--checkpoint", minilm_like, "the cat sat", "--out", tmp_path / "heads"])
    assert status == 0, err
    assert out.startswith("text: [CLS] the cat sat [SEP]")
    model, tokenizer = load_pretrained(minilm_like, dtype="float64")
    capture = capture_text(model, tokenizer, "the cat sat")
    model.encode(np.array([[2, 5, 6, 8, 3]]))
    np.testing.assert_array_equal(capture.weights["encoder.0.self_attn"], model.stack.layers[0].self_attn.last_weights[0])


def test_the_recipe_is_read_from_sentence_transformers_files(minilm_like):
    _, _, recipe = load_sentence_encoder(minilm_like)
    assert recipe == EmbeddingRecipe(("mean",), normalize=True, max_length=12, lowercase=False)


@pytest.mark.parametrize("modules, pooling, settings, expected", [
    (MODULES[:2], {**POOLING, "pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}, None,
     EmbeddingRecipe(("cls",), False, 12)),
    (MODULES, {**POOLING, "pooling_mode_max_tokens": True}, None, EmbeddingRecipe(("max", "mean"), True, 12)),
    (MODULES, {"embedding_dimension": 8, "pooling_mode": ["mean", "cls"], "include_prompt": True}, None,
     EmbeddingRecipe(("mean", "cls"), True, 12)),
    (MODULES, {"pooling_mode": "lasttoken"}, {"do_lower_case": True}, EmbeddingRecipe(("lasttoken",), True, 16, True)),
    (MODULES, {key: False for key in POOLING if key.startswith("pooling")}, None, EmbeddingRecipe(("mean",), True, 12)),
    (None, None, {}, EmbeddingRecipe(("mean",), False, 16)),
])
def test_each_form_of_the_pooling_files_gives_the_recipe_sentence_transformers_builds(tmp_path, modules, pooling,
                                                                                         settings, expected):
    """Legacy booleans concatenate in sentence-transformers' order (cls, max, mean, …), a
    pooling_mode list in its own; no mode is mean; no modules.json is mean, not normalised; no
    max_seq_length is the tokenizer's model_max_length (512) cut to the 16 positions."""
    folder = write_sentence_folder(tmp_path / "encoder", modules, pooling, settings)
    assert load_sentence_encoder(folder)[2] == expected


def test_a_bert_with_its_masked_lm_head_embeds_too(tmp_path):
    """sentence-transformers reads a plain Hugging Face BERT as mean pooling, not normalised."""
    tokenizer = bert_tokenizer()
    folder = write_folder(tmp_path / "mlm", bert_config(tokenizer.get_vocab_size()),
                          bert_tensors(tokenizer.get_vocab_size(), np.random.default_rng(0)), tokenizer)
    model, tokenizer, recipe = load_sentence_encoder(folder)
    assert model.masked_lm_head and recipe == EmbeddingRecipe(("mean",), False, 16)
    status, out, err = embed_command(folder, "the cat")
    assert status == 0, err


BAD_FILES = [
    ("modules.json", {"a": 1}, r"modules.json: expected a JSON list of modules"),
    ("modules.json", [MODULES[0], {**MODULES[1], "type": "sentence_transformers.models.Dense"}],
     r"modules.json: module 1 is sentence_transformers.models.Dense, which this project does not implement"),
    ("modules.json", [MODULES[0], {**MODULES[1], "type": 3}], r"modules.json: module 1: type must be"),
    ("modules.json", [MODULES[1], MODULES[0]], r"the modules are Pooling, Transformer; this project reads"),
    ("modules.json", [MODULES[0]], r"the modules are Transformer; this project reads"),
    ("modules.json", [{**MODULES[0], "path": "x"}, MODULES[1]], r"module 0 \(Transformer\) has path 'x'"),
    ("modules.json", [MODULES[0], {**MODULES[1], "path": "../1_Pooling"}], r"the Pooling module's path must be a "
                                                                            r"folder inside"),
    ("modules.json", [MODULES[0], {**MODULES[1], "path": "/etc"}], r"the Pooling module's path must be"),
    ("modules.json", [MODULES[0], {**MODULES[1], "path": "2_Pooling"}], r"2_Pooling/config.json: no such file"),
    ("1_Pooling/config.json", [], r"1_Pooling/config.json: expected a JSON object of the pooling settings"),
    ("1_Pooling/config.json", {"pooling_mode": "sum"}, r"pooling_mode must be one of cls, max, mean"),
    ("1_Pooling/config.json", {"pooling_mode": []}, r"pooling_mode must be one of"),
    ("1_Pooling/config.json", {"pooling_mode_mean_tokens": "yes"}, r"pooling_mode_mean_tokens must be true or false"),
    ("1_Pooling/config.json", {"word_embedding_dimension": 384}, r"word_embedding_dimension is 384, but the model's "
                                                                 r"vectors have 8 dimensions"),
    ("1_Pooling/config.json", {"pooling_mode_sum": True}, r"unknown field 'pooling_mode_sum'"),
    ("sentence_bert_config.json", {"max_seq_length": 10 ** 6}, r"max_seq_length must be an integer from 3 to 16"),
    ("sentence_bert_config.json", {"max_seq_length": "12"}, r"max_seq_length must be an integer"),
    ("sentence_bert_config.json", {"do_lower_case": "yes"}, r"do_lower_case must be true or false"),
    ("sentence_bert_config.json", [12], r"sentence_bert_config.json: expected a JSON object"),
    ("tokenizer_config.json", {"model_max_length": 2}, r"model_max_length must be a number of tokens"),
]


@pytest.mark.parametrize("file, content, message", BAD_FILES)
def test_each_bad_sentence_transformers_file_is_one_line_naming_file_and_field(minilm_like, file, content, message):
    if file == "tokenizer_config.json":
        (minilm_like / "sentence_bert_config.json").unlink()
    (minilm_like / file).write_text(json.dumps(content))
    assert_one_line(embed_command(minilm_like, "the cat"), message)


def test_files_that_are_not_json_are_one_line(minilm_like):
    for file in ("modules.json", "1_Pooling/config.json", "sentence_bert_config.json"):
        original = (minilm_like / file).read_bytes()
        (minilm_like / file).write_bytes(b"\xff{")
        assert_one_line(embed_command(minilm_like, "the cat"), f"{file}: not UTF-8 JSON")
        (minilm_like / file).write_bytes(original)


def test_random_values_in_every_field_read_embed_or_give_one_line(minilm_like):
    rng = np.random.default_rng(0)
    fields = {"1_Pooling/config.json": [*POOLING, "pooling_mode", "embedding_dimension", "include_prompt"],
              "sentence_bert_config.json": ["max_seq_length", "do_lower_case"]}
    for file, names in fields.items():
        original = (minilm_like / file).read_text()
        for _ in range(40):
            name, value = names[rng.integers(len(names))], HOSTILE_VALUES[rng.integers(len(HOSTILE_VALUES))]
            edit_json(minilm_like / file, lambda values: values.update({name: value}))
            assert_runs_or_one_line(embed_command(minilm_like, "the cat"), f"{file} {name}={value!r}")
            (minilm_like / file).write_text(original)


def test_a_run_folder_or_a_missing_path_is_one_line(tmp_path):
    (tmp_path / "run").mkdir()
    assert_one_line(embed_command(tmp_path / "run", "the cat"), r"is not a Hugging Face model folder \(no config.json\) "
                                                                r"nor a Hub name")
    assert_one_line(embed_command(tmp_path / "missing" / "folder", "the cat"), r"no such folder .*missing/folder: embed "
                                                                               r"reads a BERT-architecture encoder")


def test_a_folder_that_is_not_an_encoder_is_one_line(tmp_path):
    tokenizer = gpt2_tokenizer()
    folder = write_folder(tmp_path / "gpt2", gpt2_config(tokenizer.get_vocab_size()),
                          gpt2_tensors(tokenizer.get_vocab_size(), np.random.default_rng(1)), tokenizer)
    assert_one_line(embed_command(folder, "the cat"), r"config.json: model_type gpt2 is a causal language model, not "
                                                      r"an encoder")


# pooling and embedding

def test_each_pooling_mode_computes_its_formula():
    rng = np.random.default_rng(0)
    h, lengths = rng.normal(size=(3, 5, 4)), np.array([5, 2, 1])
    real = np.arange(5) < lengths[:, None]
    expected = {"cls": lambda row, n: row[0], "max": lambda row, n: row[:n].max(axis=0),
                "mean": lambda row, n: row[:n].mean(axis=0),
                "mean_sqrt_len_tokens": lambda row, n: row[:n].sum(axis=0) / np.sqrt(n),
                "weightedmean": lambda row, n: (np.arange(1, n + 1)[:, None] * row[:n]).sum(axis=0) / (n * (n + 1) / 2),
                "lasttoken": lambda row, n: row[n - 1]}
    assert set(expected) == set(POOLING_MODES)
    for mode, formula in expected.items():
        np.testing.assert_allclose(pool(h, real, mode), [formula(row, n) for row, n in zip(h, lengths)],
                                   rtol=1e-12, err_msg=mode)


def test_an_embedding_does_not_depend_on_the_batch_or_the_order(minilm_like):
    model, tokenizer, recipe = load_sentence_encoder(minilm_like)
    together = embed(model, tokenizer, TEXTS, recipe, batch_size=4)
    alone = np.concatenate([embed(model, tokenizer, [text], recipe) for text in TEXTS])
    assert together.shape == (len(TEXTS), 8) and together.dtype == np.float32
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-6)
    np.testing.assert_allclose(embed(model, tokenizer, TEXTS[::-1], recipe), together[::-1], rtol=0, atol=1e-6)


def test_an_embedding_is_the_normalised_mean_of_the_encoders_outputs(minilm_like):
    model, tokenizer, recipe = load_sentence_encoder(minilm_like, dtype="float64")
    (vector,) = embed(model, tokenizer, [TEXTS[0]], recipe)
    ids = np.array([framed_ids(tokenizer, TEXTS[0], recipe)])
    mean = model.encode(ids).data[0].mean(axis=0)
    np.testing.assert_allclose(vector, mean / np.linalg.norm(mean), rtol=0, atol=1e-14)
    assert vector.dtype == np.float64


def test_a_long_text_is_cut_at_max_seq_length_and_the_padding_token_in_a_text_is_read(minilm_like):
    model, tokenizer, recipe = load_sentence_encoder(minilm_like)
    long_text = " ".join(["the cat sat"] * 10)
    assert framed_ids(tokenizer, long_text, recipe) == \
        [tokenizer.cls_id, *tokenizer.encode(long_text)[:10], tokenizer.sep_id]
    cut = tokenizer.tokenizer.decode(tokenizer.encode(long_text)[:10])
    np.testing.assert_allclose(embed(model, tokenizer, [long_text], recipe), embed(model, tokenizer, [cut], recipe),
                               rtol=0, atol=1e-6)
    with_pad = "the [PAD] cat"                                     # attended to, as attention_mask 1 makes it
    ids = np.array([framed_ids(tokenizer, with_pad, recipe)])
    assert tokenizer.pad_id in ids
    mean = model.encode(ids, np.ones(ids.shape, dtype=bool)).data[0].mean(axis=0)
    np.testing.assert_allclose(embed(model, tokenizer, [with_pad], recipe)[0], mean / np.linalg.norm(mean), atol=1e-6)


def test_an_empty_text_or_a_string_for_a_list_is_refused_by_the_function():
    with pytest.raises(ValueError, match="text 2 is empty"):
        embed(None, None, ["the cat", "  "])
    with pytest.raises(ValueError, match=r"texts must be a list of texts, got one string \('the cat'\): pass \[text\]"):
        embed(None, None, "the cat")


def test_cosine_similarity_and_rank():
    a = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, -2.0]])
    np.testing.assert_allclose(cosine_similarity(a, a), [[1, 2 ** -0.5, 0], [2 ** -0.5, 1, -2 ** -0.5],
                                                         [0, -2 ** -0.5, 1]], atol=1e-15)
    order, scores = rank(np.array([2.0, 0.1]), a)
    assert order.tolist() == [0, 1, 2] and scores[0] > scores[1] > scores[2]


# the command

def test_the_command_prints_json_lines_of_the_functions_embeddings_exactly(minilm_like):
    model, tokenizer, recipe = load_sentence_encoder(minilm_like)
    status, out, err = embed_command(minilm_like, *TEXTS[:3])
    assert status == 0 and err == "", err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["text"] for line in lines] == TEXTS[:3]
    np.testing.assert_array_equal(np.array([line["embedding"] for line in lines], dtype=np.float32),
                                  embed(model, tokenizer, TEXTS[:3], recipe))


def test_the_command_reads_a_file_or_standard_input_and_writes_npy_or_jsonl(minilm_like, tmp_path, monkeypatch):
    import io

    model, tokenizer, recipe = load_sentence_encoder(minilm_like)
    expected = embed(model, tokenizer, TEXTS, recipe)
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    written = tmp_path / "runs" / "e.npy"                       # its folder made: runs/ of a fresh clone
    status, out, err = embed_command(minilm_like, "--file", tmp_path / "texts.txt", "--out", written)
    assert status == 0 and out == "" and err == f"wrote 5 embeddings of 8 dimensions to {written}\n"
    np.testing.assert_array_equal(np.load(written), expected)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("\n".join(TEXTS).encode())))
    status, out, err = embed_command(minilm_like, "--out", tmp_path / "e.jsonl", "--quiet")
    assert status == 0 and out == err == ""
    lines = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    np.testing.assert_array_equal(np.array([line["embedding"] for line in lines], dtype=np.float32), expected)


def test_out_never_replaces_a_file_unless_asked(minilm_like, tmp_path):
    mine = tmp_path / "notes.jsonl"
    mine.write_text("the user's own lines\n")
    assert_one_line(embed_command(minilm_like, "--out", mine, "the cat"),
                    r"--out .*notes.jsonl: the file already exists .* --overwrite to replace it")
    assert mine.read_text() == "the user's own lines\n"
    status, out, err = embed_command(minilm_like, "--out", mine, "--overwrite", "--quiet", "the cat")
    assert status == 0, err
    assert json.loads(mine.read_text())["text"] == "the cat"


@pytest.mark.parametrize("name", ["e.npy", "e.jsonl"])
def test_out_past_the_file_size_limit_is_one_true_line_and_leaves_no_file(minilm_like, tmp_path, name):
    """`ulimit -f` (RLIMIT_FSIZE; Python ignores SIGXFSZ, so the write fails with EFBIG) stands
    for a disk that fills: the line says what happened to which file, not NumPy's "48000
    requested and 12768 written", and neither the file nor its temporary is left behind."""
    import resource

    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, limits[1]))
    try:
        status, _, err = embed_command(minilm_like, "--out", tmp_path / name, "--quiet", *TEXTS)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
    assert_one_line((status, "", err), rf"{name}: the file would be larger than this process may write \(ulimit -f\) "
                                       rf"or the file system allows: raise the limit, or choose another folder")
    assert "requested" not in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["encoder"]


def test_similarity_prints_the_cosine_matrix_and_search_ranks_the_texts(minilm_like):
    model, tokenizer, recipe = load_sentence_encoder(minilm_like)
    vectors = embed(model, tokenizer, TEXTS, recipe)
    status, out, err = embed_command(minilm_like, "--similarity", *TEXTS)
    assert status == 0, err
    printed = np.array([[float(value) for value in line.split("\t")] for line in out.splitlines()])
    np.testing.assert_allclose(printed, cosine_similarity(vectors, vectors), rtol=0, atol=5e-5)
    status, out, err = embed_command(minilm_like, "--search", "a cat on a mat", "--top-k", "3", *TEXTS)
    assert status == 0, err
    (query,) = embed(model, tokenizer, ["a cat on a mat"], recipe)
    order, scores = rank(query, vectors)
    assert out.splitlines() == [f"{score:.4f}\t{TEXTS[i]}" for i, score in zip(order[:3], scores)]


@pytest.mark.parametrize("args, message", [
    (["the cat", ""], r"text 2 is empty: every text needs at least one word"),
    (["--search", " ", "the cat"], r"--search: the query is empty"),
    (["--out", "e.txt", "the cat"], r"--out e.txt: the file name must end in .npy or .jsonl"),
    (["--file", "texts.txt", "the cat"], r"give the texts as arguments or as --file FILE, not both"),
])
def test_bad_command_lines_are_one_line(minilm_like, args, message):
    assert_one_line(embed_command(minilm_like, *args), message)


def test_a_file_that_is_not_utf8_or_has_a_blank_line_is_one_line_naming_it(minilm_like, tmp_path):
    (tmp_path / "latin1.txt").write_bytes("the café\n".encode("latin-1"))
    assert_one_line(embed_command(minilm_like, "--file", tmp_path / "latin1.txt"),
                    r"latin1.txt: line 1 is not UTF-8 text")
    (tmp_path / "blank.txt").write_text("the cat\n\na dog\n")
    assert_one_line(embed_command(minilm_like, "--file", tmp_path / "blank.txt"), r"blank.txt: line 2 is empty")
