"""Benchmarks: what `numpy-transformer bench` measures (the command is `numpy_transformer/cli/bench.py`).

| module             | measures                                                                  |
|--------------------|---------------------------------------------------------------------------|
| attention.py       | time and peak memory of the chapter-2 attention variants as n grows       |
| random_features.py | the error of random-feature linear attention against exact attention      |
| train_step.py      | a training step of this project's model against PyTorch, time and memory  |
| decode.py          | greedy decoding with and without the key/value cache                      |
| configs.py         | the model configurations and batches the last two measure                 |
| memory.py          | gradient checkpointing: activation memory and time against the depth L    |
| complexity.py      | the complexity notes' table (FLOPs, time, memory against T, d); KV cache  |

docs/performance.md, docs/chapter2.md and docs/theory.md give their figures.
"""
