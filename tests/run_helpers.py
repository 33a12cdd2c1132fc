"""Small runs for the training, checkpoint, evaluation and command tests: a model of a few
thousand parameters on a hundred built-in pairs trains in a fraction of a second."""
import contextlib
import importlib.util
import io
import json
import re
from pathlib import Path
import shutil
import time

import numpy as np
import pytest

from numpy_transformer.cli import main
from numpy_transformer.data import Pair, builtin_corpus, detokenize
from numpy_transformer.training.cores import usable_cores
from numpy_transformer.training.settings import resolve

# --threads 2 is refused where this process may use one processor (a CPU set, a container's quota)
needs_two_cores = pytest.mark.skipif(usable_cores() < 2, reason="--threads 2 needs two processors this process may use")

TINY_MODEL = dict(d_model=16, n_heads=2, d_ff=32, dropout=0.1)
TINY_TRAINING = dict(batch_size=16, steps=10, warmup_steps=20, eval_every=5, log_every=2, checkpoint_every=5)
TINY_DATA = dict(dataset="builtin", tokenizer="word", shared_vocabulary=False, n_pairs=120, max_len=32)


def tiny_configs(model=None, training=None, data=None):
    """(model fields, TrainingConfig, DataConfig) of a tiny run on 120 built-in pairs: 108 for
    training, 7 batches of 16 per epoch."""
    return resolve("default", {**TINY_MODEL, **(model or {})}, {**TINY_TRAINING, **(training or {})},
                   {**TINY_DATA, **(data or {})})


def weights(model):
    return {name: p.data.copy() for name, p in model.named_parameters()}


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def written_pairs(n, seed=1):
    """n built-in pairs as written text (`l'uomo.`), the way a real corpus stores them."""
    return [Pair(detokenize(p.src, "en"), detokenize(p.tgt, "it")) for p in builtin_corpus(n, seed=seed)]


def write_opus_jsonl(path, pairs):
    """A JSON-lines file in the opus_books schema: {"id", "translation": {"en", "it"}} per line."""
    rows = [{"id": str(i), "translation": {"en": pair.src, "it": pair.tgt}} for i, pair in enumerate(pairs)]
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def run_main(args):
    """(exit status, stdout, stderr) of main(args), SystemExit included (argparse's errors)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([str(arg) for arg in args])
        except SystemExit as exit:
            status = exit.code
    return status, out.getvalue(), err.getvalue()


def assert_clear_error(status, err, message, absent_folder=None):
    assert status == 1
    assert "Traceback" not in err
    assert err.startswith("numpy-transformer ") and ": error: " in err
    assert re.search(message, err), err
    if absent_folder is not None:
        assert not absent_folder.exists()


def fake_cached_dataset(cache_dir, name, config, splits):
    """Write the splits ({split: rows}, rows as dicts) of a Hub dataset `owner/name` where
    `datasets` keeps a downloaded one: <cache>/<owner>___<name>/<config>/<version>/<hash>/ with
    its Arrow files, so that it loads offline as the cached copy."""
    import datasets

    files = {}
    for split, rows in splits.items():
        files[split] = cache_dir.parent / f"{split}.jsonl"
        files[split].write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    build = cache_dir.parent / "build"
    datasets.load_dataset("json", data_files={split: str(path) for split, path in files.items()}, cache_dir=str(build))
    (built,) = [p for p in (build / "json").glob("*/*/*") if p.is_dir()]
    owner, short = name.split("/")
    target = cache_dir / f"{owner}___{short}" / config / "0.0.0" / "0123456789abcdef"
    target.mkdir(parents=True)
    for split in splits:
        shutil.copy(built / f"json-{split}.arrow", target / f"{short}-{split}.arrow")
    info = json.loads((built / "dataset_info.json").read_text())
    info.update(builder_name=short, dataset_name=short, config_name=config)
    for split in info["splits"].values():
        split["dataset_name"] = short
    (target / "dataset_info.json").write_text(json.dumps(info))


def assert_unavailable_at_once(load, start, hints):
    """`load()` raises DataUnavailableError within seconds, its message starting with `start`
    and holding every one of `hints` (the ways on)."""
    from numpy_transformer.data import DataUnavailableError

    began = time.perf_counter()
    try:
        load()
    except DataUnavailableError as error:
        message = str(error)
    else:
        raise AssertionError("no DataUnavailableError")
    assert time.perf_counter() - began < 10
    assert message.startswith(start), message
    for hint in hints:
        assert hint in message, hint


def load_example(name):
    """The module of examples/<name>.py, loaded from its file (the examples are not a package)."""
    path = Path(__file__).parent.parent / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
