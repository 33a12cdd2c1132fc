"""The attention studio: every head of a model on one sentence, in one HTML page that opens from
disk with no network (thesis chapter 3, interactive). Lab tier.

    from numpy_transformer.analysis.studio import StudioView, studio_capture, studio_data
    recorded = studio_capture(model, lambda: capture_sentence(model, src_tok, tgt_tok, "the cat sleeps ."))
    data = studio_data(*recorded, model_name="runs/default")
    StudioView(data)                          # shows inline in a notebook (_repr_html_)
    write_studio_page("attention.html", data) # the same page as a file

| module          | what it holds                                                                  |
|-----------------|--------------------------------------------------------------------------------|
| `head_vectors`  | the Q^(h), K^(h), V^(h) and mask every attention layer used (eqs. (3)–(7), (10)) |
| `page_data`     | the page's numbers as one JSON-ready dict (its format: docs/chapter3.md)       |
| `studio_page`   | the page: studio.html, studio.css and studio.js of this folder, the data inlined |

The JavaScript (studio.js) draws the matrix, head, model, equation and replay views from the
data alone; it asks for nothing over the network.
"""
from numpy_transformer.analysis.studio.head_vectors import HeadVectors, studio_capture
from numpy_transformer.analysis.studio.page_data import studio_data
from numpy_transformer.analysis.studio.studio_page import StudioView, studio_html, write_studio_page

__all__ = ["HeadVectors", "studio_capture", "studio_data", "StudioView", "studio_html", "write_studio_page"]
