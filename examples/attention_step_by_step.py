"""Masked self-attention on a four-token sentence, one step at a time (thesis §1.2, eqs. (4)–(10)).

    python examples/attention_step_by_step.py            # [--threads N]: BLAS threads (default 1)

Embeds "the cat sat down" (d_model = 4, one head, so d_k = 4), then prints every intermediate
of  MaskedAttention(Q, K, V) = softmax(M + Q Kᵀ / √d_k) V  with its shape: Q, K, V, the scaled
scores, the causal mask M, the masked scores, the weights and the output. Expected start:

    Sentence: ['the', 'cat', 'sat', 'down'] -> ids [0 1 2 3]

    X = Embedding(ids) + P[:4]  (4, 4)   tokens scaled by √d_model, plus positions (eq. (1))
    [[ 0.126  0.868  0.64   1.105]
"""
import argparse
import math

from numpy_transformer.cli.example_scripts import add_example_arguments, run_example, threads_from_command_line

threads_from_command_line()                  # before NumPy loads: BLAS reads its thread count then
import numpy as np  # noqa: E402

from autograd import no_grad  # noqa: E402
from numpy_transformer.attention import scaled_dot_product_attention  # noqa: E402
from numpy_transformer.masks import additive_mask, causal_mask  # noqa: E402
from numpy_transformer.nn import Embedding, Linear  # noqa: E402
from numpy_transformer.positional import sinusoidal_encoding  # noqa: E402

SENTENCE = ["the", "cat", "sat", "down"]
D_MODEL = 4


def show(name, array, note=""):
    """Print `array` under a heading with its name, shape and a note."""
    print(f"\n{name}  {array.shape}   {note}")
    print(array)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_example_arguments(parser, __file__, output=False)
    parser.parse_args(argv)
    np.set_printoptions(precision=3, suppress=True)
    rng = np.random.default_rng(0)
    ids = np.arange(len(SENTENCE))
    print(f"Sentence: {SENTENCE} -> ids {ids}")
    embedding = Embedding(len(SENTENCE), D_MODEL, rng)
    W_q, W_k, W_v = (Linear(D_MODEL, D_MODEL, rng, bias=False) for _ in range(3))

    with no_grad():
        X = embedding(ids) + sinusoidal_encoding(len(ids), D_MODEL)
        show("X = Embedding(ids) + P[:4]", X.data, "tokens scaled by √d_model, plus positions (eq. (1))")
        Q, K, V = W_q(X), W_k(X), W_v(X)
        show("Q = X W_q", Q.data, "one row per token: what it looks for (eq. (4))")
        show("K = X W_k", K.data, "what each token offers to be found by")
        show("V = X W_v", V.data, "what each token passes on")

        scores = (Q @ K.T).data / math.sqrt(D_MODEL)
        show("S = Q Kᵀ / √d_k", scores, "row i: how well query i matches each key (eq. (5), scaled by √4 = 2)")
        M = additive_mask(causal_mask(len(ids)))
        show("M", M, "the causal mask of eq. (10): 0 = may attend, -inf = a future token")
        show("S + M", scores + M, "future scores are -inf ...")

        output, weights = scaled_dot_product_attention(Q, K, V, causal_mask(len(ids)))
        show("A = softmax(S + M)", weights.data, "... so their weights are exactly 0; each row sums to 1 (eq. (6))")
        show("A V", output.data, "row i: the average of the values of tokens 0..i, weighted by row i of A")

    print(f"\nCheck: the last row of A V is Σ_j A[3, j] V[j] = {weights.data[-1] @ V.data}")
    print(f"       the first token sees only itself, so row 0 of A V is V[0] = {V.data[0]}")


if __name__ == "__main__":
    run_example(main, __file__)
