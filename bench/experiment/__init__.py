"""What one experiment is, apart from how it was asked for: the specs `bench run`, `bench eval` and `bench sweep`
share, and the life of a run row in the results database.

    RunSpec      every option of `bench run`, typed, with its defaults: built from parsed CLI arguments or from a
                 sweep point's options; owns the comparison's configs and config hashes, the reproduce command and
                 the evaluation settings (run_spec.py)
    EvalSpec     one `bench eval`: model, suites, evaluation settings -> config and config hash (eval_spec.py)
    EvalSettings how encoders are loaded and scored, shared by both (settings.py)
    Recording    heartbeat while a run works, its row finished (with the data fingerprint) or marked failed after
                 (record.py)
    comparison   the comparison job: a RunSpec's runs found (reused when finished) or made, trained, evaluated,
                 recorded; `bench run` and the Python API call `run_comparison` (comparison.py)
    ranges       the allowed range of every numeric option, and the device check, for the CLI and sweep points
                 alike (option_ranges.py)

Owns: what defines a result (and so its hash). Never: parses argv. Trains and scores only through bench.train and bench.evaluate.
"""
