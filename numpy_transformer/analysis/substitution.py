"""Beyond the thesis: does the model still translate when every attention matrix is replaced by
its structured approximation X = P_c B + E (eq. (19))?

Inside `substituted_weights`, each head's weights A (one sentence, one head, (n_q, n_k)) are
replaced by approximate(name, A) where they multiply V, i.e. the new attention values are
(I_n P + Ẽ) V as the thesis writes them. `structured_substitution` does it with the exact
projection of `projection.py` for every head of every layer and reports the loss and the BLEU
of greedy translations before and after. X is used as it is: X ≤ H entrywise, its rows sum to
the captured share of H's mass (a little under 1), so the approximation also shrinks the
outputs a little. The decoder runs without its key/value cache (each step decodes the whole
prefix again), so every step sees the whole causal matrix its projection needs.
"""
import contextlib
import dataclasses

import numpy as np

from autograd import Tensor
from numpy_transformer.analysis.capture import check_full_attention
from numpy_transformer.analysis.hooks import KINDS, kind_of, weights_hooks
from numpy_transformer.analysis.projection import DEFAULT_EPSILON, DEFAULT_SPARSITY, project_structured
from numpy_transformer.data.batching import encode_pairs
from numpy_transformer.data.detokenize import detokenize
from numpy_transformer.decoding import greedy_decode
from numpy_transformer.inference import inference_mode
from numpy_transformer.training.evaluation import corpus_scores, mean_cross_entropy
from numpy_transformer.translation import with_specials


@contextlib.contextmanager
def substituted_weights(model, approximate, kinds=KINDS):
    """Inside the block, the weights of every head of the layers of `kinds` are replaced by
    approximate(name, A), A one head's (n_q, n_k) array, as they multiply V."""
    check_full_attention(model)

    def make_hook(name):
        def substitute(weights):
            A = weights.data
            X = [[approximate(name, A[b, h]) for h in range(A.shape[1])] for b in range(A.shape[0])]
            return Tensor(np.asarray(X, dtype=A.dtype))
        return substitute if kind_of(name) in kinds else None

    with weights_hooks(model, make_hook):
        yield


@dataclasses.dataclass(frozen=True)
class SubstitutionResult:
    """Loss and BLEU with the softmax weights and with their projections (w, num_pos); the
    mean share of each matrix's mass the projections kept, over every matrix they replaced."""
    w: int
    num_pos: int
    n_pairs: int
    loss: float
    substituted_loss: float
    bleu: float
    substituted_bleu: float
    captured_mass: float


def greedy_bleu(model, encoded, pairs, src_tokenizer, tgt_tokenizer):
    """Corpus BLEU of greedy translations, one sentence at a time, no key/value cache, each at
    most max_len tokens (the attention matrices this study projects stay within max_len)."""
    hypotheses = []
    with inference_mode(model):
        for x in encoded.src:
            ids = greedy_decode(model, with_specials(x, src_tokenizer)[None], tgt_tokenizer.sos_id,
                                tgt_tokenizer.eos_id, max_len=model.config.max_len, use_cache=False)[0]
            hypotheses.append(tgt_tokenizer.detokenize(ids))
    references = [detokenize(pairs[i].tgt, tgt_tokenizer.language) for i in encoded.pair_index]
    return corpus_scores(hypotheses, references).bleu


def structured_substitution(model, src_tokenizer, tgt_tokenizer, pairs, w, num_pos, n_pairs=50,
                            s=DEFAULT_SPARSITY, epsilon=DEFAULT_EPSILON, kinds=KINDS):
    """A `SubstitutionResult` over the first `n_pairs` pairs that fit the model's max_len."""
    encoded = encode_pairs(pairs[:n_pairs], src_tokenizer, tgt_tokenizer, model.config.max_len)
    captured = []

    def approximate(name, A):
        projection = project_structured(A, w, num_pos, s, epsilon)
        captured.append(projection.captured_mass)
        return projection.X

    loss = mean_cross_entropy(model, encoded, batch_size=1)
    bleu = greedy_bleu(model, encoded, pairs, src_tokenizer, tgt_tokenizer)
    with substituted_weights(model, approximate, kinds):
        substituted_loss = mean_cross_entropy(model, encoded, batch_size=1)
        substituted_bleu = greedy_bleu(model, encoded, pairs, src_tokenizer, tgt_tokenizer)
    return SubstitutionResult(w, num_pos, len(encoded), loss, substituted_loss, bleu, substituted_bleu,
                              float(np.mean(captured)))
