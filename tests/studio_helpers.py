"""Reading back what the attention studio wrote: the JSON block of a page, and the numbers a
head's equation view computes, in NumPy (tests/test_studio_data.py, tests/test_studio_browser.py)."""
import json
import re

import numpy as np

DATA_BLOCK = re.compile(r'<script type="application/json" id="attention-data">(.*?)</script>', re.S)


def page_data(path):
    """The data block of a studio page, parsed as another program would read it."""
    return json.loads(DATA_BLOCK.search(path.read_text(encoding="utf-8")).group(1))


def heads_of(data, kind):
    return [entry for entry in data["attention"] if entry["kind"] == kind]


def recomputed_weights(data, entry):
    """softmax(q kᵀ/√d_k + M) from the entry's rows and its kind's mask (eqs. (5), (6), (10))."""
    q, k = np.array(entry["q"]), np.array(entry["k"])
    allowed = np.array(data["masks"][entry["kind"]], dtype=bool)
    scores = np.where(allowed, q @ k.T / np.sqrt(entry["d_k"]), -np.inf)
    exps = np.exp(scores - scores.max(axis=1, keepdims=True))
    return exps / exps.sum(axis=1, keepdims=True)
