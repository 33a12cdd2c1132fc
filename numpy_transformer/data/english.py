"""English morphology for the built-in corpus: the third person singular of the present tense and
the indefinite article."""
IRREGULAR_THIRD_PERSON = {"have": "has", "do": "does", "go": "goes", "be": "is"}


def third_person_singular(verb):
    """eat → eats, watch → watches, study → studies, have → has. A phrasal verb inflects its
    first word: look for → looks for."""
    head, *rest = verb.split(" ")
    if head in IRREGULAR_THIRD_PERSON:
        head = IRREGULAR_THIRD_PERSON[head]
    elif head.endswith(("s", "sh", "ch", "x", "z", "o")):
        head += "es"
    elif head.endswith("y") and head[-2] not in "aeiou":
        head = head[:-1] + "ies"
    else:
        head += "s"
    return " ".join([head, *rest])


def present(verb, person, number):
    """The English present tense: `eats` for he/she/it and every singular noun, `eat` elsewhere
    (`be` has its own forms: am, are, is)."""
    if verb == "be":
        return "am" if (person, number) == (1, "sg") else "is" if (person, number) == (3, "sg") else "are"
    return third_person_singular(verb) if (person, number) == (3, "sg") else verb


def indefinite_article(next_word):
    """'an' before a vowel sound, 'a' elsewhere: an apple, an umbrella, a university, a useful."""
    starts_with_vowel_sound = next_word[0] in "aeiou" and not next_word.startswith(("uni", "use", "eu"))
    return "an" if starts_with_vowel_sound else "a"
