"""The real corpus of the thesis's experiments (§3.1): `Helsinki-NLP/opus_books` through
`datasets`, English→Italian by default (config `en-it`: 32,332 pairs of sentences from
copyright-free books, one `train` split, rows {"id", "translation": {"en", "it"}}).

The corpus has no validation or test split: `load_opus_books` makes a seeded 90/5/5 one, after
an optional subset (the first N pairs, or N at random). Other language pairs of the corpus are
chosen by name ("de-en", "fr-it", …); the order says the direction ("it-en" translates Italian
into English from the `en-it` config).

Network. A cached copy is used first, offline (HF_DATASETS_CACHE, or `cache_dir`). Without
one, the Hub is probed for a few seconds before anything is downloaded; if it cannot be
reached (or HF_HUB_OFFLINE=1), `DataUnavailableError` says how to go on, at once, instead of
the library's minutes of retries.
"""
import contextlib
import re
import threading

from numpy_transformer.data.corpus import SPLIT_FRACTIONS, Pair, make_splits

OPUS_BOOKS = "Helsinki-NLP/opus_books"
# The configurations of opus_books (16 languages, the bitexts of its loading script).
OPUS_BOOKS_PAIRS = tuple("""
ca-de ca-en ca-hu ca-nl de-en de-eo de-es de-fr de-hu de-it de-nl de-pt de-ru el-en el-es el-fr el-hu
en-eo en-es en-fi en-fr en-hu en-it en-nl en-no en-pl en-pt en-ru en-sv eo-es eo-fr eo-hu eo-it eo-pt
es-fi es-fr es-hu es-it es-nl es-no es-pt es-ru fi-fr fi-no fi-pl fr-hu fr-it fr-nl fr-no fr-pl fr-pt
fr-ru fr-sv hu-it hu-nl hu-no hu-pl hu-pt hu-ru it-nl it-pt it-ru it-sv
""".split())
PAIR_FORM = re.compile(r"^([a-z]{2})-([a-z]{2})$")
HUB_TIMEOUT = 3.0   # seconds to wait for the Hub before calling it unreachable


class DataUnavailableError(RuntimeError):
    """The corpus is neither cached nor downloadable; the message says what to do instead."""


def parse_pair(pair):
    """'en-it' → ('en', 'it'): source and target language codes (two lowercase letters each)."""
    match = PAIR_FORM.match(pair) if isinstance(pair, str) else None
    if not match or match.group(1) == match.group(2):
        raise ValueError(f"pair must look like 'en-it' (source-target, two-letter language codes), got {pair!r}")
    return match.group(1), match.group(2)


def opus_books_config(source, target):
    """The corpus configuration holding the two languages (in either order)."""
    for config in (f"{source}-{target}", f"{target}-{source}"):
        if config in OPUS_BOOKS_PAIRS:
            return config
    with_source = [config for config in OPUS_BOOKS_PAIRS if source in config.split("-")]
    raise ValueError(
        f"opus_books has no {source}-{target} pair. Pairs with {source!r}: {', '.join(with_source) or 'none'}. "
        f"All {len(OPUS_BOOKS_PAIRS)}: {' '.join(OPUS_BOOKS_PAIRS)} (either order works; the list is at "
        f"https://huggingface.co/datasets/{OPUS_BOOKS}, or from datasets.get_dataset_config_names({OPUS_BOOKS!r}))")


def load_opus_books(pair="en-it", subset=None, subset_mode="first", seed=0, cache_dir=None,
                    fractions=SPLIT_FRACTIONS):
    """opus_books for a language pair, split into train, validation and test (a `DataSplits`).

    subset: keep N pairs before splitting, the first N (subset_mode="first") or N drawn at
    random with the seed ("random"). cache_dir: where `datasets` keeps its copy (default
    HF_DATASETS_CACHE, ~/.cache/huggingface/datasets).
    Raises DataUnavailableError when the Hub cannot be reached and nothing is cached."""
    source, target = parse_pair(pair)
    config = opus_books_config(source, target)
    table = cached_opus_books(config, cache_dir)
    if table is None:
        table = download_opus_books(config, cache_dir)
    return opus_splits(table, pair, subset, subset_mode, seed, fractions)


def opus_splits(table, pair="en-it", subset=None, subset_mode="first", seed=0, fractions=SPLIT_FRACTIONS):
    """Split a table of the opus_books schema ({"id", "translation": {…}} rows, a
    `datasets.Dataset` or a list of dicts): the part of `load_opus_books` after the download."""
    source, target = parse_pair(pair)
    pairs = [Pair(row[source], row[target]) for row in table["translation"]] if hasattr(table, "column_names") \
        else [Pair(row["translation"][source], row["translation"][target]) for row in table]
    return make_splits(pairs, f"opus_books {pair} ({OPUS_BOOKS}, {len(pairs)} pairs)", subset, subset_mode, seed,
                       fractions, (source, target))


def cached_opus_books(config, cache_dir=None):
    """The cached copy of a configuration, read with the network switched off; None if absent."""
    import datasets

    with _offline(), _quiet():
        try:
            return datasets.load_dataset(OPUS_BOOKS, config, split="train", cache_dir=cache_dir)
        except Exception:  # any failure here means "no usable cached copy": the caller goes online
            return None


def download_opus_books(config, cache_dir=None):
    """Download a configuration, after checking that the Hub answers."""
    import datasets

    if datasets.config.HF_HUB_OFFLINE or not hub_is_reachable():
        raise DataUnavailableError(unavailable_message(config, cache_dir))
    try:
        return datasets.load_dataset(OPUS_BOOKS, config, split="train", cache_dir=cache_dir)
    except ConnectionError:
        raise DataUnavailableError(unavailable_message(config, cache_dir)) from None


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


def unavailable_message(config, cache_dir=None):
    import datasets

    cache = cache_dir or datasets.config.HF_DATASETS_CACHE
    reason = "offline mode is on (HF_HUB_OFFLINE)" if datasets.config.HF_HUB_OFFLINE else \
        f"the Hugging Face Hub ({datasets.config.HF_ENDPOINT}) cannot be reached"
    source, target = config.split("-")
    return (
        f"Cannot load opus_books {config}: {reason}, and no copy is cached in {cache}.\n"
        f"Three ways on:\n"
        f"  1. A cached copy: on a machine with network run\n"
        f"       python -c \"import datasets; datasets.load_dataset('{OPUS_BOOKS}', '{config}')\"\n"
        f"     then copy its cache folder here and point HF_DATASETS_CACHE at it "
        f"(HF_HUB_OFFLINE=1 then skips the network entirely).\n"
        f"  2. Local files: --dataset FILE, a JSON-lines, CSV/TSV or Parquet file with rows "
        f"{{\"id\", \"translation\": {{\"{source}\", \"{target}\"}}}} or two columns {source}, {target}.\n"
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
