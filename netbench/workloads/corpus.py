"""A procedurally generated text corpus with structure a tiny language model can learn.

Generated rather than shipped, so there is no licence question and every rank can draw its own
sample of the same language (different bytes, same distribution): gradients differ between
ranks while the task stays shared. The language has structure at several ranges, so the loss
keeps falling past the unigram level: spelling of a small lexicon, number agreement between
subject and verb, sentence templates, and small sums whose answer depends on the two operands.
"""

from __future__ import annotations

import random

_DETS_SG = ("the", "a", "one", "every", "this")
_DETS_PL = ("the", "some", "two", "many", "these")
_ADJS = ("red", "quiet", "small", "old", "bright", "green", "heavy", "quick", "tired", "clever")
_NOUNS = ("cat", "dog", "bird", "river", "farmer", "engine", "teacher", "window", "robot", "garden")
_VERBS = ("see", "follow", "build", "carry", "watch", "paint", "find", "like", "move", "clean")
_PLACES = ("near the hill", "in the town", "under the bridge", "by the sea", "at night", "after lunch")
_NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _noun_phrase(rng: random.Random) -> tuple[str, bool]:
    """A noun phrase and whether it is plural (the verb must agree)."""
    plural = rng.random() < 0.4
    det = rng.choice(_DETS_PL if plural else _DETS_SG)
    words = [det]
    if rng.random() < 0.6:
        words.append(rng.choice(_ADJS))
    noun = rng.choice(_NOUNS)
    words.append(noun + "s" if plural else noun)
    return " ".join(words), plural


def _third_person(verb: str) -> str:
    """English third-person singular: watch -> watches, carry -> carries, see -> sees."""
    if verb.endswith(("ch", "sh", "s", "x")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _sentence(rng: random.Random) -> str:
    """One sentence from a handful of templates."""
    kind = rng.random()
    if kind < 0.55:
        subject, plural = _noun_phrase(rng)
        verb = rng.choice(_VERBS)
        obj, _ = _noun_phrase(rng)
        tail = f" {rng.choice(_PLACES)}" if rng.random() < 0.4 else ""
        return f"{subject} {verb if plural else _third_person(verb)} {obj}{tail}."
    if kind < 0.8:
        a, b = rng.randrange(10), rng.randrange(10)
        return f"{_NUMBERS[a]} plus {_NUMBERS[b]} is {a + b}."
    a, b = rng.randrange(50), rng.randrange(50)
    return f"{a}+{b}={a + b};"


def generate_text(seed: int, n_bytes: int) -> bytes:
    """At least ``n_bytes`` of ASCII text drawn from the corpus language with ``seed``."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        sentence = _sentence(rng).capitalize() + ("\n" if rng.random() < 0.2 else " ")
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts).encode("ascii")
