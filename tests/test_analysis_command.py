"""The `attention` subcommand (numpy_transformer/cli/attention_maps.py) on a tiny trained run."""
import argparse

import pytest

from numpy_transformer.analysis.capture import AttentionCapture
from numpy_transformer.cli.attention_maps import add_parser
from numpy_transformer.training.checkpoint import CheckpointError
from numpy_transformer.training.run import Run
from run_helpers import tiny_configs


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    run = Run.new(tmp_path_factory.mktemp("run") / "run", *tiny_configs(training={"steps": 2}), report=None)
    run.train()
    return run.directory


def parse(argv):
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_the_command_writes_the_figures_and_prints_the_roles(checkpoint, tmp_path, capsys):
    args = parse(["attention", "--checkpoint", str(checkpoint), "the cat sleeps .", "--out", str(tmp_path),
                  "--format", "svg", "--target", "il gatto dorme ."])
    assert args.run(args) == 0
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != ".numpy-transformer-output.json")
    assert names == ["attention.npz", "decoder_cross_attn.svg", "decoder_self_attn.svg", "encoder_self_attn.svg",
                     "spectra.svg"]
    printed = capsys.readouterr().out
    assert "| encoder.0.self_attn | 0 |" in printed and "| decoder.0.cross_attn | 1 |" in printed
    assert "target (given): [SOS] il " in printed and "Structured approximation" in printed
    assert len(AttentionCapture.load(tmp_path / "attention.npz").tgt_tokens) == 5     # [SOS] il gatto dorme .


def test_a_missing_checkpoint_is_the_checkpoints_error(tmp_path):
    args = parse(["attention", "--checkpoint", str(tmp_path / "none"), "a sentence"])
    with pytest.raises(ValueError, match="no such folder .*none: train a model there"):
        args.run(args)
    (tmp_path / "empty").mkdir()
    args = parse(["attention", "--checkpoint", str(tmp_path / "empty"), "a sentence"])
    with pytest.raises(CheckpointError, match="no checkpoint in .*empty: checkpoint.npz is missing"):
        args.run(args)
