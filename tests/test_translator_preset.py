"""The `translator` preset (numpy_transformer/training/presets.py): the default model on every
Tatoeba pair of the package (`tatoeba-full`). A tiny run of it (its data, small sizes and steps
given as flags) goes through train, evaluate, translate and attention as the default's does."""
import json
import re

import pytest

from numpy_transformer.cli.attention_maps import add_parser
from numpy_transformer.training.presets import PRESETS
from numpy_transformer.training.settings import resolve
from run_helpers import run_main

SMALL = ["--subset", "1500", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--vocab-size", "600",
         "--batch-size", "16", "--steps", "4", "--eval-every", "2", "--checkpoint-every", "2", "--samples", "1"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(folder, stdout) of `train --preset translator` on 1,500 of its pairs with a tiny model."""
    directory = tmp_path_factory.mktemp("translator") / "run"
    status, out, err = run_main(["train", "--preset", "translator", "--out", directory, *SMALL])
    assert status == 0, err
    return directory, out


def test_the_preset_is_the_default_model_on_every_pair_for_longer():
    model, training, data = resolve("translator")
    default_model, default_training, default_data = resolve("default")
    assert model == default_model
    assert (data.dataset, data.tokenizer, data.vocab_size, data.shared_vocabulary, data.max_len) == \
        ("tatoeba-full", "unigram", 8000, True, 64)
    assert (training.steps, training.batch_size, training.warmup_steps) == (20_000, 64, 400)
    assert training.steps > default_training.steps and default_data.dataset == "tatoeba"
    assert "translator" in PRESETS


def test_train_prints_the_full_corpus_and_its_held_out_scores(trained):
    directory, out = trained
    assert "Tatoeba English–Italian, every pair" in out and "CC-BY 2.0 FR" in out
    assert re.search(r"Test split: [\d,]+ pairs", out) and re.search(r"greedy +\d+\.\d\d +\d+\.\d\d", out), out
    metrics = json.loads((directory / "metrics.json").read_text())
    assert metrics["steps"] == 4 and "every pair" in metrics["source"]
    assert json.loads((directory / "data.json").read_text())["dataset"] == "tatoeba-full"


def test_evaluate_rebuilds_its_test_split_and_gives_the_scores_of_train(trained):
    directory, _ = trained
    metrics = json.loads((directory / "metrics.json").read_text())
    status, out, err = run_main(["evaluate", "--checkpoint", directory, "--samples", "0"])
    assert status == 0, err
    assert re.search(rf"greedy +{metrics['bleu_greedy']:.2f} +{metrics['chrf_greedy']:.2f}", out), out


def test_translate_reads_its_run_folder(trained):
    directory, _ = trained
    status, out, err = run_main(["translate", "--checkpoint", directory, "Where is the station?", "I like tea."])
    assert status == 0, err
    assert len(out.splitlines()) == 2 and f"model: {directory}" in err


def test_attention_reads_its_run_folder(trained, tmp_path, capsys):
    import argparse
    directory, _ = trained
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["attention", "--checkpoint", str(directory), "Where is the station?",
                              "--out", str(tmp_path), "--format", "svg"])
    assert args.run(args) == 0
    assert (tmp_path / "attention.npz").is_file() and (tmp_path / "encoder_self_attn.svg").is_file()
    assert "| encoder.0.self_attn | 0 |" in capsys.readouterr().out
