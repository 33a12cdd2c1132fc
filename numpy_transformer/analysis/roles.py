"""A role for each head (thesis §3.1.1; Voita et al. 2019): positional, syntactic, rare-token,
or other, read off the measures of `measures.py`.

The rules, tried in this order (the first that holds names the role):

| role       | rule                                                                          |
|------------|-------------------------------------------------------------------------------|
| rare-token | one key receives ≥ 40% of all the mass, or two keys ≥ 55% together, and at    |
|            | least twice what a uniform head puts on its largest one or two columns (2/n_k |
|            | and 4/n_k; more under a causal mask, where every row sees the first token):   |
|            | the thesis's Σ3, "all tokens attending a specific one", with one or two       |
|            | tokens T (often `.` and [EOS])                                                |
| positional | one diagonal k = j − i holds ≥ 50% of the mass: the thesis's Σ1 (k = 0), or a |
|            | previous/next-token head (k = ∓1)                                             |
| syntactic  | ≥ 60% of the mass within bandwidth 2 (abs(j − i) ≤ 2), and at least 1.5 times |
|            | what a uniform head puts there, but no single diagonal dominant: the          |
|            | thesis's Σ2, near words attending each other                                  |
| other      | none of these: spread out, or structured some other way                       |

With `broad=True` (`classify_head`, `classify_capture`, `count_roles`) an "other" head is
**broad** when its rows are spread: its mean row entropy is at least half a uniform head's
(≥ ½ log n_k), that is each row's perplexity exp(entropy) covers about √n_k keys or more. The
thesis has no such kind; Clark et al. (2019) describe heads of BERT's lower layers that attend
broadly, and a pretrained model needs the word to set them apart from the rest of "other".

Why these numbers (checked on the generators of `families.py` in tests/test_analysis_roles.py,
16 × 16 heads with their sparse error):
- rare-token before positional: a column collecting 40% of the mass is never a positional
  head's (each of its columns gets about 1/n), while a rare-token head whose window covers
  half the rows still keeps the other half on its diagonal (≥ 50%). "Twice a uniform share"
  keeps a 2 × 2 identity (each column 50%) positional, and the first column of a causal head
  (which a uniform causal 15 × 15 head already gives 22%) from passing for a rare token. Two
  tokens: Σ3 with T = {t₁, t₂}, each attended by 6 of 16 rows, has 37.5% per column (under
  40%) but 75% for the pair; a positional or syntactic 16 × 16 head puts about 2/16 on any
  two columns.
- 50% on one diagonal: an identity with the thesis's sparse error (coefficient ≤ 0.5, one
  entry per row) keeps ≥ 2/3 of its mass on the diagonal; a band of bandwidth 1 with
  drop-out spreads a row over about 3 keys, ≈ 1/3 each.
- 60% in the band and 1.5 × uniform: a uniform 16 × 16 head has 29% of its mass within
  bandwidth 2; a short sentence (n ≤ 6) has most of its entries in the band, and the ratio
  keeps its uniform heads "other". Below n ≈ 2w + 2 = 6 tokens no rule can tell the roles
  apart, and the roles of such short sentences mean little.
"""
import collections
import dataclasses

import numpy as np

from numpy_transformer.analysis.measures import HeadMeasures, head_measures

ROLES = ("positional", "syntactic", "rare-token", "other")
RARE_TOKEN_COLUMN_MASS = 0.4
RARE_TOKEN_PAIR_MASS = 0.55
RARE_TOKEN_UNIFORM_FACTOR = 2.0
POSITIONAL_OFFSET_MASS = 0.5
SYNTACTIC_BAND_WIDTH = 2
SYNTACTIC_BAND_MASS = 0.6
SYNTACTIC_UNIFORM_FACTOR = 1.5
ROLES_WITH_BROAD = ("positional", "syntactic", "rare-token", "broad", "other")
BROAD_ENTROPY_SHARE = 0.5


def role_from_measures(measures):
    """The role (one of ROLES) that the rules of the module docstring give a `HeadMeasures`."""
    uniform_one, uniform_two = measures.uniform_top_columns
    if measures.top_column_mass >= max(RARE_TOKEN_COLUMN_MASS, RARE_TOKEN_UNIFORM_FACTOR * uniform_one) or \
            measures.top_two_columns_mass >= max(RARE_TOKEN_PAIR_MASS, RARE_TOKEN_UNIFORM_FACTOR * uniform_two):
        return "rare-token"
    if measures.dominant_offset_mass >= POSITIONAL_OFFSET_MASS:
        return "positional"
    if measures.band_mass >= max(SYNTACTIC_BAND_MASS, SYNTACTIC_UNIFORM_FACTOR * measures.uniform_band_mass):
        return "syntactic"
    return "other"


def classify_head(H, causal=False, broad=False):
    """(role, HeadMeasures) of one head (n_q, n_k); `causal` for a masked self-attention;
    `broad`: an "other" head whose rows are spread is "broad" (module docstring)."""
    measures = head_measures(H, SYNTACTIC_BAND_WIDTH, causal)
    role = role_from_measures(measures)
    if broad and role == "other" and measures.mean_entropy >= BROAD_ENTROPY_SHARE * measures.uniform_entropy:
        role = "broad"
    return role, measures


@dataclasses.dataclass(frozen=True)
class HeadRole:
    """One row of the roles table: which head, its role and its measures."""
    name: str
    head: int
    role: str
    measures: HeadMeasures


def classify_capture(capture, broad=False):
    """A `HeadRole` for every head of an `AttentionCapture`, in the order of its names
    (`broad`: as `classify_head`)."""
    return [HeadRole(name, head, *classify_head(matrix, capture.is_causal(name), broad))
            for name, weights in capture.weights.items() for head, matrix in enumerate(weights)]


def roles_table(head_roles, key_tokens=None):
    """The roles as a Markdown table. key_tokens: name → the key tokens, to print the top
    column's token."""
    lines = ["| attention | head | role | top diagonal k (mass) | band ≤ 2 (uniform) | top key (mass) | "
             "entropy (nats) | rank | ‖H‖₂ |",
             "|---|---:|---|---|---|---|---:|---|---:|"]
    for row in head_roles:
        m = row.measures
        token = f" `{key_tokens[row.name][m.top_column]}`" if key_tokens else ""
        lines.append(f"| {row.name} | {row.head} | {row.role} | {m.dominant_offset:+d} ({m.dominant_offset_mass:.2f}) | "
                     f"{m.band_mass:.2f} ({m.uniform_band_mass:.2f}) | {m.top_column}{token} ({m.top_column_mass:.2f}) | "
                     f"{m.mean_entropy:.2f} | {m.rank}/{min(m.shape)} | {m.spectral_norm:.2f} |")
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class RoleCount:
    """One head over a set of sentences: how many sentences gave it each role (a dict over ROLES,
    or ROLES_WITH_BROAD), the key token it attended most in the most sentences (and in how
    many), and its measures averaged over them."""
    name: str
    head: int
    counts: dict
    top_token: str
    top_token_sentences: int
    mean_top_column_mass: float
    mean_band_mass: float
    mean_entropy: float

    @property
    def n_sentences(self):
        return sum(self.counts.values())

    @property
    def role(self):
        """The role of the most sentences (ties go to the first in the order of `counts`)."""
        roles = list(self.counts)
        return max(roles, key=lambda role: (self.counts[role], -roles.index(role)))


def count_roles(captures, broad=False):
    """A `RoleCount` for every head of one model over its `AttentionCapture`s, one per sentence
    (the names and heads of the first capture, in its order); `broad`: count "broad" apart
    from "other" (module docstring)."""
    roles = ROLES_WITH_BROAD if broad else ROLES
    per_sentence = [classify_capture(capture, broad) for capture in captures]
    counts = []
    for i, first in enumerate(per_sentence[0]):
        rows = [sentence[i] for sentence in per_sentence]
        found = collections.Counter(row.role for row in rows)
        keys = collections.Counter(capture.axes(first.name)[1][row.measures.top_column]
                                   for capture, row in zip(captures, rows))
        top_token, top_token_sentences = keys.most_common(1)[0]
        counts.append(RoleCount(first.name, first.head, {role: found[role] for role in roles}, top_token,
                                top_token_sentences, mean_measure(rows, "top_column_mass"),
                                mean_measure(rows, "band_mass"), mean_measure(rows, "mean_entropy")))
    return counts


def mean_measure(rows, measure):
    """The mean of one field of the `HeadMeasures` of these `HeadRole`s."""
    return float(np.mean([getattr(row.measures, measure) for row in rows]))


def role_counts_markdown(counts):
    """The `RoleCount`s as a Markdown table: the most frequent role and its share of the
    sentences, the sentences of each role, the most attended key and the mean measures."""
    roles = list(counts[0].counts)
    lines = ["| attention | head | role (share of sentences) | " + " | ".join(roles) +
             " | most attended key (sentences) | top key mass | band ≤ 2 | entropy (nats) |",
             "|---|---:|---|" + "---:|" * len(roles) + "---|---:|---:|---:|"]
    for row in counts:
        lines.append(f"| {row.name} | {row.head} | {row.role} ({row.counts[row.role] / row.n_sentences:.0%}) | "
                     + " | ".join(str(row.counts[role]) for role in roles) +
                     f" | `{row.top_token}` ({row.top_token_sentences}/{row.n_sentences}) | "
                     f"{row.mean_top_column_mass:.2f} | {row.mean_band_mass:.2f} | {row.mean_entropy:.2f} |")
    return "\n".join(lines)


def role_shares_markdown(counts, as_counts=False):
    """The `RoleCount`s summed per attention layer, as a Markdown table: the share of each role
    over its heads × sentences (`as_counts`: the number of heads × sentences), and how many heads
    have each role as their most frequent."""
    roles = list(counts[0].counts)
    lines = ["| attention | heads | " + " | ".join(roles) + " | heads by their most frequent role |",
             "|---|---:|" + "---:|" * len(roles) + "---|"]
    for name in dict.fromkeys(row.name for row in counts):
        rows = [row for row in counts if row.name == name]
        total = sum(row.n_sentences for row in rows)
        found = [sum(row.counts[role] for row in rows) for role in roles]
        shares = " | ".join(str(n) if as_counts else f"{n / total:.0%}" for n in found)
        majority = collections.Counter(row.role for row in rows)
        heads = ", ".join(f"{majority[role]} {role}" for role in roles if majority[role])
        lines.append(f"| {name} | {len(rows)} | {shares} | {heads} |")
    return "\n".join(lines)
