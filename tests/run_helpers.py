"""Small runs for the training, checkpoint, evaluation and command tests: a model of a few
thousand parameters on a hundred built-in pairs trains in a fraction of a second."""
import contextlib
import io
import json
import re

import numpy as np

from numpy_transformer.cli import main
from numpy_transformer.data import Pair, builtin_corpus, detokenize
from numpy_transformer.training.configs import resolve

TINY_MODEL = dict(d_model=16, n_heads=2, d_ff=32, dropout=0.1)
TINY_TRAINING = dict(batch_size=16, steps=10, warmup_steps=20, eval_every=5, log_every=2, checkpoint_every=5)
TINY_DATA = dict(n_pairs=120, max_len=32)


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
