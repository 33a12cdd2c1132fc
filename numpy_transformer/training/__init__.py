"""The run machinery: everything between a model and a trained model in a folder.

| module             | holds                                                                      |
|--------------------|----------------------------------------------------------------------------|
| loss.py            | the objectives: label-smoothed cross-entropy by teacher forcing (and LMs') |
| loop.py            | `train_step` (forward, loss, backward, clip, update), and `Trainer`, which |
|                    | runs it: batches, validation, Ctrl-C, exact resume                         |
| mixed_precision.py | the float16 twin and the loss scale of `--precision mixed`                 |
| settings.py        | `DataConfig`, `TrainingConfig`, and `resolve` (a preset plus the flags)    |
| presets.py         | the named settings of `numpy-transformer train --preset`                   |
| prepare.py         | a run's data: the corpus split, tokenized and encoded                      |
| parallel.py        | a step shared by processes (`--threads N`): shards, sum, transports        |
| mpi.py             | the same over MPI ranks (`mpiexec -n P numpy-transformer train`)           |
| run.py             | `Run`: a training run in a folder, new or resumed                          |
| run_folder.py      | which files of a run's folder the project wrote, its parts' fingerprints,  |
|                    | and its lock                                                               |
| locks.py           | lock files that record their process; stale or damaged ones taken over     |
| checkpoint.py      | saving and loading a run's folder                                          |
| atomic_files.py    | atomic writes                                                              |
| allocator.py       | keep the memory NumPy frees for the next step (glibc's malloc settings)    |
| metrics_log.py     | the JSON-lines log and the loss figure                                     |
| evaluation.py      | all evaluation: perplexity, BLEU and chrF of translations, a language      |
|                    | model's accuracy and samples; what `train` and `evaluate` print            |

Nothing is imported here, so that `numpy_transformer.training.presets` can be read (by the
command line's parser) without loading NumPy.
"""
