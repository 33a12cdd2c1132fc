"""The run machinery: everything between a model and a trained model in a folder.

| module          | holds                                                                       |
|-----------------|-----------------------------------------------------------------------------|
| loss.py         | the objective: label-smoothed cross-entropy by teacher forcing, perplexity  |
| loop.py         | `Trainer`: steps, clipping, Adam, validation, Ctrl-C, exact resume          |
| settings.py     | `DataConfig`, `TrainingConfig`, and `resolve` (a preset plus the flags)     |
| presets.py      | the named settings of `numpy-transformer train --preset`                    |
| run.py          | `Run`: a training run in a folder, new or resumed                           |
| checkpoint.py   | saving and loading a run's folder                                           |
| atomic_files.py | atomic writes                                                               |
| allocator.py    | keep the memory NumPy frees for the next step (glibc's malloc settings)     |
| metrics_log.py  | the JSON-lines log and the loss figure                                      |
| evaluation.py   | translations of a test set, BLEU, chrF and perplexity                       |

Nothing is imported here, so that `numpy_transformer.training.presets` can be read (by the
command line's parser) without loading NumPy.
"""
