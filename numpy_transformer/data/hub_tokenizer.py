"""The tokenizer of a Hugging Face checkpoint: its `tokenizer.json` read by `tokenizers`
(byte-level BPE for GPT-2, WordPiece for BERT), with the roles of its special tokens, behind
the interface of this project's `WordTokenizer` that generation and fill-mask read.

    tokenizer = HubTokenizer.load("path/to/bert-base-uncased")
    tokenizer.encode("Hello there")     # ids, no special tokens; [CLS] … [SEP] are added by the caller

Roles. GPT-2 has one special token, `<|endoftext|>`: it ends a text, and starts one when the
prompt is empty; GPT-2 has no [SOS] and no padding. BERT has [CLS] [SEP] [MASK] [PAD] [UNK].
The names come from the checkpoint's tokenizer_config.json and special_tokens_map.json (the
second where both name a role, the order in which `transformers` reads them), else the
defaults above. A tokenizer whose post-processor puts the beginning-of-text token first (a
model exported from this project, trained to read [SOS] first) has it as `sos_id`, which
generation puts before the prompt.

The files come from elsewhere and are checked as `transformers` reads them: each JSON file an
object, each role a string, null (no such token) or an object with a string "content" (an
AddedToken), tokenizer.json a tokenizer `tokenizers` reads. Any other value is a ValueError
naming the file and the field. The padding and truncation tokenizer.json may set (sentence-
embedding checkpoints pad every text to 128 tokens and cut longer ones) are switched off: the
commands frame the text themselves ([CLS] text [SEP]); fill-mask refuses a text longer than the
model reads, and embed cuts it where sentence-transformers does (`sentence_embedding.EmbeddingRecipe`).
"""
import json
from pathlib import Path

from numpy_transformer import bounded_json
from numpy_transformer.data.tokenizer import TextTokenizer

TOKENIZER_FILE, SPECIAL_TOKENS_FILE, TOKENIZER_CONFIG_FILE = ("tokenizer.json", "special_tokens_map.json",
                                                              "tokenizer_config.json")
DOWNLOAD_AGAIN = "the file is damaged or is not a Hugging Face file: download it again"
DEFAULT_ROLES = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "cls_token": "[CLS]",
                 "sep_token": "[SEP]", "mask_token": "[MASK]", "pad_token": "[PAD]", "unk_token": "[UNK]"}


class HubTokenizer(TextTokenizer):
    """A `tokenizers.Tokenizer` and the ids of its special tokens (None where it has none).
    roles: role → token; sources: role → the file that named it (None: the default);
    path: the tokenizer.json it was read from."""

    def __init__(self, tokenizer, roles, language="en", sources=None, path=Path(TOKENIZER_FILE)):
        self.tokenizer, self.language, self.path = tokenizer, language, path
        self.roles, self.sources = roles, sources or {}
        self.ids = {role: None if token is None else tokenizer.token_to_id(token) for role, token in roles.items()}
        ids = self.ids
        self.bos_id, self.eos_id, self.unk_id = ids["bos_token"], ids["eos_token"], ids["unk_token"]
        self.cls_id, self.sep_id, self.mask_id, self.pad_id = (ids["cls_token"], ids["sep_token"], ids["mask_token"],
                                                               ids["pad_token"])
        self.special_ids = sorted({i for i in ids.values() if i is not None})
        framed = self.encoding("", add_special_tokens=True).ids
        self.sos_id = self.bos_id if framed[:1] == [self.bos_id] else None     # the prompt as it is, GPT-2's way

    @classmethod
    def load(cls, folder):
        """The tokenizer of a checkpoint folder (tokenizer.json; tokenizer_config.json and
        special_tokens_map.json where it has them), its padding and truncation switched off."""
        folder = Path(folder)
        path = folder / TOKENIZER_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (only the fast tokenizers' {TOKENIZER_FILE} is read)")
        roles, sources = dict(DEFAULT_ROLES), {}
        for name in (TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_FILE):
            if (folder / name).is_file():
                named = saved_roles(folder / name)
                roles.update(named)
                sources.update(dict.fromkeys(named, name))
        return cls(read_tokenizer(path), roles, sources=sources, path=path)

    def encoding(self, text, add_special_tokens=False):
        """The `tokenizers` Encoding of `text`; a ValueError naming tokenizer.json when its model
        cannot encode it (a WordPiece vocabulary without its [UNK])."""
        try:
            return self.tokenizer.encode(text, add_special_tokens=add_special_tokens)
        except Exception as error:  # the tokenizers library raises a bare Exception
            raise ValueError(f"{self.path}: this tokenizer cannot encode {text[:40]!r} ({error})") from None

    def encode(self, text, keep=()):
        """Token ids of `text`, without special tokens. A special token's name typed in the text
        is that token, as `transformers` reads it (split_special_tokens=False), so that a Hugging
        Face checkpoint gives the outputs it gives there; `keep` changes nothing."""
        return self.encoding(text).ids

    def require(self, roles, command):
        """A ValueError naming the first of `roles` whose token tokenizer.json lacks, and the file
        that named it: `command` needs them."""
        for role in roles:
            token, source = self.roles[role], self.sources.get(role)
            if token is None:
                raise ValueError(f"{self.path.parent / source}: {role} is null, and {command} needs that token (name "
                                 f"the tokenizer's own token as {role} in {SPECIAL_TOKENS_FILE})")
            if self.ids[role] is None:
                named = f"of {source}" if source else "by default"
                raise ValueError(f"{self.path} has no token {token!r}, the {role} {named}: {command} needs it (name "
                                 f"the tokenizer's own token as {role} in {SPECIAL_TOKENS_FILE})")


def read_json(path):
    """The JSON value in the file `path`, read within bounds (`bounded_json`); a ValueError naming
    the file when it is not UTF-8 JSON, too large or too deep, or holds a number out of range."""
    return bounded_json.read_json(path, remedy=DOWNLOAD_AGAIN)


def saved_roles(path):
    """role → token named in a tokenizer_config.json or special_tokens_map.json, the roles of
    DEFAULT_ROLES only: a string, null (None, no such token), or an AddedToken's object whose
    "content" is the string."""
    saved = read_json(path)
    if not isinstance(saved, dict):
        raise ValueError(f"{path}: expected a JSON object of special tokens such as {{\"mask_token\": \"[MASK]\"}}, "
                         f"got {type(saved).__name__}")
    roles = {}
    for role in DEFAULT_ROLES.keys() & saved.keys():
        value = saved[role]
        token = value.get("content") if isinstance(value, dict) else value
        if token is not None and not isinstance(token, str):
            raise ValueError(f"{path}: {role} must be a token (a string, or an object whose \"content\" is one), got "
                             f"{json.dumps(value)[:60]}")
        roles[role] = token
    return roles


def read_tokenizer(path):
    """tokenizer.json as a `tokenizers.Tokenizer`, its padding and truncation switched off; a
    ValueError naming the file and what `tokenizers` found wrong, or the post-processor's
    template naming a special token it does not define (on which `tokenizers` would panic)."""
    from tokenizers import Tokenizer

    text = bounded_json.read_bounded(path, bounded_json.TOKENIZER_BYTES, DOWNLOAD_AGAIN)
    saved = bounded_json.parse_json(text, path, remedy=DOWNLOAD_AGAIN)
    try:
        tokenizer = Tokenizer.from_str(text.decode("utf-8"))
    except Exception as error:  # the tokenizers library raises a bare Exception, its message names the field
        raise ValueError(f"{path}: not a tokenizer `tokenizers` reads ({error})") from None
    undefined = undefined_template_tokens(saved.get("post_processor") if isinstance(saved, dict) else None)
    if undefined:
        raise ValueError(f"{path}: post_processor: its template puts the special token {undefined[0]!r}, which its "
                         f"special_tokens do not define")
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def undefined_template_tokens(processor):
    """The special tokens a TemplateProcessing post-processor (one alone, or in a Sequence) puts
    in its templates without defining them in its special_tokens."""
    if not isinstance(processor, dict):
        return []
    if processor.get("type") == "Sequence":
        return [token for inner in processor["processors"] for token in undefined_template_tokens(inner)]
    if processor.get("type") != "TemplateProcessing":
        return []
    used = {piece["SpecialToken"]["id"] for template in ("single", "pair") for piece in processor[template]
            if "SpecialToken" in piece}
    return sorted(used - processor["special_tokens"].keys())
