"""The number of parameters a `TransformerConfig` implies, in closed form (thesis chapter 2),
without building the model: `memory_budget` sizes a run from it before anything is allocated.
`model.count_parameters` counts a built model's; the tests check that the two agree.

    from numpy_transformer.parameter_count import analytic_parameter_count
    analytic_parameter_count(config)["total"]
"""
from numpy_transformer.attention.variants import variant_parameter_count

__all__ = ["analytic_parameter_count"]


def analytic_parameter_count(config):
    """The parameters a configuration implies, in closed form, by component (thesis chapter 2).

    Chapter 2 of the thesis measures a language model by its number of parameters (its
    Table 1: GPT-1 117 million … Minerva 540 billion). For the model of chapter 1, with
    d = d_model, m = d_ff, l_s, l_t the vocabularies, L_e, L_d the layers, n_max = max_len:

        component      parameters                    what they are
        embeddings     (l_s + l_t) d                 Wᴱ of each language (l_t d when shared)
        positional     2 n_max d                     a learned P per stack (eq. (1) has none);
                       2 · buckets · H               T5's relative bias, one table per stack
        attention      (L_e + 2 L_d) · 4(d² + d)     W_q, W_k, W_v, W_c ∈ ℝ^{d×d}, biases; eqs. (3), (7)
                       (L_e + 2 L_d) · 2 m_s d       memory slots M_k, M_v ∈ ℝ^{m_s×d} (memory_slots m_s)
        feed_forward   (L_e + L_d) · (2dm + m + d)   W₁, b₁, W₂, b₂ of §1.2.4 (SwiGLU: 3dm + 2m + d)
        layer_norms    (2 L_e + 3 L_d) · 2d          γ, β of eq. (2) per sub-layer (pre-norm: + 2 · 2d;
                                                      BERT's embedding_norm: + 2 · 2d)
        projection     d l_t                         P ∈ ℝ^{d×l} of §1.2.5 (0 when tied to Wᴱ)

    (attention also counts the E, F of a Linformer encoder, eq. (17): k′ n_max per matrix.)

    The decoder layer has two attentions (self and cross) and three LayerNorms.
    A decoder-only or encoder-only config (`config.kind`) counts its one stack the same way,
    each of its L blocks an encoder layer (one attention, two LayerNorms), over one vocabulary l
    and with one positional table; "projection" is then its head: the decoder-only's W (d l) and
    b (l) when not tied, the encoder-only's transform (d² + d), LayerNorm (2d) and bias (l), and
    its d l when not tied (`language_model.py`).
    The number of heads does not appear: splitting W_q into H blocks (eq. (3)) changes no count.
    Returns a dict of these components (ints) and their "total".

    The paper's base model (d 512, H 8, m 2048, L 6 + 6, one vocabulary of about 37,000
    tokens shared by the source and target embeddings and the projection) comes out at
    63,082,496 ≈ 63.1M here; Table 3 of Vaswani et al. prints 65 × 10⁶, 3% more, which is
    more than its rounding. Their big model (d 1024, H 16, m 4096) comes out at 214.2M
    against the printed 213 × 10⁶, 0.6% less. The paper says neither how it counted nor the
    exact vocabulary size ("about 37000"), so the gap cannot be pinned down here; the
    per-layer terms agree with its Table 3 (N = 8 and N = 2 differ by 44 × 10⁶ there, by
    44.1M here).
    """
    d, m, l_t = config.d_model, config.d_ff, config.tgt_vocab_size
    n_blocks = config.n_encoder_layers + config.n_decoder_layers     # one of them is 0 in a one-stack model
    two_stacks = config.kind == "encoder-decoder"
    n_stacks, n_cross = (2, config.n_decoder_layers) if two_stacks else (1, 0)
    n_norms = 2 * n_blocks + n_cross + n_stacks * ((config.norm_placement == "pre") + config.embedding_norm)
    feed_forward_size = 3 * d * m + 2 * m + d if config.activation == "swiglu" else 2 * d * m + m + d
    vocabularies = l_t + (0 if config.share_source_embedding or not two_stacks else config.src_vocab_size)
    untied = 0 if config.tie_embeddings else d * l_t
    counts = {
        "embeddings": vocabularies * d,
        "positional": n_stacks * {"learned": config.max_len * d, "relative": config.relative_buckets * config.n_heads,
                                  "sinusoidal": 0}[config.positional],
        "attention": (n_blocks + n_cross) * (4 * (d * d + d) + 2 * config.memory_slots * d) + variant_parameter_count(
            config.attention, config.attention_options, config.n_heads, config.max_len,
            config.n_decoder_layers if config.kind == "decoder-only" else config.n_encoder_layers),
        "feed_forward": n_blocks * feed_forward_size,
        "layer_norms": n_norms * 2 * d,
        "projection": untied + {"encoder-decoder": 0, "decoder-only": 0 if config.tie_embeddings else l_t,
                                "encoder-only": d * d + 3 * d + l_t}[config.kind],
    }
    counts["total"] = sum(counts.values())
    return counts
