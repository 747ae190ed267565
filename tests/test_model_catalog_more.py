"""The catalog models added for the published benchmark rows: counts against the published figures, KV bytes by hand.

Tolerance on a published parameter count: max(1 %, half a unit of its last printed digit). Model cards
print two or three significant figures and sometimes truncate rather than round (Qwen2.5-14B's 14.77B is
printed "14.7B"), so 1 % covers a truncated three-figure number and half a unit covers a rounded
two-figure one ("1.7B", "24B"). What the library leaves out (Qwen3's per-head q/k norms: 256 parameters
a layer; MoE router biases) is far below either.
"""

import pytest

from servingmath.models import active_parameter_count, get_model, kv_bytes_per_token, parameter_count
from servingmath.validation import SAME_SHAPES, resolve_model

B = 1e9

# name: (published total, half a unit of its last digit, published active or None, its half unit, source)
PUBLISHED = {
    "Qwen2.5-14B": (14.7 * B, 0.05 * B, None, None, "model card: 14.7B"),
    "Qwen2.5-3B": (3.09 * B, 0.005 * B, None, None, "model card: 3.09B"),
    "Qwen2.5-1.5B": (1.54 * B, 0.005 * B, None, None, "model card: 1.54B"),
    "Qwen2.5-0.5B": (0.49 * B, 0.005 * B, None, None, "model card: 0.49B"),
    "Qwen3-14B": (14.8 * B, 0.05 * B, None, None, "model card: 14.8B"),
    "Qwen3-4B": (4.0 * B, 0.05 * B, None, None, "model card: 4.0B"),
    "Qwen3-1.7B": (1.7 * B, 0.05 * B, None, None, "model card: 1.7B"),
    "Qwen3-0.6B": (0.6 * B, 0.05 * B, None, None, "model card: 0.6B"),
    "Mistral-Nemo-12B": (12 * B, 0.5 * B, None, None, "model card: 12B"),
    "Mistral-Small-24B": (24 * B, 0.5 * B, None, None, "model card: 24B"),
    "Mistral-Large-2": (123 * B, 0.5 * B, None, None, "Mistral: 123B"),
    "Phi-4": (14.7 * B, 0.05 * B, None, None, "14.7B from the checkpoint (the report's '14-billion')"),
    "Mixtral-8x22B": (141 * B, 0.5 * B, 39 * B, 0.5 * B, "Mistral: 141B total, 39B active"),
    "Qwen3-Coder-480B-A35B": (480 * B, 0.5 * B, 35 * B, 0.5 * B, "model card: 480B total, 35B activated"),
}


def within(count, published, half_unit):
    return abs(count - published) <= max(0.01 * published, half_unit)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_total_parameters_match_the_published_figure(name):
    total, half, _, _, source = PUBLISHED[name]
    count = parameter_count(name)
    assert within(count, total, half), f"{name}: {count / B:.3f}B vs {source}"


@pytest.mark.parametrize("name", sorted(n for n, row in PUBLISHED.items() if row[2] is not None))
def test_active_parameters_match_the_published_figure(name):
    _, _, active, half, source = PUBLISHED[name]
    count = active_parameter_count(name)
    assert within(count, active, half), f"{name}: {count / B:.3f}B active vs {source}"


def test_kimi_k2_counts():
    # README: "1T" total, "32B" activated. The library's 1.026T rounds to 1.0T. Its active count
    # includes the input embedding (163840 x 7168 = 1.17B, gathered, never multiplied); without it,
    # 31.69B rounds to 32B, the figure Moonshot states (DeepSeek-V3's "37B" reads the same way).
    model = get_model("Kimi-K2")
    assert abs(parameter_count(model) - 1.0e12) <= 0.05e12
    embedding = model.vocab_size * model.hidden_size
    assert abs(active_parameter_count(model) - embedding - 32 * B) <= 0.5 * B
    assert model.is_mla and model.n_experts == 384 and model.n_dense_layers == 1


def test_exact_counts_by_hand():
    # Two counts written out in full, so a change in the counting convention shows.
    d, f, L, H, K, dh, V = 5120, 14336, 40, 32, 8, 128, 131072     # Mistral-Nemo-12B: head_dim != d / H
    layer = d * H * dh + 2 * d * K * dh + H * dh * d + 3 * d * f + 2 * d
    assert parameter_count("Mistral-Nemo-12B") == L * layer + 2 * V * d + d
    d, f, L, H, K, dh, V = 896, 4864, 24, 14, 2, 64, 151936         # Qwen2.5-0.5B: q/k/v biases, tied head
    layer = d * H * dh + 2 * d * K * dh + H * dh * d + (H * dh + 2 * K * dh) + 3 * d * f + 2 * d
    assert parameter_count("Qwen2.5-0.5B") == L * layer + V * d + d


# name: (layers, KV heads, head size); KV bytes per token = 2 (K and V) x L x K x d_h x bytes per element
KV_SHAPES = {
    "Qwen2.5-14B": (48, 8, 128), "Qwen2.5-3B": (36, 2, 128), "Qwen2.5-1.5B": (28, 2, 128),
    "Qwen2.5-0.5B": (24, 2, 64), "Qwen3-14B": (40, 8, 128), "Qwen3-4B": (36, 8, 128),
    "Qwen3-1.7B": (28, 8, 128), "Qwen3-0.6B": (28, 8, 128), "Mistral-Nemo-12B": (40, 8, 128),
    "Mistral-Small-24B": (40, 8, 128), "Mistral-Large-2": (88, 8, 128), "Phi-4": (40, 10, 128),
    "Mixtral-8x22B": (56, 8, 128), "Qwen3-Coder-480B-A35B": (62, 8, 128),
}


@pytest.mark.parametrize("name", sorted(KV_SHAPES))
@pytest.mark.parametrize("dtype, nbytes", [("bf16", 2), ("fp8", 1)])
def test_kv_bytes_per_token_by_hand(name, dtype, nbytes):
    layers, kv_heads, head_dim = KV_SHAPES[name]
    assert kv_bytes_per_token(name, dtype) == 2 * layers * kv_heads * head_dim * nbytes


def test_kimi_k2_kv_bytes_are_mla_latents():
    # MLA caches one latent (512) and one RoPE key (64) per token and layer, shared by the heads.
    assert kv_bytes_per_token("Kimi-K2", "bf16") == 61 * (512 + 64) * 2


def test_new_models_use_full_attention():
    # None of these configs has a sliding window (Mistral-Nemo/Small/Large, Mixtral-8x22B and Phi-4 say null).
    for name in list(KV_SHAPES) + ["Kimi-K2"]:
        assert get_model(name).sliding_window is None, name


ALIASES = {
    "mistralai/Mistral-Nemo-Instruct-2407": "Mistral-Nemo-12B",
    "mistralai/Mistral-Nemo-Base-2407": "Mistral-Nemo-12B",
    "mistralai/Mistral-Small-24B-Instruct-2501": "Mistral-Small-24B",
    "mistralai/Mistral-Small-24B-Base-2501": "Mistral-Small-24B",
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": "Mistral-Small-24B",
    "mistralai/Mistral-Large-Instruct-2407": "Mistral-Large-2",
    "mistralai/Mistral-Large-Instruct-2411": "Mistral-Large-2",
    "Qwen/Qwen2.5-Coder-14B-Instruct": "Qwen2.5-14B",
    "Qwen/Qwen2.5-Coder-3B-Instruct": "Qwen2.5-3B",
    "Qwen/Qwen2.5-Coder-1.5B-Instruct": "Qwen2.5-1.5B",
    "Qwen/Qwen2.5-Coder-0.5B-Instruct": "Qwen2.5-0.5B",
    "Qwen/Qwen3-4B-Instruct-2507": "Qwen3-4B",
    "Qwen/Qwen3-4B-Thinking-2507": "Qwen3-4B",
}


@pytest.mark.parametrize("text", sorted(ALIASES))
def test_same_shapes_aliases_resolve(text):
    model, note, _ = resolve_model(text)
    assert model.name == ALIASES[text]
    assert not note.startswith("catalog"), "resolved by the catalog itself: the alias would be redundant"


def test_every_alias_added_here_is_tested():
    targets = {"Mistral-Nemo-12B", "Mistral-Small-24B", "Mistral-Large-2", "Qwen2.5-14B", "Qwen2.5-3B",
               "Qwen2.5-1.5B", "Qwen2.5-0.5B", "Qwen3-4B"}
    ours = {alias for alias, (target, _) in SAME_SHAPES.items() if target in targets}
    tested = {text.split("/")[-1].lower().replace("-instruct", "", 1) if "coder" in text.lower()
              else text.split("/")[-1].lower() for text in ALIASES}
    assert ours == tested


@pytest.mark.parametrize("text, name", [
    ("mistralai/Mixtral-8x22B-Instruct-v0.1", "Mixtral-8x22B"),
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "Qwen3-Coder-480B-A35B"),
    ("moonshotai/Kimi-K2-Instruct", "Kimi-K2"),
    ("microsoft/phi-4", "Phi-4"),
    ("Qwen/Qwen3-14B-FP8", "Qwen3-14B"),
    ("Qwen/Qwen2.5-14B-Instruct", "Qwen2.5-14B"),
])
def test_hub_names_reach_the_new_models_without_an_alias(text, name):
    assert resolve_model(text)[0].name == name
