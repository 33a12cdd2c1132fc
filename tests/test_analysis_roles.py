"""Head roles (numpy_transformer/analysis/roles.py) on synthetic heads whose role is known: the
generators of thesis §3.1.2 with their sparse error, 16 × 16, many random draws each."""
from collections import Counter

import numpy as np
import pytest

from numpy_transformer.analysis.families import sigma1_member, sigma2, sigma3, sparse_error
from numpy_transformer.analysis.measures import uniform_head
from numpy_transformer.analysis.roles import RARE_TOKEN_PAIR_MASS, ROLES, HeadRole, classify_head, roles_table

N, DRAWS = 16, 100


def roles_of(draw):
    return Counter(classify_head(draw())[0] for _ in range(DRAWS))


def test_identity_with_the_thesis_noise_is_positional():
    rng = np.random.default_rng(0)
    assert roles_of(lambda: sigma1_member(N, rng.choice([0.0, 0.25, 0.5]), rng)) == {"positional": DRAWS}


def test_previous_and_next_token_heads_are_positional():
    rng = np.random.default_rng(1)
    for shift in (-1, 1):
        draw = lambda: 0.8 * np.roll(np.eye(N), shift, axis=1) + 0.2 * rng.dirichlet(np.ones(N), size=N)
        assert roles_of(draw) == {"positional": DRAWS}


def test_a_band_with_drop_out_is_syntactic():
    rng = np.random.default_rng(2)
    draw = lambda: sigma2(N, 2, 2, rng.choice([0.0, 0.1, 0.3]), rng) + sparse_error(N, 0.3, rng)
    assert roles_of(draw) == {"syntactic": DRAWS}


def test_most_rows_attending_one_token_is_rare_token():
    rng = np.random.default_rng(3)
    size = 12
    draw = lambda: sigma3(N, [int(rng.integers(N))], [size], [int(rng.integers(0, N - size + 1))]) + \
        sparse_error(N, 0.3, rng)
    assert roles_of(draw) == {"rare-token": DRAWS}


def test_two_rare_tokens_sharing_the_rows_are_rare_token():
    rng = np.random.default_rng(5)
    draw = lambda: sigma3(N, list(rng.choice(N, 2, replace=False)), [6, 6], [1, 8]) + sparse_error(N, 0.3, rng)
    assert roles_of(draw) == {"rare-token": DRAWS}


def test_every_row_on_the_final_token_is_rare_token_even_under_a_causal_mask():
    H = np.zeros((N, N))
    H[:, -1] = 1.0
    assert classify_head(H)[0] == "rare-token"


def test_a_causal_heads_first_columns_are_not_taken_for_rare_tokens():
    """Under the causal mask every row sees the first tokens: a uniform causal 8 × 8 head puts
    55% of its mass on its first two columns, which is no sign of a rare-token head."""
    H = uniform_head(8, 8, causal=True)
    role, measures = classify_head(H, causal=True)
    assert measures.top_two_columns_mass >= RARE_TOKEN_PAIR_MASS
    assert role == "other"


def test_spread_out_heads_are_other():
    rng = np.random.default_rng(4)
    for concentration in (0.3, 3.0):
        assert roles_of(lambda: rng.dirichlet(np.full(N, concentration), size=N)) == {"other": DRAWS}
    assert classify_head(np.full((N, N), 1 / N))[0] == "other"


@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_small_identity_is_positional_not_rare_token(n):
    assert classify_head(np.eye(n))[0] == "positional"


def test_a_short_uniform_head_is_not_called_syntactic():
    assert classify_head(np.full((5, 5), 0.2))[0] == "other"


def test_the_roles_table_has_a_row_per_head():
    rows = [HeadRole("encoder.0.self_attn", h, *classify_head(H))
            for h, H in enumerate([np.eye(4), np.full((4, 4), 0.25)])]
    table = roles_table(rows, {"encoder.0.self_attn": ["a", "b", "c", "d"]})
    assert table.count("\n") == 3 and "positional" in table and "other" in table and "`a`" in table
    assert {row.role for row in rows} <= set(ROLES)


@pytest.mark.parametrize("n", [4, 16])
def test_the_measures_come_with_the_role(n):
    role, measures = classify_head(np.eye(n))
    assert role == "positional" and measures.dominant_offset == 0 and measures.rank == n
