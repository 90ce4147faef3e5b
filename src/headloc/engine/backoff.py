"""Out-of-memory back-off: a step that runs out of accelerator memory is retried with half the rows.

:class:`RowBudget` holds the rows per forward pass an evaluation job may use. ``budget.run(step)``
calls ``step(rows)``; when that raises an out-of-memory error it frees the memory torch caches,
halves ``rows`` (never below ``minimum``), logs it and calls ``step`` again with the same work, so
a job finds the size that fits instead of crashing, and keeps that size for every later step. When
even ``minimum`` rows run out of memory, the error raised names what to change instead.
A step must be a pure function of its inputs and ``rows`` (nothing half-written survives a retry):
the evaluation engine retries a whole mask group, whose answers are computed afresh.

``batch_size: auto`` (:func:`headloc.model.memory.resolve_rows`) starts at 512 rows on an
accelerator and halves down from there, to the largest power-of-two fraction of it that fits.

Torch only (no lm-eval), so benchmarks/gpu_check.py runs the same code on a GPU machine.
"""

from __future__ import annotations

import gc
import logging

import torch

_log = logging.getLogger("headloc")


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` says an accelerator ran out of memory (torch's own error, or a library's
    allocation failure surfacing as a RuntimeError, e.g. cuBLAS's)."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and ("out of memory" in text or "CUBLAS_STATUS_ALLOC_FAILED" in text)


def free_cached_memory() -> None:
    """Hand the memory of tensors that are gone back to the device (after an out-of-memory error)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class RowBudget:
    """Rows per forward pass, halved on out-of-memory errors (see the module)."""

    def __init__(self, rows: int, *, minimum: int = 1, log: logging.Logger | None = None):
        if rows < minimum:
            raise ValueError(f"rows per pass {rows} is below the minimum {minimum}")
        self.rows, self.minimum = int(rows), int(minimum)
        self.log = log or _log
        self.halvings = 0

    def run(self, step):
        """``step(rows)``, retried with half the rows after each out-of-memory error."""
        while True:
            try:
                return step(self.rows)
            except Exception as error:  # noqa: BLE001 - re-raised unless it is out of memory
                if not is_out_of_memory(error):
                    raise
                message = str(error).splitlines()[0][:200]
                if self.rows <= self.minimum:
                    raise torch.OutOfMemoryError(self._too_large(message)) from error
            # outside the except block, so the failed pass's frames (and their tensors) are gone
            free_cached_memory()
            old, self.rows = self.rows, max(self.minimum, self.rows // 2)
            self.halvings += 1
            self.log.warning("out of memory at %d rows per pass (%s); retrying the same work with %d rows "
                             "per pass, kept from now on", old, message, self.rows)

    def _too_large(self, message: str) -> str:
        """What to change when even the fewest rows per pass run out of memory."""
        return (f"out of memory at {self.rows} row{'s' if self.rows > 1 else ''} per pass, the fewest allowed "
                f"({message}): the model and one pass do not fit on this device. Spread the model over "
                "several GPUs and the CPU (device_map: auto), load it in a smaller dtype (bfloat16 instead "
                "of float32), or score fewer masks per pass (masks_per_pass)")
