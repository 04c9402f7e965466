"""``skmpt lm-eval --model_args pretrained=antiberty --tasks TASK``: lm-evaluation-harness with the model ``skmpt``.

Takes lm-eval's own flags, with the model set to ``skmpt`` (:mod:`skmpt.text.harness`): a task
of lm-eval's or a local one found through ``--include_path`` (a YAML with ``dataset_path: json``).
Prints lm-eval's table and, per task, the requests scored exactly, the forward passes spent, the
root mean square standard error of the estimates, how many requests each estimator scored and,
with ``--model_args target_se=...`` (a standard error in nats per request), how many reached it;
``--output_path`` writes lm-eval's results file (and, with ``--log_samples``, its samples, each
with its standard error, exactness, forward passes and estimator under ``"skmpt"``). Needs lm-eval:
``pip install "skmpt[eval]"``.
"""

import argparse
import json
import logging
import os
from pathlib import Path

from .common import non_negative_int, positive_int, random_seed

__all__ = ["DESCRIPTION", "HELP", "add_arguments", "run"]

HELP = "evaluate a masked or diffusion LM with lm-evaluation-harness (model 'skmpt')"
DESCRIPTION = __doc__

logger = logging.getLogger("skmpt.cli.lm_eval")


def _limit(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--limit must be a number (documents, or a fraction below 1); "
                                         f"got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--limit must be positive; got {text!r}")
    return int(value) if value >= 1 else value


def add_arguments(parser):
    add = parser.add_argument
    add("--model_args", default="pretrained=antiberty",
        help="the model's options, 'key=value,...' (pretrained, score_method, max_forward_passes, target_se, dtype, "
             "device, ...)")
    add("--tasks", required=True, help="comma-separated task names")
    add("--include_path", default=None, help="a folder of local task YAML files")
    add("--output_path", default=None, help="folder (or .json file) for lm-eval's results")
    add("--log_samples", action="store_true", help="also write each sample, with its estimate's standard error")
    add("--limit", type=_limit, default=None, help="documents per task (or a fraction of them)")
    add("--num_fewshot", type=non_negative_int, default=None, help="examples in each prompt")
    add("--batch_size", type=positive_int, default=None, help="masked copies per forward pass")
    add("--seed", type=random_seed, default=0, help="seeds lm-eval's sampling and the masks, in [0, 2**32)")
    add("--quiet", action="store_true", help="no progress messages")
    add("--debug", action="store_true", help="show the traceback of an error")


def _checked(args):
    """Checks that need no model: tasks named, the include path and output folder usable."""
    tasks = [task.strip() for task in args.tasks.split(",") if task.strip()]
    if not tasks:
        raise ValueError(f"--tasks names no task: {args.tasks!r}")
    if args.include_path is not None and not Path(args.include_path).is_dir():
        raise ValueError(f"--include_path {args.include_path!r} is not a folder")
    if args.log_samples and args.output_path is None:
        raise ValueError("--log_samples needs --output_path (where the samples are written)")
    return tasks


def _missing_data_files(manager, tasks):
    """What a local task's data files lack, before the model loads: lm-eval reads them only after it.

    A task whose YAML names ``dataset_kwargs: data_files`` (``dataset_path: json`` and the like)
    points to files that must exist; a relative path is read from the current folder, not the
    YAML's. Returns a message naming the first missing file, or None. Globs and URLs are left to lm-eval.
    """
    for task in tasks:
        entry = manager.task_index.get(task)
        config = getattr(entry, "cfg", None) or {}
        files = (config.get("dataset_kwargs") or {}).get("data_files")
        if not files:
            continue
        values = files.values() if isinstance(files, dict) else [files]
        paths = [path for value in values for path in ([value] if isinstance(value, str) else value)]
        for path in paths:
            if "://" in path or any(char in path for char in "*?[") or Path(path).exists():
                continue
            where = "" if Path(path).is_absolute() else f" (read from the current folder, {os.getcwd()})"
            return f"task {task!r} reads {path!r}{where}, which does not exist; its YAML is {str(entry.yaml_path)!r}"
    return None


def run(args):
    from . import UsageError

    try:
        tasks = _checked(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        import lm_eval
        import lm_eval.tasks
        from lm_eval.loggers import EvaluationTracker
        from lm_eval.utils import make_table
    except ImportError:
        raise ImportError('skmpt lm-eval needs lm-evaluation-harness: pip install "skmpt[eval]"') from None
    from ..text.harness import annotate_samples

    model_args = args.model_args
    if "seed=" not in model_args:
        model_args = f"{model_args},seed={args.seed}" if model_args else f"seed={args.seed}"
    manager = lm_eval.tasks.TaskManager(include_path=args.include_path)
    unknown = [task for task in tasks if task not in manager.all_tasks]
    if unknown:
        raise UsageError(f"--tasks: unknown task {', '.join(map(repr, unknown))} (give --include_path for a "
                         "local YAML)")
    missing = _missing_data_files(manager, tasks)
    if missing:
        raise UsageError(f"--tasks: {missing}")
    tracker = None if args.output_path is None else EvaluationTracker(output_path=args.output_path)
    results = lm_eval.simple_evaluate(
        model="skmpt", evaluation_tracker=tracker, model_args=model_args, tasks=tasks, task_manager=manager,
        num_fewshot=args.num_fewshot,
        batch_size=args.batch_size, limit=args.limit, log_samples=True, random_seed=args.seed,
        numpy_random_seed=args.seed, torch_random_seed=args.seed, fewshot_random_seed=args.seed,
    )
    if results is None:  # a secondary process: rank 0 reports
        return
    annotate_samples(results)  # the samples are always kept for this summary; written with --log_samples
    print(make_table(results))
    for task, summary in results["skmpt"].items():
        print(f"{task}: {summary['exact']} of {summary['requests']} requests exact, {summary['forward_passes']} "
              f"forward passes ({summary['forward_passes_per_request']:.1f} per request), rms standard error "
              f"{summary['rms_std']:.4g} nats; estimators: "
              + ", ".join(f"{name} {count}" for name, count in summary["estimators"].items())
              + ("" if summary["target_reached"] is None else
                 f"; {summary['target_reached']} of {summary['requests']} requests reached target_se"))
    if args.output_path is not None:
        samples = results.pop("samples", None)
        tracker.save_results_aggregated(results=results, samples=samples if args.log_samples else None)
        for task in results["configs"] if args.log_samples else ():
            tracker.save_results_samples(task_name=task, samples=samples[task])
        logger.info("wrote %s", json.dumps(str(tracker.output_path)))
