"""The grammar of the built-in corpus: it writes an English sentence and its Italian translation
together, word by word, so the alignment between the two comes for free.

Every English word is an `EnglishWord`; every Italian word is an `ItalianWord` that lists the
English words it translates. Reordering (`the red apple` → `la mela rossa`), fusion (`in the` →
`nel`), dropping (`he eats` → `mangia`) and one-to-many (`never` → `non … mai`) are just which
English words each Italian word points at. `Phrase` concatenates both sides in order.

What the grammar covers, clause by clause (the `CLAUSES` table):

| clause        | English                                   | Italian                                   |
|---------------|-------------------------------------------|-------------------------------------------|
| action        | the boy does not eat the red apple        | il ragazzo non mangia la mela rossa       |
| intransitive  | she often sleeps in the garden            | dorme spesso nel giardino                 |
| description   | my sisters are tired                      | le mie sorelle sono stanche               |
| location      | the keys are on the shelf                 | le chiavi sono sullo scaffale             |
| existence     | there is an umbrella in the box           | c' è un ombrello nella scatola            |
| motion        | we go to the doctor                       | andiamo dal medico                        |
| modal         | I cannot read the letter                  | non posso leggere la lettera              |
| liking        | the children like the cake                | ai bambini piace la torta                 |
| giving        | he gives the book to Anna                 | dà il libro ad Anna                       |

Noun phrases take a determiner (the, a, some, my…, this, that, a number), an adjective now and
then, and a relative clause (`the book that I read` → `il libro che leggo`); two clauses may be
joined by `and`.
"""
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from numpy_transformer.data import english, italian
from numpy_transformer.data.lexicon import Verb, lexicon


class Draw:
    """Random choices from a `numpy.random.Generator`, drawn in blocks of uniforms (one
    Generator call per `block` choices keeps sentence generation fast and reproducible)."""

    def __init__(self, rng, block=4096):
        self.rng, self.block = rng, block
        self.uniforms = []

    def uniform(self):
        if not self.uniforms:
            self.uniforms = self.rng.random(self.block).tolist()[::-1]
        return self.uniforms.pop()

    def chance(self, probability):
        return self.uniform() < probability

    def choice(self, options):
        return options[int(self.uniform() * len(options))]


class EnglishWord:
    """An English word; Italian words point at it (identity, not spelling, tells two `the` apart)."""
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


class ItalianWord:
    """An Italian word and the English words it translates (several for `nel` = in + the, one
    each for `non` and `mai` = never)."""
    __slots__ = ("text", "translates")

    def __init__(self, text, translates=()):
        self.text, self.translates = text, tuple(translates)


@dataclass
class Phrase:
    english: list
    italian: list

    def __add__(self, other):
        return Phrase(self.english + other.english, self.italian + other.italian)


@dataclass
class NounPhrase(Phrase):
    gender: str
    number: str
    kinds: frozenset
    person: int = 3
    starts_with_article: bool = False   # a preposition can fuse with it: in + il → nel


def words(text):
    return [EnglishWord(word) for word in text.split()]


def parallel(english_text, italian_text):
    """A fixed expression: word for word when both sides have as many words (every day → ogni
    giorno), otherwise every Italian word translates the whole English expression (a lot → molto)."""
    source, targets = words(english_text), italian_text.split()
    if len(source) == len(targets):
        return Phrase(source, [ItalianWord(t, [s]) for s, t in zip(source, targets)])
    return Phrase(source, [ItalianWord(t, source) for t in targets])


# ---------------------------------------------------------------- lexicon look-ups

@cache
def nouns_with(kinds):
    return tuple(noun for noun in lexicon().nouns if noun.kinds & kinds)


@cache
def adjectives_for(noun):
    return tuple(adjective for adjective in lexicon().adjectives if adjective.kinds & noun.kinds)


@cache
def adjectives_of(kinds):
    return tuple(adjective for adjective in lexicon().adjectives if adjective.kinds & kinds)


@cache
def verbs_with(objects=False, alone=False, to=False):
    """Verbs that take an object (objects=True), can stand alone, or take `to` + a person."""
    def fits(verb):
        kinds = verb.takes - {"alone", "to"}
        return (not objects or kinds) and (not alone or "alone" in verb.takes) and (not to or "to" in verb.takes)
    return tuple(verb for verb in lexicon().verbs if fits(verb))


@cache
def verbs_for_object(noun_kinds):
    return tuple(verb for verb in verbs_with(objects=True) if verb.takes & noun_kinds)


def object_kinds(verb):
    return verb.takes - {"alone", "to"}


# ---------------------------------------------------------------- noun phrases

PRONOUNS = {"I": (1, "sg", "m"), "you": (2, "sg", "m"), "he": (3, "sg", "m"), "she": (3, "sg", "f"),
            "we": (1, "pl", "m"), "they": (3, "pl", "m")}
OWNERS = ("my", "your", "his", "her", "our", "their")
NUMBERS = {"two": "due", "three": "tre", "four": "quattro", "five": "cinque", "six": "sei",
           "seven": "sette", "eight": "otto", "nine": "nove", "ten": "dieci"}
SINGULAR_DETERMINERS = ("the",) * 4 + ("a",) * 2 + ("owner",) * 2 + ("this", "that")
PLURAL_DETERMINERS = ("the",) * 4 + ("owner",) * 2 + ("these", "those") + ("number", "some") * 2
MASS_DETERMINERS = ("the",) * 3 + ("owner", "this", "that") + ("some",) * 3


def pronoun(text):
    """A subject pronoun: Italian drops it (`he eats` → `mangia`); its person, number and gender
    live on in the verb and in the adjectives that agree with it."""
    person, number, gender = PRONOUNS[text]
    return NounPhrase(words(text), [], gender, number, frozenset({"person"}), person)


def name_phrase(name, kinds):
    """A person's or a city's name: no article in either language (Anna, Rome → Roma)."""
    source = EnglishWord(name.english)
    return NounPhrase([source], [ItalianWord(name.italian, [source])], name.gender, "sg", kinds)


def noun_phrase(draw, kinds, role="object", relative=True, plural=0.35):
    """A noun phrase whose noun has one of `kinds`.

    role: 'subject', 'object', 'negated object', 'pp' (after a preposition); `some` only in an
    object that is not negated (`in delle scatole` is not Italian, `does not drink some water`
    not English); 'indefinite' (a, some, a number: after `there is`); 'bare' (a language after
    `speak`: parla italiano)."""
    noun = draw.choice(nouns_with(kinds))
    if "language" in noun.kinds:
        return language(noun, article=role != "bare")
    number = "pl" if noun.english_plural and "unique" not in noun.kinds and draw.chance(plural) else "sg"
    phrase = determined(draw, noun, number, role)
    if relative and draw.chance(0.08):
        clause = relative_clause(draw, phrase)
        phrase = replace(phrase, english=phrase.english + clause.english, italian=phrase.italian + clause.italian)
    return phrase


def language(noun, article):
    """A language: bare in English; in Italian with the article (studia l'inglese) except
    after `parlare` (parla inglese)."""
    source = EnglishWord(noun.english)
    name = ItalianWord(noun.italian, [source])
    the = [ItalianWord(italian.definite_article(noun.gender, "sg", noun.italian), [source])] if article else []
    return NounPhrase([source], the + [name], noun.gender, "sg", noun.kinds, starts_with_article=article)


def determined(draw, noun, number, role):
    """determiner + (adjective) + noun in English; determiner + noun + (adjective) in Italian."""
    gender = noun.gender if number == "sg" else noun.plural_gender
    noun_en = EnglishWord(noun.english if number == "sg" else noun.english_plural)
    noun_it = ItalianWord(noun.italian if number == "sg" else noun.italian_plural, [noun_en])
    adjectives = adjectives_for(noun)
    adjective = draw.choice(adjectives) if adjectives and draw.chance(0.25) else None
    adjective_en = [EnglishWord(adjective.english)] if adjective else []
    adjective_it = [ItalianWord(italian.agree(adjective.forms, gender, number), adjective_en)] if adjective else []
    kind = choose_determiner(draw, noun, number, role)
    determiner_en, determiner_it = determiner(draw, kind, noun, gender, number, (adjective_en + [noun_en])[0].text,
                                              noun_it.text, bare_kin=adjective is None)
    return NounPhrase(determiner_en + adjective_en + [noun_en], determiner_it + [noun_it] + adjective_it,
                      gender, number, noun.kinds,
                      starts_with_article=determiner_it[0].text in italian.ARTICLE_ENDING)


OWNABLE = frozenset({"thing", "animal", "food", "drink", "kin", "owned"})


def choose_determiner(draw, noun, number, role):
    mass = noun.english_plural is None
    if "unique" in noun.kinds:
        return "the"
    if role == "indefinite":
        return "some" if mass else "a" if number == "sg" else draw.choice(("some", "number"))
    options = MASS_DETERMINERS if mass else SINGULAR_DETERMINERS if number == "sg" else PLURAL_DETERMINERS
    if "kin" in noun.kinds:
        options += ("owner",) * 4
    kind = draw.choice(options)
    if (kind == "some" and role != "object") or (kind == "owner" and not noun.kinds & OWNABLE):
        return "the"
    return kind


def determiner(draw, kind, noun, gender, number, next_english, next_italian, bare_kin=True):
    """The determiner's words in both languages. `next_english` and `next_italian` are the words
    that follow it (the sound of the next word picks a/an and il/lo/l'). A possessive takes the
    article, except before a singular family noun without adjective (`bare_kin`) and not after
    `loro`: mio fratello, but il mio fratello alto, la loro madre."""
    if kind == "owner":
        owner = EnglishWord(draw.choice(OWNERS))
        possessive = ItalianWord(italian.possessive(owner.text, gender, number), [owner])
        if bare_kin and "kin" in noun.kinds and number == "sg" and owner.text != "their":
            return [owner], [possessive]
        return [owner], [ItalianWord(italian.definite_article(gender, number, possessive.text), [owner]), possessive]
    if kind == "number":
        count = draw.choice(tuple(NUMBERS))
        source = EnglishWord(count)
        return [source], [ItalianWord(NUMBERS[count], [source])]
    if kind == "a":
        source = EnglishWord(english.indefinite_article(next_english))
        return [source], [ItalianWord(italian.indefinite_article(gender, next_italian), [source])]
    article = italian.definite_article(gender, number, next_italian)
    source = EnglishWord(kind)
    if kind == "the":
        return [source], [ItalianWord(article, [source])]
    if kind == "some":                                        # partitive: di + article
        return [source], [ItalianWord(italian.articulated("di", article), [source])]
    return [source], [ItalianWord(italian.demonstrative(kind in ("this", "these"), article), [source])]


def with_preposition(english_text, preposition, phrase):
    """`english_text` (possibly empty) + noun phrase, with the Italian preposition in front:
    fused with a definite article where Italian fuses them (in + il → nel, a + l' → all'),
    `ad`/`ed` before the same vowel (ad Anna)."""
    source = words(english_text)
    first = phrase.italian[0]
    if phrase.starts_with_article and preposition in italian.ARTICULATED_STEM:
        fused = ItalianWord(italian.articulated(preposition, first.text), source + list(first.translates))
        return Phrase(source + phrase.english, [fused] + phrase.italian[1:])
    # With no English preposition (a Matteo piace), `a` goes with the phrase's first word.
    head = ItalianWord(italian.with_euphonic_d(preposition, first.text), source or phrase.english[:1])
    return Phrase(source + phrase.english, [head] + phrase.italian)


def subject(draw, kinds):
    """A subject for a verb that accepts subjects of `kinds`: a pronoun, a name, a noun phrase,
    or two noun phrases joined by `and` (plural; masculine unless both are feminine)."""
    people = "person" in kinds
    if people and draw.chance(0.4):
        return pronoun(draw.choice(tuple(PRONOUNS)))
    if people and draw.chance(0.12):
        return name_phrase(draw.choice(lexicon().names), frozenset({"person"}))
    first = noun_phrase(draw, kinds, role="subject")
    if draw.chance(0.06):
        shared = first.kinds & kinds                # the dog and the cat run, not the dog and the bee
        second = noun_phrase(draw, shared, role="subject", relative=False)
        joined = first + conjunction(second.italian[0].text) + second
        gender = "f" if first.gender == second.gender == "f" else "m"
        return NounPhrase(joined.english, joined.italian, gender, "pl", shared)
    return first


def conjunction(next_italian):
    source = EnglishWord("and")
    return Phrase([source], [ItalianWord(italian.with_euphonic_d("e", next_italian), [source])])


def relative_clause(draw, head):
    """`who reads a book` / `that the girl reads` (`who` for people): Italian uses `che` for all."""
    subject_verbs = tuple(verb for verb in verbs_with(objects=True) if verb.subjects & head.kinds)
    object_verbs = verbs_for_object(head.kinds)
    marker = EnglishWord("who" if "person" in head.kinds else "that")
    if subject_verbs and (not object_verbs or draw.chance(0.5)):
        verb = draw.choice(subject_verbs)
        clause = present_tense(verb, head) + noun_phrase(draw, object_kinds(verb), relative=False)
    else:
        verb = draw.choice(object_verbs)
        doer = subject_without_relative(draw, verb.subjects)
        clause = doer + present_tense(verb, doer)
    return Phrase([marker], [ItalianWord("che", [marker])]) + clause


def subject_without_relative(draw, kinds):
    if "person" in kinds and draw.chance(0.5):
        return pronoun(draw.choice(tuple(PRONOUNS)))
    return noun_phrase(draw, kinds, role="subject", relative=False)


# ---------------------------------------------------------------- verbs

def present_tense(verb, doer, negated=False, adverb=None):
    """The verb agreeing with its subject, in both languages.

    negated: `does not eat` → `non mangia` (the auxiliary and `not` both translate to `non`).
    adverb: 'always' / 'often' go before the English verb and after the Italian one (`he often
    reads` → `legge spesso`); 'never' becomes `non … mai`."""
    form = italian.present(verb.italian, doer.person, doer.number)
    if negated:
        auxiliary = words(english.present("do", doer.person, doer.number) + " not")
        main = words(verb.english)
        return Phrase(auxiliary + main, [ItalianWord("non", auxiliary), ItalianWord(form, main)])
    main = words(english.present(verb.english, doer.person, doer.number))
    verb_it = ItalianWord(form, main)
    if adverb == "never":
        never = EnglishWord("never")
        return Phrase([never] + main, [ItalianWord("non", [never]), verb_it, ItalianWord("mai", [never])])
    if adverb:
        source = EnglishWord(adverb)
        return Phrase([source] + main, [verb_it, ItalianWord(FREQUENCY[adverb], [source])])
    return Phrase(main, [verb_it])


FREQUENCY = {"always": "sempre", "often": "spesso", "never": "mai"}


def copula(doer, negated):
    """am / is / are (not) → (non) sono / è / siamo …"""
    be = EnglishWord(english.present("be", doer.person, doer.number))
    is_it = ItalianWord(italian.present("essere", doer.person, doer.number), [be])
    if negated:
        not_ = EnglishWord("not")
        return Phrase([be, not_], [ItalianWord("non", [not_]), is_it])
    return Phrase([be], [is_it])


def polarity(draw):
    """(negated, adverb) for a clause: a fifth are negated, some have a frequency adverb."""
    if draw.chance(0.2):
        return True, None
    return False, draw.choice(tuple(FREQUENCY)) if draw.chance(0.12) else None


def infinitive(verb, to=True):
    """`to eat` → `mangiare`, or the bare `eat` after can/must."""
    source = words(("to " if to else "") + verb.english)
    return Phrase(source, [ItalianWord(verb.italian, source)])


# ---------------------------------------------------------------- adjuncts

TIMES = (("today", "oggi"), ("tomorrow", "domani"), ("now", "ora"), ("every day", "ogni giorno"),
         ("every morning", "ogni mattina"), ("every evening", "ogni sera"), ("on Monday", "lunedì"),
         ("on Tuesday", "martedì"), ("on Wednesday", "mercoledì"), ("on Thursday", "giovedì"),
         ("on Friday", "venerdì"), ("on Saturday", "sabato"), ("on Sunday", "domenica"))
MANNERS = (("quickly", "velocemente"), ("slowly", "lentamente"), ("well", "bene"), ("badly", "male"))
A_LOT = ("a lot", "molto")      # after a verb without object only: lavora molto


def time_adjunct(draw, probability=0.15):
    """today, every morning, on Monday… (now and then)."""
    return parallel(*draw.choice(TIMES)) if draw.chance(probability) else Phrase([], [])


def place_adjunct(draw):
    """Where or with whom: in the kitchen → nella cucina, in Rome → a Roma, at home → a casa,
    with my friend → con il mio amico."""
    options = draw.uniform()
    if options < 0.5:
        return with_preposition("in", "in", place(draw, frozenset({"inside"})))
    if options < 0.65:
        return with_preposition("in", "a", name_phrase(draw.choice(lexicon().cities), frozenset({"city"})))
    if options < 0.75:
        return parallel("at home", "a casa")
    companion = noun_phrase(draw, frozenset({"person"}), role="pp", relative=False)
    return with_preposition("with", "con", companion)


def place(draw, kinds):
    """A place or a thing one is in, on, near…: singular (in the kitchens reads oddly)."""
    return noun_phrase(draw, kinds, role="pp", relative=False, plural=0)


STATIVE = {"avere", "volere", "conoscere", "vedere", "sentire", "capire"}   # no `well`, `quickly`…
STAYING_PUT = {"viaggiare", "uscire"}        # no `at home`: travelling and going out leave it


def adjuncts(draw, verb, negated=False, adverb=None, manners=MANNERS):
    """Nothing, or a place, a manner, a time, each now and then. No manner after a negation
    (`does not wait badly`) or with a verb of state (`wants badly`); neither manner nor time
    after a frequency adverb (`never writes every day`)."""
    phrase = Phrase([], [])
    if verb.italian not in STAYING_PUT and draw.chance(0.25):
        phrase = phrase + place_adjunct(draw)
    if not (negated or adverb or verb.italian in STATIVE) and draw.chance(0.1):
        phrase = phrase + parallel(*draw.choice(manners))
    return phrase if adverb else phrase + time_adjunct(draw)


# (English, Italian, kinds of the ground for a thing, kinds of the ground for a person or animal)
LOCATIONS = (("in", "in", frozenset({"inside", "container"}), frozenset({"inside"})),
             ("on", "su", frozenset({"surface"}), frozenset({"ground"})),
             ("under", "sotto", frozenset({"furniture", "under"}), frozenset({"under"})),
             ("behind", "dietro", frozenset({"place", "furniture", "landmark"}), frozenset({"place", "landmark"})),
             ("near", "vicino a", frozenset({"place", "furniture", "landmark"}), frozenset({"place", "landmark"})),
             ("next to", "accanto a", frozenset({"place", "furniture", "landmark"}), frozenset({"place", "landmark"})),
             ("in front of", "davanti a", frozenset({"place", "furniture", "landmark"}),
              frozenset({"place", "landmark"})))
LIVING = frozenset({"person", "animal"})


def location(draw, figure_kinds):
    """Where something is: in the box, on the shelf (sullo scaffale), under the table (sotto
    il tavolo), near the station (vicino alla stazione), in front of the house (davanti alla
    casa). People and animals get grounds that suit them: on the beach, not on the shelf."""
    english_text, italian_text, for_things, for_living = draw.choice(LOCATIONS)
    ground = place(draw, for_living if figure_kinds & LIVING else for_things)
    *adverb, preposition = italian_text.split()
    if not adverb:
        return with_preposition(english_text, preposition, ground)
    *english_adverb, english_preposition = english_text.split()
    if not english_adverb:                                # near → vicino a: one English word, two Italian
        fused = with_preposition(english_text, preposition, ground)
        lead = ItalianWord(adverb[0], fused.english[:1])
        return Phrase(fused.english, [lead] + fused.italian)
    lead = words(" ".join(english_adverb))
    return Phrase(lead, [ItalianWord(adverb[0], lead)]) + with_preposition(english_preposition, preposition, ground)


# ---------------------------------------------------------------- clauses

BARE_OBJECT = {"parlare"}       # parla inglese, but studia l'inglese


def object_role(verb, negated):
    """'bare' after parlare; no `some` after a negation (English would say `any`)."""
    return "bare" if verb.italian in BARE_OBJECT else "negated object" if negated else "object"


def action(draw):
    """Subject + verb + object (+ place, manner, time): the boy eats the red apple."""
    verb = draw.choice(verbs_with(objects=True))
    doer = subject(draw, verb.subjects)
    negated, adverb = polarity(draw)
    thing = noun_phrase(draw, object_kinds(verb), role=object_role(verb, negated))
    return doer + present_tense(verb, doer, negated, adverb) + thing + adjuncts(draw, verb, negated, adverb)


def intransitive(draw):
    """Subject + verb (+ place, manner, time): she often sleeps in the garden."""
    verb = draw.choice(verbs_with(alone=True))
    doer = subject(draw, verb.subjects)
    negated, adverb = polarity(draw)
    return doer + present_tense(verb, doer, negated, adverb) + adjuncts(draw, verb, negated, adverb, MANNERS + (A_LOT,))


def description(draw):
    """Subject + be + adjective, agreeing in gender and number: the girls are tired → le
    ragazze sono stanche; I am ready → sono pronto."""
    doer = subject(draw, frozenset({"person", "animal", "thing", "place", "food", "drink"}))
    adjective = draw.choice(adjectives_of(doer.kinds))
    source = EnglishWord(adjective.english)
    form = ItalianWord(italian.agree(adjective.forms, doer.gender, doer.number), [source])
    return doer + copula(doer, draw.chance(0.2)) + Phrase([source], [form])


def whereabouts(draw):
    """Subject + be + location: the keys are on the shelf → le chiavi sono sullo scaffale."""
    doer = subject(draw, frozenset({"person", "animal", "small", "food"}))
    return doer + copula(doer, draw.chance(0.15)) + location(draw, doer.kinds)


def existence(draw):
    """there is / there are → c'è / ci sono, with an indefinite noun phrase and a location."""
    thing = noun_phrase(draw, frozenset({"animal", "small", "food", "person"}), role="indefinite", relative=False)
    there, be = words("there " + ("is" if thing.number == "sg" else "are"))
    start = [ItalianWord("c'", [there]), ItalianWord("è", [be])] if thing.number == "sg" else \
        [ItalianWord("ci", [there]), ItalianWord("sono", [be])]
    return Phrase([there, be], start) + thing + location(draw, thing.kinds)


MOTIONS = (("go", "andare", "to"), ("come", "venire", "to"), ("come", "venire", "from"),
           ("return", "tornare", "to"), ("return", "tornare", "from"), ("arrive", "arrivare", "at"))


def motion(draw):
    """go / come / return / arrive: to a place (a + article: al parco), to a person's trade (da
    + article: dal medico), to a city (a Roma, ad Atene), home (a casa); from (da)."""
    english_verb, italian_verb, direction = draw.choice(MOTIONS)
    doer = subject(draw, frozenset({"person"}))
    negated, _ = polarity(draw)
    phrase = doer + present_tense(Verb(english_verb, italian_verb, frozenset(), frozenset()), doer, negated)
    preposition = "da" if direction == "from" else "a"
    roll = draw.uniform()
    if roll < 0.2:
        city = name_phrase(draw.choice(lexicon().cities), frozenset({"city"}))
        goal = with_preposition("in" if direction == "at" else direction, preposition, city)
    elif roll < 0.3 and direction == "to":
        goal = parallel("home", "a casa")
    elif roll < 0.45 and direction != "at":
        goal = with_preposition(direction, "da", noun_phrase(draw, frozenset({"trade"}), role="pp", relative=False))
    else:
        goal = with_preposition(direction, preposition, place(draw, frozenset({"destination"})))
    return phrase + goal + time_adjunct(draw)


MODALS = {"can": "potere", "must": "dovere"}


def modal(draw):
    """can / must / want to + verb: she can read the letter → può leggere la lettera; I cannot
    swim → non posso nuotare (`cannot` translates to both `non` and `posso`)."""
    verb = draw.choice(verbs_with(objects=True) + verbs_with(alone=True))
    doer = subject(draw, verb.subjects)
    negated = draw.chance(0.25)
    modal_verb = draw.choice(("can", "must", "want"))
    if modal_verb == "want":
        phrase = present_tense(Verb("want", "volere", frozenset(), frozenset()), doer, negated) + infinitive(verb)
    else:
        form = italian.present(MODALS[modal_verb], doer.person, doer.number)
        if negated and modal_verb == "can":
            source = [EnglishWord("cannot")]
            phrase = Phrase(source, [ItalianWord("non", source), ItalianWord(form, source)])
        elif negated:
            must, not_ = words("must not")
            phrase = Phrase([must, not_], [ItalianWord("non", [not_]), ItalianWord(form, [must])])
        else:
            source = [EnglishWord(modal_verb)]
            phrase = Phrase(source, [ItalianWord(form, source)])
        phrase = phrase + infinitive(verb, to=False)
    if object_kinds(verb) and ("alone" not in verb.takes or draw.chance(0.5)):
        phrase = phrase + noun_phrase(draw, object_kinds(verb), role=object_role(verb, negated))
    return doer + phrase + time_adjunct(draw)


CLITICS = {"I": "mi", "you": "ti", "he": "gli", "she": "le", "we": "ci"}
LIKEABLE = frozenset({"food", "drink", "animal", "thing", "place", "watch", "listen", "language"})


def liking(draw):
    """like → piacere, whose subject is the thing liked: I like the film → mi piace il film;
    the children like the cakes → ai bambini piacciono le torte."""
    liked = noun_phrase(draw, LIKEABLE, role="subject")
    like = Verb("like", "piacere", frozenset(), frozenset())
    if draw.chance(0.5):
        likes = pronoun(draw.choice(tuple(CLITICS)))
        experiencer = Phrase(likes.english, [ItalianWord(CLITICS[likes.english[0].text], likes.english)])
    else:
        likes = name_phrase(draw.choice(lexicon().names), frozenset({"person"})) if draw.chance(0.2) else \
            noun_phrase(draw, frozenset({"person"}), role="pp", relative=False)
        experiencer = with_preposition("", "a", likes)
    verb = present_tense(like, likes, negated=draw.chance(0.2))
    form = "piace" if liked.number == "sg" else "piacciono"
    verb.italian[-1] = ItalianWord(form, verb.italian[-1].translates)
    negation = verb.italian[:-1]
    # English: experiencer, (do not) like; Italian: (non) before the clitic, after `a` + noun phrase.
    if likes.italian:
        italian_order = experiencer.italian + negation + verb.italian[-1:]
    else:
        italian_order = negation + experiencer.italian + verb.italian[-1:]
    return Phrase(likes.english + verb.english, italian_order) + liked


def giving(draw):
    """give / send / show something to someone: he gives the book to Anna → dà il libro ad Anna."""
    verb = draw.choice(verbs_with(to=True))
    doer = subject(draw, verb.subjects)
    negated, adverb = polarity(draw)
    thing = noun_phrase(draw, object_kinds(verb), role=object_role(verb, negated), relative=False)
    receiver = name_phrase(draw.choice(lexicon().names), frozenset({"person"})) if draw.chance(0.25) else \
        noun_phrase(draw, frozenset({"person"}), role="pp", relative=False)
    return doer + present_tense(verb, doer, negated, adverb) + thing + with_preposition("to", "a", receiver)


CLAUSES = ((action, 30), (intransitive, 12), (description, 10), (whereabouts, 7), (existence, 6),
           (motion, 10), (modal, 10), (liking, 8), (giving, 5))
CLAUSE_WEIGHTS = np.cumsum([weight for _, weight in CLAUSES]) / sum(weight for _, weight in CLAUSES)


def clause(draw):
    return CLAUSES[int(np.searchsorted(CLAUSE_WEIGHTS, draw.uniform(), side="right"))][0](draw)


def sentence(draw):
    """One clause, or two joined by `and`, and a full stop."""
    phrase = clause(draw)
    if draw.chance(0.12):
        second = clause(draw)
        phrase = phrase + conjunction(second.italian[0].text) + second
    stop = EnglishWord(".")
    return phrase + Phrase([stop], [ItalianWord(".", [stop])])
