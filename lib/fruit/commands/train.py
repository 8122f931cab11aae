"""``fruit train``: train and evaluate one run into a run folder (fruit.training).

Example::

    fruit train --task question-formation --architecture Tf+Nd --profile smoke --generate-data

Sizes, the checkpoint interval, max epochs, the data folder (``data/<profile>``) and the
data seed come from ``--profile`` (fruit.profiles, the same files and the same data as
``fruit run``) unless given explicitly. The run folder is
``OUT/runs/<profile name>/<task>/<architecture>/<phase>-<index>`` unless ``--run-dir``
is given. Running the same command again resumes an
unfinished run, or prints the metrics of a finished one; a folder that holds a run with
other settings (finished or not) is refused, naming each difference.
"""

from __future__ import annotations

import json
import sys

from fruit import training
from fruit.device import DEVICE_CHOICES
from fruit.profiles import PHASES, load_profile, profile_names


def add_arguments(parser) -> None:
    defaults = training.RunConfig(task="", architecture="")
    a = parser.add_argument
    a("--task", required=True, help="task slug, e.g. question-formation")
    a("--architecture", required=True, help="e.g. Tf, Tf+Nd, LSTM+Sup+R")
    a(
        "--profile",
        default=defaults.profile,
        help=f"a shipped profile ({', '.join(profile_names())}) or the path of your own .toml: "
        f"sizes, checkpoint interval and max epochs come from it, not its search's or selection's "
        f"settings: give --learning-rate and --batch-tokens (default: {defaults.profile})",
    )
    a("--phase", default=defaults.phase, choices=PHASES, help="(default: %(default)s)")
    a(
        "--index",
        type=int,
        default=defaults.index,
        help="trial or run number (default: %(default)s)",
    )
    a(
        "--seed",
        type=int,
        default=defaults.seed,
        help="run seed, other seeds derive from it (default: %(default)s)",
    )
    a("--learning-rate", type=float, default=defaults.learning_rate, help="(default: %(default)s)")
    a(
        "--batch-tokens",
        type=int,
        default=defaults.batch_tokens,
        help="token budget B (default: %(default)s)",
    )
    for name in (
        "train-size",
        "dev-size",
        "test-size",
        "gen-size",
        "checkpoint-every",
        "max-epochs",
    ):
        a(f"--{name}", type=int, default=None, help="override the profile's value")
    a("--d", type=int, default=None, help="model size (default: chosen for --target-params)")
    training_default = "default: the profile's [training] value, else {}"
    a("--target-params", type=int, help=training_default.format(defaults.target_params))
    a("--parameter-seed", type=int, default=None)
    a("--shuffle-seed", type=int, default=None)
    a("--sampling-seed", type=int, help=training_default.format(defaults.sampling_seed))
    a("--num-samples", type=int, help=training_default.format(defaults.num_samples))
    a(
        "--data-dir",
        default=None,
        help="folder with <task>/{train,dev,test,gen}.tsv (default: data/<profile>, as fruit run)",
    )
    a(
        "--generate-data",
        action="store_true",
        help="generate the task's splits into an absent DATA_DIR/<task>/ folder (as fruit run)",
    )
    a("--data-seed", type=int, default=None, help="default: the profile's seed for the task")
    a(
        "--output-dir",
        default="results",
        help="run folders go under OUTPUT_DIR/runs/ (default: %(default)s)",
    )
    a("--run-dir", default=None, help="explicit run folder (overrides --output-dir)")
    a("--device", default=defaults.device, help=f"{DEVICE_CHOICES} (default: %(default)s)")
    a(
        "--no-partial-on-test",
        dest="partial_on_test",
        action="store_false",
        default=None,
        help="skip partial accuracy on the test set",
    )
    a("--progress", action="store_true", default=None, help="show a progress bar")
    a("--no-progress", dest="progress", action="store_false")


def config_from_args(args) -> training.RunConfig:
    """The profile's ``[training]`` table (as ``fruit run`` passes it to the notebook),
    then every option given (None: not given)."""
    parameters = dict(load_profile(args.profile).training)
    parameters.update({k: v for k, v in vars(args).items() if v is not None})
    return training.RunConfig.from_parameters(parameters)


def main(args) -> int:
    from fruit.io import check_folder, remove_leftovers

    config = training.resolve_config(config_from_args(args))  # resolved once, here
    check_folder(args.run_dir or args.output_dir, "--run-dir" if args.run_dir else "--output-dir")
    run_dir = args.run_dir or training.run_dir_for(args.output_dir, config)
    remove_leftovers(run_dir)  # half-written saves of a killed earlier call
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    metrics = training.train_run(config, run_dir, progress=progress)
    print(json.dumps(metrics, indent=2, sort_keys=True))
    print(f"run folder: {run_dir}", file=sys.stderr)
    return 0 if metrics["status"] == "complete" else 1
