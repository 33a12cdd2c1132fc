"""The architecture notes' theoretical claims, as code (§Theoretical Analysis, §Gradient Flow,
§Attention Optimization): attention built by hand to copy, shift, average and attend locally,
Boolean gates, and the gradient identities beside autograd's. docs/theory.md walks through them."""
