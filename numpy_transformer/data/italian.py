"""Italian morphology for the built-in corpus: articles, elision, articulated prepositions,
possessives, demonstratives, adjective agreement and present-tense conjugation.

Words are lowercase strings. An elided word keeps its apostrophe and stands as a token of its
own (`l'` `uomo`): the tokenised form of the corpus; `detokenize` joins them back (`l'uomo`).

The article depends on the sound the next word starts with (its *onset*):

| onset                                   | example            | m. sg. | m. pl. | f. sg. | f. pl. |
|-----------------------------------------|--------------------|--------|--------|--------|--------|
| consonant                               | ragazzo, casa      | il     | i      | la     | le     |
| vowel                                   | uomo, acqua        | l'     | gli    | l'     | le     |
| "impure": s + consonant, z, gn, ps, x   | studente, zio      | lo     | gli    | la     | le     |

The indefinite article: un / uno (impure onset) for the masculine, una / un' (vowel) for the
feminine: `un uomo` (no apostrophe: `un` is a full form), `un'amica`, `uno zaino`.
"""
VOWELS = "aeiouàèéìòù"
IMPURE_PREFIXES = ("gn", "ps", "pn", "x", "z")

DEFINITE = {("m", "sg"): {"consonant": "il", "vowel": "l'", "impure": "lo"},
            ("m", "pl"): {"consonant": "i", "vowel": "gli", "impure": "gli"},
            ("f", "sg"): {"consonant": "la", "vowel": "l'", "impure": "la"},
            ("f", "pl"): {"consonant": "le", "vowel": "le", "impure": "le"}}
INDEFINITE = {"m": {"consonant": "un", "vowel": "un", "impure": "uno"},
              "f": {"consonant": "una", "vowel": "un'", "impure": "una"}}

# Preposition + definite article in one word: the preposition's stem, then the article's ending.
#   di + il = del, a + lo = allo, da + l' = dall', in + la = nella, su + gli = sugli.
ARTICULATED_STEM = {"di": "de", "a": "a", "da": "da", "in": "ne", "su": "su"}
ARTICLE_ENDING = {"il": "l", "lo": "llo", "l'": "ll'", "la": "lla", "i": "i", "gli": "gli", "le": "lle"}

# Demonstratives follow the definite article's pattern: quel ragazzo, quello studente, quell'uomo.
THIS = {"il": "questo", "lo": "questo", "l'": "quest'", "la": "questa", "i": "questi", "gli": "questi",
        "le": "queste"}
THAT = {"il": "quel", "lo": "quello", "l'": "quell'", "la": "quella", "i": "quei", "gli": "quegli",
        "le": "quelle"}

# Possessive adjectives (m. sg., f. sg., m. pl., f. pl.): they agree with the possessed noun.
POSSESSIVES = {"my": ("mio", "mia", "miei", "mie"), "your": ("tuo", "tua", "tuoi", "tue"),
               "his": ("suo", "sua", "suoi", "sue"), "her": ("suo", "sua", "suoi", "sue"),
               "our": ("nostro", "nostra", "nostri", "nostre"), "their": ("loro", "loro", "loro", "loro")}

# The persons of a conjugation table, in order (io, tu, lui/lei, noi, voi, loro). The corpus
# never uses voi: English `you` is translated as tu.
PERSONS = ((1, "sg"), (2, "sg"), (3, "sg"), (1, "pl"), (2, "pl"), (3, "pl"))


def onset(word):
    """'vowel', 'impure' (s + consonant, z, gn, ps, pn, x) or 'consonant': what an article sees."""
    if word[0] in VOWELS:
        return "vowel"
    if (word[0] == "s" and len(word) > 1 and word[1] not in VOWELS) or word.startswith(IMPURE_PREFIXES):
        return "impure"
    return "consonant"


def definite_article(gender, number, next_word):
    """il / lo / l' / la / i / gli / le for a noun phrase whose next word is `next_word`."""
    return DEFINITE[gender, number][onset(next_word)]


def indefinite_article(gender, next_word):
    """un / uno / una / un' (singular only; the plural 'some' is the partitive `di` + article)."""
    return INDEFINITE[gender][onset(next_word)]


def articulated(preposition, article):
    """di/a/da/in/su fused with a definite article: ('in', "l'") → "nell'"."""
    return ARTICULATED_STEM[preposition] + ARTICLE_ENDING[article]


def demonstrative(near, article):
    """questo (near=True, 'this') or quello ('that') in the form that replaces `article`."""
    return (THIS if near else THAT)[article]


def possessive(owner, gender, number):
    """mio, tua, suoi, nostre, loro…: agrees with the possessed noun, not with the owner
    (`his house` and `her house` are both `la sua casa`); `loro` never changes."""
    return agree(POSSESSIVES[owner], gender, number)


def with_euphonic_d(word, next_word):
    """'e' → 'ed' and 'a' → 'ad' before the same vowel, accented or not: `ed esce`, `ed è`,
    `ad Anna`."""
    if word in ("e", "a") and next_word[0].lower() in {"e": "eèé", "a": "aà"}[word]:
        return word + "d"
    return word


def adjective_forms(spec):
    """The four forms (m. sg., f. sg., m. pl., f. pl.) of an adjective from its lexicon entry:
    'rosso' → rosso/rossa/rossi/rosse, 'grande' → grande/grande/grandi/grandi, 'blu' → blu ×4
    (invariable), or the four forms spelled out where the plural changes the spelling
    ('stanco/stanca/stanchi/stanche')."""
    if "/" in spec:
        return tuple(spec.split("/"))
    if spec.endswith("o"):
        return spec, spec[:-1] + "a", spec[:-1] + "i", spec[:-1] + "e"
    if spec.endswith("e"):
        return spec, spec, spec[:-1] + "i", spec[:-1] + "i"
    return spec, spec, spec, spec


def agree(forms, gender, number):
    """The form of an adjective (its four forms) agreeing with a noun of this gender and number."""
    return forms[("m", "f").index(gender) + 2 * ("sg", "pl").index(number)]


# Present indicative of the irregular verbs the corpus uses (io, tu, lui/lei, noi, voi, loro).
IRREGULAR_VERBS = {
    "essere": ("sono", "sei", "è", "siamo", "siete", "sono"),
    "avere": ("ho", "hai", "ha", "abbiamo", "avete", "hanno"),
    "andare": ("vado", "vai", "va", "andiamo", "andate", "vanno"),
    "fare": ("faccio", "fai", "fa", "facciamo", "fate", "fanno"),
    "dare": ("do", "dai", "dà", "diamo", "date", "danno"),
    "bere": ("bevo", "bevi", "beve", "beviamo", "bevete", "bevono"),
    "venire": ("vengo", "vieni", "viene", "veniamo", "venite", "vengono"),
    "uscire": ("esco", "esci", "esce", "usciamo", "uscite", "escono"),
    "volere": ("voglio", "vuoi", "vuole", "vogliamo", "volete", "vogliono"),
    "potere": ("posso", "puoi", "può", "possiamo", "potete", "possono"),
    "dovere": ("devo", "devi", "deve", "dobbiamo", "dovete", "devono"),
    "scegliere": ("scelgo", "scegli", "sceglie", "scegliamo", "scegliete", "scelgono"),
}
# -ire verbs that insert -isc- in the singular and the third person plural.
ISC_VERBS = {"capire", "finire", "pulire", "costruire", "preferire"}
REGULAR_ENDINGS = {"are": ("o", "i", "a", "iamo", "ate", "ano"),
                   "ere": ("o", "i", "e", "iamo", "ete", "ono"),
                   "ire": ("o", "i", "e", "iamo", "ite", "ono"),
                   "isc": ("isco", "isci", "isce", "iamo", "ite", "iscono")}


def present(infinitive, person, number):
    """Present indicative: mangiare, 3, 'sg' → 'mangia'. Irregular verbs come from their table;
    regular ones add the endings of their conjugation (-are, -ere, -ire, -ire with -isc-) to the
    stem, with two spelling rules that keep the sound of the stem: -care/-gare verbs add h
    before i (cerchi, paghiamo); -iare verbs drop the stem's unstressed i before i (studi,
    mangiamo)."""
    slot = PERSONS.index((person, number))
    if infinitive in IRREGULAR_VERBS:
        return IRREGULAR_VERBS[infinitive][slot]
    conjugation = "isc" if infinitive in ISC_VERBS else infinitive[-3:]
    stem, ending = infinitive[:-3], REGULAR_ENDINGS[conjugation][slot]
    if conjugation == "are" and ending.startswith("i"):
        if stem.endswith(("c", "g")):
            stem += "h"
        elif stem.endswith("i"):
            stem = stem[:-1]
    return stem + ending
