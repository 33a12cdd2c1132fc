"""Run folders and exported folders written by numpy-transformer 0.1 (tests/data/checkpoints_0_1,
whose README says how they were made), before the model configurations became one
`TransformerConfig`, still load: the same configuration, the same weights, the same logits, and
the same outputs of `translate`, `generate`, `fill-mask` and `evaluate`."""
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from autograd import no_grad
from numpy_transformer.config import TransformerConfig
from numpy_transformer.interop.export import load_torch
from numpy_transformer.training.checkpoint import CheckpointError, load_checkpoint
from run_helpers import run_main, weights

FOLDERS = Path(__file__).parent / "data" / "checkpoints_0_1"
EXPECTED = FOLDERS / "expected"
KINDS = {"translation": "encoder-decoder", "lm": "decoder-only", "mlm": "encoder-only"}
IDS = np.array([[2, 5, 9, 14, 3, 1], [2, 7, 11, 3, 1, 1]])          # the ids the old logits were computed on


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A copy of the fixture folders (the commands must not write into the repository's copy)."""
    copy = tmp_path_factory.mktemp("checkpoints_0_1")
    for name in (*KINDS, "translation_torch", "lm_torch"):
        shutil.copytree(FOLDERS / name, copy / name)
    return copy


def saved_weights(folder):
    with np.load(folder / "checkpoint.npz") as archive:
        return {key.removeprefix("model/"): archive[key] for key in archive.files if key.startswith("model/")}


def logits(model, run):
    model.eval()
    with no_grad():
        return (model(IDS, IDS[:, :-1]) if run == "translation" else model(IDS)).data


@pytest.mark.parametrize("run", KINDS)
def test_an_old_run_folder_loads_its_configuration_and_its_weights_unchanged(runs, run):
    checkpoint = load_checkpoint(runs / run)
    assert checkpoint.model_config.kind == KINDS[run] and checkpoint.task == run
    saved = saved_weights(runs / run)
    loaded = weights(checkpoint.model)
    assert sorted(loaded) == sorted(saved)
    assert all(loaded[name].dtype == saved[name].dtype and np.array_equal(loaded[name], saved[name]) for name in saved)


def test_an_old_language_model_json_reads_as_the_one_stack_kinds_with_its_values(runs):
    lm = TransformerConfig.load(runs / "lm" / "model.json")
    assert (lm.kind, lm.vocab_size, lm.n_layers, lm.causal) == ("decoder-only", 75, 1, True)
    assert (lm.src_vocab_size, lm.tgt_vocab_size, lm.n_encoder_layers, lm.n_decoder_layers) == (75, 75, 0, 1)
    assert (lm.positional, lm.norm_variant, lm.norm_eps, lm.norm_placement, lm.activation, lm.tie_embeddings) == \
           ("learned", "torch", 1e-5, "pre", "gelu", True)
    mlm = TransformerConfig.load(runs / "mlm" / "model.json")
    assert (mlm.kind, mlm.n_encoder_layers, mlm.n_decoder_layers, mlm.causal, mlm.norm_placement) == \
           ("encoder-only", 1, 0, False, "post")
    assert TransformerConfig.from_json(lm.to_json()) == lm                  # written again in the new form


@pytest.mark.parametrize("run", KINDS)
def test_an_old_run_folder_gives_the_logits_the_old_code_gave(runs, run):
    """The weights are equal bit for bit (above); the logits may differ in their last float32
    bits only if the current forward pass adds its terms in another order (an engine-room form),
    hence rtol 1e-5."""
    with np.load(EXPECTED / "logits.npz") as expected:
        np.testing.assert_allclose(logits(load_checkpoint(runs / run).model, run), expected[run], rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("run", ["translation", "lm"])
def test_an_old_export_to_torch_loads_the_weights_of_its_run(runs, run):
    exported = load_torch(runs / f"{run}_torch")
    checkpoint = load_checkpoint(runs / run)
    assert exported.config == checkpoint.model_config
    loaded, saved = weights(exported), weights(checkpoint.model)
    assert sorted(loaded) == sorted(saved) and all(np.array_equal(loaded[name], saved[name]) for name in saved)


@pytest.mark.parametrize("command, expected", [
    (["translate", "--checkpoint", "{runs}/translation", "--beam", "2", "the cat", "Elena orders some honey."],
     "translate.txt"),
    (["generate", "--checkpoint", "{runs}/lm", "--max-new-tokens", "6", "--temperature", "0", "the"],
     "generate_greedy.txt"),
    (["generate", "--checkpoint", "{runs}/lm", "--max-new-tokens", "6", "--top-k", "5", "--seed", "3", "the"],
     "generate_sampled.txt"),
    (["fill-mask", "--checkpoint", "{runs}/mlm", "--top-k", "3", "the [MASK] is"], "fill_mask.txt"),
], ids=["translate", "generate-greedy", "generate-sampled", "fill-mask"])
def test_the_commands_print_what_the_old_code_printed(runs, command, expected):
    status, out, err = run_main([part.format(runs=runs) for part in command])
    assert status == 0, err
    assert out == (EXPECTED / expected).read_text(encoding="utf-8")


def evaluation_figures(text):
    """The lines of `evaluate`'s output that carry its results: the sample outputs, the BLEU and
    chrF rows, the perplexity and the accuracy."""
    pattern = r"^ *(?:greedy|beam 2|best|perplexity|Test split).*$"
    lines = [line.strip() for line in re.findall(pattern, text, flags=re.MULTILINE)]
    return [re.sub(r", [\d,]+ sources, one reference each\.$", ".", line) for line in lines]   # the count added since


@pytest.mark.parametrize("run", KINDS)
def test_evaluate_gives_the_old_code_s_scores(runs, run):
    status, out, err = run_main(["evaluate", "--checkpoint", runs / run, "--beam", "2", "--samples", "1", "--quiet"])
    assert status == 0, err
    expected = evaluation_figures((EXPECTED / f"evaluate_{run}.txt").read_text(encoding="utf-8"))
    assert expected and evaluation_figures(out) == expected


@pytest.mark.parametrize("run", KINDS)
def test_an_old_run_resumes_to_the_weights_the_old_code_reached(runs, tmp_path, run):
    """Two more steps from the old checkpoint (its Adam moments, its generators' states, the
    masks of mlm) land on the weights the old code's resume reached (to rtol 1e-5, as the
    logits)."""
    folder = shutil.copytree(runs / run, tmp_path / run)
    status, out, err = run_main(["train", "--out", folder, "--resume", "--steps", "6", "--quiet"])
    assert status == 0, err
    resumed = saved_weights(folder)
    with np.load(EXPECTED / "resumed.npz") as expected:
        old = {key.removeprefix(f"{run}/model/"): expected[key] for key in expected.files if key.startswith(f"{run}/")}
    assert sorted(resumed) == sorted(old)
    np.testing.assert_allclose(np.concatenate([resumed[name].ravel() for name in old]),
                               np.concatenate([old[name].ravel() for name in old]), rtol=1e-5, atol=1e-6)


def test_a_model_json_of_another_kind_than_the_task_s_is_refused_naming_both_files(runs, tmp_path):
    folder = shutil.copytree(runs / "lm", tmp_path / "lm")
    shutil.copy(runs / "mlm" / "model.json", folder / "model.json")            # an encoder-only model, same vocabulary
    with pytest.raises(CheckpointError, match=r"lm/model.json does not describe a model of the task 'lm' of "
                                              r".*lm/data.json: DecoderOnlyTransformer: config must be a "
                                              r"TransformerConfig of kind 'decoder-only'"):
        load_checkpoint(folder)
