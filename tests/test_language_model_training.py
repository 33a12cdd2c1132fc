"""The language models trained through the translation machinery (`train --task lm|mlm`): their
batches and objectives, the loss falling on the built-in corpus, checkpoints that load the
model of their task, exact resume (MLM's masks included), and the `generate` and `fill-mask`
commands with their errors."""
import json
import re

import numpy as np
import pytest

from numpy_transformer.completion import complete, fill_mask
from numpy_transformer.data import train_text_tokenizer
from numpy_transformer.data.texts import encode_texts
from numpy_transformer.config import TransformerConfig
from numpy_transformer.language_model import IGNORED, DecoderOnlyTransformer, EncoderOnlyTransformer, mask_tokens
from numpy_transformer.training.checkpoint import load_checkpoint
from numpy_transformer.training.settings import resolve
from numpy_transformer.training.loss import CausalLM, make_objective
from numpy_transformer.training.run import Run
from run_helpers import TINY_DATA, TINY_TRAINING, assert_clear_error, assert_same_weights, run_main, weights

LM_MODEL = dict(d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.1)
TINY_LM = ["--n-pairs", "120", "--max-len", "32", "--d-model", "16", "--n-heads", "2", "--d-ff", "32",
           "--layers", "1", "--batch-size", "16", "--steps", "10", "--eval-every", "5", "--samples", "2"]
TEXTS = ["the cat sat on the mat .", "a dog .", "the dog sat on the cat ."]


def lm_configs(task, training=None, data=None):
    return resolve(None, LM_MODEL, {**TINY_TRAINING, **(training or {})}, {"task": task, **TINY_DATA, **(data or {})})


@pytest.fixture(scope="module")
def tokenizer():
    return train_text_tokenizer(TEXTS * 2, "en")


def test_a_causal_batch_reads_sos_x_and_predicts_x_eos(tokenizer):
    encoded = encode_texts(TEXTS, tokenizer, framing="causal")
    batch = CausalLM().batch(encoded, np.array([0, 1]))
    cat, dog = (tokenizer.encode(text) for text in TEXTS[:2])
    np.testing.assert_array_equal(batch.inputs[0], [tokenizer.sos_id, *cat])
    np.testing.assert_array_equal(batch.targets[0], [*cat, tokenizer.eos_id])
    np.testing.assert_array_equal(batch.targets[1], [*dog, tokenizer.eos_id] + [tokenizer.pad_id] * 4)
    assert batch.ignore_index == tokenizer.pad_id and batch.n_tokens == len(cat) + len(dog) + 2


def test_mlm_masks_are_a_function_of_seed_and_step_and_evaluation_masks_of_the_batch_alone(tokenizer):
    encoded = encode_texts(TEXTS * 20, tokenizer, framing="masked")
    positions = np.arange(60)
    objective, other_seed = make_objective("mlm", (tokenizer,), seed=3), make_objective("mlm", (tokenizer,), seed=4)
    step_5 = objective.batch(encoded, positions, ("train", 5))
    np.testing.assert_array_equal(step_5.inputs, objective.batch(encoded, positions, ("train", 5)).inputs)
    assert not np.array_equal(step_5.targets, objective.batch(encoded, positions, ("train", 6)).targets)
    assert not np.array_equal(step_5.targets, other_seed.batch(encoded, positions, ("train", 5)).targets)
    np.testing.assert_array_equal(objective.batch(encoded, positions, ("evaluate", 0)).targets,
                                  other_seed.batch(encoded, positions, ("evaluate", 0)).targets)
    framed = np.where(step_5.targets != IGNORED, step_5.targets, step_5.inputs)
    special = np.isin(framed, tokenizer.special_ids)
    assert (step_5.targets[special] == IGNORED).all()                      # [CLS] [SEP] [PAD] never predicted
    assert step_5.n_tokens == int((step_5.targets != IGNORED).sum()) > 0


def test_a_short_batch_still_has_one_masked_token():
    inputs, targets = mask_tokens(np.array([[4, 9, 5]]), np.random.default_rng(0), mask_id=6, vocab_size=10,
                                  special_ids=(0, 1, 2, 3, 4, 5, 6), rate=1e-9)
    assert targets.tolist() == [[IGNORED, 9, IGNORED]]


@pytest.mark.parametrize("task, model_class", [("lm", DecoderOnlyTransformer), ("mlm", EncoderOnlyTransformer)])
def test_the_loss_falls_on_the_built_in_corpus(tmp_path, task, model_class):
    training = {"steps": 100, "schedule": "constant", "lr": 1e-2, "eval_every": 10}
    with Run.new(tmp_path / "run", *lm_configs(task, training), report=None) as run:
        assert isinstance(run.model, model_class) and run.model.config.causal == (task == "lm")
        validation = []
        run.train(lambda trainer: validation.append(trainer.validation_loss))
    losses = run.trainer.losses
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:5])
    assert validation[-1] < 0.95 * validation[9]


@pytest.mark.parametrize("task", ["lm", "mlm"])
def test_n_steps_then_resume_then_n_steps_equals_2n_steps(tmp_path, task):
    with Run.new(tmp_path / "whole", *lm_configs(task, {"steps": 10}), report=None) as whole:
        whole.train()
    with Run.new(tmp_path / "split", *lm_configs(task, {"steps": 5}), report=None) as first:
        first.train()
    with Run.resume(tmp_path / "split", {"steps": 10}, report=None) as second:
        second.train()
    assert first.trainer.losses + second.trainer.losses == whole.trainer.losses
    assert_same_weights(weights(second.model), weights(whole.model))


def train_tiny(tmp_path_factory, task):
    """(folder, stdout) of `train --task TASK` with tiny settings on 120 built-in texts."""
    directory = tmp_path_factory.mktemp(task) / "run"
    status, out, err = run_main(["train", "--task", task, "--out", directory, *TINY_LM])
    assert status == 0, err
    return directory, out


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    return train_tiny(tmp_path_factory, "lm")


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory):
    return train_tiny(tmp_path_factory, "mlm")


def test_train_lm_prints_its_data_model_samples_and_perplexity(lm_run):
    directory, out = lm_run
    assert "its en side" in out and "texts: 108 train, 6 validation, 6 test" in out
    assert "model: decoder-only (causal), 1 layers, d_model 16" in out and "of 16 texts" in out
    assert "prompt" in out and "greedy" in out and "Test split: 6 texts" in out and "perplexity" in out
    metrics = json.loads((directory / "metrics.json").read_text())
    assert metrics["task"] == "lm" and metrics["preset"] == "lm" and metrics["test_texts"] == 6
    assert metrics["perplexity"] == pytest.approx(np.exp(metrics["test_cross_entropy"]))
    assert 0 <= metrics["accuracy"] <= 1 and metrics["model"]["n_decoder_layers"] == 1
    assert sorted(p.name for p in directory.glob("tokenizer_*.json")) == ["tokenizer_en.json"]


def test_a_language_model_checkpoint_loads_the_model_of_its_task(lm_run, mlm_run):
    for (directory, _), model_class, kind in ((lm_run, DecoderOnlyTransformer, "decoder-only"),
                                              (mlm_run, EncoderOnlyTransformer, "encoder-only")):
        checkpoint = load_checkpoint(directory)
        assert isinstance(checkpoint.model, model_class) and isinstance(checkpoint.model_config, TransformerConfig)
        assert checkpoint.model_config.kind == kind
        assert len(checkpoint.tokenizers) == 1 and checkpoint.tokenizers[0].mask_id == 6
        assert checkpoint.model_config.vocab_size == checkpoint.tokenizers[0].vocab_size


def test_evaluate_gives_the_perplexity_train_printed(lm_run):
    directory, out = lm_run
    status, evaluated, _ = run_main(["evaluate", "--checkpoint", directory, "--samples", "0"])
    assert status == 0
    line = [text for text in out.splitlines() if text.strip().startswith("perplexity")]
    assert line and line[0] in evaluated


def test_generate_prints_each_prompt_with_its_continuation(lm_run):
    directory, _ = lm_run
    status, out, err = run_main(["generate", "--checkpoint", directory, "--temperature", "0", "the man", "we"])
    assert status == 0 and "synthetic" in err
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("the man") and lines[1].startswith("we")
    checkpoint = load_checkpoint(directory)
    assert lines == complete(checkpoint.model, checkpoint.tokenizers[0], ["the man", "we"], None, 30, temperature=0)


def test_the_same_seed_gives_the_same_text_and_another_seed_another(lm_run):
    directory, _ = lm_run
    texts = [run_main(["generate", "--checkpoint", directory, "--seed", seed, "--temperature", "3", "the"])[1]
             for seed in (1, 1, 2)]
    assert texts[0] == texts[1] != texts[2]


@pytest.mark.parametrize("args, message", [
    (["--top-p", "1.5"], "argument --top-p: must be a number in (0, 1], got 1.5"),
    (["--temperature", "-1"], "argument --temperature: must be a number ≥ 0, got -1.0"),
    (["--top-k", "0"], "argument --top-k: must be a positive integer, got 0"),
])
def test_a_bad_sampling_value_is_one_clear_line(lm_run, args, message):
    status, _, err = run_main(["generate", "--checkpoint", lm_run[0], *args, "the"])
    assert status == 2 and "Traceback" not in err and message in err


def test_a_prompt_longer_than_the_model_is_one_clear_line(lm_run):
    status, _, err = run_main(["generate", "--checkpoint", lm_run[0], "the man " * 20])
    assert_clear_error(status, err, r"the prompt is 41 tokens long \(a start token included\), and this model reads at "
                                    r"most 32")


def test_fill_mask_prints_token_tab_probability_best_first(mlm_run):
    directory, _ = mlm_run
    status, out, _ = run_main(["fill-mask", "--checkpoint", directory, "--top-k", "4", "the [MASK] eats ."])
    assert status == 0
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(rows) == 4 and all(len(row) == 2 for row in rows)
    probabilities = [float(p) for _, p in rows]
    assert probabilities == sorted(probabilities, reverse=True) and 0 < probabilities[-1] <= probabilities[0] <= 1
    checkpoint = load_checkpoint(directory)
    tokenizer = checkpoint.tokenizers[0]
    masked = tokenizer.encode("the [MASK] eats .", keep=[tokenizer.mask_id])
    ids = np.array([[tokenizer.cls_id, *masked, tokenizer.sep_id]])
    logits = checkpoint.model.eval()(ids).data[0, 2]
    logits[tokenizer.special_ids] = -np.inf
    assert rows[0][0] == tokenizer.token(int(np.argmax(logits)))


def test_fill_mask_gives_one_block_per_mask(mlm_run):
    checkpoint = load_checkpoint(mlm_run[0])
    blocks = fill_mask(checkpoint.model, checkpoint.tokenizers[0], "[MASK] man [MASK] .", top_k=2)
    assert len(blocks) == 2 and all(len(block) == 2 for block in blocks)
    status, out, _ = run_main(["fill-mask", "--checkpoint", mlm_run[0], "--top-k", "2", "[MASK] man [MASK] ."])
    assert out.count("\n\n") == 1 and len(out.split()) == 8


def test_fill_mask_without_a_mask_or_with_the_wrong_model_is_one_clear_line(lm_run, mlm_run):
    status, _, err = run_main(["fill-mask", "--checkpoint", mlm_run[0], "no mask here"])
    assert_clear_error(status, err, r"no \[MASK\] in 'no mask here'")
    status, _, err = run_main(["fill-mask", "--checkpoint", lm_run[0], "the [MASK]"])
    assert_clear_error(status, err, r"holds a causal language model \(GPT\) \(task lm\); this command needs a masked")
    status, _, err = run_main(["translate", "--checkpoint", mlm_run[0], "the man"])
    assert_clear_error(status, err, "this command needs a translation model")


def test_a_task_picks_its_preset_and_a_preset_of_another_task_is_refused(tmp_path):
    model, _, data = resolve(None, data={"task": "mlm"})
    assert data.task == "mlm" and model["norm_placement"] == "post" and model["n_layers"] == 2
    status, _, err = run_main(["train", "--task", "lm", "--preset", "default", "--out", tmp_path / "run"])
    assert_clear_error(status, err, r"the preset 'default' trains the task 'translation', not 'lm'", tmp_path / "run")
    status, _, err = run_main(["train", "--language", "it", "--out", tmp_path / "run"])
    assert_clear_error(status, err, "language is a language model's", tmp_path / "run")


@pytest.mark.parametrize("kind, name", [("bpe", "byte-level BPE"), ("wordpiece", "WordPiece"), ("unigram", "unigram")])
def test_a_subword_language_model_trains_and_generates(tmp_path, kind, name):
    directory = tmp_path / kind
    status, out, err = run_main(["train", "--task", "lm", "--language", "it", "--tokenizer", kind, "--vocab-size",
                                 "300", "--out", directory, *TINY_LM])
    assert status == 0, err
    assert f"vocabulary ({name}" in out and "its it side" in out
    status, out, _ = run_main(["generate", "--checkpoint", directory, "--max-new-tokens", "5", "--seed", "3", "il"])
    assert status == 0 and out.startswith("il") and "##" not in out and "▁" not in out


@pytest.mark.parametrize("kind", ["wordpiece", "unigram"])
def test_a_subword_masked_language_model_fills_a_mask(tmp_path, kind):
    directory = tmp_path / kind
    status, _, err = run_main(["train", "--task", "mlm", "--tokenizer", kind, "--vocab-size", "300", "--out", directory,
                               *TINY_LM])
    assert status == 0, err
    status, out, err = run_main(["fill-mask", "--checkpoint", directory, "the [MASK] reads a book ."])
    assert status == 0, err
    assert len(out.splitlines()) >= 1 and all(len(line.split("\t")) == 2 for line in out.splitlines())


def test_a_text_file_trains_a_language_model(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line {i} : the number {i % 7} follows the number {(i + 6) % 7} .\n" for i in range(200)))
    status, out, err = run_main(["train", "--task", "mlm", "--dataset", path, "--out", tmp_path / "run",
                                 *TINY_LM[2:]])                                      # no --n-pairs: a file's own size
    assert status == 0, err
    assert f"local text file {path} (200 texts)" in out
    splits = re.search(r"^texts: (\d+) train, (\d+) validation, (\d+) test$", out, flags=re.MULTILINE)
    assert splits and sum(map(int, splits.groups())) == 200 and min(map(int, splits.groups())) > 0


def test_attention_draws_and_classifies_the_heads_of_a_language_model(lm_run, mlm_run, tmp_path):
    for (directory, _), kind, first in ((lm_run, "decoder", "[SOS]"), (mlm_run, "encoder", "[CLS]")):
        out = tmp_path / kind
        status, printed, err = run_main(["attention", "--checkpoint", directory, "the man eats .", "--out", out])
        assert status == 0, err
        assert printed.startswith(f"text: {first} the ") and f"| {kind}.0.self_attn | 1 |" in printed
        assert (out / f"{kind}_self_attn.png").is_file() and (out / "spectra.png").is_file()
        with np.load(out / "attention.npz") as saved:
            heads = saved[f"weights/{kind}.0.self_attn"]
        assert heads.shape[0] == 2 and np.allclose(heads.sum(axis=-1), 1)
        if kind == "decoder":
            assert np.allclose(np.triu(heads, 1), 0)                        # no head looks ahead
    status, _, err = run_main(["attention", "--checkpoint", lm_run[0], "the man", "--target", "x"])
    assert_clear_error(status, err, "--target is the translation a translation model's decoder reads")


def test_a_language_model_exported_in_gpt2_format_generates_what_it_generated_here(lm_run, mlm_run, tmp_path):
    directory, _ = lm_run
    status, out, err = run_main(["export", "--checkpoint", directory, "--to", "hf", tmp_path / "gpt2"])
    assert status == 0, err
    assert sorted(p.name for p in (tmp_path / "gpt2").iterdir()) == [".numpy-transformer-output.json", "config.json",
                                                                    "model.safetensors", "special_tokens_map.json",
                                                                    "tokenizer.json"]
    prompts = ["the", "we"]
    here = run_main(["generate", "--checkpoint", directory, "--temperature", "0", *prompts])[1]
    exported = run_main(["generate", "--checkpoint", tmp_path / "gpt2", "--temperature", "0", *prompts])[1]
    assert exported == here and len(here.splitlines()) == 2
    status, _, err = run_main(["export", "--checkpoint", mlm_run[0], "--to", "hf", tmp_path / "bert"])
    assert_clear_error(status, err, "holds a masked language model")


@pytest.mark.parametrize("flags, named", [(["--beam", "4"], "--beam sets"),
                                          (["--length-penalty", "0.6"], "--length-penalty sets"),
                                          (["--beam", "2", "--length-penalty", "0"], "--beam and --length-penalty set")])
def test_beam_flags_are_refused_for_a_language_model_not_ignored(tmp_path, flags, named):
    """--beam and --length-penalty set the translation's beam search: with --task lm|mlm they
    would change nothing, so the command refuses them before any data is read (a new run) or
    before the run is touched (a resume)."""
    for task in ("lm", "mlm"):
        status, _, err = run_main(["train", "--task", task, *TINY_LM, "--out", tmp_path / task, *flags])
        assert_clear_error(status, err, f"{named} the beam search of a translation model's final evaluation; "
                                        f"a --task {task} run is scored without one", tmp_path / task)
    status, _, err = run_main(["train", "--task", "lm", *TINY_LM, "--out", tmp_path / "run", "--steps", "5",
                               "--beam", "1"])                          # no beam search: what an lm run does
    assert status == 0, err
    saved = {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir() if path.is_file()}
    status, _, err = run_main(["train", "--out", tmp_path / "run", "--resume", "--steps", "8", *flags])
    assert_clear_error(status, err, "a --task lm run is scored without one")
    assert {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir() if path.is_file()} == saved
