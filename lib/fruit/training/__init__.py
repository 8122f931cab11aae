"""Training one run into a run folder (docs/paper.md §11-§13, docs/contracts.md §5).

```python
from fruit import training

config = training.RunConfig("question-formation", "Tf+Nd", profile="smoke", generate_data=True)
config = training.resolve_config(config)   # once: every setting filled and checked
run = training.open_run(config, "results/runs/smoke/question-formation/Tf+Nd/final-0")
run.train(progress=True)      # resumes from checkpoint.pt when the folder has one
metrics = run.finish()        # evaluation with best.pt, then metrics.json
training.read_log(run.dir)    # log.csv as a DataFrame
training.learning_curve(training.read_log(run.dir))  # its picture (a matplotlib Figure)
```

The modules, from the bottom up: ``data`` (``prepare_data``, ``load_data``: a task's data
folder and a run's splits), ``config`` (``RunConfig``, ``resolve_config``: every setting,
completed from the profile), ``checkpoints`` (``TrainingState``, ``checkpoint.pt``,
``best.pt``, ``log.csv``, ``warnings.log``), ``objective`` (the loss, Adam, clipping,
the plateau schedule), ``records`` (``config.json``, the final evaluation,
``metrics.json``), ``resume`` (opening a folder again: resuming from ``checkpoint.pt``,
restarting after damage), ``loop`` (``open_run``, ``Run``, ``train_run``: the optimisation, pausing); ``curve``
(``learning_curve``: log.csv drawn; ``as_png``).
"""

from fruit.training.checkpoints import LOG_COLUMNS, TrainingState, read_log
from fruit.training.config import PROFILE_FIELDS, RunConfig, resolve_config, run_dir_for
from fruit.training.curve import as_png, learning_curve
from fruit.training.data import (
    DATA_MARKER,
    MIN_GENERATED_TRAIN,
    SPLIT_FIELDS,
    TaskData,
    load_data,
    prepare_data,
    published_folder,
)
from fruit.training.loop import Run, default_model_factory, open_run, train_run

__all__ = [
    "DATA_MARKER",
    "LOG_COLUMNS",
    "MIN_GENERATED_TRAIN",
    "PROFILE_FIELDS",
    "SPLIT_FIELDS",
    "Run",
    "RunConfig",
    "TaskData",
    "TrainingState",
    "default_model_factory",
    "load_data",
    "open_run",
    "prepare_data",
    "published_folder",
    "as_png",
    "learning_curve",
    "read_log",
    "resolve_config",
    "run_dir_for",
    "train_run",
]
