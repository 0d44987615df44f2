"""Shared by the tests' Python checks (import it with test/support on PYTHONPATH): named checks that
record a failure and go on, and the checks of a run that trained on data chunks (summary.json's
"elastic" section, docs/reliability.md)."""
import sys


class Checks:
    """check(what, cond) prints "ok: what" or "FAILED: what"; exit() ends the script 0 when every
    check held, else 1."""

    def __init__(self):
        self.ok = True

    def __call__(self, what, cond):
        print(("ok: " if cond else "FAILED: ") + what)
        self.ok = self.ok and bool(cond)
        return cond

    def exit(self):
        sys.exit(0 if self.ok else 1)


def check_chunk_epochs(check, name, summary, steps, exact_steps=False):
    """Prints one line on run `name` (its summary.json, parsed) and checks it: it reached global step
    `steps` (exactly, with exact_steps), completed at least one epoch, every complete epoch visited
    all 60,000 MNIST examples, and no epoch was inexact."""
    elastic = summary.get("elastic", {})
    chunks = elastic.get("data_chunks", {})
    complete = [e for e in chunks.get("epochs", []) if e["complete"]]
    counts = [e["examples"] for e in complete]
    print(f"{name}: global step {summary['global_step']}, test accuracy {summary['test_accuracy']:.4f}, "
          f"complete epochs {chunks.get('epochs_complete')} with {sorted(set(counts))} examples each, "
          f"inexact {chunks.get('epochs_inexact')}, leased {chunks.get('leased')}, stale reports {chunks.get('stale_reports')}, "
          f"joined {elastic.get('workers_joined')}, dropped {elastic.get('workers_dropped')}")
    reached = summary["global_step"] == steps if exact_steps else summary["global_step"] >= steps
    check(f"{name}: reached step {steps}", reached)
    check(f"{name}: at least one complete epoch", len(complete) >= 1)
    check(f"{name}: every complete epoch visited 60000 examples", all(c == 60000 for c in counts))
    check(f"{name}: no inexact epoch", chunks.get("epochs_inexact") == 0)
