"""--checkpoint names a folder that does not exist: every command says so in one line, with the
`train` command that makes the model it reads there; the Hugging Face Hub is asked only for
names shaped as a Hub repository's (`gpt2`, `owner/name`), never for a path such as
runs/default, ./run or data/run beside a folder data/."""
import argparse

import pytest
from huggingface_hub.utils import HFValidationError, validate_repo_id

from numpy_transformer.cli import build_parser
from numpy_transformer.interop.pretrained import looks_like_hub_name, names_pretrained

from run_helpers import run_main

TRAIN = "train a model there with `numpy-transformer train"
# each command that takes --checkpoint, its other arguments, and the end of its line after "runs/default: "
COMMANDS = {
    "translate": (["hello"], f"{TRAIN} --out runs/default`"),
    "evaluate": ([], f"{TRAIN} --out runs/default` (--task lm for a GPT, --task mlm for a BERT)"),
    "attention": (["hello"], f"{TRAIN} --out runs/default` (--task lm for a GPT, --task mlm for a BERT)"),
    "generate": (["hello"], f"{TRAIN} --task lm --out runs/default`"),
    "fill-mask": (["a [MASK] ."], f"{TRAIN} --task mlm --out runs/default`"),
    "export": (["--to", "torch", "runs/exported"], f"{TRAIN} --out runs/default` (--task lm for a GPT)"),
    "embed": (["hello"], "embed reads a BERT-architecture encoder such as all-MiniLM-L6-v2 (a folder of "
                         "config.json, model.safetensors and tokenizer.json, or a Hub name: "
                         "sentence-transformers/all-MiniLM-L6-v2), not a run folder of train"),
}


@pytest.fixture
def no_hub(monkeypatch, tmp_path):
    """An empty working folder (no runs/ in it), and the Hub out of reach: asking it fails the test."""
    def asked(name, *args, **kwargs):
        raise AssertionError(f"the Hub was asked for {name!r}")

    for module in ("numpy_transformer.interop.pretrained", "numpy_transformer.interop.sentence_encoder"):
        monkeypatch.setattr(f"{module}.model_folder", asked)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def commands_with_checkpoint():
    subparsers = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    return {name for name, parser in subparsers.choices.items()
            if any("--checkpoint" in action.option_strings for action in parser._actions)}


def test_every_command_that_takes_a_checkpoint_is_checked_here():
    assert commands_with_checkpoint() == set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_run_folder_not_trained_yet_is_one_line_naming_the_train_that_makes_it(command, no_hub):
    arguments, advice = COMMANDS[command]
    status, out, err = run_main([command, "--checkpoint", "runs/default", *arguments])
    assert status == 1 and out == ""
    assert err == f"numpy-transformer {command}: error: no such folder runs/default: {advice}\n"
    assert not (no_hub / "runs").exists()


@pytest.mark.parametrize("command", ["generate", "fill-mask", "attention", "embed"])
@pytest.mark.parametrize("path", ["./run", "../run", "runs/examples/gpt", "data/run", "/nowhere/at/all", "~/run",
                                  "run/", "a/b/c", "my--run", "run.git"])
def test_a_path_that_is_no_hub_name_is_a_missing_folder_for_the_commands_that_read_hub_models(command, path, no_hub):
    (no_hub / "data").mkdir()
    arguments, _ = COMMANDS[command]
    status, out, err = run_main([command, "--checkpoint", path, *arguments])
    assert status == 1 and out == ""
    assert err.startswith(f"numpy-transformer {command}: error: no such folder {path}: ") and err.count("\n") == 1


@pytest.mark.parametrize("name", ["gpt2", "bert-base-uncased", "openai-community/gpt2",
                                  "sentence-transformers/all-MiniLM-L6-v2", "EleutherAI/pythia-70m", "a.b_c-d"])
def test_names_shaped_as_hub_repositories_are_hub_names(name, no_hub):
    validate_repo_id(name)
    assert looks_like_hub_name(name) and names_pretrained(name)


@pytest.mark.parametrize("name", ["runs/default", "runs/gpt", "./gpt2", "../gpt2", "/gpt2", "~/gpt2", "~gpt2",
                                  "gpt2/", "owner/name/more", "data/gpt2", "my--model", "my..model", ".gpt2", "gpt2.",
                                  "-gpt2", "gpt2.git", "a" * 97, "owner\\name", "", "a b"])
def test_paths_and_names_the_hub_refuses_are_not_hub_names(name, no_hub):
    (no_hub / "data").mkdir()
    assert not looks_like_hub_name(name) and not names_pretrained(name)


def test_the_rule_agrees_with_huggingface_hub_where_no_local_folder_decides(no_hub):
    """Every name huggingface_hub refuses is refused here too (the rule adds only the local
    folders: runs/ and an owner that is a folder here)."""
    for name in ["gpt2", "a/b", "a/b/c", "./a", "a--b", "a..b", ".a", "a.", "a.git", "a" * 96, "a" * 97, "x y", "é"]:
        try:
            validate_repo_id(name)
            valid = True
        except HFValidationError:
            valid = False
        assert looks_like_hub_name(name) == valid, name


def test_an_existing_folder_is_never_a_hub_name(no_hub):
    (no_hub / "gpt2").mkdir()
    assert looks_like_hub_name("openai-community/gpt2") and not names_pretrained("gpt2")
    status, _, err = run_main(["generate", "--checkpoint", "gpt2", "hello"])
    assert status == 1 and "no checkpoint in gpt2: checkpoint.npz is missing" in err and err.count("\n") == 1
