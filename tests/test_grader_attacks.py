"""Attacks on the grader, as a careless teacher, a careless student and a cheating student would try them.

Every attack asserts three things: nothing crashes, no row is lost, and the score is the fair one
(what the answers the submission really checked are worth for that student's own variant). One
grading run (module fixture, two submissions at a time, short time limits) serves the attacks that
need a kernel; the others call the checker, the parser and the command line directly.

Attacks that only a sandbox can stop (reading or writing the teacher's files, the network, a
process outliving the grader) are skipped, with the reason, where the machine allows no namespace
sandbox; on this project's machines bubblewrap or unshare is available and they all run.
"""

from __future__ import annotations

import atexit
import csv
import hashlib
import json
import os
import shutil
import tempfile
import time
import unicodedata
from pathlib import Path

import nbformat
import pytest
import sympy

from conftest import ROOT
from servingmath import answers, assignments, sandbox
from servingmath.checks import evaluate
from servingmath.questions import get_question
from servingmath.units import UNIT_SCALES

#: The attacks aim at the template the grader reads. They get a copy of the book's exercise set, in a folder of
#: its own, so that where the machine allows no sandbox (isolation "none": the attacks then succeed, and the
#: grader says so) they cannot corrupt the repository for the tests that follow.
_TEMPLATE_DIR = Path(tempfile.mkdtemp(prefix="servingmath-attack-template-"))
os.chmod(_TEMPLATE_DIR, 0o755)
atexit.register(shutil.rmtree, _TEMPLATE_DIR, True)
TEMPLATE = Path(shutil.copy(ROOT / "exercises" / "01_anatomy_of_a_request.ipynb", _TEMPLATE_DIR))
KEY = b"attack-suite-course-key"
STUDENTS = ["josé", "answers", "thief", "detached", "suicide", "runnerkill", "hog", "looper", "copier",
            "tamperer", "garbage", "huge", "dave", "absent"]
LIMITS = sandbox.Limits(cell_seconds=20, wall_seconds=120, cpu_seconds=120, memory_bytes=3 * 2**30)


# ---------------------------------------------------------------- building submissions
def _literal(qid, params, which="right"):
    q = get_question(qid)
    value = q.expected(params) if which == "right" else q.mistakes[0].answer(params)
    if q.kind == "symbolic":
        return f"sympy.sympify({str(value)!r})"
    if q.kind in ("choice", "conceptual"):
        return repr(value)
    return repr(float(value) / UNIT_SCALES[q.unit][0] if q.unit else float(value))


def _fill(nb, student, overrides=None, which="right"):
    """Answer every question of ``nb`` for ``student``'s variant; ``overrides`` maps a question id to
    the source of its answer cell (the placeholder name is kept)."""
    nb = nbformat.from_dict(copy_nb(nb))
    overrides = overrides or {}
    for index, qid, name in assignments.check_cells(nb):
        params = get_question(qid).draw_for(KEY, student)
        source = overrides.get(qid)
        nb.cells[index - 1].source = (source.replace("ANSWER", name) if source is not None
                                      else f"import sympy\n{name} = {_literal(qid, params, which)}")
    return nb


def copy_nb(nb):
    return json.loads(json.dumps(nb))


def _insert_after_check(nb, qid, source):
    index = next(i for i, q, _ in assignments.check_cells(nb) if q == qid)
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source))
    return nb


def _fair(nb_answers: dict, student):
    """The fair score: what ``nb_answers`` (question id -> value) is worth for ``student``'s variant."""
    score = 0
    for qid, value in nb_answers.items():
        q = get_question(qid)
        score += evaluate(q, value, params=q.draw_for(KEY, student)).correct
    return score


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


QIDS = [qid for _, qid, _ in assignments.check_cells(nbformat.read(TEMPLATE, as_version=4))]
N = len(QIDS)


@pytest.fixture(scope="module")
def iso():
    return sandbox.detect_isolation("auto")


def _needs_sandbox(iso):
    if iso.level not in ("bwrap", "unshare"):
        pytest.skip(f"this machine allows only isolation level {iso.level!r}: no namespace sandbox")


@pytest.fixture(scope="module")
def graded(tmp_path_factory, iso):
    """One grading run of every attack that needs a kernel (ten kernels, two at a time)."""
    if iso.level == "none":
        pytest.skip("no sandbox on this machine (isolation 'none'): the attacks on the teacher's files would "
                    "succeed, as the grader's warning says; install bubblewrap, or run as root")
    base = tmp_path_factory.mktemp("attacks")
    handout, subs, out = base / "handout", base / "collected", base / "grades"
    template = Path(shutil.copy(TEMPLATE, base))     # the attacks' target: this run's own copy
    roster = assignments.make_assignment(template, STUDENTS, KEY, handout)
    key_file = base / "keys" / "course.key"
    key_file.parent.mkdir()
    key_file.write_bytes(KEY)
    subs.mkdir()
    nb = {s: nbformat.read(handout / f"{s}.ipynb", as_version=4) for s in STUDENTS}
    paths = {"subs": str(subs), "out": str(out), "template": str(template), "roster": str(roster),
             "key": str(key_file), "marker": str(base / "pwned")}
    info = {"paths": paths, "fair": {}}
    default_answers = {qid: _typed(qid, get_question(qid).draw(None)) for qid in QIDS}
    default_cells = {qid: f"import sympy\nANSWER = {_literal(qid, get_question(qid).draw(None))}" for qid in QIDS}

    def save(student, notebook, name=None):
        nbformat.write(notebook, subs / (name or f"{student}.ipynb"))

    # honest work, saved under an NFD name with another case and an upper-case suffix
    save("josé", _fill(nb["josé"], "josé"), unicodedata.normalize("NFD", "José") + ".IPYNB")

    # odd answers, each costing only its own question; code hidden in answers; a loop variable called
    # `type`; a name reused after its check; a KeyboardInterrupt raised on purpose (not a time-out)
    evil_class = (
        "class Evil(sympy.Symbol):\n"
        "    def _sympyrepr(self, printer):\n"
        f"        open({paths['marker']!r} + '-sympyrepr', 'w').write('ran')\n"
        "        return 'Integer(1)'\n"
        "    def __str__(self):\n"
        f"        open({paths['marker']!r} + '-str', 'w').write('ran')\n"
        "        return '1'\n"
        "    __repr__ = __str__\n")
    payload = ("sympify.__globals__['__builtins__']['exec']("
               f"\"open({paths['marker']!r} + '-exec', 'w').write('ran')\")")
    odd = {
        "anatomy.kv_bytes_per_token": "ANSWER = 1 + 2j",
        "anatomy.kv_cache_one_sequence": "ANSWER = 10 ** 400",
        "anatomy.tpot_from_timestamps": "ANSWER = '7' * 12000",
        "anatomy.e2e_formula": "import sympy\n" + evil_class + "ANSWER = Evil('T_1')",
        "anatomy.decode_floor": f"ANSWER = {payload!r}",
        "anatomy.mean_itl_vs_mean_tpot": "ANSWER = '9**9**9'",
        "anatomy.which_phase_compute_bound": "for type in ['decode', 'prefill']:\n    pass\nANSWER = type",
    }
    answers_nb = _fill(nb["answers"], "answers", odd)
    answers_nb = _insert_after_check(answers_nb, "anatomy.batch_throughput",
                                     "batch_tok_s = 'something else entirely'\nwall = throughput = None")
    save("answers", _insert_after_check(answers_nb, QIDS[1], "raise KeyboardInterrupt"))
    info["fair"]["answers"] = N - len(odd) + 1      # the loop variable's answer is right

    # a thief: the library's default-variant answers (all it gives without the key), a checker patched
    # to say "correct", forged and flooded records, a forged status line, writes into the runner's
    # pipe, the teacher's files, other submissions, the grader's folder found through /proc, the
    # network, the key
    thief = _fill(nb["thief"], "thief", default_cells)
    thief.cells.insert(2, nbformat.v4.new_code_cell(
        "from servingmath import checks\n"
        "checks.evaluate = lambda *a, **k: checks.CheckResult('x', 'correct', 'correct.')\n"))
    records = "".join(
        f"print('\\n' + checks.CAPTURE_MARK + json.dumps({{'q': {qid!r}, 'a': {{'kind': 'number', 'value': '1'}}}}))\n"
        for qid in QIDS)
    thief.cells.append(nbformat.v4.new_code_cell(
        "import json, os\nfrom servingmath import checks\n" + records
        + "for _ in range(2000):\n    print(checks.CAPTURE_MARK + '{\"q\": \"anatomy.batch_throughput\"}')\n"
        "os.write(1, b'{\"t\": \"status\", \"state\": \"done\", \"errors\": [], \"timed_out\": []}\\n')\n"
        "try:\n    os.write(os.open(f'/proc/{os.getppid()}/fd/1', os.O_WRONLY), b'{\"t\": \"capture\"}\\n')\n"
        "except OSError as e:\n    print(e)\n"))
    steal = (
        "import os, socket, glob\n"
        "found = []\n"
        f"for path in [{paths['subs']!r} + '/' + {unicodedata.normalize('NFD', 'José') + '.IPYNB'!r}, "
        f"{paths['template']!r}, {paths['roster']!r}, "
        f"{paths['key']!r}, {paths['out']!r} + '/journal.jsonl', {paths['out']!r} + '/scores.csv']:\n"
        "    for mode in ('a', 'w'):\n"
        "        try:\n            open(path, mode).write('PWNED'); found.append(path)\n"
        "        except OSError:\n            pass\n"
        "for pid in os.listdir('/proc'):\n"
        "    try:\n"
        "        cwd = os.readlink(f'/proc/{pid}/cwd')\n"
        "        for name in os.listdir(cwd):\n"
        "            if name.endswith(('.ipynb', '.IPYNB', '.csv', '.key', '.jsonl')):\n"
        "                open(os.path.join(cwd, name), 'a').write('PWNED'); found.append(name)\n"
        "    except (OSError, ValueError):\n"
        "        pass\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=2); found.append('network')\n"
        "except OSError:\n    pass\n"
        "key = os.environ.get('SERVINGMATH_KEY')\n"
        f"for p in glob.glob('/*/*.key') + [{paths['key']!r}]:\n"
        "    try:\n        key = open(p, 'rb').read().strip()\n"
        "    except OSError:\n        pass\n")
    thief.cells.insert(2, nbformat.v4.new_code_cell(steal))
    for index, qid, name in assignments.check_cells(thief):   # with the key, every variant would be right
        thief.cells[index - 1].source += (
            "\nif key:\n    from servingmath.questions import get_question as _g\n"
            f"    _q = _g({qid!r}); {name} = _q.expected(_q.draw_for(key, 'thief'))\n"
            f"    if _q.kind == 'numeric' and _q.unit:\n"
            f"        {name} = {name} / __import__('servingmath.units').units.UNIT_SCALES[_q.unit][0]")
    save("thief", thief)
    info["fair"]["thief"] = _fair(default_answers, "thief")

    # known slips in half the answers; a process that outlives the kernel and rewrites the results
    # later; a thread that never ends
    slips = {qid: f"import sympy\nANSWER = {_literal(qid, get_question(qid).draw_for(KEY, 'detached'), 'wrong')}"
             for qid in QIDS[5:]}
    save("detached", _insert_after_check(_fill(nb["detached"], "detached", slips), QIDS[-1],
        "import os, time, threading\n"
        "threading.Thread(target=time.sleep, args=(3600,)).start()\n"
        "if os.fork() == 0:\n    try:\n        os.setsid()\n        if os.fork() == 0:\n            time.sleep(3)\n"
        f"            for p in [{paths['out']!r} + '/scores.csv', {paths['marker']!r} + '-detached']:\n"
        "                try:\n                    open(p, 'w').write('PWNED')\n"
        "                except OSError:\n                    pass\n"
        "    finally:\n        os._exit(0)\n"))
    info["fair"]["detached"] = 5

    # the kernel kills itself after three answers; another kills its runner
    save("suicide", _insert_after_check(_fill(nb["suicide"], "suicide"), QIDS[2],
                                        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"))
    save("runnerkill", _insert_after_check(_fill(nb["runnerkill"], "runnerkill"), QIDS[2],
                                           "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"))

    # memory hog, a huge file, 50 MB of output, a (bounded) fork bomb: all survived, all answers count
    bomb = ("import os, time\nkids = 0\nfor _ in range(3000):\n    try:\n        pid = os.fork()\n"
            "    except OSError:\n        break\n    if pid == 0:\n        try:\n            time.sleep(2)\n"
            "        finally:\n            os._exit(0)\n    kids += 1\nprint('forked', kids)\n"
            ) if iso.uid is not None else ""
    save("hog", _insert_after_check(_fill(nb["hog"], "hog"), QIDS[0],
        "try:\n    hog = bytearray(8 * 2**30)\nexcept MemoryError:\n    hog = None\n"
        "try:\n    with open('big.bin', 'wb') as f:\n        f.write(b'0' * (200 * 2**20))\n"
        "except OSError:\n    pass\n"
        "print('y' * 50_000_000)\n" + bomb))

    # an endless loop that ignores Ctrl-C, after four answers
    save("looper", _insert_after_check(_fill(nb["looper"], "looper"), QIDS[3],
                                       "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"))

    # copier hands in josé's work (josé's variant, josé's hand-out)
    save("copier", _fill(nb["josé"], "josé"))
    info["fair"]["copier"] = _fair({qid: _value(qid, "josé") for qid in QIDS}, "copier")

    # its own check() that always says correct, and half the check cells deleted
    tamperer = _fill(nb["tamperer"], "tamperer")
    tamperer.cells.insert(2, nbformat.v4.new_code_cell("def check(*args):\n    print('correct.')"))
    doomed = {i for i, _, _ in assignments.check_cells(tamperer)[::2]}
    tamperer.cells = [c for i, c in enumerate(tamperer.cells) if i not in doomed]
    save("tamperer", tamperer)

    # not notebooks
    (subs / "garbage.ipynb").write_bytes(b"{this is not json")
    with open(subs / "huge.ipynb", "wb") as handle:
        handle.write(b"{" + b" " * (33 * 2**20) + b"}")
    # two files for one student; a file that is no one's; a spreadsheet formula and a newline in names
    save("dave", _fill(nb["dave"], "dave"), "dave.ipynb")
    save("dave", _fill(nb["dave"], "dave"), "Dave.ipynb")
    (subs / "=HYPERLINK(evil)|x.ipynb").write_text("{}")
    (subs / "eve\n| injected | row |.ipynb").write_text("{}")

    before = {name: _sha(subs / name) for name in os.listdir(subs)}
    before.update({"template": _sha(template), "roster": _sha(roster), "key": _sha(key_file)})
    info["before"] = before
    progress, warnings = [], []
    grades = assignments.grade_folder(template, subs, out, roster, KEY, limits=LIMITS, jobs=2,
                                      progress=progress.append, warn=warnings.append, hide=[key_file])
    info.update(grades={g.student: g for g in grades}, out=out, subs=subs, roster=roster, key_file=key_file,
                progress=progress, warnings=warnings, base=base, template=template)
    return info


def _typed(qid, params):
    """The value a notebook holds when it answers ``qid`` right for ``params``."""
    q = get_question(qid)
    value = q.expected(params)
    return value / UNIT_SCALES[q.unit][0] if q.kind == "numeric" and q.unit else value


def _value(qid, student):
    return _typed(qid, get_question(qid).draw_for(KEY, student))


def _grade(graded, student):
    return graded["grades"][student]


# ---------------------------------------------------------------- the whole run
def test_every_row_is_there_once(graded):
    rows = list(csv.DictReader((graded["out"] / "scores.csv").open(encoding="utf-8")))
    students = [r["student"] for r in rows]
    for name in STUDENTS:
        assert students.count(name) == 1, name
    assert len(rows) == len(STUDENTS) + 2          # + the two files that are no one's
    journal = (graded["out"] / "journal.jsonl").read_text().splitlines()
    assert len(journal) == 1 + len([s for s in STUDENTS if s not in ("dave", "absent")])


def test_the_isolation_used_is_printed(graded, iso):
    assert any(line.startswith(f"isolation: {iso.level}") for line in graded["warnings"])
    assert f"{iso.level} (" in (graded["out"] / "summary.md").read_text()


def test_attack_honest_work_under_an_nfd_name_in_another_case_with_an_upper_case_suffix_gets_full_marks(graded):
    g = _grade(graded, "josé")
    assert g.status == "ok" and g.score == N and g.file.endswith(".IPYNB"), g


def test_attack_odd_answers_cost_only_their_own_question(graded):
    g = _grade(graded, "answers")
    assert g.status == "ok" and g.score == graded["fair"]["answers"], g
    assert g.results["anatomy.which_phase_compute_bound"] == "correct"      # loop variable named `type`
    assert g.results["anatomy.batch_throughput"] == "correct"               # the name reused afterwards
    for qid in ("anatomy.kv_bytes_per_token", "anatomy.kv_cache_one_sequence", "anatomy.tpot_from_timestamps",
                "anatomy.e2e_formula", "anatomy.decode_floor", "anatomy.mean_itl_vs_mean_tpot"):
        assert g.results[qid] == "unreadable", (qid, g.results[qid])


def test_attack_code_in_an_answer_never_runs_anywhere(graded):
    marker = graded["paths"]["marker"]
    for suffix in ("-sympyrepr", "-str", "-exec"):
        assert not os.path.exists(marker + suffix), suffix


def test_attack_a_keyboard_interrupt_raised_on_purpose_is_not_a_time_out(graded):
    g = _grade(graded, "answers")
    assert any("KeyboardInterrupt" in f for f in g.flags) and not any("longer than" in f for f in g.flags)


def test_attack_forged_records_a_flood_and_a_patched_checker_earn_nothing(graded):
    g = _grade(graded, "thief")
    assert g.status == "ok" and g.score == graded["fair"]["thief"] < N, g


def test_attack_the_teachers_files_and_other_submissions_are_out_of_reach(graded, iso):
    _needs_sandbox(iso)
    after = {name: _sha(graded["subs"] / name) for name in os.listdir(graded["subs"])}
    before = graded["before"]
    assert {k: v for k, v in before.items() if k in after} == after
    assert before["template"] == _sha(graded["template"]) and before["roster"] == _sha(graded["roster"])
    assert before["key"] == _sha(graded["key_file"])
    assert "PWNED" not in (graded["out"] / "journal.jsonl").read_text()


def test_attack_a_process_outliving_the_kernel_is_killed_before_the_results_are_written(graded, iso):
    _needs_sandbox(iso)
    assert _grade(graded, "detached").score == graded["fair"]["detached"]
    time.sleep(4)                       # the detached child would write at 3 s
    assert "PWNED" not in (graded["out"] / "scores.csv").read_text()
    assert not os.path.exists(graded["paths"]["marker"] + "-detached")
    if iso.uid is not None:
        for slot in range(2):
            assert not sandbox._uid_processes(iso.uid + slot)


def test_attack_a_kernel_that_kills_itself_keeps_the_answers_it_checked(graded):
    g = _grade(graded, "suicide")
    assert g.status == "failed to run" and g.score == 3, g
    assert all(g.results[q] == "missing" for q in QIDS[3:])


def test_attack_a_kernel_that_kills_its_runner_keeps_the_answers_it_checked(graded):
    g = _grade(graded, "runnerkill")
    # the runner dies (the answers checked before count), or it is its pid namespace's init,
    # which a signal from inside cannot kill (then every answer counts)
    assert (g.status, g.score) in (("failed to run", 3), ("ok", N)), g


def test_attack_memory_hog_huge_file_flood_of_output_and_fork_bomb_are_survived(graded):
    g = _grade(graded, "hog")
    # on a loaded machine the hog's cell may run past the cell limit: it is interrupted, the rest runs
    assert g.score == N and g.status in ("ok", "timed out"), g


def test_attack_an_endless_loop_that_ignores_interrupts_times_out_with_the_answers_before_it(graded):
    g = _grade(graded, "looper")
    assert g.status == "timed out" and g.score == 4, g
    assert any("ignored the interrupt" in f for f in g.flags)


def test_attack_copying_a_friends_notebook_scores_what_it_is_worth_for_ones_own_variant(graded):
    g = _grade(graded, "copier")
    assert g.score == graded["fair"]["copier"] < N
    assert any("made for josé" in f for f in g.flags)


def test_attack_a_redefined_check_and_deleted_check_cells_score_nothing_and_are_flagged(graded):
    g = _grade(graded, "tamperer")
    assert g.score == 0 and set(g.results.values()) == {"missing"}
    assert any("redefined" in f for f in g.flags) and any("changed or deleted" in f for f in g.flags)


def test_attack_files_that_are_not_notebooks_get_a_row_each(graded):
    assert _grade(graded, "garbage").status == "not a notebook"
    assert _grade(graded, "huge").status == "not a notebook"


def test_attack_two_files_for_one_student_are_reported_not_guessed(graded):
    g = _grade(graded, "dave")
    assert g.status == "duplicate submissions" and "Dave.ipynb" in g.flags[0]


def test_attack_a_missing_submission_is_counted_apart(graded):
    assert _grade(graded, "absent").status == "no submission"
    summary = (graded["out"] / "summary.md").read_text()
    assert "## Missing submissions (1)" in summary and "- absent" in summary
    graded_count = len([s for s in STUDENTS if s not in ("dave", "absent")])
    assert f"{graded_count} submissions graded, 1 missing" in summary


def test_attack_names_that_are_spreadsheet_formulas_are_escaped_in_scores_csv(graded):
    rows = list(csv.reader((graded["out"] / "scores.csv").open(encoding="utf-8")))
    cells = [c for row in rows for c in row]
    assert "'=HYPERLINK(evil)|x" in cells
    assert not any(c[:1] in ("=", "+", "-", "@") for c in cells)


def test_attack_pipes_and_newlines_in_names_do_not_break_summary_md(graded):
    import re

    summary = (graded["out"] / "summary.md").read_text()
    for line in summary.splitlines():
        if line.startswith("| "):
            assert len(re.findall(r"(?<!\\)\|", line)) in (5, 6), line
    assert "eve \\| injected \\| row \\|" in summary
    assert "\n| injected" not in summary


def test_attack_each_known_slip_is_named_in_scores_csv(graded):
    rows = {r["student"]: r for r in csv.DictReader((graded["out"] / "scores.csv").open(encoding="utf-8"))}
    slips = rows["detached"]["known_slips"]
    for qid in QIDS[5:]:
        assert f"{qid}: {get_question(qid).mistakes[0].label}" in slips
    assert int(rows["josé"]["score"]) == N and rows["josé"]["known_slips"] == ""


# ---------------------------------------------------------------- resuming
def test_attack_the_grader_killed_mid_run_resumes_without_losing_or_redoing_a_grade(graded, tmp_path):
    out = tmp_path / "resumed"
    out.mkdir()
    journal = (graded["out"] / "journal.jsonl").read_text().splitlines()
    kept = [line for line in journal[1:] if json.loads(line)["student"] != "garbage"]
    # the run "was killed" after every student but one: its line never made it (and a torn line)
    (out / "journal.jsonl").write_text("\n".join([journal[0], *kept]) + '\n{"student": "hon')
    runs, real = [], sandbox.run_notebook

    def counted(data, *args, **kwargs):
        if not kwargs.get("probe"):
            sources = ["".join(c["source"]) for c in json.loads(data)["cells"]]
            runs.append([source for source in sources if "graded_handout(" in source])
        return real(data, *args, **kwargs)

    sandbox.run_notebook = counted
    try:
        grades = assignments.grade_folder(graded["template"], graded["subs"], out, graded["roster"], KEY, limits=LIMITS,
                                          warn=lambda line: None)
    finally:
        sandbox.run_notebook = real
    assert {g.student: g.score for g in grades} == {g.student: g.score for g in graded["grades"].values()}
    assert runs == []                              # nobody is run twice (garbage needs no kernel)
    assert {g.student: g.status for g in grades}["garbage"] == "not a notebook"
    assert len((out / "journal.jsonl").read_text().splitlines()) == len(journal) + 1   # + the torn line


def test_attack_a_journal_of_another_run_is_refused_not_mixed_in(graded, tmp_path):
    out = tmp_path / "other"
    out.mkdir()
    (out / "journal.jsonl").write_text(json.dumps({"journal": 1, "template": "04_decode.ipynb"}) + "\n")
    with pytest.raises(assignments.TeacherError, match="another grading run"):
        assignments.grade_folder(graded["template"], graded["subs"], out, graded["roster"], KEY, limits=LIMITS)


# ---------------------------------------------------------------- answers, without a kernel
class _Evil(sympy.Symbol):
    ran: list = []

    def _sympyrepr(self, printer):
        _Evil.ran.append("sympyrepr")
        return "Integer(1)"

    def __str__(self):
        _Evil.ran.append("str")
        return "T"

    __repr__ = __str__

    def _sympystr(self, printer):
        _Evil.ran.append("sympystr")
        return "T"


class _FakeFloat:
    @property
    def __class__(self):     # isinstance() believes it; type() does not
        return float

    def __float__(self):
        raise AssertionError("the checker called a student's __float__")


class _EvilStr(str):
    def strip(self, *args):
        raise AssertionError("the checker called a student's str method")


FORMULA_Q = get_question("anatomy.e2e_formula")
NUMBER_Q = get_question("anatomy.batch_throughput")
RIGHT = NUMBER_Q.expected() / UNIT_SCALES[NUMBER_Q.unit][0]


@pytest.mark.parametrize("text", [
    "sympify.__globals__['__builtins__']['exec']('import os')",
    "__import__('os').system('touch /tmp/pwned')",
    "().__class__.__bases__[0].__subclasses__()",
    "(lambda: 1)()",
    "[T for T in range(10**9)]",
    "T if n else T_1",
    "T_1.__class__",
    "f'{T}'",
    "(x := 1)",
    "eval('1')",
    "getattr(T, 'name')",
    "T_1 + n*T; import os",
])
def test_attack_code_in_a_formula_string_is_refused_in_one_sentence(text):
    result = evaluate(FORMULA_Q, text)
    assert result.status == "invalid"
    assert result.message.count(". ") == 0 and len(result.message) < 260, result.message


def test_attack_huge_powers_are_refused_before_they_are_computed():
    for text in ["9**9**9", "10**400", "2**(2**(2**(2**5)))", "9^9^9", "1e308*1e308"]:
        result = evaluate(FORMULA_Q, text)
        assert result.status == "invalid" and "too large" in result.message, text
    assert "too large" in evaluate(FORMULA_Q, "T**100000").message


def test_attack_long_answers_are_refused_by_their_length_before_any_pattern_runs():
    numeric = get_question("anatomy.tpot_from_timestamps")
    for text in ["1" * 12_000 + "x", "1" * 12_000, "1." + "1" * 12_000 + " ms!", " " * 12_000 + "1"]:
        assert "too long" in evaluate(numeric, text).message
        assert "too long" in evaluate(FORMULA_Q, text).message
    with pytest.raises(ValueError, match="too long"):
        __import__("servingmath.units").units.parse_quantity("1" * 101)


def test_attack_an_object_whose_printing_methods_run_code_is_refused_without_calling_them():
    expression = _Evil("T") + 1
    _Evil.ran.clear()
    result = evaluate(FORMULA_Q, expression)
    assert result.status == "invalid" and "_Evil" in result.message
    assert _Evil.ran == []
    assert answers.to_record(_Evil("T"))["kind"] == "invalid" and _Evil.ran == []


def test_attack_objects_that_lie_about_their_class_or_subclass_str_are_refused():
    assert evaluate(NUMBER_Q, _FakeFloat()).status == "invalid"
    assert evaluate(NUMBER_Q, _EvilStr(str(RIGHT))).status == "invalid"
    assert evaluate(FORMULA_Q, _EvilStr("T_1 + (n - 1)*T")).status == "invalid"


@pytest.mark.parametrize("answer", [1 + 2j, 10**400, float("inf"), float("nan"), True, None, [RIGHT], {"a": 1},
                                    __import__("numpy").array([RIGHT, RIGHT]), __import__("numpy").bool_(True),
                                    sympy.Float("1e400"), sympy.I, sympy.oo, sympy.sin(1), object()])
def test_attack_odd_numbers_and_objects_are_unreadable_not_a_crash(answer):
    assert evaluate(NUMBER_Q, answer).status == "invalid"


def test_attack_numpy_and_sympy_numbers_that_are_right_are_accepted():
    np = __import__("numpy")
    for answer in [np.float64(RIGHT), np.array(RIGHT), np.array([RIGHT]), np.int64(round(RIGHT)),
                   sympy.Integer(round(RIGHT)), sympy.Rational(round(RIGHT) * 2, 2)]:
        assert evaluate(NUMBER_Q, answer).correct, answer


def test_attack_a_huge_sympy_expression_is_refused_quickly():
    T = sympy.Symbol("T")
    big = sympy.Add(*[sympy.Mul(T, sympy.Integer(i), evaluate=False) for i in range(5000)], evaluate=False)
    assert "too large" in evaluate(FORMULA_Q, big).message
    assert "too large" in evaluate(FORMULA_Q, sympy.Pow(9, sympy.Pow(9, 9, evaluate=False), evaluate=False)).message


def test_attack_the_graders_own_check_of_an_answer_has_a_hard_time_limit():
    def forever():
        while True:
            pass

    with pytest.raises(answers.AnswerTimeout):
        answers.call_with_time_limit(forever, timeout=1.0)
    assert answers.call_with_time_limit(lambda: [1, "a"], timeout=5.0) == [1, "a"]


def test_attack_a_forged_record_is_read_as_data():
    for record in [{"kind": "number", "value": "__import__('os')"}, {"kind": "formula", "value": "eval('1')"},
                   {"kind": "number", "value": "1e999"}, {"kind": "text", "value": 5}, "not a dict",
                   {"kind": "formula", "value": "T" * 100_000}, {"kind": "pickle", "value": "x"}]:
        try:
            answer = answers.from_record(record)
        except answers.AnswerError:
            continue
        assert evaluate(FORMULA_Q, answer).status == "invalid"


def test_attack_the_library_cannot_produce_a_graded_variant_without_the_key():
    q = get_question("anatomy.kv_bytes_per_token")
    students = [f"s{i}" for i in range(40)]
    graded_params = [q.draw_for(KEY, s) for s in students]
    assert len({p["model"] for p in graded_params}) > 1
    assert [q.draw_for(KEY, s) for s in students] == graded_params              # the key reproduces them
    assert [q.draw_for(b"another key", s) for s in students] != graded_params   # another key does not
    with pytest.raises(ValueError, match="key"):
        q.draw_for(b"", "s1")
    handout = assignments.make_variant(TEMPLATE, KEY, "s1")
    text = json.dumps(handout)
    assert KEY.decode() not in text and "use_seed" not in text and "seed" not in json.dumps(handout.metadata)


def test_attack_questions_without_a_variant_are_only_the_non_numeric_ones_in_every_set():
    for path in sorted((ROOT / "exercises").glob("*.ipynb")):
        for _, qid, _ in assignments.check_cells(nbformat.read(path, as_version=4)):
            q = get_question(qid)
            if q.kind == "numeric":
                assert q.variants, f"{path.name}: {qid} has no variants"


# ---------------------------------------------------------------- a careless teacher
def _cli(*args):
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = assignments.main([str(a) for a in args])
    return code, err.getvalue()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    base = tmp_path_factory.mktemp("course")
    key = base / "course.key"
    code, _ = _cli("make", TEMPLATE, "--students", "ana,bea", "--key-file", key, "--out", base / "handout")
    assert code == 0 and key.exists()
    subs = base / "subs"
    subs.mkdir()
    nbformat.write(nbformat.read(base / "handout" / "ana.ipynb", as_version=4), subs / "ana.ipynb")
    return base


@pytest.mark.parametrize("case,message", [
    ("no roster on a set with variants", "per-student variants"),
    ("missing submissions folder", "does not exist"),
    ("empty submissions folder", "no notebooks"),
    ("template from another chapter", "none of the 1 readable submissions"),
    ("roster for another template", "was made for"),
    ("wrong key", "does not match"),
    ("missing key file", "does not exist"),
    ("a solutions notebook as template", "holds solutions"),
    ("a hand-out as template", "a student's hand-out"),
    ("output inside the submissions", "must not be inside"),
    ("roster without key", "needs the course key"),
])
def test_attack_teacher_mistakes_stop_with_a_clear_message_and_exit_status_2(course, case, message, tmp_path):
    template, subs, roster, key = TEMPLATE, course / "subs", course / "handout" / "roster.csv", course / "course.key"
    out = tmp_path / "out"
    extra = ["--roster", roster, "--key-file", key]
    if case == "no roster on a set with variants":
        extra = []
    elif case == "missing submissions folder":
        subs = tmp_path / "nowhere"
    elif case == "empty submissions folder":
        subs = tmp_path / "empty"
        subs.mkdir()
    elif case == "template from another chapter":
        template = ROOT / "exercises" / "04_decode.ipynb"
        extra = ["--no-variants"]
    elif case == "roster for another template":
        template = ROOT / "exercises" / "04_decode.ipynb"
    elif case == "wrong key":
        wrong = tmp_path / "wrong.key"
        wrong.write_text("not the key")
        extra = ["--roster", roster, "--key-file", wrong]
    elif case == "missing key file":
        extra = ["--roster", roster, "--key-file", tmp_path / "none.key"]
    elif case == "a solutions notebook as template":
        template = ROOT / "solutions" / "01_anatomy_of_a_request.ipynb"
    elif case == "a hand-out as template":
        template = course / "handout" / "ana.ipynb"
    elif case == "output inside the submissions":
        out = subs / "grades"
    elif case == "roster without key":
        extra = ["--roster", roster]
    code, err = _cli("grade", template, "--submissions", subs, "--out", out, *extra)
    assert code == 2 and message in err, err
    assert "Traceback" not in err


def test_attack_a_roster_saved_by_a_spreadsheet_is_read(course, tmp_path):
    text = (course / "handout" / "roster.csv").read_text()
    lines = text.splitlines()
    messy = "\ufeff" + "\n".join(line.replace(",", ", ") for line in lines[:1]) + ", seed\n"
    messy += "\n".join(line.replace(",", ", ") + ", " for line in lines[1:]) + "\n\n ; \n"
    path = tmp_path / "roster.csv"
    path.write_bytes(messy.replace(" ; ", "").encode("utf-8"))
    assert assignments.read_roster(path, TEMPLATE.name, assignments.read_key(key_file=course / "course.key")) \
        == ["ana", "bea"]
    semicolons = tmp_path / "semicolons.csv"
    semicolons.write_bytes(("Student;Template;Key_check;Comment\r\n" + "\r\n".join(
        ";".join(line.split(",")) + ";élève" for line in lines[1:]) + "\r\n").encode("cp1252"))
    assert assignments.read_roster(semicolons) == ["ana", "bea"]


@pytest.mark.parametrize("roster,message", [
    ("student\nana\nAna\n", "listed twice (lines 2 and 3)"),
    ("student,seed\nana,\n,12\n", "line 3 has no student name"),
    ("name,seed\nana,1\n", "no 'student' column"),
    ("\n\n", "is empty"),
])
def test_attack_a_broken_roster_names_the_lines_to_fix(tmp_path, roster, message):
    path = tmp_path / "roster.csv"
    path.write_text(roster)
    with pytest.raises(assignments.TeacherError, match=message.replace("(", r"\(").replace(")", r"\)")):
        assignments.read_roster(path)


@pytest.mark.parametrize("students,message", [("ana,ana", "more than once"), ("ana,ANA", "more than once"),
                                             ("ana,../x", "names a file"), ("", "no names")])
def test_attack_make_refuses_bad_student_lists_with_exit_status_2(tmp_path, students, message):
    code, err = _cli("make", TEMPLATE, "--students", students, "--key-file", tmp_path / "k", "--out", tmp_path / "h")
    assert code == 2 and message in err and "Traceback" not in err


def test_attack_csv_and_markdown_escaping_of_every_cell():
    assert assignments.csv_cell("=1+1") == "'=1+1" and assignments.csv_cell("@SUM(A1)") == "'@SUM(A1)"
    assert assignments.csv_cell("+1") == "'+1" and assignments.csv_cell("-1") == "'-1"
    assert assignments.csv_cell("alice") == "alice" and assignments.csv_cell(3) == "3"
    assert assignments.md_cell("a|b\nc<script>") == "a\\|b c&lt;script&gt;"
    assert "\u2028" not in assignments.md_cell("a\u2028| x")
    fenced = assignments._fence("~~~~~\n## not a heading")
    assert fenced.startswith("~~~~~~\n") and fenced.endswith("\n~~~~~~")


def test_attack_a_choice_or_a_question_id_that_is_mistyped_gets_the_closest_ids_only():
    with pytest.raises(KeyError) as info:
        evaluate("anatomy.kv_bytes_per_tokn", 1)
    message = str(info.value)
    assert "anatomy.kv_bytes_per_token" in message and message.count("anatomy.") <= 4


# ---------------------------------------------------------------- the weaker isolation levels
def _level_or_skip(level):
    try:
        return sandbox.detect_isolation(level)
    except RuntimeError as exc:
        pytest.skip(f"isolation {level!r} does not work on this machine: {exc}")


def _small_course(tmp_path, students):
    handout, subs = tmp_path / "handout", tmp_path / "subs"
    roster = assignments.make_assignment(TEMPLATE, students, KEY, handout)
    subs.mkdir()
    return handout, subs, roster


def test_attack_under_unshare_alone_the_teachers_files_stay_out_of_reach(tmp_path):
    _level_or_skip("unshare")
    handout, subs, roster = _small_course(tmp_path, ["ana", "ben"])
    nbformat.write(_fill(nbformat.read(handout / "ana.ipynb", as_version=4), "ana"), tmp_path / "ana.ipynb")
    (subs / "ana.ipynb").write_bytes((tmp_path / "ana.ipynb").read_bytes()[:20])   # a broken file: no kernel
    key_file = tmp_path / "secret" / "course.key"
    key_file.parent.mkdir()
    key_file.write_bytes(KEY)
    targets = [subs / "ana.ipynb", roster, key_file, TEMPLATE]
    attack = _fill(nbformat.read(handout / "ben.ipynb", as_version=4), "ben",
                   {qid: f"import sympy\nANSWER = {_literal(qid, get_question(qid).draw(None))}" for qid in QIDS})
    attack.cells.insert(2, nbformat.v4.new_code_cell(
        "import os\nreached = []\n"
        f"for path in {[str(t) for t in targets]!r} + [{str(tmp_path / 'out' / 'scores.csv')!r}]:\n"
        "    try:\n        open(path, 'a').write('PWNED'); reached.append(path)\n    except OSError:\n        pass\n"
        f"assert not os.path.exists({str(key_file)!r}) or not open({str(key_file)!r}, 'rb').read()\n"))
    nbformat.write(attack, subs / "ben.ipynb")
    before = {t: _sha(t) for t in targets}
    warnings = []
    grades = {g.student: g for g in assignments.grade_folder(
        TEMPLATE, subs, tmp_path / "out", roster, KEY, isolation="unshare", limits=LIMITS, jobs=2,
        warn=warnings.append, hide=[key_file])}
    assert warnings[0].startswith("isolation: unshare")
    assert {t: _sha(t) for t in targets} == before
    assert grades["ana"].status == "not a notebook"
    assert grades["ben"].score == _fair({qid: _typed(qid, get_question(qid).draw(None)) for qid in QIDS}, "ben")
    assert not any("AssertionError" in f for f in grades["ben"].flags)    # the key was not readable


def test_without_any_sandbox_the_grader_still_grades_and_says_so(tmp_path):
    handout, subs, roster = _small_course(tmp_path, ["ana"])
    nbformat.write(_fill(nbformat.read(handout / "ana.ipynb", as_version=4), "ana"), subs / "ana.ipynb")
    warnings = []
    (grade,) = assignments.grade_folder(TEMPLATE, subs, tmp_path / "out", roster, KEY, isolation="none",
                                        limits=LIMITS, warn=warnings.append)
    assert grade.status == "ok" and grade.score == N
    assert warnings[0].startswith("isolation: none") and "WARNING: no isolation is possible here" in warnings[1]
    assert "no isolation is possible here" in (tmp_path / "out" / "summary.md").read_text()
