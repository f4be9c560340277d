"""Curves of a training run (PNG), from its log records: the loss, or several logged values in
panels over the steps (GRPO's F1 and retrievals per question, as the paper's Figure 3)."""

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
    plot_curves(records, path, title, [("loss", "loss")])


def plot_curves(records: Sequence[dict[str, Any]], path: Path, title: str, keys: Sequence[tuple[str, str]]) -> None:
    """One panel per (log key, axis label), the value per step and, from 5 steps on, its moving mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in records]
    fig, axes = plt.subplots(len(keys), 1, figsize=(6.4, 1.2 + 2.8 * len(keys)), dpi=130, sharex=True, squeeze=False)
    for ax, (key, label) in zip(axes[:, 0], keys):
        values = [r[key] for r in records]
        ax.plot(steps, values, lw=0.8, alpha=0.5, marker="o" if len(values) < 5 else None, label=f"{label} per step")
        if len(values) >= 5:
            window = max(2, len(values) // 20)
            ax.plot(steps, moving_average(values, window), lw=1.8, label=f"mean of {window} steps")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[-1, 0].set_xlabel("optimizer step")
    axes[0, 0].set_title(title, fontsize=9)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())
