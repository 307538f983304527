"""lenbench: train self-supervised embedding methods under one budget, score them, compare them.

The packages follow the data flow; each imports only those listed before it (tests/test_dependencies.py holds
the order):

    bench.runtime    errors, provenance, signals, torchrun process group and re-launch, heartbeat, cache folder,
                     the one plug-in registry type (plugins.Registry)
    bench.data       dataset catalog, readers of the on-disk formats, training corpora, sentence splitting
    bench.encode     texts -> vectors: encoder, ONNX backend, batching, embedding cache, backbones, model info
    bench.train      the shared trainer, backbone choice, batch sharding, budgets, checkpoints, the method protocol
                     and registry
    bench.evaluate   suites, length attacks, BM25, the runner that records scores
    bench.report     comparison tables, statistics, model cards, MTEB result files
    bench.experiment what one run or evaluation is (RunSpec, EvalSpec): configs, hashes, reproduce commands, and
                     recording a run row's life
    bench.sweep      grids of runs: spec, points, executors, state
    bench.claim      claim files: a paper's claim run as sweep points and judged against its controls
    bench.commands   the `bench` subcommands: argument parsing and wiring, nothing else

`results_db` (the results database) sits below all of them; `leaderboard` (the Streamlit app) above `report`;
`methods` (the built-in adapters) above `train` and `evaluate`: they build on the method protocol
(`bench.train.method`), pooling, sentence splitting and the attacks, and `bench` reaches them only through the
`lenbench.methods` entry-point group. No import cycles, functions included (tests/test_dependencies.py).
"""
