"""The lab's benchmarks: what `numpy-transformer bench` measures (the command is
`numpy_transformer/cli/bench.py`).

| module              | measures                                                                  |
|---------------------|---------------------------------------------------------------------------|
| attention_cost.py   | time and peak memory of the chapter-2 attention variants as n grows       |
| random_features.py  | the error of random-feature linear attention against exact attention      |
| train_step.py       | a training step of this project's model against PyTorch, time and memory  |
| decode.py           | greedy decoding with and without the key/value cache                      |
| latency.py          | one sentence at a time (translate, generate) against PyTorch              |
| plain_decoding.py   | the plain-array yardsticks `latency` compares with                        |
| workloads.py        | the model configurations and batches `train-step` and `decode` measure    |
| memory_use.py       | gradient checkpointing: activation memory and time against the depth L    |
| precision_speed.py  | mixed precision against float32, a training step                          |
| pretrained_speed.py | a GPT-2-small-sized Hugging Face model: loading and generation            |
| complexity.py       | the complexity notes' table (FLOPs, time, memory against T, d); KV cache  |
| sts.py              | sentence embeddings on the STS benchmark against sentence-transformers    |

docs/performance.md, docs/chapter2.md, docs/theory.md and docs/language_models.md give their
figures.
"""
