"""Write a small SQuAD v2.0-format question-answering set of the project's own invented text.

Usage: python scripts/generate_squad_sample.py [--output-dir data/squad_sample] [--seed 7]

Each context introduces two invented people with three facts each (birthplace, birth year, job,
instrument, dog's name, university), in sentences drawn from several templates; its questions ask
for one person's fact, so a model must find the person named in the question, not just a fact of
the right kind. One question in four asks for a fact the context does not give for that person
(often one it gives for the other): SQuAD v2's unanswerable questions (`is_impossible`, no answers).
Every `answer_start` is the character offset of its answer in the context, checked as it is written.
The output is deterministic: the same seed writes the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

FIRST = ["Mara", "Tobin", "Elsa", "Corin", "Ilse", "Bram", "Nadia", "Oskar", "Petra", "Luca", "Greta", "Anton",
         "Rosa", "Emil", "Vera", "Felix", "Hedda", "Jonas", "Lina", "Milo"]
LAST = ["Quill", "Varga", "Holm", "Brennan", "Okafor", "Lindqvist", "Morrow", "Castell", "Dunmore", "Ferreira",
        "Hartley", "Ivers", "Kessler", "Marsh", "Novak", "Pelham", "Renner", "Strand", "Thorne", "Wexley"]
CITIES = ["Lindenport", "Carrow", "Ostervik", "Belmoor", "Tressaly", "Hanbridge", "Veldrun", "Ashcombe", "Port Ellery",
          "Marrowfield", "Kestrel Bay", "Dunhallow"]
JOBS = ["clockmaker", "ferry pilot", "botanist", "bookbinder", "glassblower", "cartographer", "beekeeper",
        "surveyor", "lighthouse keeper", "tailor", "chemist", "stonemason"]
INSTRUMENTS = ["cello", "oboe", "harp", "accordion", "violin", "trumpet", "flute", "bassoon"]
DOGS = ["Biscuit", "Pepper", "Juno", "Rufus", "Clover", "Saffron", "Nutmeg", "Barley", "Tansy", "Ziggy"]
UNIVERSITIES = ["the University of Carrow", "Belmoor College", "the Ostervik Institute", "Hanbridge Academy",
                "the Royal School of Veldrun"]

# Each fact: the values it draws from, sentences stating it ({name}, {value}, {pronoun}), questions.
FACTS: Dict[str, Dict[str, List[str]]] = {
    "birthplace": {"values": CITIES,
                   "sentences": ["{name} was born in {value}.", "{name} grew up in {value}, where {pronoun} was born."],
                   "questions": ["Where was {name} born?", "In which town was {name} born?"]},
    "year": {"values": [str(year) for year in range(1851, 1951)],
             "sentences": ["{name} was born in the year {value}.", "{name}'s birth year was {value}."],
             "questions": ["In what year was {name} born?", "When was {name} born?"]},
    "job": {"values": JOBS,
            "sentences": ["{name} worked as a {value} for most of {possessive} life.", "By trade {name} was a {value}."],
            "questions": ["What did {name} work as?", "What was {name}'s trade?"]},
    "instrument": {"values": INSTRUMENTS,
                   "sentences": ["In the evenings {name} played the {value}.", "{name} learned to play the {value}."],
                   "questions": ["Which instrument did {name} play?", "What instrument did {name} learn?"]},
    "dog": {"values": DOGS,
            "sentences": ["{name} kept a dog called {value}.", "{name}'s dog was named {value}."],
            "questions": ["What was the name of {name}'s dog?", "What was {name}'s dog called?"]},
    "university": {"values": UNIVERSITIES,
                   "sentences": ["{name} studied at {value}.", "{name} was a student at {value}."],
                   "questions": ["Where did {name} study?", "At which school did {name} study?"]},
}
PRONOUNS = {"she": "her", "he": "his"}
FEMININE = {"Mara", "Elsa", "Ilse", "Nadia", "Petra", "Greta", "Rosa", "Vera", "Hedda", "Lina"}


def _person(rng: random.Random, taken: List[str]) -> Tuple[str, Dict[str, str]]:
    """A new person's name and three facts."""
    while True:
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        if name not in taken and name.split()[0] not in {other.split()[0] for other in taken}:
            break
    kinds = rng.sample(sorted(FACTS), 3)
    return name, {kind: rng.choice(FACTS[kind]["values"]) for kind in kinds}


def _context(rng: random.Random, people: List[Tuple[str, Dict[str, str]]]) -> Tuple[str, Dict[Tuple[str, str], int]]:
    """The context's text and where each (person, fact kind)'s value starts in it."""
    text, starts = "", {}
    for name, facts in people:
        pronoun = "she" if name.split()[0] in FEMININE else "he"
        words = {"name": name, "pronoun": pronoun, "possessive": PRONOUNS[pronoun]}
        for kind, value in facts.items():
            before, after = rng.choice(FACTS[kind]["sentences"]).split("{value}")
            lead = before.format(**words)
            text += (" " if text else "") + lead
            starts[(name, kind)] = len(text)  # the value follows the words before it
            text += value + after.format(**words)
    return text, starts


def _question(rng: random.Random, qid: str, name: str, kind: str, context: str,
              value: Optional[str], start: Optional[int]) -> Dict[str, Any]:
    question = rng.choice(FACTS[kind]["questions"]).format(name=name)
    if value is None or start is None:
        return {"id": qid, "question": question, "answers": [], "is_impossible": True}
    if context[start:start + len(value)] != value:
        raise AssertionError(f"{qid}: the answer {value!r} is not at {start} in {context!r}")
    return {"id": qid, "question": question, "answers": [{"text": value, "answer_start": start}], "is_impossible": False}


def paragraph(rng: random.Random, prefix: str, number: int) -> Dict[str, Any]:
    """One context about two people with three questions on what it says and one it does not answer."""
    first = _person(rng, [])
    people = [first, _person(rng, [first[0]])]
    context, starts = _context(rng, people)
    asked = rng.sample(sorted(starts), 3)
    qas = [_question(rng, f"{prefix}{number}-{index}", name, kind, context, dict(people)[name][kind], starts[(name, kind)])
           for index, (name, kind) in enumerate(asked)]
    name, facts = rng.choice(people)
    missing = sorted(set(FACTS) - set(facts))
    qas.append(_question(rng, f"{prefix}{number}-3", name, rng.choice(missing), context, None, None))
    rng.shuffle(qas)
    return {"context": context, "qas": qas}


def document(count: int, seed: int, prefix: str) -> Dict[str, Any]:
    """A SQuAD v2.0 document of `count` contexts (four questions each)."""
    rng = random.Random(seed)
    paragraphs = [paragraph(rng, prefix, number) for number in range(count)]
    return {"version": "v2.0", "data": [{"title": "invented lives", "paragraphs": paragraphs}]}


SPLITS = {"train": (120, 0, "t"), "validation": (30, 1, "v")}


def main() -> None:
    """Write the train and validation files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path,
                        default=Path(__file__).resolve().parents[1] / "data" / "squad_sample")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for split, (count, offset, prefix) in SPLITS.items():
        path = args.output_dir / f"{split}.json"
        path.write_text(json.dumps(document(count, args.seed * 100 + offset, prefix)) + "\n", encoding="utf-8")
        print(f"{path}: {count} contexts, {count * 4} questions")


if __name__ == "__main__":
    main()
