"""Attention: scaled dot-product attention (thesis eqs. (5), (6), (10)), multi-head attention
(eqs. (3), (4), (7)), and the efficient variants of chapter 2.

    from numpy_transformer.attention import scaled_dot_product_attention, MultiHeadAttention

| function                   | computes                                             | thesis         |
|----------------------------|------------------------------------------------------|----------------|
| `sparse_attention`         | softmax over the neighbours N(i) of a graph          | eq. (11)       |
| `sliding_window_attention` | Longformer: dilated window + global tokens, banded   | §2.1.1         |
| `linear_attention`         | φ(Q)(φ(K)ᵀV) / φ(Q)(φ(K)ᵀ1), causal by prefix sums   | eqs. (12)–(15) |
| `linformer_attention`      | softmax(Q (E K)ᵀ/√d)(F V)                            | eq. (17)       |
| `blockwise_attention`      | eq. (5) exactly, online softmax, recomputing VJP     | eq. (5)        |

Each lives in a file of its own (sparse.py, window.py, kernel_linear.py, linformer.py,
blockwise.py); variants.py puts them behind `MultiHeadAttention(attention=...)`.
The pattern builders of Figure 7 are in `patterns.py`.

The layer, multi_head.py, is eqs. (3)–(7) in four lines; what is not in those equations joins
it through named pieces: heads.py (the reshapes of eqs. (3) and (7)), attend.py (how the heads
attend: full attention, memory slots, a variant; the weights' dropout and the analyses' hook),
cache.py (the key/value cache of decoding), memory_slots.py and relative.py (learned key/value
slots, T5's relative position bias).
"""
from numpy_transformer.attention.scaled_dot_product import scaled_dot_product_attention
from numpy_transformer.attention.heads import merge_heads, split_heads
from numpy_transformer.attention.multi_head import MultiHeadAttention
from numpy_transformer.attention.patterns import (bigbird_pattern, dilated_window_pattern, draw_figure_7,
                                                  global_tokens_pattern, random_pattern, sliding_window_pattern)
from numpy_transformer.attention.sparse import AttentionGraph, sparse_attention
from numpy_transformer.attention.window import sliding_window_attention
from numpy_transformer.attention.kernel_linear import (causal_linear_attention, feature_map, linear_attention,
                                                linear_attention_step, random_features,
                                                recurrent_linear_attention)
from numpy_transformer.attention.linformer import linformer_attention
from numpy_transformer.attention.blockwise import blockwise_attention

__all__ = ["scaled_dot_product_attention", "MultiHeadAttention", "split_heads", "merge_heads",
           "sparse_attention", "AttentionGraph", "sliding_window_pattern", "dilated_window_pattern",
           "global_tokens_pattern", "random_pattern", "bigbird_pattern", "draw_figure_7",
           "sliding_window_attention", "linear_attention", "causal_linear_attention", "linear_attention_step",
           "recurrent_linear_attention", "feature_map", "random_features", "linformer_attention",
           "blockwise_attention"]
