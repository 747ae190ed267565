"""The interview drill and the question bank behind it.

The drill runs end to end from a script (a subprocess fed on stdin), scores a
right answer and not a wrong one, answers garbage with a helpful reply (never a
traceback), counts late answers with an injected clock, and lists the chapters.
The bank is large enough and holds every follow-up and pitfall the rehearsal
chapter promises.
"""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys

import pytest

from conftest import ROOT
from servingmath import drill
from servingmath.questions import get_question
from servingmath.checks import evaluate
from servingmath.hardware import Accelerator
from servingmath.questions import all_questions, get_question
from servingmath.questions.interview import REQUIRED
from servingmath.roofline import ridge_point
from servingmath.units import UNIT_SCALES

BANK = all_questions()
INTERVIEW = {qid: q for qid, q in BANK.items() if qid.startswith("interview.")}

FOLLOW_UPS = ["interview.why_batching_raises_throughput", "interview.what_is_goodput",
              "interview.b_star_8xh100", "interview.low_tpot_with_background_work"]
PITFALLS = ["interview.pitfall_unconstrained_throughput", "interview.pitfall_decode_saturates",
            "interview.pitfall_latency_linear_in_batch", "interview.pitfall_ignoring_queueing_ttft",
            "interview.pitfall_tpot_80ms_sluggish"]


def _typed(question) -> str:
    """What a student types for the right answer of ``question``."""
    value = question.expected()
    if question.kind == "numeric":
        return repr(float(value) / UNIT_SCALES[question.unit][0] if question.unit else float(value))
    if question.kind == "conceptual":
        return str(value) + "\n"          # a paragraph ends with an empty line
    return str(value)


def _wrong(question) -> str:
    value = question.mistakes[0].answer(question.draw(None))
    if question.kind == "numeric":
        return repr(float(value) / UNIT_SCALES[question.unit][0] if question.unit else float(value))
    if question.kind == "conceptual":
        return value + "\n"
    return str(value)


def _run(args, stdin: str, timeout: int = 60, check_rc: int | None = 0):
    proc = subprocess.run([sys.executable, "-m", "servingmath.drill", *args], input=stdin, text=True,
                          capture_output=True, timeout=timeout, cwd=ROOT)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    if check_rc is not None:
        assert proc.returncode == check_rc, (proc.returncode, proc.stderr)
    return proc


def _drill(questions, text: str, **kwargs):
    out = io.StringIO()
    result = drill.run_drill(questions, stdin=io.StringIO(text), stdout=out, **kwargs)
    return result, out.getvalue()


# ---------------------------------------------------------------- the bank
def test_the_bank_has_at_least_80_questions_and_25_interview_questions():
    assert len(BANK) >= 80, len(BANK)
    assert len(INTERVIEW) >= 25, len(INTERVIEW)


def test_the_bank_mixes_every_kind_and_difficulty():
    kinds = {q.kind for q in BANK.values()}
    assert kinds == {"numeric", "symbolic", "choice", "conceptual"}
    assert {q.difficulty for q in INTERVIEW.values()} == {"easy", "medium", "hard"}


@pytest.mark.parametrize("qid", FOLLOW_UPS + PITFALLS)
def test_every_required_follow_up_and_pitfall_is_present(qid):
    assert qid in BANK
    assert qid in REQUIRED.values()


def test_required_covers_exactly_the_follow_ups_and_pitfalls():
    assert sorted(REQUIRED.values()) == sorted(FOLLOW_UPS + PITFALLS)


@pytest.mark.parametrize("qid", sorted(INTERVIEW))
def test_interview_questions_name_the_chapter_they_draw_on(qid):
    q = INTERVIEW[qid]
    assert q.chapter and q.chapter != "interview"
    if q.kind == "conceptual":
        assert len(q.key_points) >= 3
        assert len(str(q.expected())) > 150, "a model answer should be a full paragraph"


@pytest.mark.parametrize("qid,answer", [
    ("interview.queueing_growth", "It grows like 1/(1-rho): hyperbolically, not exponentially. It diverges as "
                                  "rho goes to 1; at 90 % busy the wait is 9 service times, and M/D/1 waits half."),
    ("interview.why_batching_raises_throughput",
     "Decode is memory-bound, not compute-bound: the weights are read once per step for the whole batch, so "
     "the step time barely grows while tokens per step grow. It stops at the knee where it turns compute-bound."),
])
def test_a_negated_wrong_claim_is_not_held_against_the_answer(qid, answer):
    assert evaluate(qid, answer).correct, evaluate(qid, answer)


@pytest.mark.parametrize("qid,answer,hint", [
    ("interview.queueing_growth", "The queueing delay grows exponentially with the load.", "hyperbolically"),
    ("interview.pitfall_unconstrained_throughput", "Nothing: latency does not change with the batch.",
     "Latency does depend on the batch"),
    ("interview.what_is_goodput", "Goodput is the average throughput of the server.", "average throughput"),
])
def test_a_wrong_claim_in_free_text_earns_its_hint(qid, answer, hint):
    result = evaluate(qid, answer)
    assert result.status == "incorrect" and hint in result.message


def test_a_vague_answer_is_told_the_missing_key_points():
    result = evaluate("interview.what_is_goodput", "Goodput is a kind of throughput.")
    assert result.status == "incorrect" and "A strong answer also names" in result.message


# ---------------------------------------------------------------- choosing questions
def test_selection_is_repeatable_with_a_seed_and_respects_the_filters():
    a = drill.select_questions(chapters="decode,slo", difficulties=["easy", "medium"], n=6, seed=4)
    b = drill.select_questions(chapters=["decode", "slo"], difficulties="easy,medium", n=6, seed=4)
    assert [q.id for q in a] == [q.id for q in b] and len(a) == 6
    for q in a:
        assert {"decode", "slo"} & set(drill.question_chapters(q)) and q.difficulty != "hard"
    c = drill.select_questions(chapters="decode,slo", difficulties=["easy", "medium"], n=6, seed=5)
    assert [q.id for q in a] != [q.id for q in c]


def test_a_chapter_matches_by_module_and_by_the_chapter_a_question_draws_on():
    decode_ids = {q.id for q in drill.select_questions(chapters="decode", n=1000, seed=0)}
    assert "decode.tpot_batch_64" in decode_ids
    assert "interview.why_batching_raises_throughput" in decode_ids
    interview_ids = {q.id for q in drill.select_questions(chapters="interview", n=1000, seed=0)}
    assert interview_ids == set(INTERVIEW)


@pytest.mark.parametrize("kwargs,message", [
    (dict(chapters="decod"), "Did you mean decode"),
    (dict(difficulties="hardest"), "hard"),
    (dict(kinds="essay"), "conceptual"),
    (dict(n=0), "n must be"),
    (dict(chapters="anatomy", difficulties="hard", kinds="symbolic"), "no question matches"),
])
def test_bad_filters_are_refused_with_what_is_allowed(kwargs, message):
    with pytest.raises(ValueError, match=message):
        drill.select_questions(**{"seed": 0, **kwargs})


def test_asking_for_more_questions_than_match_gives_them_all():
    qs = drill.select_questions(chapters="speculative", n=50, seed=0)
    assert len(qs) == drill.chapter_counts()["speculative"]["total"]


# ---------------------------------------------------------------- the drill, end to end from a script
def _pick(args):
    """The questions a CLI run with ``args`` (which include --seed) will ask."""
    values = dict(zip(args[::2], args[1::2]))
    return drill.select_questions(chapters=values.get("--chapter"), kinds=values.get("--kind"),
                                  difficulties=values.get("--difficulty"), n=int(values.get("--n", 5)),
                                  seed=int(values["--seed"]))


@pytest.mark.parametrize("args", [
    ["--chapter", "interview", "--kind", "numeric", "--n", "3", "--seed", "7"],
    ["--chapter", "interview", "--kind", "conceptual,symbolic,choice", "--n", "3", "--seed", "2"],
    ["--chapter", "decode,memory", "--n", "2", "--seed", "1"],
])
def test_a_scripted_session_scores_right_answers_and_not_wrong_ones(args):
    questions = _pick(args)
    right = _run(args, "".join(_typed(q) + "\n" for q in questions))
    assert f"Score: {len(questions)} of {len(questions)} (100 %)." in right.stdout
    assert right.stdout.count("Correct.") == len(questions)
    for q in questions:
        assert q.id in right.stdout
    wrong = _run(args, "".join(_wrong(q) + "\n" for q in questions))
    assert f"Score: 0 of {len(questions)} (0 %)" in wrong.stdout
    for q in questions:       # every wrong answer here is a known mistake: its hint is shown
        assert q.mistakes[0].hint.split(":")[0][:40] in wrong.stdout.replace("\n", " ").replace("  ", " ") \
            or q.kind == "conceptual"


def test_the_same_seed_gives_the_same_session():
    args = ["--n", "4", "--seed", "42"]
    text = "skip\n" * 4
    assert _run(args, text).stdout == _run(args, text).stdout


def test_numeric_feedback_shows_the_expected_value_with_its_unit_and_the_mistakes_hint():
    q = get_question("interview.decode_floor_70b_tp8")          # in ms
    seconds = q.expected()
    result, out = _drill([q], f"{seconds * 8 * 1e3!r}\n")        # one GPU reading all weights
    assert result.records[0].status == "not yet"
    assert "Hint: That is one GPU reading all the weights" in out
    assert f"Expected: {seconds * 1e3:.3f}"[:14] in out and " ms (accepted within 1 %)" in out


def test_seconds_and_milliseconds_are_both_understood():
    q = get_question("interview.decode_floor_70b_tp8")          # asks for ms
    si = q.expected()
    for typed in [f"{si!r} s", f"{si * 1e3!r} ms", f"{si * 1e6!r} us", f"{si * 1e3!r}"]:
        result, _ = _drill([q], typed + "\n")
        assert result.score == 1, typed
    result, out = _drill([q], f"{si!r}\n")                     # seconds typed as a bare number of ms
    assert result.score == 0 and "seconds versus milliseconds" in out


@pytest.mark.parametrize("garbage,reply", [
    ("", "Please type an answer (in ms)"),
    ("fast", "'fast' is not a number"),
    ("12 parsecs", "unknown unit 'parsecs'"),
    ("1,5", "use a decimal point"),
    ("12 GB", "Wrong kind of unit"),
])
def test_garbage_gets_a_helpful_reply_and_the_question_is_asked_again(garbage, reply):
    q = get_question("interview.decode_floor_70b_tp8")
    result, out = _drill([q], f"{garbage}\n{q.expected()!r} s\n")
    assert reply in out
    assert result.score == 1                                   # the good answer after it still counts


def test_garbage_for_formulas_choices_and_paragraphs_gets_helpful_replies():
    formula = get_question("interview.mm1_wait")
    choice = get_question("interview.lowest_batch1_tpot")
    paragraph = get_question("interview.what_is_goodput")
    text = ("rho*s/(1-rho\n\n9**9**9**9\nrho*s/(1-rho)\n"   # unbalanced, empty, a huge power, then right
            "7\nfaster\n3\n"                         # out of range, not an option, then option 3
            "\n" + str(paragraph.expected()) + "\n\n")
    result, out = _drill([formula, choice, paragraph], text)
    assert "the brackets do not match" in out and "Please type a formula" in out and "would be too large" in out
    assert "7" in out and "is not an option" in out
    assert "Please type your answer (a paragraph)" in out
    assert [r.status for r in result.records] == ["correct", "correct", "correct"], out


def test_a_paragraph_gets_key_point_feedback_the_wrong_claims_hint_and_the_model_answer():
    q = get_question("interview.queueing_growth")
    result, out = _drill([q], "It grows exponentially once the server is busy.\nIt diverges at rho = 1.\n\n")
    assert result.records[0].status == "not yet"
    assert "[x] it diverges as the utilisation approaches 1" in out
    assert "[ ] the wait grows like 1 / (1 - rho), hyperbolically" in out
    assert "Hint: Queueing delay is not exponential" in out
    assert "Model answer:" in out and "Pollaczek-Khinchine" in out


def test_end_of_input_stops_cleanly_with_the_score():
    proc = _run(["--n", "3", "--seed", "3"], "")
    assert "End of input: stopping here." in proc.stdout
    assert "Score: 0 of 3 (0 %); 1 not answered, 2 not reached." in proc.stdout


def test_end_of_input_inside_a_paragraph_still_checks_it():
    q = get_question("interview.what_is_goodput")
    result, out = _drill([q, q], str(q.expected()))             # no final empty line, then EOF
    assert result.records[0].status == "correct"
    assert result.stopped == "end of input" and result.records[1].status == "not reached"


def test_quit_and_skip():
    qs = drill.select_questions(chapters="interview", kinds="numeric", n=3, seed=0)
    result, out = _drill(qs, "skip\nquit\n")
    assert [r.status for r in result.records] == ["skipped", "not answered", "not reached"]
    assert "Expected:" in out and "Stopping here, as asked." in out


class _CtrlC(io.StringIO):
    def readline(self, *args):
        raise KeyboardInterrupt


def test_ctrl_c_ends_the_drill_with_the_score_and_status_130():
    out = io.StringIO()
    status = drill.main(["--n", "2", "--seed", "0"], stdin=_CtrlC(), stdout=out)
    assert status == 130
    assert "Interrupted (Ctrl-C): stopping here." in out.getvalue() and "Score: 0 of 2" in out.getvalue()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_in_a_real_process_prints_no_traceback():
    proc = subprocess.Popen([sys.executable, "-m", "servingmath.drill", "--n", "2", "--seed", "1"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:                       # wait until the first question waits for input
            if "'quit' stops" in line:
                break
        proc.send_signal(signal.SIGINT)
        # wait with stdin still open: closing it (as communicate() does) can race the signal, and an
        # end of input that wins is a clean stop with exit code 0
        proc.wait(timeout=60)
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        proc.kill()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Interrupted (Ctrl-C)" in out


class _FakeClock:
    """Returns the given times, one per call (the drill reads the clock twice per question)."""

    def __init__(self, *times):
        self.times = list(times)

    def __call__(self):
        return self.times.pop(0)


def test_answers_after_the_time_limit_count_as_late():
    qs = drill.select_questions(chapters="interview", kinds="numeric", n=3, seed=0)
    text = "".join(_typed(q) + "\n" for q in qs[:2]) + _wrong(qs[2]) + "\n"
    clock = _FakeClock(0.0, 20.0, 100.0, 190.0, 200.0, 290.0)  # 20 s, 90 s, 90 s
    result, out = _drill(qs, text, time_limit=60, clock=clock)
    out = " ".join(out.split())             # feedback is wrapped at the terminal width
    assert [r.status for r in result.records] == ["correct", "late", "not yet"]
    assert result.score == 1
    assert "Correct, but late (90 s > 60 s): no point." in out
    assert "(And late: 90 s > 60 s.)" in out
    assert "Time limit: 60 s per question." in out and "queueing_ttft (20 s)" in out


def test_the_time_limit_is_validated():
    with pytest.raises(ValueError, match="time_limit"):
        drill.run_drill([], stdin=io.StringIO(""), stdout=io.StringIO(), time_limit=0)
    proc = _run(["--time-limit", "-5"], "", check_rc=2)
    assert "--time-limit must be" in proc.stderr


def test_bad_command_lines_get_usage_errors_not_tracebacks():
    proc = _run(["--chapter", "decod"], "", check_rc=2)
    assert "Did you mean decode" in proc.stderr
    proc = _run(["--n", "many"], "", check_rc=2)
    assert "invalid int value" in proc.stderr
    proc = _run(["--n", "0"], "", check_rc=2)
    assert "--n must be at least 1" in proc.stderr


def test_list_shows_every_chapter_with_its_counts():
    proc = _run(["--list"], "")
    counts = drill.chapter_counts()
    for name in ["anatomy", "decode", "interview", "memory", "queueing", "slo"]:
        row = next(line for line in proc.stdout.splitlines() if line.startswith(name + " "))
        assert int(row.split()[1]) == counts[name]["total"]
    assert f"{len(BANK)} questions in all." in proc.stdout


def test_variants_use_each_questions_variant_numbers():
    q = next(q for q in BANK.values() if q.variants and "{" in q.prompt)
    seed = next(s for s in range(100) if q.draw(s) != q.params)
    _, out = _drill([q], "skip\n", variant_seed=seed)
    assert q.render(q.draw(seed)).split()[0] in out
    assert "Expected: " + drill.expected_text(q, q.draw(seed)) in out


# ---------------------------------------------------------------- reading numbers
@pytest.mark.parametrize("text,value", [("1.43x", 1.43), ("1.43 x", 1.43), ("45 %", 0.45), ("2.5", 2.5),
                                        ("'2.5'", 2.5), ("2.5.", 2.5)])
def test_ratios_may_be_typed_with_x_or_percent(text, value):
    q = get_question("interview.h200_vs_h100_decode")
    assert drill.read_numeric(q, text) == (pytest.approx(value), None)


# ---------------------------------------------------------------- the cheat sheet
def test_the_cheat_sheet_is_computed_from_the_catalogs():
    sheet = drill.cheat_sheet()
    for name in ["A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB", "MI300X"]:
        line = next(l for l in sheet.splitlines() if l.strip().startswith(name))
        assert f" {ridge_point(name):.0f} " in line + " "
    assert "TPOT 189 ms" in sheet
    mine = Accelerator.from_numbers("my-chip", memory_bytes=100e9, memory_bandwidth=2e12,
                                    peak_flops={"bf16": 500e12})
    custom = drill.cheat_sheet(accelerators=[mine], models=["Llama-3.1-8B"], reference_accelerator="H100")
    line = next(l for l in custom.splitlines() if l.strip().startswith("my-chip"))
    assert re.search(r"\b250\b", line)                       # its ridge, 500e12 / 2e12
    assert len(sheet.splitlines()) <= 60 and max(map(len, sheet.splitlines())) <= 100   # one page
    # a TP degree beyond one 8-GPU node is marked, with the note that its floor assumes NVLink throughout
    row = next(l for l in sheet.splitlines() if l.strip().startswith("Llama-3.1-405B"))
    assert row.rstrip().endswith("16*") and "more GPUs than one 8-GPU node" in sheet
    assert "*" not in next(l for l in sheet.splitlines() if l.strip().startswith("Llama-3.1-70B"))
    assert "more GPUs than one" not in custom


def test_cheat_sheet_from_the_command_line():
    proc = _run(["--cheat-sheet"], "")
    assert proc.stdout.startswith("CHEAT SHEET")


# ---------------------------------------------------------------- chapters by number, prompts that stand alone
def test_chapter_numbers_name_the_chapters_exercise_sets():
    # every number maps to the module whose questions that chapter's exercise set asks
    for number, module in drill.CHAPTER_NUMBERS.items():
        (path,) = (ROOT / "solutions").glob(f"{number}_*.ipynb")
        sources = "\n".join(c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                            for c in json.loads(path.read_text())["cells"])
        ids = set(re.findall(r"""check\(\s*["']([\w.]+)["']""", sources))
        # the chapter's own module, and questions of cross-chapter modules (published problems, the
        # MoE interview set) that name this chapter as theirs
        modules = {qid.split(".")[0] for qid in ids}
        assert ids and module in modules, (number, path.name)
        for qid in ids:
            if qid.split(".")[0] != module:
                assert get_question(qid).chapter == module, (number, qid)
    by_number = drill.select_questions(chapters="04", n=1000, seed=0)
    assert {q.id for q in by_number} == {q.id for q in drill.select_questions(chapters="decode", n=1000, seed=0)}
    assert drill.select_questions(chapters="4", n=3, seed=1) == drill.select_questions(chapters="ch04", n=3, seed=1)
    with pytest.raises(ValueError, match="there is no chapter '42'"):
        drill.select_questions(chapters="42")


def test_chapter_numbers_work_on_the_command_line():
    proc = _run(["--chapter", "04", "--n", "1", "--seed", "3"], "skip\n")
    assert "decode." in proc.stdout


def test_no_question_leans_on_the_previous_one_and_ordinals_are_english():
    for q in BANK.values():
        for seed in (None, 0, 1, 2, 3, 5, 8):
            text = q.render(q.draw(seed))
            assert not re.search(r"\b(Same assumptions|same system|previous question|That LMDeploy run)\b", text), q.id
            for number, suffix in re.findall(r"\b(\d+)(st|nd|rd|th)\b", text):
                n = int(number)
                right = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
                assert suffix == right, (q.id, number + suffix)
    q = get_question("anatomy.tpot_from_timestamps")
    assert "41st" in q.render({**q.draw(None), "n": 41, "nth": None} | q.derive({**q.params, "n": 41}))


def test_formulas_typed_in_the_drill_go_through_the_whitelist_parser():
    q = get_question("interview.mm1_wait")
    result, out = _drill([q], "__import__('os').system('echo pwned')\nrho*s/(1-rho)\n")
    assert "is not allowed in a formula" in out and "pwned\n" not in out
    assert result.score == 1



def test_the_cheat_sheet_reads_what_a_step_reads_at_both_settings():
    from servingmath.decode import knee_batch_size
    from servingmath.models import weight_bytes
    from servingmath.moe import weight_bytes_read

    sheet = drill.cheat_sheet()
    rows = {l.split()[0]: l.split() for l in sheet.splitlines() if l.startswith("  ")}
    for name in ["A100-SXM4-80GB", "H100-SXM5-80GB"]:
        ridge, peak, real = rows[name][7], rows[name][9], rows[name][10]
        assert peak == ridge == f"{ridge_point(name):.0f}"          # bf16: the knee is the ridge point
        assert real == f"{knee_batch_size('Llama-3.1-8B', name, 0, setting='realistic'):.0f}"
    mixtral = rows["Mixtral-8x7B"]                                    # stored 93.4 GB, read: shared + 2 experts
    assert mixtral[3] == f"{weight_bytes('Mixtral-8x7B') / 1e9:.1f}"
    assert mixtral[5] == f"{weight_bytes_read('Mixtral-8x7B', 1) / 1e9:.1f}"
    assert float(mixtral[5]) < float(mixtral[3]) / 3
    assert "MFU 0.5, MBU 0.75" in sheet and "routed experts only" not in sheet


# ---------------------------------------------------------------- the drill in Chinese (--lang zh)
ZH = drill.translations("zh")
TRANSLATED = sorted(qid for qid in BANK if qid.split(".")[0] in ("interview", "interview_moe", "interview_fleet"))

#: Each conceptual question's key points stated the wrong way round, in Chinese: every one is "not yet",
#: with the inverted claim's hint (the Chinese twin of tests/test_questions.py's REVERSED).
ZH_REVERSED = {
    "interview.why_batching_raises_throughput":
        "小批大小时解码是计算受限的，每条序列都要读一遍权重，所以吞吐随批大小下降；过了拐点一步转为访存受限。",
    "interview.what_is_goodput": "Goodput 也统计那些未满足 SLO 的请求；SLO 被打破时 goodput 上升，吞吐下降。",
    "interview.b_star_method": "到了脊点，矩阵乘转为访存受限；B* 随 GPU 数增大，张量并行 8 时 B* 乘以 N。",
    "interview.low_tpot_with_background_work": "让后台任务优先，聊天请求可以被抢占；运行放得下的最大批，盯住平均 TPOT。",
    "interview.pitfall_unconstrained_throughput": "TPOT 随着批增大而下降，所以最大的批能满足所有 SLO；延迟与批大小无关。",
    "interview.queueing_growth": "排队延迟随利用率线性增长，在利用率接近 1 时也保持有界。",
    "interview.prefill_vs_decode_bound": "Prefill 一次只处理一个 token，它的强度低于脊点；解码的强度高于脊点。",
    "interview.ttft_tpot_e2e": "TPOT 包括第一个 token 在内的所有 token 的平均时间；TTFT 不包括排队。",
    "interview.kv_cache_limits": "KV cache 随上下文变长而变小，所以限制批大小的是权重。",
    "interview.tensor_parallel_tradeoff": "张量并行会提高 TPOT，每张 GPU 的吞吐随 N 上升。",
    "interview.paged_attention": "PagedAttention 用大块分配，每条序列浪费更多，所以能放下更少的序列。",
    "interview.chunked_prefill": "块越小越好，要小到访存受限；分块让 TTFT 缩短。",
    "interview.disaggregation": "SLO 宽松、提示很短时分离最划算。",
    "interview.mfu_mbu": "解码是计算受限的，所以解码看 MFU。",
    "interview.quantization_effect": "int4 权重让 TPOT 上升，拐点 B* 也上升。",
    "interview.speculative_decoding": "投机解码在大批时有帮助，在小批时有害。",
    "interview.percentile_slos": "平均值能反映尾部，所以用平均值就够了。",
    "interview.capacity_planning": "用峰值速率除以每副本容量后向下取整，让利用率接近 1。",
    "interview.validate_with_measurement": "模型是上界，实测应该更快，所以模型错了。",
    "interview_moe.active_is_not_bytes":
        "批中的 token 选择相同的专家，所以一步只读一小部分模型；拐点比稠密模型更低，节点是计算受限的。",
    "interview_moe.ep_or_tp": "张量并行 8 可以切分 latent；EP 的通信字节更多。",
    "interview_moe.mla_cache": "MLA 之后注意力仍然访存受限，张量并行可以切分 latent。",
    "interview_fleet.autoscaling_headroom": "集群越大，余量越贵；自动扩缩容比按峰值配置多用副本小时。",
    "interview_fleet.prefix_aware_routing": "前缀亲和路由会降低命中率，把请求分散到每个副本才能提高命中率。",
}


def _fields(text):
    from servingmath.question import template_fields

    return template_fields(text)


def test_every_message_of_the_drill_is_translated_with_the_same_fields():
    assert set(ZH["ui"]) == set(drill.UI)
    for key, text in ZH["ui"].items():
        assert _fields(text) <= _fields(drill.UI[key]), key
        assert re.search(r"[\u4e00-\u9fff]", text), key          # written in Chinese, not left in English
    assert set(ZH["words"]) == set(drill.WORDS)
    with pytest.raises(ValueError, match="lang must be one of en, zh"):
        drill.translations("fr")


@pytest.mark.parametrize("qid", TRANSLATED)
def test_every_interview_question_is_translated_field_for_field(qid):
    q, entry = BANK[qid], ZH["questions"][qid]
    assert _fields(entry["prompt"]) == _fields(q.prompt)
    assert set(entry["mistakes"]) == {m.label for m in q.mistakes}   # every hint, keyed by its slip
    zh = drill.localize(q, "zh")
    assert zh.render(q.draw(None)) != q.render(q.draw(None)) and "{" not in zh.render(q.draw(None))
    assert [m.label for m in zh.mistakes] == [m.label for m in q.mistakes]
    assert all(re.search(r"[\u4e00-\u9fff]", m.hint) for m in zh.mistakes)
    if q.kind == "conceptual":
        assert _fields(entry["answer"]) == _fields(getattr(q.answer, "text", ""))   # the same computed numbers
        assert len(entry["key_points"]) == len(q.key_points)
    for seed in range(3):                                             # the same numbers as the English
        params = q.draw(seed)
        assert zh.expected(params) == q.expected(params) or q.kind == "conceptual"


@pytest.mark.parametrize("qid", [i for i in TRANSLATED if BANK[i].kind == "conceptual"])
def test_chinese_model_answers_and_english_ones_are_read_and_reversed_chinese_is_not_yet(qid):
    q = BANK[qid]
    zh = drill.localize(q, "zh")
    assert evaluate(zh, str(zh.expected())).correct, evaluate(zh, str(zh.expected()))
    assert evaluate(zh, str(q.expected())).correct                   # an English answer in a Chinese drill
    result = evaluate(zh, ZH_REVERSED[qid])
    assert result.status == "incorrect" and result.slip.startswith("inverted: "), result
    assert re.search(r"[\u4e00-\u9fff]", result.message)             # the hint is in Chinese


def test_every_conceptual_interview_question_has_a_chinese_reversed_example():
    assert set(ZH_REVERSED) == {i for i in TRANSLATED if BANK[i].kind == "conceptual"}


@pytest.mark.parametrize("text,named", [
    ("排队延迟按 1 / (1 - rho) 呈双曲线式增长。", True),
    ("排队延迟不是双曲线式增长的。", False),
    ("它并非双曲线式增长。", False),
    ("不同的负载下，它都呈双曲线式增长。", True),                     # 不同 "different" negates nothing
])
def test_a_negated_chinese_key_point_is_not_named(text, named):
    from servingmath.checks import mentions

    assert mentions(r"双曲", text) is named


def test_a_chinese_session_asks_hints_and_scores_in_chinese():
    qs = [get_question("interview.kv_per_token_70b"), get_question("interview.queueing_growth"),
          get_question("interview.ridge_a100")]
    out = io.StringIO()
    script = "160 KiB\n排队延迟随利用率线性增长。\n\n" + _typed(qs[2]) + "\n"
    result = drill.run_drill(qs, stdin=io.StringIO(script), stdout=out, lang="zh")
    text = out.getvalue()
    assert result.score == 1 and [r.status for r in result.records] == ["not yet", "not yet", "correct"]
    assert "面试练习：共 3 题。" in text and "第 1 题（共 3 题）" in text
    assert "提示：你只算了 K 或 V" in text                              # the numeric slip's hint, translated
    assert "参考答案：320 KiB（允许误差：1 % 以内）" in text
    assert "提示：不是线性的" in text and "要点：" in text and "[ ] 等待按 1 / (1 - rho) 增长" in text
    assert "正确。" in text and "得分：1 / 3" in text
    assert "Correct" not in text and "Not yet" not in text and "Score" not in text


def test_chinese_replies_to_garbage_and_skip_quit_in_chinese():
    q = get_question("interview.decode_floor_70b_tp8")
    assert "不是数" in drill.read_numeric(q, "很快", "zh")[1]
    assert "小数点" in drill.read_numeric(q, "5,3", "zh")[1]
    assert "不认识的单位" in drill.read_numeric(q, "5 parsecs", "zh")[1]
    out = io.StringIO()
    result = drill.run_drill([q, q], stdin=io.StringIO("跳过\n退出\n"), stdout=out, lang="zh")
    assert [r.status for r in result.records] == ["skipped", "not answered"]
    assert "已跳过。" in out.getvalue() and "按你的要求，练习到此结束。" in out.getvalue()
    with pytest.raises(ValueError, match="lang"):
        drill.run_drill([q], stdin=io.StringIO(""), stdout=io.StringIO(), lang="de")


def test_an_untranslated_question_is_asked_in_english():
    q = get_question("decode.tpot_batch_64")
    assert q.id not in ZH["questions"] and drill.localize(q, "zh") is q


def test_chinese_text_wraps_by_columns_and_never_opens_a_line_with_punctuation():
    text = drill.worked_answer(get_question("interview.speculative_decoding"), width=80, lang="zh")
    widths = [sum(drill._width(c) for c in line) for line in text.splitlines()]
    assert max(widths) <= 82                      # a closing punctuation mark may hang past the edge
    assert not any(line.lstrip()[:1] in "，。；：！？、）" for line in text.splitlines())
    assert "alpha = 0.7" in text.replace("\n   ", " ")   # Latin words and numbers are never split
    english = drill.worked_answer(get_question("interview.speculative_decoding"), width=80)
    assert english.startswith("Q (conceptual, hard).") and "A strong answer names:" in english


def test_the_command_line_drills_in_chinese():
    proc = _run(["--lang", "zh", "--chapter", "interview", "--kind", "numeric", "--n", "1", "--seed", "3"], "skip\n")
    assert "面试练习：共 1 题。" in proc.stdout and "已跳过。" in proc.stdout and "得分：0 / 1" in proc.stdout
    bad = _run(["--lang", "fr"], "", check_rc=2)
    assert "invalid choice" in bad.stderr and "Traceback" not in bad.stderr
