"""Issue 24, item 7 (problem 5): explanations that never contradict themselves. On V100 and
T4 the triton family runs tl.dot on FP32 FMAs: its reasons say why (Triton, not the device)
and name the family that would use the tensor cores, and never call the tensor cores busy;
decode states how many SMs hold a block and how many block slots idle in words that agree."""

from __future__ import annotations

import pytest

from tilesolve.solver import AttentionProblem, Phase, SolveOptions, solve


@pytest.mark.parametrize("hardware", ["v100", "t4"])
@pytest.mark.parametrize("phase", [Phase.FORWARD, Phase.BACKWARD])
def test_below_cc_8_the_reasons_say_fmas_and_why(hardware: str, phase: Phase) -> None:
    problem = AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=64, phase=phase)
    answer = solve(problem, hardware, SolveOptions(top_k=3))
    assert answer.kernel == "triton"
    for candidate in answer.candidates:
        text = " ".join(candidate.reasons)
        assert "tensor cores busy" not in text, text
        assert "FP32 FMA units busy" in text
        if "bound by FP32 FMAs" in text:
            assert "Triton 3.2 and later emit no tensor-core MMA below cc 8.0" in text
            assert "fa2, which would use them, needs cc 8.0" in text
        assert "no tensor cores" not in text  # the device has them; Triton does not use them


def test_cc_8_keeps_tensor_cores() -> None:
    problem = AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=64)
    answer = solve(problem, "a100", SolveOptions(kernel="triton", top_k=1))
    assert "tensor cores busy" in " ".join(answer.candidates[0].reasons)


def test_decode_states_sms_and_block_slots_without_contradiction() -> None:
    problem = AttentionProblem(
        batch=1,
        heads=32,
        kv_heads=8,
        seq_len=1,
        seq_len_kv=32768,
        head_dim=128,
        phase=Phase.DECODE,
    )
    answer = solve(problem, "h100", SolveOptions(top_k=3, choose_page_size=True))
    for candidate in answer.candidates:
        text = " ".join(candidate.reasons)
        assert "of the SMs busy" not in text and "of the SM slots idle" not in text
        assert "of the SMs)" in text  # "blocks on N% of the SMs"
