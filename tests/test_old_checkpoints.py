"""Run folders and exported folders written by numpy-transformer 0.1 (tests/data/checkpoints_0_1,
whose README says how they were made), before the model configurations became one
`TransformerConfig`, still load: the same configuration, the same weights, the same logits, and
the same outputs of `translate`, `generate`, `fill-mask` and `evaluate`."""
import json
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

# Logits computed from the same weights by other BLAS kernels than the old code's (OpenBLAS
# 0.3.31's SkylakeX and Sandybridge kernels on an Intel Xeon Sapphire Rapids; its Haswell kernels
# give the old code's numbers bit for bit) differ by up to 3 float32 steps of the largest logit,
# 1.2e-6 at most: 53 % of this tolerance at the worst element. It is no wider because the
# smallest wrong forward passes tried move them by only a few times it: every LayerNorm's ε ten
# times too large by 2.4 (translation) to 290 (mlm) times, the other LayerNorm formula by 6.9
# (lm) and 25 (mlm) times (docs/outputs.md, "How far the tests' numbers move").
LOGITS = dict(rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A copy of the fixture folders (the commands must not write into the repository's copy)."""
    copy = tmp_path_factory.mktemp("checkpoints_0_1")
    for name in (*KINDS, "translation_torch", "lm_torch"):
        shutil.copytree(FOLDERS / name, copy / name)
    return copy


def saved_archive(folder):
    with np.load(folder / "checkpoint.npz") as archive:
        return {key: archive[key] for key in archive.files}


def saved_weights(folder):
    return {key.removeprefix("model/"): value for key, value in saved_archive(folder).items() if key.startswith("model/")}


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


@pytest.mark.numerics
@pytest.mark.parametrize("run", KINDS)
def test_an_old_run_folder_gives_the_logits_the_old_code_gave(runs, run):
    """The weights are equal bit for bit (above); the logits differ in their last float32 bits
    where this machine's BLAS kernels, or the current forward pass, add terms in another order."""
    with np.load(EXPECTED / "logits.npz") as expected:
        np.testing.assert_allclose(logits(load_checkpoint(runs / run).model, run), expected[run], **LOGITS)


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
@pytest.mark.numerics
def test_the_commands_print_what_the_old_code_printed(runs, command, expected):
    """Word for word and digit for digit: multiplying every weight of the three models by
    1 + 1e-5 · N(0, 1), which moves their logits by 3e-5 to 2e-4 (40 times at least what another
    BLAS kernel moves them), left these outputs unchanged in three draws."""
    status, out, err = run_main([part.format(runs=runs) for part in command])
    assert status == 0, err
    assert out == (EXPECTED / expected).read_text(encoding="utf-8")


def evaluation_figures(text):
    """The lines of `evaluate`'s output that carry its results: the sample outputs, the BLEU and
    chrF rows, the perplexity and the accuracy; of the split's line, the pairs it counts (the
    sources and references that follow are this version's words)."""
    pattern = r"^ *(?:greedy|beam 2|best|perplexity|Test split).*$"
    return [re.sub(r"^(Test split: [\d,]+ pairs(?: \([^)]*\))?)[,.].*$", r"\1", line.strip())
            for line in re.findall(pattern, text, flags=re.MULTILINE)]


DECIMAL = re.compile(r"\d+\.\d+")


def reads_as(line, expected):
    """`line` is `expected` but for its decimal numbers, each of which may be one unit of the
    last printed digit away. A perplexity is the exponential of a float32 cross-entropy: one
    float32 step of mlm's 5.3743 nats moves its 215.7834 by 1.0e-4, and the nearest rounding
    boundary is 0.8e-4 away, so the third decimal is the BLAS kernel's. Across OpenBLAS's
    Haswell, SkylakeX and Sandybridge kernels the cross-entropies moved by one float32 step at
    most (translation's, under Sandybridge): a tenth of a unit of the printed figures."""
    got, want = DECIMAL.findall(line), DECIMAL.findall(expected)
    units = [10 ** len(number.partition(".")[2]) for number in want]
    return DECIMAL.sub("#", line) == DECIMAL.sub("#", expected) and \
        all(abs(round(float(a) * unit) - round(float(b) * unit)) <= 1 for a, b, unit in zip(got, want, units))


@pytest.mark.numerics
@pytest.mark.parametrize("run", KINDS)
def test_evaluate_gives_the_old_code_s_scores(runs, run):
    status, out, err = run_main(["evaluate", "--checkpoint", runs / run, "--beam", "2", "--samples", "1", "--quiet"])
    assert status == 0, err
    expected = evaluation_figures((EXPECTED / f"evaluate_{run}.txt").read_text(encoding="utf-8"))
    got = evaluation_figures(out)
    assert expected and len(got) == len(expected) and all(map(reads_as, got, expected)), (got, expected)


def test_a_figure_reads_as_the_old_one_one_unit_of_its_last_digit_away_and_no_further():
    expected = "perplexity 215.783 (cross-entropy 5.3743 nats per token), top-1 accuracy 6.8%"
    assert reads_as("perplexity 215.784 (cross-entropy 5.3742 nats per token), top-1 accuracy 6.8%", expected)
    assert not reads_as("perplexity 215.785 (cross-entropy 5.3743 nats per token), top-1 accuracy 6.8%", expected)
    assert not reads_as("perplexity 215.783 (cross-entropy 5.3743 nats per token), top-1 accuracy 9.1%", expected)
    assert not reads_as("perplexity 215.783 (cross-entropy 5.3743 nats per word), top-1 accuracy 6.8%", expected)


def moved_by_rounding(name):
    """The biases of the key projections: adding b_k to every key adds the same q·b_k to every
    score of a row, which the softmax takes away, so the loss does not depend on them and their
    gradient is zero but for rounding. Adam divides a gradient by its own size: it moves them by
    about the learning rate, in the direction the rounding took. After two steps they are the
    BLAS kernel's, not the code's (up to 25 times apart, relatively, between the old code's
    kernels and this machine's); every other weight agrees to 5e-6."""
    return name.endswith("W_k.bias")


def resume(runs, folder, run, steps):
    folder = folder if folder.exists() else shutil.copytree(runs / run, folder)
    status, out, err = run_main(["train", "--out", folder, "--resume", "--steps", steps, "--quiet"])
    assert status == 0, err
    return folder


@pytest.mark.numerics
@pytest.mark.parametrize("run", KINDS)
def test_an_old_run_resumes_to_the_weights_the_old_code_reached(runs, tmp_path, run):
    """Two more steps from the old checkpoint (its Adam moments and step count, its generators'
    states, the masks of mlm) land on the weights the old code's resume reached: each weight the
    loss depends on to rtol 1e-5 (the largest deviation across BLAS kernels uses 0.5 % of it;
    Adam's step count off by one misses by 88 times it, its moments halved by 109 to 144), and the
    model gives the logits of the old code's resumed model (LOGITS; a step count off by one misses
    them by 3,000 times the tolerance), the biases of its key projections included."""
    folder = resume(runs, tmp_path / run, run, steps=6)
    resumed = saved_weights(folder)
    with np.load(EXPECTED / "resumed.npz") as expected:
        old = {key.removeprefix(f"{run}/model/"): expected[key] for key in expected.files if key.startswith(f"{run}/")}
    assert sorted(resumed) == sorted(old)
    compared = [name for name in old if not moved_by_rounding(name)]
    assert len(old) - len(compared) == {"translation": 3, "lm": 1, "mlm": 1}[run]
    np.testing.assert_allclose(np.concatenate([resumed[name].ravel() for name in compared]),
                               np.concatenate([old[name].ravel() for name in compared]), rtol=1e-5, atol=1e-6)
    model = load_checkpoint(folder).model
    ours = logits(model, run)
    model.load_state_dict(old)
    np.testing.assert_allclose(ours, logits(model, run), **LOGITS)


@pytest.mark.numerics
@pytest.mark.parametrize("run", KINDS)
def test_an_old_run_resumed_in_two_parts_ends_bit_for_bit_where_it_ends_in_one(runs, tmp_path, run):
    """The checkpoint a resumed old run writes holds all the state the old one did: resumed to
    step 5, then to step 6, the run ends on the checkpoint a resume to step 6 in one go writes,
    bit for bit (the key projections' biases and Adam's moments included), on any BLAS kernel:
    both are computed on this machine."""
    whole = saved_archive(resume(runs, tmp_path / "whole", run, steps=6))
    resume(runs, tmp_path / "parts", run, steps=5)
    parts = saved_archive(resume(runs, tmp_path / "parts", run, steps=6))
    assert sorted(parts) == sorted(whole)
    arrays = [key for key in whole if key != "state"]
    assert [key for key in arrays if not np.array_equal(parts[key], whole[key])] == []
    loop_state = [json.loads(str(archive["state"])) for archive in (parts, whole)]
    for state in loop_state:
        del state["train_seconds"]                      # a clock, not a state
    assert loop_state[0] == loop_state[1]


def test_a_model_json_of_another_kind_than_the_task_s_is_refused_naming_both_files(runs, tmp_path):
    folder = shutil.copytree(runs / "lm", tmp_path / "lm")
    shutil.copy(runs / "mlm" / "model.json", folder / "model.json")            # an encoder-only model, same vocabulary
    with pytest.raises(CheckpointError, match=r"lm/model.json does not describe a model of the task 'lm' of "
                                              r".*lm/data.json: DecoderOnlyTransformer: config must be a "
                                              r"TransformerConfig of kind 'decoder-only'"):
        load_checkpoint(folder)
