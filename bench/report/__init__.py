"""What is shown and handed on from the results database: the comparison tables the CLI prints, the paired
bootstrap and t-interval statistics behind them (shared with the leaderboard), model cards and MTEB result files.

Owns: reading finished runs and presenting them. Never: trains, encodes or evaluates.
"""
