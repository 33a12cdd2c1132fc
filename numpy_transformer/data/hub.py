"""Datasets of the Hugging Face Hub through `datasets`, the cached copy first, and one clear
error within seconds when there is none and the Hub cannot be reached.

    tables = load_hub_dataset("wikitext", "wikitext-2-raw-v1", what="the wikitext corpus",
                              local_hint="--dataset FILE.txt, one text per line")
    tables["train"]["text"]

A cached copy is read with the network switched off (HF_DATASETS_CACHE, or `cache_dir`). Without
one, the Hub is probed for a few seconds before anything is downloaded; if it cannot be reached
(or HF_HUB_OFFLINE=1), `DataUnavailableError` says how to go on, at once, instead of the
library's minutes of retries.
"""
import contextlib
import threading
from pathlib import Path

HUB_TIMEOUT = 3.0   # seconds to wait for the Hub before calling it unreachable
MODEL_FILES = ["config.json", "model.safetensors", "tokenizer.json", "special_tokens_map.json",
               "tokenizer_config.json", "modules.json", "sentence_bert_config.json", "*Pooling/config.json"]


class DataUnavailableError(RuntimeError):
    """The corpus is neither cached nor downloadable; the message says what to do instead."""


def load_hub_dataset(name, config=None, cache_dir=None, split=None, what=None, local_hint=""):
    """The splits of a Hub dataset (a `datasets.DatasetDict`, or one `Dataset` when `split` is
    named): the cached copy, else a download once the Hub answers. what: how the error names the
    data; local_hint: the local-file way on that the error suggests.
    Raises DataUnavailableError when the Hub cannot be reached and nothing is cached."""
    import datasets

    with _offline(), _quiet():
        try:
            return datasets.load_dataset(name, config, split=split, cache_dir=cache_dir)
        except Exception:  # any failure here means "no usable cached copy": go online
            pass
    message = unavailable_message(name, config, cache_dir, what, local_hint)
    if datasets.config.HF_HUB_OFFLINE or not hub_is_reachable():
        raise DataUnavailableError(message)
    try:
        return datasets.load_dataset(name, config, split=split, cache_dir=cache_dir)
    except ConnectionError:
        raise DataUnavailableError(message) from None


def model_folder(name, cache_dir=None):
    """The local folder of a Hugging Face model: `name` itself when it is a folder, else the
    files of the Hub repository `name` (its config, safetensors weights and tokenizer) from the
    cache, or downloaded once the Hub answers. DataUnavailableError when neither, at once."""
    if Path(name).is_dir():
        return Path(name)
    import huggingface_hub.constants
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, allow_patterns=MODEL_FILES, cache_dir=cache_dir, local_files_only=True))
    except Exception:  # not cached (or not a repository name): the Hub decides
        pass
    message = model_unavailable_message(name, cache_dir or huggingface_hub.constants.HF_HUB_CACHE)
    if huggingface_hub.constants.HF_HUB_OFFLINE or not hub_is_reachable():
        raise DataUnavailableError(message)
    try:
        return Path(snapshot_download(name, allow_patterns=MODEL_FILES, cache_dir=cache_dir))
    except Exception as error:  # huggingface_hub raises its own types: a missing repository, a network fault
        raise DataUnavailableError(f"{message}\n(The Hub answered: {type(error).__name__}: {error})") from None


def model_unavailable_message(name, cache):
    import huggingface_hub.constants

    reason = "offline mode is on (HF_HUB_OFFLINE)" if huggingface_hub.constants.HF_HUB_OFFLINE else \
        f"the Hugging Face Hub ({huggingface_hub.constants.ENDPOINT}) cannot be reached"
    return (
        f"{name} is not a folder here, and the Hub model of that name cannot be loaded: {reason}, and no copy is "
        f"cached in {cache}.\n"
        f"Three ways on:\n"
        f"  1. A local folder: --checkpoint DIR holding config.json, model.safetensors and tokenizer.json (what "
        f"save_pretrained writes), or a run folder of numpy-transformer train.\n"
        f"  2. A cached copy: on a machine with network run\n"
        f"       python -c \"import huggingface_hub; huggingface_hub.snapshot_download({name!r})\"\n"
        f"     then copy its cache folder here and point HF_HUB_CACHE at it (HF_HUB_OFFLINE=1 then skips the "
        f"network entirely).\n"
        f"  3. A model trained here: numpy-transformer train --task lm (or mlm) --out DIR.")


def hub_is_reachable(endpoint=None, timeout=HUB_TIMEOUT):
    """True if the Hugging Face Hub (HF_ENDPOINT) answers an HTTP request within `timeout`
    seconds. The request runs in a thread, so a hanging name lookup cannot hold it longer."""
    import datasets
    from huggingface_hub.utils import get_session

    url, answered = endpoint or datasets.config.HF_ENDPOINT, []

    def probe():
        with contextlib.suppress(Exception):
            answered.append(get_session().head(url, timeout=timeout).status_code < 500)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 1)
    return bool(answered and answered[0])


def unavailable_message(name, config=None, cache_dir=None, what=None, local_hint=""):
    """Why the dataset cannot be loaded, and the three ways on: a cached copy, local files, the
    built-in corpus."""
    import datasets

    cache = cache_dir or datasets.config.HF_DATASETS_CACHE
    reason = "offline mode is on (HF_HUB_OFFLINE)" if datasets.config.HF_HUB_OFFLINE else \
        f"the Hugging Face Hub ({datasets.config.HF_ENDPOINT}) cannot be reached"
    arguments = ", ".join(repr(argument) for argument in (name, config) if argument)
    return (
        f"Cannot load {what or name}: {reason}, and no copy is cached in {cache}.\n"
        f"Three ways on:\n"
        f"  1. A cached copy: on a machine with network run\n"
        f"       python -c \"import datasets; datasets.load_dataset({arguments})\"\n"
        f"     then copy its cache folder here and point HF_DATASETS_CACHE at it "
        f"(HF_HUB_OFFLINE=1 then skips the network entirely).\n"
        f"  2. Local files: {local_hint}.\n"
        f"  3. The built-in corpus: --dataset builtin (synthetic English→Italian, no network needed).")


@contextlib.contextmanager
def _offline():
    """Switch datasets and huggingface_hub to offline mode (their flags are read at import
    time from HF_HUB_OFFLINE, so the environment variable cannot do it now)."""
    import datasets
    import huggingface_hub.constants

    saved = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved


@contextlib.contextmanager
def _quiet():
    """Silence the cache look-up's warnings ("Using the latest cached version…")."""
    import datasets

    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity_error()
    try:
        yield
    finally:
        datasets.logging.set_verbosity(verbosity)
