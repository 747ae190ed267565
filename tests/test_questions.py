"""Every registered question accepts its own answer and rejects each of its known mistakes."""

from __future__ import annotations

import json
import re

import pytest
import sympy as sp

from conftest import ROOT
from servingmath.checks import GENERIC_MISTAKES, Question, evaluate
from servingmath.questions import all_questions, get_question
from servingmath.units import UNIT_SCALES

QUESTIONS = all_questions()
IDS = sorted(QUESTIONS)


def test_registry_is_not_empty():
    assert len(QUESTIONS) >= 9


@pytest.mark.parametrize("qid", IDS)
def test_accepts_the_right_answer(qid):
    q = QUESTIONS[qid]
    expected = q.expected()
    if q.kind == "numeric" and q.unit is not None:
        expected = expected / UNIT_SCALES[q.unit][0]  # the plain number the student types
    result = evaluate(q, expected)
    assert result.status == "correct", result


@pytest.mark.parametrize("qid", IDS)
def test_reports_not_attempted_for_the_placeholder(qid):
    assert evaluate(QUESTIONS[qid], ...).status == "not attempted"


def _claim_text(pattern: str) -> str:
    """A sentence stating a wrong claim: the plain phrase that opens its pattern (``_claim``)."""
    phrase = re.search(r"\(\?:([^|()\\?*+\[\]]+)\|", pattern)
    assert phrase, f"a wrong claim's pattern must open with a plain phrase: {pattern[:80]}"
    return f"To be honest, {phrase.group(1)}."


def _wrong_answer(q, mistake, params):
    wrong = mistake.answer(params)
    if q.kind == "numeric" and q.unit is not None:
        return wrong / UNIT_SCALES[q.unit][0]
    if q.kind == "conceptual":
        return _claim_text(wrong)
    return wrong


@pytest.mark.parametrize("qid", IDS)
def test_rejects_every_known_mistake_with_its_hint(qid):
    q = QUESTIONS[qid]
    assert q.mistakes, f"{qid} lists no known mistakes"
    for mistake in q.mistakes:
        result = evaluate(q, _wrong_answer(q, mistake, q.draw(None)))
        assert result.status == "incorrect", (qid, mistake.hint, result)
        assert mistake.hint in result.message, (qid, result.message)
        assert result.slip == mistake.label and mistake.label


@pytest.mark.parametrize("qid", [i for i in IDS if QUESTIONS[i].kind == "numeric" and QUESTIONS[i].unit])
def test_numeric_answers_with_units_are_converted(qid):
    q = QUESTIONS[qid]
    si = float(q.expected())
    dimension = UNIT_SCALES[q.unit][1]
    base = {"s": "s", "B": "B", "FLOP": "FLOP", "FLOP/s": "FLOP/s", "B/s": "B/s", "tok/s": "tok/s",
            "req/s": "req/s", "FLOP/B": "FLOP/B", "tok": "tok"}[dimension]
    assert evaluate(q, f"{si!r} {base}").status == "correct"
    other = {"s": "B", "B": "s"}.get(dimension, "s")
    assert evaluate(q, f"{si!r} {other}").status == "invalid"


def test_a_wrong_answer_with_no_known_mistake_gets_plain_not_yet():
    q = get_question("anatomy.batch_throughput")
    result = evaluate(q, 7.0)
    assert result.status == "incorrect" and result.message == "not yet."


def test_garbage_answers_get_a_helpful_reply_not_a_traceback():
    q = get_question("anatomy.tpot_from_timestamps")
    for answer in ["", "fast", None, [1, 2], "12 parsecs", float("nan"), True]:
        result = evaluate(q, answer)
        assert result.status == "invalid", (answer, result)
        assert "not yet" in result.message


def test_symbolic_answers_accept_strings_and_equivalent_forms():
    q = get_question("anatomy.e2e_formula")
    T1, T, L_o = sp.symbols("T_1 T L_o", positive=True)
    assert evaluate(q, "T_1 + L_o*T - T").correct
    assert evaluate(q, T1 + T * (L_o - 1)).correct
    assert not evaluate(q, T1 + T * L_o).correct
    assert evaluate(q, "T_1 + ").status == "invalid"


def test_unknown_question_id_suggests_close_ids():
    with pytest.raises(KeyError, match="anatomy.kv_bytes_per_token"):
        evaluate("anatomy.kv_bytes_per_tokn", 1)


def _check_calls(folder):
    calls = {}
    for path in sorted((ROOT / folder).glob("*.ipynb")):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                for qid in re.findall(r"""check\(\s*["']([\w.]+)["']""", source):
                    calls.setdefault(qid, []).append(path.name)
    return calls


def test_every_question_is_asked_in_a_solutions_notebook_and_every_check_is_registered():
    calls = _check_calls("solutions")
    assert set(calls) - set(QUESTIONS) == set(), "check() calls with unregistered ids"
    assert set(QUESTIONS) - set(calls) == set(), "registered questions that no notebook asks"
    assert all(len(v) == 1 for v in calls.values()), {k: v for k, v in calls.items() if len(v) > 1}


VARIANT_IDS = [i for i in IDS if QUESTIONS[i].variants]


@pytest.mark.parametrize("qid", VARIANT_IDS)
def test_every_variant_accepts_its_answer_and_rejects_its_mistakes(qid):
    # per-student variants (servingmath.assignments) must stay checkable: for many seeds the
    # recomputed answer is accepted, and no known mistake collapses onto the right answer
    q = QUESTIONS[qid]
    seen = set()
    for seed in range(8):
        params = q.draw(seed)
        seen.add(repr(sorted(params.items())))
        expected = q.expected(params)
        shown = expected / UNIT_SCALES[q.unit][0] if q.kind == "numeric" and q.unit else expected
        assert evaluate(q, shown, seed=seed).correct, (seed, params)
        assert "{" not in q.render(params), q.render(params)
        for index, mistake in enumerate(q.mistakes):
            result = evaluate(q, _wrong_answer(q, mistake, params), seed=seed)
            assert not result.correct, (seed, params, mistake.hint)
            if result.slip != mistake.label:   # the hint still works, unless an earlier one gives the same value
                earlier = [m.label for m in q.mistakes[:index]] + [g[3] for g in GENERIC_MISTAKES]
                assert result.slip in earlier, (seed, params, mistake.hint, result.message)
    assert len(seen) > 1, "the variants never change the parameters"


@pytest.mark.parametrize("qid", VARIANT_IDS)
def test_graded_variants_come_from_the_key_and_stay_checkable(qid):
    q = QUESTIONS[qid]
    key = b"a course key for the tests"
    drawn = [q.draw_for(key, f"student-{i}") for i in range(4)]
    assert drawn == [q.draw_for(key, f"student-{i}") for i in range(4)]          # reproducible
    assert q.draw_for(key, "Student-0") == q.draw_for(key, " student-0 ")        # names compared as written
    for params in drawn:
        expected = q.expected(params)
        shown = expected / UNIT_SCALES[q.unit][0] if q.kind == "numeric" and q.unit else expected
        assert evaluate(q, shown, params=params).correct
        assert "{" not in q.render(params)


def test_every_numeric_question_has_variants():
    assert [qid for qid in IDS if QUESTIONS[qid].kind == "numeric" and not QUESTIONS[qid].variants] == []


def test_another_key_draws_other_variants():
    q = get_question("decode.tpot_batch_64")
    students = [f"s{i}" for i in range(20)]
    assert [q.draw_for(b"k1", s) for s in students] != [q.draw_for(b"k2", s) for s in students]
    with pytest.raises(ValueError, match="key"):
        q.draw_for("", "s1")


@pytest.mark.parametrize("qid", [i for i in IDS if QUESTIONS[i].kind == "symbolic"])
def test_symbol_names_are_identifiers_the_parser_reads(qid):
    q = QUESTIONS[qid]
    for name, symbol in q.symbols.items():
        assert re.fullmatch(r"[A-Za-z_]\w*", name) and re.fullmatch(r"[A-Za-z_]\w*", symbol.name), (qid, name)
    assert evaluate(q, str(q.expected())).correct          # the expected formula, typed as text


# ---------------------------------------------------------------- conceptual answers read in the right direction
CONCEPTUAL = [i for i in IDS if QUESTIONS[i].kind == "conceptual"]

#: Each conceptual question's key points stated the wrong way round: every one must get "not yet".
REVERSED = {
    "interview.why_batching_raises_throughput":
        "At small batch decode is compute-bound and the weights are read once per sequence, so every added "
        "sequence makes the step much longer and throughput falls with the batch; the gain continues past the "
        "knee, where the step turns memory-bound.",
    "interview.what_is_goodput":
        "Goodput counts every completed request, including those that miss their SLOs; it is the lowest request "
        "rate at which at most 90 % of requests meet TTFT and TPOT, and throughput goes down while goodput goes up "
        "as the SLOs break.",
    "interview.b_star_method":
        "The matmuls turn memory-bound when the batch reaches the ridge point, about 295 FLOP per byte, since their "
        "intensity falls with the batch; B* grows with the number of GPUs under tensor parallelism, and above B* "
        "throughput is still rising while MFU, MBU, the KV cache and the TPOT target do not matter.",
    "interview.low_tpot_with_background_work":
        "Give the background jobs a higher priority class and preempt the chat requests when needed; run the "
        "largest batch that fits, chunk nothing, and watch the mean TPOT.",
    "interview.pitfall_unconstrained_throughput":
        "TPOT falls with the batch, so the largest batch meets every SLO; past the knee the step is memory-bound "
        "and throughput keeps growing, so optimise raw throughput, not goodput.",
    "interview.queueing_growth":
        "The wait grows linearly with the utilisation and converges as rho approaches 1: at 90 % busy it is about "
        "one service time, and M/D/1 waits twice as long as M/M/1.",
    "interview.prefill_vs_decode_bound":
        "Prefill processes one token at a time, so its intensity is below the ridge point, while decode reads the "
        "weights once for many tokens and its intensity, about the batch size, is above the ridge.",
    "interview.ttft_tpot_e2e":
        "TTFT runs from the first token to the last token and excludes queueing; TPOT is the mean time per output "
        "token including the first; E2E = TTFT + n TPOT.",
    "interview.kv_cache_limits":
        "The KV cache stores the keys and values of past tokens, 2 x L x K x d_h x b_kv bytes per token, but it "
        "shrinks with the context and the batch while the weights grow with the batch; more KV heads raise the "
        "batch.",
    "interview.tensor_parallel_tradeoff":
        "Tensor parallelism raises TPOT and per-GPU throughput rises with N; the all-reduces per layer over NVLink "
        "cost nothing, and it leaves less memory for the KV cache.",
    "interview.paged_attention":
        "Reserving the maximum length wastes memory, so PagedAttention uses large blocks and wastes at least one "
        "per sequence; paging fits fewer sequences, a smaller batch, less throughput.",
    "interview.chunked_prefill":
        "A long prefill stalls the decodes, so split it into chunks small enough to be memory-bound, sharing a "
        "step with the decode tokens under a token budget; chunking makes TTFT shrink.",
    "interview.disaggregation":
        "Prefill and decode interfere on shared GPUs, so each pool is sized for its own SLO and the KV-cache "
        "transfer per request is cheap; it pays off with loose SLOs and short prompts, measured as goodput.",
    "interview.mfu_mbu":
        "MFU is achieved FLOP/s over peak FLOP/s and MBU achieved bandwidth over peak bandwidth; decode is usually "
        "compute-bound, so judge decode by MFU, and MBU is the one for prefill and large batches.",
    "interview.quantization_effect":
        "Int4 weights make decode TPOT rise since the weight read moves more bytes, the knee B* rises, prefill is "
        "memory-bound and gets 4x faster, and the KV cache gets less memory.",
    "interview.speculative_decoding":
        "A draft proposes tokens and the target verifies them in one pass; speculative decoding helps at large "
        "batch and hurts at small batch, whatever the acceptance rate.",
    "interview.percentile_slos":
        "The mean shows the tail: slow requests sharply move it, few users ever meet the slow tail, and under load "
        "queueing stretches the tail slower than the mean.",
    "interview.capacity_planning":
        "Take the prompt and output lengths, find what one replica sustains within the SLOs, divide the peak rate "
        "by it and round down, and plan utilisation near 1, making sure the configuration fits in memory.",
    "interview_fleet.prefix_aware_routing":
        "The cache is shared across replicas, so least-loaded routing keeps the hit rate as high as one replica's; "
        "prefix affinity lowers the hit rate and carries no risk.",
    "interview_fleet.autoscaling_headroom":
        "Run a fixed fleet sized for the mean rate; new replicas start at once, so no headroom is needed, and the "
        "headroom costs more in a bigger fleet.",
    "interview.validate_with_measurement":
        "The model is an upper bound on the step time, so the measurement should be faster; the 53 % ratio means "
        "the model is wrong, and there is nothing to calibrate or check.",
    "interview_moe.active_is_not_bytes":
        "Yes: the tokens of a batch pick the same experts, so a step reads little of the model, about the 37B "
        "active parameters; the knee is lower than a dense model's and the node is compute-bound.",
    "interview_moe.ep_or_tp":
        "TP 8: tensor parallelism can split the latent across the GPUs, and EP sends more bytes in its "
        "all-to-alls than TP's all-reduces, so attention DP holds fewer sequences.",
    "interview_moe.mla_cache":
        "MLA compresses K and V into a latent, absorbed into the query, but each byte serves one head, so "
        "attention stays memory-bound, below the ridge point, and tensor parallelism can split the latent.",
}

#: The issue's own examples of inverted answers that a direction-blind checker called correct.
ISSUE_EXAMPLES = [
    ("interview.speculative_decoding", "Speculative decoding helps at large batch and hurts at small batch. A draft "
     "proposes tokens, the target verifies them in one pass, the gain depends on the acceptance rate, and it is "
     "compute-bound past the knee."),
    ("interview.tensor_parallel_tradeoff", "TP lets a big model fit and leaves more memory for the KV cache. It raises "
     "TPOT, costs all-reduces over NVLink, and per-GPU throughput rises with N, so replicas are not needed."),
    ("interview.queueing_growth", "Queueing delay does not grow hyperbolically; it grows linearly. It diverges at 1, "
     "at 90 % the wait is 9 service times, and M/D/1 waits half as long."),
]


def _solution_answers():
    """Conceptual question id -> the answer its solutions notebook types (a string literal in the cell
    before the check), over every solutions notebook: the interview bank is asked in chapter 17, its MoE
    questions in chapter 16, and others wherever their chapter asks them."""
    import ast

    import nbformat

    found = {}
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):     # the interview bank and the chapters' sets
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            match = re.search(r"""check\(\s*["']([\w.]+)["']\s*,\s*(\w+)\s*\)""", cell.source)
            if match and match.group(1) in QUESTIONS and QUESTIONS[match.group(1)].kind == "conceptual":
                tree = ast.parse(nb.cells[index - 1].source)
                for node in ast.walk(tree):
                    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == match.group(2)
                                                            for t in node.targets):
                        found[match.group(1)] = ast.literal_eval(node.value)
    return found


def _reverse_words(text: str) -> str:
    """The text with its directions swapped word by word (small <-> large, rises <-> falls, ...)."""
    pairs = [("lower", "higher"), ("lowers", "raises"), ("small", "large"), ("smaller", "larger"), ("short", "long"),
             ("shorter", "longer"), ("less", "more"), ("grows", "shrinks"), ("grow", "shrink"), ("rises", "falls"),
             ("rise", "fall"), ("increases", "decreases"), ("helps", "hurts"), ("memory-bound", "compute-bound"),
             ("faster", "slower"), ("above", "below"), ("before", "after"), ("up", "down"), ("drops", "climbs"),
             ("hyperbolically", "linearly"), ("half", "twice"), ("barely", "sharply"), ("stops", "continues"),
             ("fewer", "more"), ("tight", "loose"), ("within", "beyond"), ("cancels", "multiplies"),
             ("diverges", "converges"), ("once", "many times"), ("memory-bandwidth-bound", "compute-bound"),
             ("hides", "shows"), ("lowest", "highest"), ("least", "most")]
    table = {}
    for a, b in pairs:
        table.setdefault(a, b)
        table.setdefault(b, a)

    def swap(match):
        word = match.group(0)
        new = table.get(word.lower())
        return word if new is None else (new[0].upper() + new[1:] if word[0].isupper() else new)

    text = re.sub(r"[A-Za-z][A-Za-z-]*", swap, text)
    return re.sub(r"\bcannot\b", "can", re.sub(r"\bnot ", "", text))


def test_every_conceptual_question_lists_an_inverted_claim_and_a_reversed_example():
    assert set(REVERSED) == set(CONCEPTUAL)
    for qid in CONCEPTUAL:
        assert any(m.label.startswith("inverted: ") for m in QUESTIONS[qid].mistakes), qid


@pytest.mark.parametrize("qid", CONCEPTUAL)
def test_key_points_with_their_directions_reversed_are_not_yet(qid):
    result = evaluate(QUESTIONS[qid], REVERSED[qid])
    assert result.status == "incorrect", result


@pytest.mark.parametrize("qid", CONCEPTUAL)
def test_the_model_answer_with_every_direction_swapped_is_not_yet(qid):
    q = QUESTIONS[qid]
    swapped = _reverse_words(str(q.expected()))
    assert swapped != q.expected()
    result = evaluate(q, swapped)
    assert result.status == "incorrect" and result.slip.startswith("inverted: "), (swapped, result)


@pytest.mark.parametrize("qid,answer", ISSUE_EXAMPLES)
def test_the_issues_inverted_answers_are_not_yet(qid, answer):
    result = evaluate(qid, answer)
    assert result.status == "incorrect" and result.slip.startswith("inverted: "), result


def test_model_answers_and_the_solutions_answers_stay_correct():
    answers = _solution_answers()
    assert set(answers) == set(CONCEPTUAL)
    for qid in CONCEPTUAL:
        assert evaluate(qid, str(QUESTIONS[qid].expected())).correct, qid
        assert evaluate(qid, answers[qid]).correct, (qid, evaluate(qid, answers[qid]))


@pytest.mark.parametrize("text,expected", [
    ("It grows hyperbolically.", True), ("It does not grow hyperbolically.", False),
    ("It doesn't grow hyperbolically, it grows linearly.", False),
    ("It does not grow linearly, it grows hyperbolically.", True), ("Never hyperbolically.", False),
])
def test_a_negated_key_point_is_not_named(text, expected):
    from servingmath.checks import mentions

    assert mentions(r"hyperbol", text) is expected
