"""The KV-cache workload's fixed figures, as MLPerf Storage v3.0's kv-cache.py has them (both sides use them).

The controller checks a campaign with them (the smallest and largest entry a workload can write,
the memory its tiers take) and the hosts simulate with them (iolab.host.kvcache_sim), so that a
figure has one home. Where each comes from: docs/REFERENCE_FIGURES.md, "KV-cache offload".

    bytes_per_token(32, 8, 128)         131072: layers × KV heads × head dimension × 2 (K and V) × 2 B (fp16)
    templates(0.25)["coding"]           ((1024, 6250), (100, 500), (0.2, 1.0)): context, generated, think time
    entry_bounds(131072, 1.0)           the smallest and largest KV entry in bytes (np.save's header included)
"""

from __future__ import annotations

# Model presets: (layers, KV heads, head dimension) of each model's attention (hidden size / heads).
MODELS = {"llama3.1-8b": (32, 8, 128), "llama3.1-70b": (80, 8, 128)}
# What kv-cache.py calls each of them (--model).
REFERENCE_MODELS = {"llama3.1-8b": "llama3.1-8b", "llama3.1-70b": "llama3.1-70b-instruct"}
ELEMENT_BYTES = 2  # float16
# The user templates: (context tokens, generated tokens, think time in s), each a range drawn uniformly.
TEMPLATES: dict[str, tuple[tuple[int, int], tuple[int, int], tuple[float, float]]] = {
    "chatbot": ((512, 4096), (50, 200), (0.1, 0.5)),
    "coding": ((4096, 25000), (100, 500), (0.2, 1.0)),
    "document": ((4096, 16384), (200, 800), (0.3, 1.5)),
}
SYSTEM_PROMPT_WORDS = (5, 9, 6)  # the three common system prompts' words: a prefix hit shortens a context by one
NPY_HEADER = 128  # np.save's header before the array's bytes (version 1.0, a 5-dimension float16 shape)


def bytes_per_token(layers: int, kv_heads: int, head_dim: int) -> int:
    """KV bytes per token: K and V of every layer and KV head, fp16."""
    return layers * kv_heads * head_dim * 2 * ELEMENT_BYTES


def templates(scale: float = 1.0) -> dict[str, tuple[tuple[int, int], tuple[int, int], tuple[float, float]]]:
    """The user templates with their context ranges times `scale` (a lab's smaller entries), at least 1 token."""
    out = {}
    for name, ((low, high), generated, think) in TEMPLATES.items():
        small = max(1, round(low * scale))
        out[name] = ((small, max(small, round(high * scale))), generated, think)
    return out


def entry_bounds(per_token: int, scale: float = 1.0) -> tuple[int, int]:
    """(smallest, largest) KV entry in bytes that a workload can write: a request's context is drawn from a
    quarter of its user's context up to all of it, and a prefix hit takes up to 9 tokens off."""
    ranges = [context for context, _, _ in templates(scale).values()]
    fewest = max(0, max(1, min(low for low, _ in ranges) // 4) - max(SYSTEM_PROMPT_WORDS))
    most = max(high for _, high in ranges)
    return NPY_HEADER + fewest * per_token, NPY_HEADER + most * per_token


def mean_entry(per_token: int, scale: float = 1.0) -> float:
    """The mean KV entry in bytes over the three templates (drawn alike), a request's context averaging 5/8 of
    its user's, which averages the template's range."""
    ranges = [context for context, _, _ in templates(scale).values()]
    return per_token * sum((low + high) / 2 * 5 / 8 for low, high in ranges) / len(ranges)
