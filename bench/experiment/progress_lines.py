"""The lines a comparison prints about its progress: what is left (`Eta`) and why a training stopped."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Eta:
    """What is left of a comparison, from what was measured: each run still to do costs the mean evaluation time
    measured so far, and a trained one also the mean training time measured so far (same budget for every method).
    Until a training has been measured it is not guessed: the line says how many trainings are still to time. (The
    untrained baseline comes first and trains nothing, so an estimate from mean run times would err short.)"""

    pending: list[bool]  # trains?, for every run not yet done, in order
    eval_seconds: list[float] = field(default_factory=list)
    train_seconds: list[float] = field(default_factory=list)

    def skip(self) -> None:
        """A run that needs nothing (reused, or another process holds it)."""
        self.pending.pop(0)

    def done(self, train_seconds: float | None, eval_seconds: float) -> None:
        self.pending.pop(0)
        self.eval_seconds.append(eval_seconds)
        if train_seconds is not None:
            self.train_seconds.append(train_seconds)

    def left(self) -> tuple[float, int]:
        """(seconds measured to be left, trainings left whose time is not measured yet)."""
        evaluation = sum(self.eval_seconds) / len(self.eval_seconds) if self.eval_seconds else 0.0
        trainings = sum(self.pending)
        training = sum(self.train_seconds) / len(self.train_seconds) if self.train_seconds else None
        seconds = len(self.pending) * evaluation + (trainings * training if training is not None else 0.0)
        return seconds, 0 if training is not None else trainings

    def line(self, method: str, done: int, total: int, elapsed: float) -> str:
        """'[simcse] 2/3 runs done, 4 min 10 s elapsed, about 2 min 5 s left (measured: training 70 s, evaluation
        55 s a run)'."""
        from bench.runtime.progress import duration

        head = f"[{method}] {done}/{total} runs done, {duration(elapsed)} elapsed"
        if not self.pending:
            return head
        seconds, unmeasured = self.left()
        measured = [f"training {duration(sum(self.train_seconds) / len(self.train_seconds))}" if self.train_seconds else "",
                    f"evaluation {duration(sum(self.eval_seconds) / len(self.eval_seconds))}" if self.eval_seconds else ""]
        basis = " and ".join(m for m in measured if m) + " a run, as measured"
        if unmeasured:
            return (f"{head}; left: {len(self.pending)} evaluation(s), about {duration(seconds)} ({basis}), plus "
                    f"{unmeasured} training(s) not timed yet (the first one sets the estimate)")
        return f"{head}, about {duration(seconds)} left ({basis})"


def elapsed_eta(method: str, done: int, total: int, elapsed: float, loop_elapsed: float) -> str:
    """Kept for callers of the earlier name: the mean-run-time line (`Eta` is what the comparison job prints)."""
    from bench.runtime.progress import duration

    left = (total - done) * loop_elapsed / max(done, 1)
    rest = f", about {duration(left)} left" if done < total else ""
    return f"[{method}] {done}/{total} runs done, {duration(elapsed)} elapsed{rest}"


def stop_reason(stopped_by: str) -> str:
    """Why training stopped, as a reader says it: 'the steps budget was reached', 'the LR schedule ended'."""
    if stopped_by == "schedule":
        return "the LR schedule ended"
    if stopped_by == "interrupted":
        return "interrupted"
    return f"the {stopped_by} budget was reached" if stopped_by else "done"
