"""The help of `numpy-transformer` says what the code does: every default it names is the
parser's (an option with a default of its own) or, for the flags of `train` that override the
preset, the default run's (the preset `default` over the configurations' own defaults); a
misspelled option is answered with the nearest one, and no option is taken by abbreviation."""
import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from numpy_transformer.cli import build_parser, main
from numpy_transformer.cli.common import DECODING_DEFAULTS
from numpy_transformer.cli.train import DEFAULT_OUT
from numpy_transformer.config import TransformerConfig
from numpy_transformer.training.presets import PRESETS
from numpy_transformer.training.settings import DataConfig, TrainingConfig

NAMED_DEFAULT = re.compile(r"(?:\(|; )default ([^\s;:),]+)")     # "(default 4; …", "…; default xavier_uniform"


def own_defaults(config_class):
    return {field.name: field.default for field in dataclasses.fields(config_class)
            if field.default is not dataclasses.MISSING}


DEFAULT_PRESET = PRESETS["default"]
DEFAULT_RUN = {"model": {**own_defaults(TransformerConfig), **DEFAULT_PRESET.model},
               "training": {**own_defaults(TrainingConfig), **DEFAULT_PRESET.training},
               "data": {**own_defaults(DataConfig), **DEFAULT_PRESET.data}}
# train's flags that set a field under another name
OTHER_FIELDS = {"layers": ("model", "n_encoder_layers"), "warmup": ("training", "warmup_steps"),
                "clip_norm": ("training", "clip_norm"), "lr": ("training", None)}
# train's --out, --beam, --length-penalty: None tells the command it was not given
COMMAND_DEFAULTS = {"out": DEFAULT_OUT, **DECODING_DEFAULTS}


def subcommand_parsers(parser, name="numpy-transformer"):
    """(name, parser) of the command and of every subcommand, `bench precision` included."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, subparser in action.choices.items():
                yield from subcommand_parsers(subparser, f"{name} {command}")


def help_of_each_option(parser):
    """first option string → its help as `--help` prints it (on a terminal wide enough that no
    help is wrapped)."""
    helps, option = {}, None
    for line in parser.format_help().splitlines():
        started = re.match(r"  (-[^\s,]+)\S*(?: \S+)*?(?:\s{2,}(.*))?$", line)
        if started:
            option = started[1]
            helps[option] = started[2] or ""
        elif option and line.startswith(" " * 4):
            helps[option] += line.strip()
        else:
            option = None
    return helps


def expected_default(action):
    """The value an option takes when it is not given: its parser default, or for a flag of
    train that overrides the preset, the default run's value of its field (None: no value)."""
    if action.default is not None:
        return action.default
    section, _, field = action.dest.partition(".")
    if field:
        return DEFAULT_RUN[section].get(field)          # attention_options: a fresh {} each time
    if action.dest in OTHER_FIELDS:
        section, field = OTHER_FIELDS[action.dest]
        if field == "warmup_steps" and DEFAULT_RUN["training"]["schedule"] != "warmup":
            return None
        return DEFAULT_RUN[section][field] if field else None
    return COMMAND_DEFAULTS.get(action.dest)


def means(named, value, action):
    """Whether the text `named` (what the help gives as the default) stands for `value`."""
    if isinstance(action, argparse.BooleanOptionalAction):
        return named == (action.option_strings[0] if value else action.option_strings[1])
    if isinstance(value, (list, tuple)):
        return named == " ".join(map(str, value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return re.fullmatch(r"[-+.\deE]+", named) is not None and float(named) == value
    return named == str(value)


@pytest.fixture
def parser(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")        # argparse wraps the help to the terminal's width
    return build_parser()


def test_every_default_the_help_names_is_the_parsers_or_the_default_runs(parser):
    checked = 0
    for name, command in subcommand_parsers(parser):
        actions = {option: action for action in command._actions for option in action.option_strings}
        for option, text in help_of_each_option(command).items():
            action = actions[option]
            value = expected_default(action)
            for named in NAMED_DEFAULT.findall(text):
                if value is None:
                    assert re.fullmatch(r"[A-Z_]+", named), \
                        f"{name} {option}: the help names the default {named!r}, the option has none: {text}"
                else:
                    assert means(named, value, action), f"{name} {option}: the help says {named!r}, the code {value!r}"
                    checked += 1
    assert checked >= 60


def test_every_flag_of_train_that_overrides_the_preset_names_its_default_when_it_has_one(parser):
    train = dict(subcommand_parsers(parser))["numpy-transformer train"]
    helps = help_of_each_option(train)
    overriding = [action for action in train._actions
                  if "." in action.dest or action.dest in OTHER_FIELDS and action.option_strings]
    assert len(overriding) > 40
    for action in overriding:
        value = expected_default(action)
        named = NAMED_DEFAULT.findall(helps[action.option_strings[0]])
        assert (len(named) == 1) == (value not in (None, {})), (action.option_strings[0], named, value)


def test_the_help_names_the_default_runs_corpus_tokenizer_and_weights(parser, capsys):
    data = DEFAULT_PRESET.data
    (train_line,) = [line for line in parser.format_help().splitlines() if line.strip().startswith("train ")]
    assert f"by default on dataset {data['dataset']}, en-it" in train_line
    train = dict(subcommand_parsers(parser))["numpy-transformer train"]
    assert (f"--preset default: {data['dataset']} en-it, one shared {data['tokenizer']} vocabulary of "
            f"{data['vocab_size']:,}, {DEFAULT_PRESET.model['init']} weights") in train.format_help()
    assert (data["dataset"], data["tokenizer"], data["shared_vocabulary"], DEFAULT_PRESET.model["init"]) == \
        ("tatoeba", "unigram", True, "xavier_uniform")          # the defaults the README and docs describe


def test_the_readme_describes_the_default_run_the_preset_trains():
    readme = " ".join((Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8").split())
    model, training, data = DEFAULT_PRESET.model, DEFAULT_PRESET.training, DEFAULT_PRESET.data
    assert data["dataset"] == "tatoeba" and "60,000 short, everyday pairs from the Tatoeba project" in readme
    assert (f"one layer each side, {model['n_heads']} heads, d_model {model['d_model']}, Glorot-uniform weights, "
            f"one {data['tokenizer']} vocabulary of {data['vocab_size']:,} pieces for both languages") in readme
    assert model["n_encoder_layers"] == model["n_decoder_layers"] == 1 and model["init"] == "xavier_uniform"
    assert data["shared_vocabulary"] and f"{training['steps']:,} steps of {training['batch_size']} pairs" in readme


@pytest.mark.parametrize("argv, misspelled, nearest", [
    (["train", "--stpes", "5"], "--stpes", "--steps"),
    (["train", "--tokeniser=word"], "--tokeniser", "--tokenizer"),
    (["translate", "--checkpoint", "runs/x", "--beem", "2"], "--beem", "--beam"),
    (["bench", "precision", "--config", "tiny"], "--config", "--configs"),
])
def test_a_misspelled_option_is_refused_by_its_command_with_the_nearest_option(argv, misspelled, nearest, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    command = " ".join(word for word in argv[:2] if not word.startswith("-"))
    assert exit_.value.code == 2
    assert err.startswith(f"usage: numpy-transformer {command} ")        # the command's usage, not the top level's
    assert err.splitlines()[-1] == (f"numpy-transformer {command}: error: unknown option {misspelled}; "
                                    f"did you mean {nearest}?")


def test_an_option_nothing_resembles_points_to_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["gradcheck", "--xyzzy"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "numpy-transformer gradcheck: error: unknown option --xyzzy (the options of numpy-transformer gradcheck "
        "are in numpy-transformer gradcheck --help)")


@pytest.mark.parametrize("argv, abbreviated, meant", [
    (["train", "--thread", "2"], "--thread", "--threads"),
    (["train", "--step", "5"], "--step", "--steps"),
    (["bench", "precision", "--step", "2"], "--step", "--steps"),
])
def test_no_option_is_taken_by_an_abbreviation(argv, abbreviated, meant, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert f"unknown option {abbreviated}; did you mean {meant}?" in capsys.readouterr().err


def test_n_pairs_with_the_default_corpus_is_one_line_saying_why(tmp_path, capsys):
    assert main(["train", "--n-pairs", "3000", "--out", str(tmp_path / "run")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("numpy-transformer train: error: --n-pairs (3000) would be ignored: it is the size of "
                           "the built-in corpus")
    assert "the dataset 'tatoeba' has its own size" in line and not (tmp_path / "run").exists()
