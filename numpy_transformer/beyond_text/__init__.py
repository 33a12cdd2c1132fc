"""Attention beyond text (architecture notes, §Applications Beyond NLP): the encoder on image
patches (vision), the decoder attending to an image (cross-modal), attention over a graph's
edges (graph), and over the past of a time series (time_series). Each module reuses the
project's layers and its attention function; docs/beyond_text.md walks through them."""
