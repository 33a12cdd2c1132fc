"""Acting on the weights a model uses (numpy_transformer/analysis/hooks.py, ablation.py,
substitution.py): silencing a head removes exactly that head, substituting each matrix by
itself changes nothing, and the hooks are gone afterwards."""
import numpy as np
import pytest

from analysis_helpers import PAIRS, tiny_model, tokenizers
from numpy_transformer.analysis.ablation import ablated_heads, ablation_markdown, head_ablation
from numpy_transformer.analysis.hooks import attention_modules, weights_hooks
from numpy_transformer.analysis.substitution import structured_substitution, substituted_weights
from numpy_transformer.data import encode_pairs
from numpy_transformer.inference import inference_mode

SRC_TOKENIZER, TGT_TOKENIZER = tokenizers()
SRC = np.array([[2, 7, 8, 9, 10, 3], [2, 11, 12, 3, 1, 1]])     # the second row padded (pad_id 1)
TGT = np.array([[2, 5, 6, 7], [2, 8, 1, 1]])


def logits(model):
    with inference_mode(model):
        return model(SRC, TGT).data


def test_silencing_a_head_is_zeroing_its_block_of_w_c():
    """head_h A_h V_h = 0 removes rows h·d_k … (h+1)·d_k of Concat(heads) W_c, eq. (7)."""
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER, dtype="float64")
    with ablated_heads(model, [("decoder.1.cross_attn", 1)]):
        silenced = logits(model)
    attention = attention_modules(model)["decoder.1.cross_attn"]
    attention.W_c.weight.data[attention.d_k:2 * attention.d_k] = 0.0
    np.testing.assert_allclose(silenced, logits(model), atol=1e-12)


def test_ablation_changes_the_loss_only_for_the_head_silenced():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER, dtype="float64")
    attention = attention_modules(model)["encoder.0.self_attn"]
    attention.W_c.weight.data[:attention.d_k] = 0.0                  # head 0 of encoder.0 already does nothing
    encoded = encode_pairs(PAIRS[:8], SRC_TOKENIZER, TGT_TOKENIZER, model.config.max_len)
    base, results = head_ablation(model, encoded)
    increases = {(r.name, r.head): r.increase for r in results}
    assert len(results) == 6 * 2
    assert increases.pop(("encoder.0.self_attn", 0)) == pytest.approx(0.0, abs=1e-12)
    assert all(abs(change) > 1e-9 for change in increases.values())
    assert [r.increase for r in results] == sorted((r.increase for r in results), reverse=True)
    assert "| 1 |" in ablation_markdown(base, results)


def test_substituting_each_matrix_by_itself_leaves_the_output_unchanged():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER)
    before = logits(model)
    calls = []
    with substituted_weights(model, lambda name, A: calls.append(name) or A):
        np.testing.assert_array_equal(logits(model), before)
    assert len(calls) == 2 * 6 * 2                                  # batch × layers × heads
    np.testing.assert_array_equal(logits(model), before)


def test_a_projection_wide_enough_to_hold_every_matrix_changes_nothing():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER)
    result = structured_substitution(model, SRC_TOKENIZER, TGT_TOKENIZER, PAIRS[:3], w=model.config.max_len,
                                     num_pos=1, n_pairs=3)
    assert result.n_pairs == 3 and result.captured_mass == pytest.approx(1.0)
    assert result.substituted_loss == pytest.approx(result.loss, rel=1e-6)
    assert result.substituted_bleu == pytest.approx(result.bleu)


def test_a_narrow_projection_changes_the_loss():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER)
    result = structured_substitution(model, SRC_TOKENIZER, TGT_TOKENIZER, PAIRS[:3], w=0, num_pos=0, s=0,
                                     n_pairs=3)
    assert result.captured_mass < 1 and result.substituted_loss != pytest.approx(result.loss)


def test_hooks_are_removed_even_when_the_block_fails():
    model = tiny_model(SRC_TOKENIZER, TGT_TOKENIZER)
    with pytest.raises(RuntimeError, match="inside"):
        with weights_hooks(model, lambda name: lambda w: w * 0):
            raise RuntimeError("inside")
    assert all(module.attend.weights_hook is None for module in attention_modules(model).values())
