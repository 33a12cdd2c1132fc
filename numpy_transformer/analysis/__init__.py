"""Inside the heads: thesis chapter 3 as code.

    from numpy_transformer.analysis import capture_sentence, classify_capture, structured_approximation
    capture = capture_sentence(model, src_tokenizer, tgt_tokenizer, "the cat sleeps .")
    X, distance = structured_approximation(capture.weights["encoder.0.self_attn"][0], w=3, num_pos=2)

| module          | what it holds                                                             | thesis           |
|-----------------|---------------------------------------------------------------------------|------------------|
| `hooks`         | every attention layer under a stable name; a hook on the weights it uses  |                  |
| `capture`       | every attention matrix of a sentence pair, with its tokens; .npz          | §3.1             |
| `heatmaps`      | layers × heads grids with a shared colour bar; one head with its values   | Figures 11, 12   |
| `spectra`       | singular-value spectra of every head                                      | Figure 10        |
| `measures`      | diagonal, offset and band masses, column masses, entropy, rank, ‖H‖₂      | §3.1             |
| `roles`         | positional / syntactic / rare-token / other, from the measures; counted   | §3.1.1           |
|                 | over many sentences                                                       |                  |
| `attribution`   | attention rollout, attention × gradient                                   | notes            |
| `alignment`     | cross-attention against the built-in corpus's word alignments (AER)       |                  |
| `families`      | random members of Σ1, Σ2(w), Σ3(T, W) plus the sparse error Ẽ             | eqs. (19), (20)  |
| `search`        | `random_search`: the thesis's validation, best of many random members     | eq. (22), §3.1.2 |
| `projection`    | the exact minimiser of eq. (21) over the structured set                   | eqs. (21), (22)  |
| `structured`    | `structured_approximation` (both methods), the validation table, its      | §3.1.2           |
|                 | means over many sentences                                                 |                  |
| `substitution`  | the model with every head replaced by its approximation: loss, BLEU       | beyond           |
| `ablation`      | heads silenced one at a time, ranked by the loss they cost                | [12]             |

The `numpy-transformer attention` command that draws and prints these is numpy_transformer/cli/attention_maps.py.
"""
from numpy_transformer.analysis.ablation import ablated_heads, head_ablation
from numpy_transformer.analysis.alignment import AlignmentCounts, cross_attention_alignment
from numpy_transformer.analysis.attribution import attention_gradient_attribution, attention_rollout
from numpy_transformer.analysis.capture import AttentionCapture, capture_attention, capture_sentence
from numpy_transformer.analysis.heatmaps import draw_attention_grid, draw_attention_head, draw_capture
from numpy_transformer.analysis.hooks import attention_modules, weights_hooks
from numpy_transformer.analysis.measures import head_measures
from numpy_transformer.analysis.projection import project_structured
from numpy_transformer.analysis.search import random_search
from numpy_transformer.analysis.roles import classify_capture, classify_head
from numpy_transformer.analysis.spectra import draw_spectra
from numpy_transformer.analysis.structured import structured_approximation, validation_table
from numpy_transformer.analysis.substitution import structured_substitution, substituted_weights

__all__ = ["ablated_heads", "head_ablation", "AlignmentCounts", "cross_attention_alignment",
           "attention_gradient_attribution", "attention_rollout", "AttentionCapture", "capture_attention",
           "capture_sentence", "draw_attention_grid", "draw_attention_head", "draw_capture", "attention_modules",
           "weights_hooks", "head_measures", "project_structured", "random_search", "classify_capture",
           "classify_head", "draw_spectra", "structured_approximation", "validation_table",
           "structured_substitution", "substituted_weights"]
