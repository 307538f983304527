"""`bench sweep`: a method x seed x budget x suite grid as one object.

spec.py reads the TOML file; points.py expands it into points (one `bench.experiment.RunSpec`, its command line and
config hash each);
state.py reads each point's state from the results database; worker.py runs one point (`bench run --resume`,
retried); executors.py runs many (local pool or a submitit job array); report.py prints the plan and the
comparison of finished points. The command itself is bench/commands/sweep.py.
"""
