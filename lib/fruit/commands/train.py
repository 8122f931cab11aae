"""``fruit train``: train and evaluate one run into a run folder (fruit.training).

Example::

    fruit train --task question-formation --architecture Tf+Nd --profile smoke --generate-data

Sizes, the checkpoint interval and max epochs come from ``--profile`` (fruit.profiles,
the same files as ``fruit run``) unless given explicitly. The run folder is
``OUT/runs/<profile name>/<task>/<architecture>/<phase>-<index>`` unless ``--run-dir``
is given. Running the same command again resumes an
unfinished run, or prints the metrics of a finished one.
"""

from __future__ import annotations

import json
import sys

from fruit import training
from fruit.profiles import profile_names


def add_arguments(parser) -> None:
    defaults = training.RunConfig(task="", architecture="")
    a = parser.add_argument
    a("--task", required=True, help="task slug, e.g. question-formation")
    a("--architecture", required=True, help="e.g. Tf, Tf+Nd, LSTM+Sup+R")
    a(
        "--profile",
        default=defaults.profile,
        help=f"a shipped profile ({', '.join(profile_names())}) or the path of your own .toml: "
        f"sizes, checkpoint interval and max epochs come from it (default: {defaults.profile})",
    )
    a("--phase", default=defaults.phase, choices=training.PHASES)
    a("--index", type=int, default=defaults.index, help="trial or run number")
    a("--seed", type=int, default=defaults.seed, help="run seed (other seeds derive from it)")
    a("--learning-rate", type=float, default=defaults.learning_rate)
    a("--batch-tokens", type=int, default=defaults.batch_tokens, help="token budget B")
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
    a("--target-params", type=int, default=defaults.target_params)
    a("--parameter-seed", type=int, default=None)
    a("--shuffle-seed", type=int, default=None)
    a("--sampling-seed", type=int, default=defaults.sampling_seed)
    a("--num-samples", type=int, default=defaults.num_samples)
    a("--data-dir", default=defaults.data_dir, help="folder with <task>/{train,dev,test,gen}.tsv")
    a(
        "--generate-data",
        action="store_true",
        help="generate the task's splits into an absent DATA_DIR/<task>/ folder",
    )
    a("--data-seed", type=int, default=defaults.data_seed)
    a("--output-dir", default="results", help="run folders go under OUTPUT_DIR/runs/")
    a("--run-dir", default=None, help="explicit run folder (overrides --output-dir)")
    a("--device", default=defaults.device, help="auto, cpu, cuda or cuda:N")
    a("--no-partial-on-test", action="store_true", help="skip partial accuracy on the test set")
    a("--progress", action="store_true", default=None, help="show a progress bar")
    a("--no-progress", dest="progress", action="store_false")


def config_from_args(args) -> training.RunConfig:
    return training.RunConfig(
        task=args.task,
        architecture=args.architecture,
        phase=args.phase,
        index=args.index,
        seed=args.seed,
        profile=args.profile,
        learning_rate=args.learning_rate,
        batch_tokens=args.batch_tokens,
        train_size=args.train_size,
        dev_size=args.dev_size,
        test_size=args.test_size,
        gen_size=args.gen_size,
        checkpoint_every=args.checkpoint_every,
        max_epochs=args.max_epochs,
        target_params=args.target_params,
        d=args.d,
        data_dir=args.data_dir,
        generate_data=args.generate_data,
        data_seed=args.data_seed,
        device=args.device,
        parameter_seed=args.parameter_seed,
        shuffle_seed=args.shuffle_seed,
        sampling_seed=args.sampling_seed,
        num_samples=args.num_samples,
        partial_on_test=not args.no_partial_on_test,
    )


def main(args) -> int:
    config = config_from_args(args)
    run_dir = args.run_dir or training.run_dir_for(args.output_dir, training.resolve_config(config))
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    metrics = training.train_run(config, run_dir, progress=progress)
    print(json.dumps(metrics, indent=2, sort_keys=True))
    print(f"run folder: {run_dir}", file=sys.stderr)
    return 0 if metrics["status"] == "complete" else 1
