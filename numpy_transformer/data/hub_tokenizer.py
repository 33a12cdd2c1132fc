"""The tokenizer of a Hugging Face checkpoint: its `tokenizer.json` read by `tokenizers`
(byte-level BPE for GPT-2, WordPiece for BERT), with the roles of its special tokens, behind
the interface of this project's `WordTokenizer` that generation and fill-mask read.

    tokenizer = HubTokenizer.load("path/to/bert-base-uncased")
    tokenizer.encode("Hello there")     # ids, no special tokens; [CLS] … [SEP] are added by the caller

Roles. GPT-2 has one special token, `<|endoftext|>`: it ends a text, and starts one when the
prompt is empty; GPT-2 has no [SOS] and no padding. BERT has [CLS] [SEP] [MASK] [PAD] [UNK].
The names come from the checkpoint's special_tokens_map.json when it has one. A tokenizer whose
post-processor puts the beginning-of-text token first (a model exported from this project,
trained to read [SOS] first) has it as `sos_id`, which generation puts before the prompt.
"""
import json
from pathlib import Path

from numpy_transformer.data.tokenizer import TextTokenizer

TOKENIZER_FILE, SPECIAL_TOKENS_FILE = "tokenizer.json", "special_tokens_map.json"
DEFAULT_ROLES = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "cls_token": "[CLS]",
                 "sep_token": "[SEP]", "mask_token": "[MASK]", "pad_token": "[PAD]", "unk_token": "[UNK]"}


class HubTokenizer(TextTokenizer):
    """A `tokenizers.Tokenizer` and the ids of its special tokens (None where it has none)."""

    def __init__(self, tokenizer, roles, language="en"):
        self.tokenizer, self.language = tokenizer, language
        ids = {role: tokenizer.token_to_id(token) for role, token in roles.items()}
        self.bos_id, self.eos_id, self.unk_id = ids["bos_token"], ids["eos_token"], ids["unk_token"]
        self.cls_id, self.sep_id, self.mask_id, self.pad_id = (ids["cls_token"], ids["sep_token"], ids["mask_token"],
                                                               ids["pad_token"])
        self.special_ids = sorted({i for i in ids.values() if i is not None})
        framed = tokenizer.encode("", add_special_tokens=True).ids
        self.sos_id = self.bos_id if framed[:1] == [self.bos_id] else None     # the prompt as it is, GPT-2's way

    @classmethod
    def load(cls, folder):
        """The tokenizer of a checkpoint folder (tokenizer.json, special_tokens_map.json)."""
        from tokenizers import Tokenizer

        folder = Path(folder)
        path = folder / TOKENIZER_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (only the fast tokenizers' {TOKENIZER_FILE} is read)")
        roles = dict(DEFAULT_ROLES)
        if (folder / SPECIAL_TOKENS_FILE).is_file():
            saved = json.loads((folder / SPECIAL_TOKENS_FILE).read_text(encoding="utf-8"))
            roles.update({role: value["content"] if isinstance(value, dict) else value
                          for role, value in saved.items() if role in roles})
        return cls(Tokenizer.from_file(str(path)), roles)
