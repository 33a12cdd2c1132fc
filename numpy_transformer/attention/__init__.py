"""Attention: scaled dot-product attention (thesis eqs. (5), (6), (10)) and multi-head
attention (eqs. (3), (4), (7)).

    from numpy_transformer.attention import scaled_dot_product_attention, MultiHeadAttention
"""
from numpy_transformer.attention.scaled_dot_product import scaled_dot_product_attention
from numpy_transformer.attention.multi_head import MultiHeadAttention, merge_heads, split_heads

__all__ = ["scaled_dot_product_attention", "MultiHeadAttention", "split_heads", "merge_heads"]
