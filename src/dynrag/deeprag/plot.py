"""The loss curve of a training run (PNG), from its log records."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Sequence

from dynrag.io.files import atomic_write_bytes


def moving_average(values: Sequence[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def plot_loss(records: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in records]
    losses = [r["loss"] for r in records]
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=130)
    ax.plot(steps, losses, lw=0.8, alpha=0.5, label="loss per step")
    if len(losses) >= 5:
        window = max(2, len(losses) // 20)
        ax.plot(steps, moving_average(losses, window), lw=1.8, label=f"mean of {window} steps")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())
