"""Turn tokenised text back into written text, before BLEU scoring and for display.

A word-level model reads and writes tokens: the Whitespace pre-tokenizer of the thesis's set-up
cuts `l'uomo` into `l`, `'`, `uomo` and `arrivò.` into `arrivò`, `.`; decoding joins tokens
with spaces (`l ' uomo arrivò .`). `detokenize` undoes that, so hypotheses and references are
scored as text (sacrebleu then applies its own, standard tokenisation).

Rules, in order:

| rule                                             | before                  | after                 |
|--------------------------------------------------|-------------------------|-----------------------|
| Italian: an apostrophe joins the elided word to  | `l ' uomo`, `dell' acqua` | `l'uomo`, `dell'acqua` |
| the next (but after po, mo, be it ends the word) | `un po ' di`            | `un po' di`           |
| English: an apostrophe before s, t, m, d, re,    | `don ' t`, `Anna ' s`   | `don't`, `Anna's`     |
| ve, ll joins both sides                          |                         |                       |
| no space before closing punctuation              | `sì , grazie !`         | `sì, grazie!`         |
| . , ; : ! ? % ) ] } » …                          |                         |                       |
| no space after opening punctuation ( [ { « ¿ ¡   | `( nota )`, `« ciao »`  | `(nota)`, `«ciao»`    |
| straight double quotes alternate open / close    | `" ciao " , disse`      | `"ciao", disse`       |
| curly and low double quotes pair up              | `„ Ja “`, `“ yes ”`     | `„Ja“`, `“yes”`       |
| decimal point and thousands separator            | `3 . 5`, `1 , 000`      | `3.5`, `1,000`        |
| a lone hyphen between two words                  | `ben - noto`            | `ben-noto`            |

Detokenizing written text changes nothing (the function is idempotent), so references from a
real corpus can go through it too.
"""
import re

LANGUAGES_WITH_ELISION = {"it", "fr", "ca"}
TRUNCATED = {"po", "mo", "be"}                       # po' (poco): the apostrophe ends the word
APOSTROPHE = "['’]"
ELISION = re.compile(rf"(\w+) ?({APOSTROPHE}) ?(?=\w)")
CONTRACTION = re.compile(rf"(\w) ?({APOSTROPHE}) ?(s|t|m|d|re|ve|ll)\b", re.IGNORECASE)
BEFORE_CLOSING = re.compile(r"\s+(?=[.,;:!?%)\]}»…])")
AFTER_OPENING = re.compile(r"(?<=[(\[{«¿¡])\s+")
NUMBER = re.compile(r"(?<=\d)([.,]) (?=\d)")
HYPHEN = re.compile(r"(?<=\w) - (?=\w)")
CURLY_QUOTED = re.compile(r"([„“]) ?([^„“”]+?) ?([“”])")       # German „…“, English “…”


def detokenize(text, language="it"):
    """Written text from tokenised `text` (see the table above). language: an ISO code; the
    apostrophe rule is the Italian one for it/fr/ca, the English one otherwise."""
    text = " ".join(text.split())
    if language in LANGUAGES_WITH_ELISION:
        text = ELISION.sub(_elide, text)
    else:
        text = CONTRACTION.sub(r"\1\2\3", text)
    text = AFTER_OPENING.sub("", BEFORE_CLOSING.sub("", text))
    text = NUMBER.sub(r"\1", text)
    text = CURLY_QUOTED.sub(r"\1\2\3", text)
    return _pair_double_quotes(HYPHEN.sub("-", text))


def _elide(match):
    word, apostrophe = match.group(1), match.group(2)
    return word + apostrophe + (" " if word.lower() in TRUNCATED else "")


def _pair_double_quotes(text):
    """Glue each opening `"` to the word after it and each closing one to the word before."""
    pieces = text.split('"')
    out = pieces[0]
    for k, piece in enumerate(pieces[1:]):
        if k % 2 == 0:                                   # opening quote
            out += '"' + piece.lstrip()
        else:                                            # closing quote
            out = out.rstrip() + '"' + piece
    return out
