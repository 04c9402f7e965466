"""Does ``torchrun -m skmpt mlm-curve`` exit cleanly every time? Run it N times and count failures.

Issue 20: a finished two-process run of ``torchrun --standalone --nproc-per-node 2 -m skmpt
mlm-curve ...`` on a tiny saved BERT sometimes aborted at exit ("terminate called without an
active exception", SIGABRT) although its CSV was written. This script saves a tiny BERT with a
word-level tokenizer, runs the two-process command line ``--runs`` times (gloo on the CPU, a
fresh output file each time, progress bars on as a user would see them) and reports how many
runs failed, with the exit status and the last line of standard error of each failure::

    python benchmarks/torchrun_exit.py                           # 30 runs
    python benchmarks/torchrun_exit.py --runs 50 --busy 2        # 50 runs beside two busy processes
    python benchmarks/torchrun_exit.py --runs 50 --busy 2 --log-dir /tmp/exit-logs --cores

``--busy N`` keeps N processes spinning on the CPU during the runs (the abort was seen on a
machine doing other work). The ranks run with ``PYTHONFAULTHANDLER=1``, so an abort prints the
Python stack of every thread; ``--log-dir`` keeps the standard error of each failed run there
and ``--cores`` lets the ranks write core files there (``gdb python CORE``, ``thread apply all
bt``: the native stacks). A run counts as failed when its exit status is not 0, when standard
error mentions ``terminate called``, ``SIGABRT`` or ``Fatal Python error``, or when the CSV is
missing or incomplete. The exit status is 1 when any run failed.

The threads found alive at exit (torch 2.13, transformers 5.24): gloo's three (``gloo_tcp_loop``
and two ``pt_gloo_runloop``), in every run. Loading the model imports ``torch.distributed.nn``,
whose functions take ``group=group.WORLD`` as a default argument, bound at import time; imported
after the group was joined, that default kept the world group, and its threads, alive after
``destroy_process_group``, until interpreter exit.
:func:`skmpt.distributed.init_distributed` imports those modules before it joins the group.
"""

import argparse
import itertools
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["a b a b", "", "b b a", "a", "b a b b a", "a a"]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def save_tiny_bert(directory):
    """A one-layer BERT over the words ``a`` and ``b``, saved with its tokenizer."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate([*SPECIALS, "a", "b"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]",
                                        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16)
    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def _spin():
    """A busy process: one core's worth of load beside the runs."""
    for _ in itertools.count():
        pass


def _allow_cores():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def run_once(torchrun, model, texts, out, environment, timeout, log_dir=None, cores=False):
    """``(ok, seconds, reason)`` of one two-process run; a failed run's standard error is kept in ``log_dir``."""
    command = [torchrun, "--standalone", "--nproc-per-node", "2", "-m", "skmpt", "mlm-curve", "--model", str(model),
               "--texts", str(texts), "--out", str(out), "--mask-rates", "0.25,0.5", "--score-masks", "2",
               "--device", "cpu", "--random-state", "0"]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=timeout,
                              cwd=log_dir if cores else None, preexec_fn=_allow_cores if cores else None)
    except subprocess.TimeoutExpired:
        return False, time.perf_counter() - start, f"timed out after {timeout} s"
    seconds = time.perf_counter() - start
    if done.returncode != 0 or any(sign in done.stderr for sign in ("terminate called", "SIGABRT", "Fatal Python")):
        if log_dir is not None:
            Path(log_dir, f"{out.stem}.stderr.txt").write_text(done.stderr, encoding="utf-8")
        last = [line for line in done.stderr.splitlines() if line.strip()][-1:] or [""]
        return False, seconds, f"exit status {done.returncode}: {last[0][:200]}"
    rows = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
    if len(rows) != len(TEXTS) + 1:
        return False, seconds, f"the CSV has {len(rows)} rows, not {len(TEXTS) + 1}"
    return True, seconds, ""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="two-process runs of the command line")
    parser.add_argument("--timeout", type=float, default=180, help="seconds one run may take")
    parser.add_argument("--busy", type=int, default=0, help="processes kept spinning on the CPU during the runs")
    parser.add_argument("--log-dir", default=None, help="folder for the standard error of failed runs")
    parser.add_argument("--cores", action="store_true", help="let the ranks write core files into --log-dir")
    args = parser.parse_args(argv)
    if args.cores and args.log_dir is None:
        parser.error("--cores needs --log-dir")
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if torchrun is None:
        parser.error("torchrun is not installed")
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path, "PYTHONFAULTHANDLER": "1"}
    if args.log_dir is not None:
        os.makedirs(args.log_dir, exist_ok=True)
    failures = []
    busy = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for process in busy:
        process.start()
    try:
        _run_all(args, torchrun, environment, failures)
    finally:
        for process in busy:
            process.kill()
            process.join()
    print(f"{len(failures)} of {args.runs} runs failed" + (f" beside {args.busy} busy processes" if busy else ""))
    return 1 if failures else 0


def _run_all(args, torchrun, environment, failures):
    with tempfile.TemporaryDirectory() as tmp:
        model, texts = Path(tmp) / "model", Path(tmp) / "texts.txt"
        save_tiny_bert(model)
        texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
        for number in range(1, args.runs + 1):
            ok, seconds, reason = run_once(torchrun, model, texts, Path(tmp) / f"curve-{number}.csv", environment,
                                           args.timeout, args.log_dir, args.cores)
            print(f"run {number:3d}: {'ok' if ok else 'FAILED'} in {seconds:.1f} s {reason}", flush=True)
            if not ok:
                failures.append((number, reason))


if __name__ == "__main__":
    sys.exit(main())
